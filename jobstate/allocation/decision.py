"""A new allocation, decided under the lock on the freshest state (see jobstate.allocation.allocation for retries)."""

from __future__ import annotations

from typing import Any

from jobstate.core.clock import format_time
from jobstate.core.keys import confusable_with
from jobstate.core.layout import episode_path
from jobstate.core.periods import Period, format_episode_id, next_sequence
from jobstate.core.records import Allocation, Episode
from jobstate.core.rules_state import key_owner_problem
from jobstate.core.tombstones import vanished_text
from jobstate.errors import AllocationConflict, StateInvalid
from jobstate.git.loose import Content
from jobstate.store.catalog import Catalog, Row
from jobstate.store.history import removing_commit
from jobstate.store.records import checked
from jobstate.store.store import Store
from jobstate.store.transaction import StateChange, transact
from jobstate.store.worktree import check_clean, uncommitted_episodes
from jobstate.store.yamlio import dumps


def allocate_locked(
    store: Store, key: str, period: Period, *, extra: dict[str, Any], keep_period: bool, any_branch: bool = False
) -> Allocation:
    """The existing episode for ``key``, or ``max + 1`` in ``period``, decided and committed under the lock."""

    def decide(cat: Catalog) -> StateChange[Allocation]:
        return _decide(store, cat, key, period, extra=extra, keep_period=keep_period, any_branch=any_branch)

    return transact(store, decide)


def _conflict_text(episodes: dict[str, str]) -> str:
    return ", ".join(f"{eid} (period {pid})" for eid, pid in sorted(episodes.items()))


def _decide(
    store: Store,
    cat: Catalog,
    key: str,
    period: Period,
    *,
    extra: dict[str, Any],
    keep_period: bool,
    any_branch: bool = False,
) -> StateChange[Allocation]:
    """Under the lock, on the freshest state: the existing episode for ``key``, or a new one."""
    orphans = uncommitted_episodes(store, cat, period.id)
    rows: list[Row] = cat.by_key(key)
    matches: dict[str, str] = {r.episode_id: r.period_id for r in rows}
    mine = [o for o in orphans if o.allocation_key == key]
    matches.update({o.episode_id: o.period_id for o in mine})
    problem = key_owner_problem(key, list(matches), None)
    if problem is not None:  # the rule verify applies to every key: one key, one episode
        raise AllocationConflict(
            f"{problem} ({_conflict_text(matches)}); "
            "jobstate will not guess which to reuse: fix the state by hand (see jobstate show) and retry"
        )
    # episodes a killed allocate wrote but never committed keep their sequence: commit them now
    recover: dict[str, Content | None] = {
        episode_path(o.episode_id): store.path(episode_path(o.episode_id)).read_bytes() for o in orphans
    }
    note = _recover_message(orphans)
    if matches:  # an episode holds a key a tombstone of this branch's history keeps: un-retired, or given it, by hand
        _refuse_retired(key, store.retired_in_history(key=key, cat=cat))
    others = store.other_first(key, next(iter(matches)), cat) if len(matches) == 1 else None
    if others is not None:
        # the key's episode is under another ID too (a copy, a rename by hand): which one ran is not ours to guess
        problem = key_owner_problem(key, sorted({*others, *matches}), None)
        raise AllocationConflict(
            f"{problem}, as this branch's history has them; jobstate will not guess which to reuse: run "
            "jobstate verify and restore the episode under its first ID"
        )
    if matches:
        ((episode_id, period_id),) = matches.items()
        if period_id != period.id and not keep_period:
            raise AllocationConflict(
                f"allocation key {key!r} already belongs to episode {episode_id} in period {period_id}, "
                f"not to period {period.id}; a key cannot move between periods: use a new key for {period.id}"
            )
        for row in rows:
            check_clean(store, row)
        found = Allocation(episode_id, period_id, int(episode_id.rsplit("-", 1)[1]), key, False, recovered=bool(mine))
        return StateChange(found, recover, note)
    _refuse_gone(store, cat, key)
    if not any_branch:
        _refuse_other_branch(store)
    in_period = cat.by_period(period.id)
    for row in in_period:
        check_clean(store, row)
    # a key that reads as one of the period's keys is most likely the same run typed differently
    twin = confusable_with(key, [r.allocation_key for r in in_period])
    if twin is not None:
        raise AllocationConflict(
            f"allocation key {key!r} reads as {twin!r}, the key of an episode of {period.id} "
            "(they differ only in case, width or compatibility characters); if this run is that one, "
            f"use {twin!r}; otherwise choose a key that differs in more than that"
        )
    sequences = {r.sequence for r in in_period} | {o.sequence for o in orphans if o.period_id == period.id}
    # never refill a gap: a sequence the period ever had on this branch stays used for ever
    highest = cat.ever_max_sequence(period.id)
    if highest is not None:
        sequences.add(highest)
    sequence = next_sequence(sequences)
    episode = Episode(
        episode_id=format_episode_id(period, sequence),
        period_id=period.id,
        period_kind=period.kind,
        sequence=sequence,
        allocation_key=key,
        allocated_at=format_time(store.now()),
        extra=extra,
    )
    if store.path(episode.directory).exists():
        # never write over an episode the catalog does not know: the state needs a look first
        raise StateInvalid(
            f"{episode.directory} exists but is not a known episode of {period.id}; "
            "run jobstate verify and fix the state before allocating"
        )
    message = f"allocate {episode.episode_id} for key {key!r}" + (f"\n\n{note}" if note else "")
    files = {**recover, episode_path(episode.episode_id): dumps(episode.to_yaml_dict())}
    allocation = Allocation(episode.episode_id, period.id, sequence, key, created=True)
    return checked(store, StateChange(allocation, files, message))


def _refuse_other_branch(store: Store) -> None:
    """A new ID is handed out on the state's branch only: another branch would start a second series of
    the same IDs, which collide at the merge (verify flags them there)."""
    wanted = store.config.state_branch
    if wanted is None:
        return  # a repository initialised before state_branch existed: as before
    ref = store.git.head_ref()
    here = ref.removeprefix("refs/heads/")
    if ref == f"refs/heads/{wanted}":
        return
    where = f"branch {here!r}" if ref.startswith("refs/heads/") else "a detached HEAD"
    raise AllocationConflict(
        f"allocation refused on {where}: jobstate.yaml names {wanted!r} as the state's branch, and an ID handed "
        f"out here may be handed out on {wanted!r} too; run it on {wanted!r}, or pass --any-branch if this "
        "branch will never be merged with it (docs/git-setups.md#branches-and-worktrees)"
    )


def _refuse_retired(key: str, retired: tuple[str, str] | None) -> None:
    """The rule verify applies to every key: a retired key is never handed out again (``retired``: the
    episode and tombstone of a retirement in this branch's history, or None)."""
    if retired is not None:
        problem = key_owner_problem(key, [retired[0]], retired[0])
        raise AllocationConflict(f"{problem} ({retired[0]}, retired ({retired[1]})): use a new key")


def _refuse_gone(store: Store, cat: Catalog, key: str) -> None:
    """A key whose episode was retired or has vanished from HEAD keeps it: allocating it again is refused."""
    gone = cat.ever_by_key(key)
    if not gone:
        return
    seen = gone[0]
    _refuse_retired(key, store.retired_in_history(episode_id=seen.episode_id, cat=cat))
    head = cat.meta("head") or "HEAD"
    holder = cat.row(episode_path(seen.episode_id))
    if holder is not None and holder.allocation_key != key:
        # two branches handed out one ID and the merge kept the other key's episode: retiring the ID
        # would retire that run, so the advice is about this key's records only
        raise AllocationConflict(
            f"allocation key {key!r} refused: its episode {seen.episode_id} (first committed in "
            f"{seen.seen_in[:12]}) holds key {holder.allocation_key!r} in HEAD: the key was changed by hand, or the "
            f"ID was handed out on another branch too and a merge kept that run's episode; do not retire "
            f"{seen.episode_id} before you know which run it holds (jobstate verify names a key changed by hand). "
            f"This run's records are in commit {seen.seen_in[:12]}: check there what it paid before giving it "
            "a new key (docs/git-setups.md#branches-and-worktrees)"
        )
    removed = removing_commit(store.git.root, head, seen.episode_id)
    kept = removed is None and store.git.is_ancestor(seen.seen_in, head)
    gone_text = vanished_text(seen.episode_id, None, removed, last_seen=seen.seen_in, in_ancestry=kept)
    raise AllocationConflict(
        f"allocation key {key!r} refused: {gone_text}; allocating it anew would pay for the same run twice"
    )


def _recover_message(orphans: list[Episode]) -> str:
    lines = [
        f"recover {o.episode_id} for key {o.allocation_key!r} (written by an interrupted allocate)" for o in orphans
    ]
    return "\n".join(lines)
