"""``jobstate complete``."""

from __future__ import annotations

from jobstate.commands._output import note, print_json
from jobstate.errors import AlreadyRecorded
from jobstate.paid.approval import complete as complete_episode
from jobstate.store.store import StoreOptions


def complete(options: StoreOptions, *, episode: str, as_json: bool) -> int:
    """Write history/<id>.yaml for an approved episode."""
    with options.open() as store:
        try:
            record = complete_episode(store, episode, notify=note)
        except AlreadyRecorded as repeat:
            if not isinstance(repeat.answer, dict):
                raise
            note(str(repeat))  # a repeat of what landed: its answer again, for the script that lost it
            record = repeat.answer
    if as_json:
        print_json(record)
    else:
        totals = ", ".join(f"{v} {k}" for k, v in record["cost_totals"].items()) or "no costs"
        print(f"{episode} completed ({totals})")
    return 0
