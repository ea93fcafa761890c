"""Allocation: one durable episode ID per allocation key.

A retry (the key is already committed) is answered from the derived catalog
without the lock and without writing: the answer is read from data that is
committed and checked against the file's blob ID, so it cannot change under
us. Everything else happens under the lock, from the first read to the commit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jobstate.errors import AllocationConflict, StateInvalid, UsageError
from jobstate.gitrepo import blob_sha
from jobstate.periods import Period, format_episode_id, next_sequence
from jobstate.records import EPISODE_FIELDS, Episode, validate_key

if TYPE_CHECKING:
    from jobstate.catalog import Catalog, Row
    from jobstate.commits import Change
    from jobstate.store import Store


@dataclass(frozen=True)
class Allocation:
    """The answer of allocate: the episode, and whether this call created it."""

    episode_id: str
    period_id: str
    sequence: int
    allocation_key: str
    created: bool
    recovered: bool = False

    def to_json(self) -> dict[str, object]:
        """The ``--json`` object."""
        return {
            "episode_id": self.episode_id,
            "period_id": self.period_id,
            "sequence": self.sequence,
            "allocation_key": self.allocation_key,
            "created": self.created,
        }


def allocate(
    store: Store,
    key: str,
    period: Period,
    *,
    extra: Mapping[str, Any] | None = None,
    keep_period: bool = False,
) -> Allocation:
    """Return the episode for ``key`` in ``period``, allocating ``max + 1`` if the key is new.

    Raises AllocationConflict when the key belongs to another period or to
    several episodes: jobstate never guesses which one to reuse. With
    ``keep_period`` (``period`` is only a guess, e.g. today's), a key that
    already belongs to one episode of another period returns that episode:
    the key stays where it is. ``extra`` fields go into a new episode.yaml.
    """
    validate_key(key)
    if period.kind != store.config.period:
        raise UsageError(
            f"period {period.id} is a {period.kind} but {store.root} counts {store.config.period} periods "
            "(setting period in jobstate.yaml)"
        )
    store.require_initialized()
    found = _committed_answer(store, key, period, keep_period)
    if found is not None:
        return found
    fields = dict(extra or {})
    if clash := sorted(set(fields) & set(EPISODE_FIELDS)):
        raise UsageError(f"extra episode field {clash[0]!r} would replace one of jobstate's own fields")
    return store.transact(lambda cat: _decide(store, cat, key, period, extra=fields, keep_period=keep_period))


def _committed_answer(store: Store, key: str, period: Period, keep_period: bool = False) -> Allocation | None:
    """The lock-free retry path: a committed, unchanged episode with this key, or None."""
    cat = store.read_catalog()
    if cat is None:
        return None
    if store.remote is not None and not store.matches_remote_tip():
        return None  # the remote moved (or went backwards): decide under the lock, after fetching
    rows = cat.by_key(key)
    if len({r.episode_id for r in rows}) != 1 or (rows[0].period_id != period.id and not keep_period):
        return None  # unknown, conflicting or ambiguous: decided (and reported) under the lock
    for row in rows:
        try:
            if blob_sha(store.path(row.path).read_bytes()) != row.blob:
                return None
        except OSError:
            return None
    r = rows[0]
    return Allocation(r.episode_id, r.period_id, r.sequence, key, created=False)


def _conflict_text(episodes: dict[str, str]) -> str:
    return ", ".join(f"{eid} (period {pid})" for eid, pid in sorted(episodes.items()))


def _decide(
    store: Store, cat: Catalog, key: str, period: Period, *, extra: dict[str, Any], keep_period: bool
) -> Change[Allocation]:
    """Under the lock, on the freshest state: the existing episode for ``key``, or a new one."""
    from jobstate.commits import Change  # noqa: PLC0415

    orphans = store.uncommitted_episodes(cat)
    rows: list[Row] = cat.by_key(key)
    matches: dict[str, str] = {r.episode_id: r.period_id for r in rows}
    mine = [o for o in orphans if o.allocation_key == key]
    matches.update({o.episode_id: o.period_id for o in mine})
    if len(matches) > 1:
        raise AllocationConflict(
            f"allocation key {key!r} matches {len(matches)} episodes: {_conflict_text(matches)}; "
            "jobstate will not guess which to reuse: fix the state by hand (see jobstate show) and retry"
        )
    # episodes a killed allocate wrote but never committed keep their sequence: commit them now
    recover: dict[str, bytes | None] = {
        f"{o.directory}/episode.yaml": store.path(f"{o.directory}/episode.yaml").read_bytes() for o in orphans
    }
    note = _recover_message(orphans)
    if matches:
        ((episode_id, period_id),) = matches.items()
        if period_id != period.id and not keep_period:
            raise AllocationConflict(
                f"allocation key {key!r} already belongs to episode {episode_id} in period {period_id}, "
                f"not to period {period.id}; a key cannot move between periods: use a new key for {period.id}"
            )
        for row in rows:
            store.check_clean(row)
        found = Allocation(episode_id, period_id, int(episode_id.rsplit("-", 1)[1]), key, False, recovered=bool(mine))
        return Change(found, recover, note)
    in_period = cat.by_period(period.id)
    for row in in_period:
        store.check_clean(row)
    sequences = {r.sequence for r in in_period} | {o.sequence for o in orphans if o.period_id == period.id}
    sequence = next_sequence(sequences)
    episode = Episode(
        episode_id=format_episode_id(period, sequence),
        period_id=period.id,
        period_kind=period.kind,
        sequence=sequence,
        allocation_key=key,
        allocated_at=_now_text(store),
        extra=extra,
    )
    if store.path(episode.directory).exists():
        # never write over an episode the catalog does not know: the state needs a look first
        raise StateInvalid(
            f"{episode.directory} exists but is not a known episode of {period.id}; "
            "run jobstate verify and fix the state before allocating"
        )
    from jobstate.yamlio import dumps  # noqa: PLC0415

    message = f"allocate {episode.episode_id} for key {key!r}" + (f"\n\n{note}" if note else "")
    files = {**recover, f"{episode.directory}/episode.yaml": dumps(episode.to_yaml_dict())}
    return Change(Allocation(episode.episode_id, period.id, sequence, key, created=True), files, message)


def _recover_message(orphans: list[Episode]) -> str:
    lines = [
        f"recover {o.episode_id} for key {o.allocation_key!r} (written by an interrupted allocate)" for o in orphans
    ]
    return "\n".join(lines)


def _now_text(store: Store) -> str:
    from jobstate.store import format_time  # noqa: PLC0415

    return format_time(store.now())
