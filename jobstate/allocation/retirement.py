"""Retiring an episode: its files leave state/, a tombstone keeps its ID and key, in one commit.

The ID and the key are never handed out again (the allocator reads the tombstone through the
catalog), and a paid step is never retired while it is open: a step that runs, is unknown or
was accepted by the vendor and not collected still costs money and needs its episode.
"""

from __future__ import annotations

from jobstate.core.clock import format_time
from jobstate.core.layout import episode_dir, episode_path, history_path, retired_path
from jobstate.core.periods import parse_episode_id
from jobstate.core.rules_attempts import open_step_refusal
from jobstate.core.tombstones import (
    MAX_BY,
    MAX_REASON,
    Tombstone,
    new_tombstone,
    tombstone_from_yaml_dict,
    validate_note,
)
from jobstate.errors import AlreadyRecorded, EpisodeUnknown, UsageError
from jobstate.git.loose import Content
from jobstate.store.catalog import Catalog
from jobstate.store.fence import require_as_committed
from jobstate.store.records import checked, submissions
from jobstate.store.running import running_holder, running_steps
from jobstate.store.store import Store
from jobstate.store.transaction import StateChange, transact
from jobstate.store.yamlio import dumps, load_file


def retire(store: Store, episode_id: str, *, by: str, reason: str) -> Tombstone:
    """Remove the episode from state/ and commit its tombstone (history/retired/<id>.yaml).

    An episode that already vanished from HEAD (git rm, a reset) can be retired too: only the
    tombstone is written, which accounts for it in verify. Refuses while one of its paid steps is
    open (``core.rules_attempts.open_step_refusal``: unknown is exit 6, running or accepted exit 3);
    a second retirement records nothing (AlreadyRecorded, exit 0).
    """
    try:
        parse_episode_id(episode_id)
    except UsageError as exc:
        raise UsageError(f"{exc}; give the explicit ID of an allocated episode") from None
    validate_note(by, "--by", MAX_BY)
    validate_note(reason, "--reason", MAX_REASON)
    store.require_initialized()

    def decide(cat: Catalog) -> StateChange[Tombstone]:
        done = cat.retirement(episode_id)
        if done is not None:
            kept = store.path(done.path)
            raise AlreadyRecorded(
                f"episode {episode_id} is already retired ({done.path}); nothing new recorded",
                answer=tombstone_from_yaml_dict(load_file(kept, done.path), done.path, episode_id)
                if kept.is_file()
                else None,
            )
        if store.path(history_path(episode_id)).exists():
            raise UsageError(f"episode {episode_id} is completed ({history_path(episode_id)}): it is history already")
        row = cat.row(episode_path(episode_id))
        files: dict[str, Content | None] = {}
        if row is not None:
            key = row.allocation_key
            _refuse_open(store, episode_id)
            head = cat.meta("head") or "HEAD"
            files = {path: None for _mode, _sha, path in store.git.ls_tree(head, episode_dir(episode_id))}
        else:
            seen = cat.ever_by_id(episode_id)
            if seen is None or not seen.allocation_key:
                raise EpisodeUnknown(
                    f"episode {episode_id} was never committed on this branch: there is nothing to retire"
                )
            key = seen.allocation_key
        stone = new_tombstone(episode_id, key, by, reason, format_time(store.now()))
        files[retired_path(episode_id)] = dumps(stone.to_yaml_dict())
        message = f"retire {episode_id} (key {key!r}) by {by}\n\n{reason}"
        return checked(store, StateChange(stone, files, message))

    return transact(store, decide)


def _refuse_open(store: Store, episode_id: str) -> None:
    """Refuse while a paid step of the episode is open, or its directory differs from HEAD."""
    steps = submissions(store, episode_id)
    busy = {step: running_holder(holder) for step, holder in running_steps(store, episode_id).items()}
    refusal = open_step_refusal(episode_id, steps, busy, "retire")
    if refusal is not None:
        raise refusal
    require_as_committed(store, episode_id)  # the fence's rule: what differs is refused, never moved
