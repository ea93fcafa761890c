"""The rules of a whole state's change, beyond one episode's: an episode is never removed (retire
keeps a tombstone), a key belongs to one episode forever, and only ``migrate`` renames an episode,
in its one shape. Pure: two states in, violations out; ``diff`` and ``verify --against`` call it on
every change and every commit of a range (review/changes.py).
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any, NamedTuple, Protocol

from jobstate.core.budget import Acknowledgement, first_day
from jobstate.core.layout import (
    BUDGET_ACKNOWLEDGED,
    EPISODE_FILE,
    PRIVATE,
    SUBMISSIONS,
    episode_dir,
    is_private,
    record_path,
    retired_path,
)
from jobstate.core.model import Records, Violation, episode_change, ledger_change
from jobstate.core.periods import is_period, parse_period
from jobstate.core.tombstones import Tombstone


class EpisodeState(Records, Protocol):
    """What the rules read of one episode of a state, beyond ``core.model.Records``."""

    legacy: bool  # the legacy week-only layout (no episode_id)

    @property
    def migration(self) -> dict[str, Any] | None: ...

    @property
    def status(self) -> str: ...


class State(Protocol):
    """Every episode of one revision, and its settings."""

    @property
    def episodes(self) -> Mapping[str, EpisodeState]: ...

    @property
    def settings(self) -> Settings | None: ...

    @property
    def acknowledgements(self) -> Sequence[Acknowledgement]: ...

    @property
    def tombstones(self) -> Mapping[str, Tombstone]:
        """The readable tombstones, by retired episode."""
        ...


def migrated_from(base: State, new: State) -> dict[str, str]:
    """New episode ID -> the legacy ID it was migrated from, in the one shape ``migrate`` writes:
    ``state/<period>/`` (no episode_id) became ``state/<period>-0/`` with ``migration.from_id``."""
    out: dict[str, str] = {}
    for view in new.episodes.values():
        origin = view.migration.get("from_id") if view.migration else None
        if not isinstance(origin, str) or view.episode_id in base.episodes:
            continue
        old = base.episodes.get(origin)
        if old is not None and old.legacy and is_period(origin) and view.episode_id == f"{origin}-0":
            out[view.episode_id] = origin
    return out


def state_violations(base: State, new: State) -> list[Violation]:
    """Every change from ``base`` to ``new`` that the model refuses. Pure."""
    moved = migrated_from(base, new)
    out: list[Violation] = []
    for eid, view in sorted(new.episodes.items()):
        origin = moved.get(eid)
        old = base.episodes.get(eid)
        if old is None and origin is None and view.migration and view.migration.get("from_id") is not None:
            out.append(
                Violation(
                    "migration drift",
                    eid,
                    record_path(eid, EPISODE_FILE),
                    "migration.from_id",
                    None,
                    view.migration.get("from_id"),
                    "only jobstate migrate writes it: state/<period>/ -> state/<period>-0/",
                )
            )
        if old is not None and origin is None:
            out += episode_change(old, view)
    gone = set(moved.values())
    for eid in sorted(set(base.episodes) - set(new.episodes) - gone):
        out.append(
            Violation(
                "episode deleted",
                eid,
                episode_dir(eid),
                "directory",
                base.episodes[eid].status,
                None,
                "an episode is never removed (jobstate retire keeps a tombstone)",
            )
        )
    owners = {v.allocation_key: eid for eid, v in base.episodes.items() if v.allocation_key and not v.legacy}
    for eid, view in sorted(new.episodes.items()):
        owner = owners.get(view.allocation_key or "")
        if owner is not None and owner != eid and moved.get(eid) != owner:
            # the key's owner in base and this episode hold it between them: the one rule of keys says why not
            problem = key_owner_problem(str(view.allocation_key), [owner, eid], None)
            out.append(
                Violation(
                    "key moved",
                    eid,
                    record_path(eid, EPISODE_FILE),
                    "allocation_key",
                    f"{view.allocation_key} of {owner}",
                    f"{view.allocation_key} of {eid}",
                    f"{problem} (a key belongs to one episode forever)",
                )
            )
    added = {eid: view for eid, view in new.episodes.items() if eid not in base.episodes and eid not in moved}
    known = shared_remote_tasks(base.episodes)
    out += [v for v in shared_remote_tasks(new.episodes) if v not in known]
    out += _retirements_kept(base.tombstones, new.tombstones)
    out += _retired_keys_reused(added, {stone.allocation_key: eid for eid, stone in new.tombstones.items()})
    if base.settings is not None and new.settings is not None:
        out += settings_change(base.settings, new.settings, episodes=bool(base.episodes))
    out += ledger_change(
        "-",
        BUDGET_ACKNOWLEDGED,
        "entries",
        list(base.acknowledgements),
        list(new.acknowledgements),
        kind="budget acknowledgement rewritten",
    )
    return out


def _later(new: str | None, old: str | None) -> bool:
    """Whether ``new`` judges fewer periods than ``old`` (budget periods of one kind; None judges all)."""
    if new is None:
        return False
    return old is None or first_day(parse_period(new)) > first_day(parse_period(old))


def shared_remote_tasks(episodes: Mapping[str, EpisodeState]) -> list[Violation]:
    """A vendor's task belongs to one episode: the same task of the same step recorded by two episodes
    (an attempt copied or forged by hand) is one charge counted twice, and a run resumes what another paid."""
    holders: dict[tuple[str, str], list[str]] = {}
    for eid, view in sorted(episodes.items()):
        for step, attempts in view.steps.items():
            for ref in sorted({a.remote_ref for a in attempts if a.remote_ref}):
                holders.setdefault((step, ref), []).append(eid)
    return [
        Violation(
            "remote task claimed twice",
            eids[-1],
            record_path(eids[-1], SUBMISSIONS),
            f"{step} remote_ref",
            f"{ref} of {eids[0]}",
            f"{ref} of {eids[-1]}",
            "a vendor's task belongs to one episode's attempt: recorded by two, it is paid for or counted twice",
        )
        for (step, ref), eids in sorted(holders.items())
        if len(eids) > 1
    ]


def _retirements_kept(old: Mapping[str, Tombstone], new: Mapping[str, Tombstone]) -> list[Violation]:
    """A tombstone is for ever, byte for byte what ``retire`` wrote: one removed (an episode un-retired,
    whose key the next run would pay for again) or rewritten (its key, who, why) is refused."""
    out: list[Violation] = []
    for eid, stone in sorted(old.items()):
        now = new.get(eid)
        if now == stone:
            continue
        fields = [f for f in stone._fields if now is not None and getattr(now, f) != getattr(stone, f)]
        out.append(
            Violation(
                "tombstone rewritten",
                eid,
                retired_path(eid),
                fields[0] if fields else "tombstone",
                getattr(stone, fields[0]) if fields else "retired",
                getattr(now, fields[0]) if fields else None,
                "a retirement is for ever: its tombstone is never removed or changed (its ID and key stay used)",
            )
        )
    return out


def _retired_keys_reused(episodes: Mapping[str, EpisodeState], retired: Mapping[str, str]) -> list[Violation]:
    """Every episode of ``episodes`` (the change's new ones) that holds a key a tombstone keeps (``retired``:
    key -> the retired episode): the rule of keys (``key_owner_problem``), as a change."""
    out: list[Violation] = []
    for eid, view in sorted(episodes.items()):
        key = view.allocation_key or ""
        holder = retired.get(key)
        problem = key_owner_problem(key, [eid], holder) if holder is not None and holder != eid else None
        if problem is not None:
            where = record_path(eid, EPISODE_FILE)
            out.append(
                Violation("key moved", eid, where, "allocation_key", f"{key} of {holder}", f"{key} of {eid}", problem)
            )
    return out


def key_owner_problem(key: str, owners: list[str], retired_by: str | None) -> str | None:
    """The rule of keys: an allocation key belongs to one episode forever, and a retired episode's key is
    never handed out again. Why ``owners`` (the episodes that hold ``key``, or would) break it, given the
    retired episode whose tombstone holds the key (or None); None when they do not. ``verify`` asks it of every
    key of a revision, ``allocate`` of the key it is asked for."""
    if retired_by is not None:
        return (
            f"allocation key {key!r} belongs to retired episode {retired_by}: a retired key is never handed out again"
        )
    if len(owners) > 1:
        return f"allocation key {key!r} belongs to several episodes: {', '.join(sorted(owners))}"
    return None


def sequence_problem(slot: tuple[str, int], owners: list[str]) -> str | None:
    """An episode ID (period and sequence) is one episode's: why ``owners`` break that, or None."""
    if len(owners) > 1:
        return f"duplicate period and sequence {slot[0]}-{slot[1]}: {', '.join(sorted(owners))}"
    return None


class Settings(NamedTuple):
    """What the model compares of jobstate.yaml: the period kind and the budget."""

    period: str
    budget_per: str | None
    limits: Mapping[str, str]
    budget_since: str | None = None  # the first budget period review judges
    probes: Mapping[str, str] = {}  # each step's probe command, shell-quoted


def settings_change(old: Settings, new: Settings, *, episodes: bool) -> list[Violation]:
    """jobstate.yaml changes that loosen money controls, or change the period kind under existing episodes."""
    out: list[Violation] = []

    def alarm(field: str, before: Any, after: Any, rule: str) -> None:
        out.append(Violation("settings loosened", "-", "jobstate.yaml", field, before, after, rule))

    if episodes and old.period != new.period:
        alarm("period", old.period, new.period, "the period kind never changes once episodes exist")
    if old.budget_per is not None and new.budget_per is None:
        alarm("budget", old.budget_per, None, "a budget, once set, is not removed in review")
    elif old.budget_per is not None and old.budget_per != new.budget_per:
        alarm("budget.per", old.budget_per, new.budget_per, "the budget period never changes")
    if old.budget_per is not None and old.budget_per == new.budget_per and _later(new.budget_since, old.budget_since):
        alarm("budget.since", old.budget_since, new.budget_since, "a budget's first judged period never moves later")
    for step in sorted(set(old.probes) | set(new.probes)):
        if old.probes.get(step) != new.probes.get(step) and new.probes.get(step) is not None:
            # a command jobstate runs, where the vendor's credentials are: what a pull request puts there runs
            out.append(
                Violation(
                    "probe command changed",
                    "-",
                    "jobstate.yaml",
                    f"steps.{step}.probe",
                    old.probes.get(step),
                    new.probes.get(step),
                    "a command jobstate runs is never changed without an alarm: read it before merging",
                )
            )
    for currency, cap in sorted(old.limits.items()):
        now = new.limits.get(currency)
        if new.budget_per is not None and (now is None or Decimal(now) > Decimal(cap)):
            alarm(f"budget.limits.{currency}", cap, now, "a cap is never raised or removed without an alarm")
    return out


def tracked_private(paths: Iterable[str]) -> list[Violation]:
    """Every path of a revision (or index) under ``.jobstate/``: what Git delivers there is data jobstate
    would otherwise take for its own records (an undo, a pending change, a command's result)."""
    return [
        Violation(
            "private file tracked",
            "-",
            path,
            "path",
            None,
            path,
            f"nothing under {PRIVATE}/ is ever committed: jobstate reads there only what it wrote itself; "
            f"untrack it with: git rm --cached -r {shlex.quote(path)}",
        )
        for path in sorted(paths)
        if is_private(path)
    ]
