"""``jobstate retire``."""

from __future__ import annotations

from jobstate.allocation.retirement import retire as retire_episode
from jobstate.commands._output import note, print_json
from jobstate.core.layout import retired_path
from jobstate.core.tombstones import Tombstone
from jobstate.errors import AlreadyRecorded
from jobstate.store.store import StoreOptions


def retire(options: StoreOptions, *, episode: str, by: str, reason: str, as_json: bool) -> int:
    """Remove an episode from state/ and keep its ID and key in a tombstone, for ever."""
    with options.open() as store:
        try:
            stone = retire_episode(store, episode, by=by, reason=reason)
        except AlreadyRecorded as repeat:
            if not isinstance(repeat.answer, Tombstone):
                raise
            note(str(repeat))  # a repeat of what landed: its answer again, for the script that lost it
            stone = repeat.answer
    if as_json:
        print_json(stone.to_yaml_dict())
    else:
        print(f"{stone.episode_id} retired ({retired_path(stone.episode_id)})")
    return 0
