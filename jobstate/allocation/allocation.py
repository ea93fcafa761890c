"""Allocation: one durable episode ID per allocation key.

A retry (the key is already committed) is answered from the derived catalog
without the lock and without writing: the answer is read from data that is
committed and checked against the file's blob ID, so it cannot change under
us. Everything else happens under the lock, from the first read to the commit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobstate.core.keys import canonical_key
from jobstate.core.periods import Period
from jobstate.core.records import EPISODE_FIELDS, Allocation
from jobstate.errors import UsageError
from jobstate.store.store import Store


def allocate(
    store: Store,
    key: str,
    period: Period,
    *,
    extra: Mapping[str, Any] | None = None,
    keep_period: bool = False,
    any_branch: bool = False,
) -> Allocation:
    """Return the episode for ``key`` in ``period``, allocating ``max + 1`` if the key is new.

    Raises AllocationConflict when the key belongs to another period or to
    several episodes: jobstate never guesses which one to reuse. With
    ``keep_period`` (``period`` is only a guess, e.g. today's), a key that
    already belongs to one episode of another period returns that episode:
    the key stays where it is. ``extra`` fields go into a new episode.yaml. A new episode on a
    branch other than ``state_branch`` (jobstate.yaml) is refused unless ``any_branch``.
    """
    canonical_key(key)
    store.require_period_kind(period)
    store.require_initialized()
    found = _committed_answer(store, key, period, keep_period)
    if found is not None:
        return found
    fields = dict(extra or {})
    if clash := sorted(set(fields) & set(EPISODE_FIELDS)):
        raise UsageError(f"extra episode field {clash[0]!r} would replace one of jobstate's own fields")
    # the lock-free retry above loads no YAML, lock or Git-writing module; a decision does
    from jobstate.allocation.decision import allocate_locked  # noqa: PLC0415 - start-up

    return allocate_locked(store, key, period, extra=fields, keep_period=keep_period, any_branch=any_branch)


def _committed_answer(store: Store, key: str, period: Period, keep_period: bool) -> Allocation | None:
    """The lock-free retry path: a committed, unchanged episode with this key, or None."""
    cat = store.read_catalog()
    if cat is None:
        return None
    if store.remote is not None and not store.matches_remote_tip():
        return None  # the remote moved (or went backwards): decide under the lock, after fetching
    rows = cat.by_key(key)
    if len({r.episode_id for r in rows}) != 1 or (rows[0].period_id != period.id and not keep_period):
        return None  # unknown, conflicting or ambiguous: decided (and reported) under the lock
    if cat.retirements(key=key) or len({eid for eid, _commit in cat.seen_of_key(key)}) > 1:
        return None  # a key a tombstone kept, or under several IDs: decided (maybe refused) under the lock
    for row in rows:
        try:
            if store.git.blob_sha(store.path(row.path).read_bytes()) != row.blob:
                return None
        except OSError:
            return None
    r = rows[0]
    return Allocation(r.episode_id, r.period_id, r.sequence, key, created=False)
