"""What changed in the state between two revisions, in words, from Git objects.

``diff`` is a read-only operation. ``compare_states`` is pure: two StateViews in,
a Diff out. Changes that should never happen in a normal pull request (a completed
episode edited, an episode deleted, a cost entry or decision rewritten, a key moved
between episodes, a submission rewritten) are collected as alarms, shown first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from jobstate.core.attempts import Attempt
from jobstate.core.costs import totals
from jobstate.core.money import sum_by_currency
from jobstate.core.records import AttemptState
from jobstate.git.signing import signers_by_file
from jobstate.git.snapshot import Revision, locate
from jobstate.review.budget_use import budget_use
from jobstate.review.facts import migration_proof
from jobstate.review.revision import EpisodeView, StateView, read_state
from jobstate.review.verify import collect

E = TypeVar("E")  # an entry of an append-only ledger


@dataclass
class Diff:
    """The changes from ``base`` to ``rev``; every list is complete (renderers may cut)."""

    base: str
    base_commit: str
    rev: str
    commit: str
    alarms: list[dict[str, str]] = field(default_factory=list)
    allocated: list[dict[str, Any]] = field(default_factory=list)
    steps: list[dict[str, Any]] = field(default_factory=list)
    costs: list[dict[str, Any]] = field(default_factory=list)
    decisions: list[dict[str, Any]] = field(default_factory=list)
    completed: list[dict[str, Any]] = field(default_factory=list)
    migrations: list[dict[str, str]] = field(default_factory=list)
    preservation: list[str] | None = None  # verify --against lines; None when nothing was migrated
    budgets: list[dict[str, Any]] = field(default_factory=list)  # use of the budget periods the change touched
    unreadable: list[str] = field(default_factory=list)

    def cost_totals(self) -> dict[str, str]:
        """Added cost per currency."""
        return _by_currency(self.costs)

    def cost_by_period(self) -> dict[str, dict[str, str]]:
        """Added cost per period, then per currency."""
        out: dict[str, dict[str, str]] = {}
        for period in sorted({str(c["period_id"]) for c in self.costs}):
            out[period] = _by_currency([c for c in self.costs if c["period_id"] == period])
        return out

    def empty(self) -> bool:
        """No change at all in the state."""
        return (
            not (self.alarms or self.allocated or self.steps or self.costs or self.decisions or self.completed)
            and not self.migrations
        )

    def to_json(self) -> dict[str, Any]:
        """Everything, for ``--format json``."""
        return {
            "base": self.base,
            "base_commit": self.base_commit,
            "rev": self.rev,
            "commit": self.commit,
            "alarms": self.alarms,
            "allocated": self.allocated,
            "steps": self.steps,
            "costs": self.costs,
            "cost_totals": self.cost_totals(),
            "cost_by_period": self.cost_by_period(),
            "decisions": self.decisions,
            "completed": self.completed,
            "migrations": self.migrations,
            "preserved": None if self.preservation is None else not self.preservation,
            "preservation_differences": self.preservation or [],
            "budgets": self.budgets,
            "unreadable": self.unreadable,
        }


def _by_currency(rows: list[dict[str, Any]]) -> dict[str, str]:
    return sum_by_currency((str(row["amount"]), str(row["currency"])) for row in rows)


def _order(view: EpisodeView) -> tuple[str, int, str]:
    return (view.period_id, view.sequence, view.episode_id)


def _attempt_events(old: Attempt | None, new: Attempt) -> list[str]:
    before = None if old is None else old.state
    state = new.state
    events: list[str] = []
    if old is None:
        events.append(f"submitted (idempotency key {new.idempotency_key})")
    resolution = new.resolution
    if resolution is not None and (old is None or not old.resolution):
        events.append(f"resolved as {resolution.get('decision')} by {resolution.get('by')}: {resolution.get('reason')}")
    if state in (AttemptState.ACCEPTED, AttemptState.COMPLETED) and before in (None, AttemptState.INTENT):
        events.append(f"accepted as {new.remote_ref}")
    if state == AttemptState.COMPLETED and before != AttemptState.COMPLETED:
        events.append("completed")
    if state == AttemptState.NOT_SUBMITTED and before != AttemptState.NOT_SUBMITTED and resolution is None:
        events.append(f"not submitted: {new.get('reason')}")
    if state == AttemptState.INTENT:
        events.append("UNKNOWN: acceptance not recorded (needs jobstate resolve)")
    return events


# how far an attempt has come: a later revision may move it forward, never back
_ORDER = {
    AttemptState.INTENT: 0,
    AttemptState.NOT_SUBMITTED: 1,
    AttemptState.ACCEPTED: 1,
    AttemptState.COMPLETED: 2,
    AttemptState.SUPERSEDED: 2,
}


def _steps(eid: str, old: EpisodeView | None, new: EpisodeView, diff: Diff) -> None:
    def first_start(step: str) -> str:
        attempts = new.steps.get(step)
        return str(attempts[0].get("started_at") or "") if attempts else ""

    for step in sorted(set(new.steps) | set(old.steps if old else {}), key=lambda s: (first_start(s), s)):
        before = {a.number: a for a in (old.steps.get(step, []) if old else [])}
        after = {a.number: a for a in new.steps.get(step, [])}
        for number, attempt in before.items():
            now = after.get(number)
            rewritten = now is None or _ORDER[now.state] < _ORDER[attempt.state]
            if not rewritten and now is not None and attempt.remote_ref not in (None, now.remote_ref):
                rewritten = True
            if rewritten:
                what = "removed" if now is None else f"went from {attempt.state.value} to {now.state.value}"
                diff.alarms.append(
                    {"kind": "submission rewritten", "episode": eid, "message": f"{step} attempt {number} {what}"}
                )
        for number, attempt in after.items():
            if number in before and attempt.fields == before[number].fields:
                continue
            events = _attempt_events(before.get(number), attempt)
            if events:
                diff.steps.append(
                    {
                        "episode_id": eid,
                        "step": step,
                        "attempt": number,
                        "state": attempt.state.value,
                        "events": events,
                    }
                )


def _appended(old: list[E], new: list[E]) -> tuple[list[E], bool]:
    """The entries added to an append-only list, and whether the old entries were kept as they were."""
    if new[: len(old)] == old:
        return new[len(old) :], True
    rest = list(new)
    for entry in old:
        if entry in rest:
            rest.remove(entry)
    return rest, False


def _ledger_added(diff: Diff, eid: str, old: list[E], new: list[E], *, kind: str, what: str) -> list[E]:
    """The entries appended to an append-only ledger; an alarm when an old entry was not kept."""
    added, kept = _appended(old, new)
    if not kept:
        diff.alarms.append({"kind": kind, "episode": eid, "message": f"{what} was changed or removed"})
    return added


_COST_FIELDS = ("step", "amount", "currency", "remote_ref")
_DECISION_FIELDS = ("status", "by", "at", "reason")


def _row(eid: str, record: tuple[Any, ...], names: tuple[str, ...], **extra: Any) -> dict[str, Any]:
    """What diff reports of a typed record: the episode, ``extra``, then the named fields."""
    return {"episode_id": eid, **extra, **{name: getattr(record, name) for name in names}}


def _episode(old: EpisodeView | None, new: EpisodeView, diff: Diff) -> None:
    eid = new.episode_id
    if old is not None and old.completed_at is not None and old.episode_id == eid:
        changed = sorted(p for p in set(old.blobs) | set(new.blobs) if old.blobs.get(p) != new.blobs.get(p))
        if changed:
            diff.alarms.append(
                {
                    "kind": "completed episode edited",
                    "episode": eid,
                    "message": f"completed at {old.completed_at}; changed: {', '.join(changed)}",
                }
            )
    _steps(eid, old, new, diff)
    costs = _ledger_added(
        diff, eid, old.costs if old else [], new.costs, kind="cost entry rewritten", what="an existing cost entry"
    )
    diff.costs += [_row(eid, c, _COST_FIELDS, period_id=new.period_id) for c in costs]
    decided = _ledger_added(
        diff, eid, old.decisions if old else [], new.decisions, kind="decision rewritten", what="an approval decision"
    )
    diff.decisions += [_row(eid, d, _DECISION_FIELDS) for d in decided]
    if new.completed_at is not None and (old is None or old.completed_at is None):
        diff.completed.append({"episode_id": eid, "completed_at": new.completed_at, "cost_totals": totals(new.costs)})


def compare_states(base: StateView, new: StateView) -> Diff:
    """The Diff from ``base`` to ``new``. Pure."""
    diff = Diff(base.rev, base.commit, new.rev, new.commit, unreadable=[f"{new.rev}: {u}" for u in new.unreadable])
    migrated_from: dict[str, str] = {}
    for view in new.episodes.values():
        origin = view.migration.get("from_id") if view.migration else None
        if isinstance(origin, str) and origin in base.episodes and view.episode_id not in base.episodes:
            migrated_from[view.episode_id] = origin
    for eid, view in sorted(new.episodes.items(), key=lambda kv: _order(kv[1])):
        old = base.episodes.get(eid) or base.episodes.get(migrated_from.get(eid, ""))
        if eid in migrated_from:
            diff.migrations.append({"from_id": migrated_from[eid], "episode_id": eid})
        elif old is None:
            diff.allocated.append(
                {"episode_id": eid, "period_id": view.period_id, "allocation_key": view.allocation_key}
            )
        _episode(old, view, diff)
    moved = set(migrated_from.values())
    for eid, view in sorted(base.episodes.items(), key=lambda kv: _order(kv[1])):
        if eid not in new.episodes and eid not in moved:
            diff.alarms.insert(
                0, {"kind": "episode deleted", "episode": eid, "message": f"{view.status} episode is gone"}
            )
    old_keys = {v.allocation_key: eid for eid, v in base.episodes.items() if v.allocation_key and not v.legacy}
    for eid, view in sorted(new.episodes.items()):
        owner = old_keys.get(view.allocation_key or "")
        if owner is not None and owner != eid and migrated_from.get(eid) != owner:
            diff.alarms.append(
                {"kind": "key moved", "episode": eid, "message": f"key {view.allocation_key!r} belonged to {owner}"}
            )
    diff.alarms.sort(key=lambda a: _ALARM_ORDER.index(a["kind"]))
    return diff


_ALARM_ORDER = [
    "episode deleted",
    "completed episode edited",
    "cost entry rewritten",
    "key moved",
    "decision rewritten",
    "decision signer mismatch",
    "submission rewritten",
    "migration drift",
]


def _preservation(path: Path, base: str, rev: str) -> list[str]:
    """verify --against's proof, over the migrated episodes only (other changes are the diff's business)."""
    facts = []
    for which in (base, rev):
        snap = Revision(locate(path), which)
        try:
            facts.append(collect(snap, hash_artifacts=False)[0])
        finally:
            snap.close()
    return migration_proof(facts[0], facts[1])


def _signers(path: Path, base: str, rev: str, result: Diff) -> None:
    """Who signed each new decision: the last commits that changed its approval.yaml (one decision
    each, as approve commits). A good signature whose principal is not ``by`` is an alarm."""
    if not result.decisions:
        return
    commits = signers_by_file(locate(path), base, rev, "state/*/approval.yaml")
    per_episode: dict[str, list[dict[str, Any]]] = {}
    for row in result.decisions:
        per_episode.setdefault(str(row["episode_id"]), []).append(row)
    for eid, rows in per_episode.items():
        found = commits.get(f"state/{eid}/approval.yaml", [])[-len(rows) :]
        for row, (status, signer) in zip(rows[-len(found) :] if found else [], found, strict=True):
            row["signature"], row["signer"] = status, signer or None
            if status == "G" and signer != row["by"]:
                result.alarms.append(
                    {
                        "kind": "decision signer mismatch",
                        "episode": eid,
                        "message": f"{row['status']} by {row['by']!r} but signed by {signer!r}",
                    }
                )
    result.alarms.sort(key=lambda a: _ALARM_ORDER.index(a["kind"]))


def diff(path: Path, base: str, rev: str = "HEAD", *, progress: bool | None = None) -> Diff:
    """What changed in state/ and history/ from ``base`` to ``rev``. This is a read-only operation."""
    old = read_state(path, base, progress=progress)
    new = read_state(path, rev, progress=progress)
    result = compare_states(old, new)
    result.unreadable = [f"{base}: {u}" for u in old.unreadable] + result.unreadable
    touched = {str(c["period_id"]) for c in result.costs} | {str(a.get("period_id")) for a in result.allocated}
    touched |= {
        new.episodes[str(s["episode_id"])].period_id for s in result.steps if s.get("episode_id") in new.episodes
    }
    result.budgets = budget_use(new, touched)
    _signers(path, base, rev, result)
    if result.migrations:
        result.preservation = _preservation(path, base, rev)
        result.alarms += [{"kind": "migration drift", "episode": "-", "message": x} for x in result.preservation]
    return result
