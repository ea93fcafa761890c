"""What changed in the state between two revisions, in words, from Git objects.

``diff`` is a read-only operation. ``compare_states`` is pure: two StateViews in,
a Diff out. Changes that should never happen in a normal pull request (a completed
episode edited, an episode deleted, a cost entry or decision rewritten, a key moved
between episodes, a submission rewritten) are collected as alarms, shown first.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from jobstate.core.attempts import Attempt
from jobstate.core.costs import totals
from jobstate.core.episode_records import EpisodeRecords
from jobstate.core.keys import key_problems
from jobstate.core.layout import PRIVATE, UNRECORDED
from jobstate.core.model import Violation, appended
from jobstate.core.money import sum_by_currency
from jobstate.core.probe import PROBE_BY
from jobstate.core.records import AttemptState
from jobstate.core.rules_state import migrated_from, state_violations, tracked_private
from jobstate.review.changes import range_violations
from jobstate.review.decisions import require_signers_file, signed_decisions
from jobstate.review.merges import merge_findings
from jobstate.review.revision import StateView, read_state
from jobstate.review.spending import budget_use
from jobstate.review.vanished import find_vanished
from jobstate.review.verify import collect, preservation
from jobstate.store.history import removing_commit
from jobstate.store.snapshot import Revision, locate

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
    settings: list[dict[str, Any]] = field(default_factory=list)  # jobstate.yaml changes, always shown
    retired: list[dict[str, Any]] = field(default_factory=list)  # episodes jobstate retire took out, with why
    preservation: list[str] | None = None  # verify --against lines; None when nothing was migrated
    budgets: list[dict[str, Any]] = field(default_factory=list)  # use of the budget periods the change touched
    acknowledged: list[dict[str, Any]] = field(default_factory=list)  # budget overruns people accepted
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
            and not self.settings
            and not self.retired
            and not self.acknowledged
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
            "settings": self.settings,
            "retired": self.retired,
            "preserved": None if self.preservation is None else not self.preservation,
            "preservation_differences": self.preservation or [],
            "budgets": self.budgets,
            "acknowledged": self.acknowledged,
            "unreadable": self.unreadable,
        }


def _by_currency(rows: list[dict[str, Any]]) -> dict[str, str]:
    return sum_by_currency((str(row["amount"]), str(row["currency"])) for row in rows)


def _order(view: EpisodeRecords) -> tuple[str, int, str]:
    return (view.period_id, view.sequence, view.episode_id)


def _attempt_events(old: Attempt | None, new: Attempt) -> list[str]:
    before = None if old is None else old.state
    state = new.state
    events: list[str] = []
    if old is None:
        events.append(f"submitted (idempotency key {new.idempotency_key})")
    resolution = new.resolution
    if resolution is not None and (old is None or not old.resolution):
        events.append(_resolution_event(resolution))
    if state in (AttemptState.ACCEPTED, AttemptState.COMPLETED) and before in (None, AttemptState.INTENT):
        events.append(f"accepted as {new.remote_ref}" if new.remote_ref else "accepted (no remote task)")
    if state == AttemptState.COMPLETED and before != AttemptState.COMPLETED:
        events.append("completed")
    if state == AttemptState.NOT_SUBMITTED and before != AttemptState.NOT_SUBMITTED and resolution is None:
        events.append(f"not submitted: {new.get('reason')}")
    if state == AttemptState.INTENT:
        events.append("UNKNOWN: acceptance not recorded (needs jobstate resolve)")
    return events


def _resolution_event(resolution: Mapping[str, Any]) -> str:
    probe = resolution.get("probe")
    if resolution.get("by") == PROBE_BY and isinstance(probe, dict):
        # the evidence itself, so a reviewer sees what the vendor answered, not only jobstate's summary
        answer = json.dumps(probe.get("answer"), sort_keys=True, ensure_ascii=False)
        decision, command = resolution.get("decision"), probe.get("command")
        return f"settled by probe as {decision}: the vendor answered {answer} (probe {command})"
    return f"resolved as {resolution.get('decision')} by {resolution.get('by')}: {resolution.get('reason')}"


def _steps(eid: str, old: EpisodeRecords | None, new: EpisodeRecords, diff: Diff) -> None:
    def first_start(step: str) -> str:
        attempts = new.steps.get(step)
        return str(attempts[0].get("started_at") or "") if attempts else ""

    for step in sorted(set(new.steps) | set(old.steps if old else {}), key=lambda s: (first_start(s), s)):
        before = {a.number: a for a in (old.steps.get(step, []) if old else [])}
        after = {a.number: a for a in new.steps.get(step, [])}
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


_COST_FIELDS = ("step", "amount", "currency", "remote_ref")
_DECISION_FIELDS = ("status", "by", "at", "reason")


def _row(eid: str, record: tuple[Any, ...], names: tuple[str, ...], **extra: Any) -> dict[str, Any]:
    """What diff reports of a typed record: the episode, ``extra``, then the named fields."""
    return {"episode_id": eid, **extra, **{name: getattr(record, name) for name in names}}


def _episode(old: EpisodeRecords | None, new: EpisodeRecords, diff: Diff) -> None:
    eid = new.episode_id
    _steps(eid, old, new, diff)
    costs = appended(old.costs if old else [], new.costs)
    diff.costs += [_row(eid, c, _COST_FIELDS, period_id=new.period_id) for c in costs]
    decided = appended(old.decisions if old else [], new.decisions)
    diff.decisions += [_row(eid, d, _DECISION_FIELDS) for d in decided]
    if new.completed_at is not None and (old is None or old.completed_at is None):
        diff.completed.append({"episode_id": eid, "completed_at": new.completed_at, "cost_totals": totals(new.costs)})


def compare_states(base: StateView, new: StateView) -> Diff:
    """The Diff from ``base`` to ``new``. Pure."""
    diff = Diff(base.rev, base.commit, new.rev, new.commit, unreadable=[f"{new.rev}: {u}" for u in new.unreadable])
    moved = migrated_from(base, new)
    for eid, view in sorted(new.episodes.items(), key=lambda kv: _order(kv[1])):
        old = base.episodes.get(eid) or base.episodes.get(moved.get(eid, ""))
        if eid in moved:
            diff.migrations.append({"from_id": moved[eid], "episode_id": eid})
        elif old is None:
            diff.allocated.append(
                {"episode_id": eid, "period_id": view.period_id, "allocation_key": view.allocation_key}
            )
        _episode(old, view, diff)
    add_alarms(diff, state_violations(base, new))
    # a record the strict readers refuse is no row of the diff: it is what no command writes
    for problem in new.unreadable:
        if problem not in base.unreadable:
            diff.alarms.append({"kind": "record refused", "episode": "-", "message": problem})
    for path in sorted(set(new.unrecorded) - set(base.unrecorded)):  # verify's warning: a file nothing names
        diff.alarms.append({"kind": "unrecorded file", "episode": "-", "message": f"{path}: {UNRECORDED}"})
    add_alarms(diff, [])
    if base.config_text != new.config_text:
        diff.settings = _settings_rows(base, new)
    return diff


def add_alarms(diff: Diff, violations: list[Violation]) -> None:
    """The model's refusals as alarms, each once, grouped by kind (the worst first)."""
    for v in violations:
        alarm = {"kind": v.kind, "episode": v.episode, "message": v.message}
        if alarm not in diff.alarms:
            diff.alarms.append(alarm)
    diff.alarms.sort(key=lambda a: ALARM_ORDER.index(a["kind"]) if a["kind"] in ALARM_ORDER else len(ALARM_ORDER))


def _settings_rows(base: StateView, new: StateView) -> list[dict[str, Any]]:
    old, cur = base.settings, new.settings
    if old is None or cur is None:
        return [{"setting": "jobstate.yaml", "old": "unreadable" if old is None else "read", "new": "changed"}]
    rows = []
    for name in ("period", "budget_per", "budget_since"):
        if getattr(old, name) != getattr(cur, name):
            rows.append({"setting": name.replace("_", "."), "old": getattr(old, name), "new": getattr(cur, name)})
    for step in sorted(set(old.probes) | set(cur.probes)):
        if old.probes.get(step) != cur.probes.get(step):
            rows.append({"setting": f"steps.{step}.probe", "old": old.probes.get(step), "new": cur.probes.get(step)})
    for currency in sorted(set(old.limits) | set(cur.limits)):
        if old.limits.get(currency) != cur.limits.get(currency):
            rows.append(
                {
                    "setting": f"budget.limits.{currency}",
                    "old": old.limits.get(currency),
                    "new": cur.limits.get(currency),
                }
            )
    if rows:
        return rows
    what = (
        "added" if not base.config_text else "removed" if not new.config_text else "changed (not its period or budget)"
    )
    return [{"setting": "jobstate.yaml", "old": "-", "new": what}]


# the worst first; every kind the model raises is here
ALARM_ORDER = [
    "private file tracked",
    "record refused",
    "episode deleted",
    "tombstone rewritten",
    "ID handed out twice",
    "completed episode edited",
    "history without approval",
    "history disagrees",
    "artifact changed after approval",
    "artifact overwritten",
    "cost entry rewritten",
    "budget acknowledgement rewritten",
    "charge without its attempt",
    "remote task claimed twice",
    "key moved",
    "key not canonical",
    "episode rewritten",
    "decision rewritten",
    "decision signer mismatch",
    "submission rewritten",
    "settings loosened",
    "probe command changed",
    "migration drift",
    "unrecorded file",
]


def _removals(cwd: Path, old: StateView, new: StateView, result: Diff) -> None:
    """Say how each deleted episode went, turn a retirement into its own alarm, and raise one for an
    episode added and removed between the two revisions, which neither side shows."""
    retired = new.tombstones
    earlier = dict(old.tombstones)
    for alarm in list(result.alarms):
        eid = alarm["episode"]
        if alarm["kind"] != "episode deleted":
            continue
        stone = retired.get(eid)
        if stone is not None:
            # jobstate retire wrote it: a row of the diff, not an alarm
            result.alarms.remove(alarm)
            if eid not in earlier:
                result.retired.append(
                    {"episode_id": eid, "by": stone.retired_by, "at": stone.retired_at, "reason": stone.reason}
                )
            earlier[eid] = stone  # said once
            continue
        by = removing_commit(cwd, new.commit, eid)
        alarm["message"] += (
            f"; removed by commit {by[:12]}"
            if by
            else f"; {new.rev} does not contain the commit that had it (a reset or a rewritten history)"
        )
    for eid, stone in sorted(retired.items()):
        if eid not in old.episodes and eid not in earlier:
            result.retired.append(
                {"episode_id": eid, "by": stone.retired_by, "at": stone.retired_at, "reason": stone.reason}
            )
    for gone in find_vanished(cwd, [new.commit], set(new.episodes), retired, exclude=[old.commit]):
        if gone.episode_id not in old.episodes:  # the worst kind: first, as the sorted alarms have it
            result.alarms.insert(0, {"kind": "episode deleted", "episode": gone.episode_id, "message": gone.message})


def _key_alarms(new: StateView, result: Diff) -> None:
    """A new episode whose key no allocation writes today (not canonical, or read as another key of its period)."""
    added = {str(a["episode_id"]) for a in result.allocated}
    periods = {new.episodes[eid].period_id for eid in added if eid in new.episodes}
    keys = {
        eid: (view.period_id, view.allocation_key)
        for eid, view in new.episodes.items()
        if view.period_id in periods and view.allocation_key
    }
    for eid, message in key_problems(keys):
        if eid in added:
            result.alarms.append({"kind": "key not canonical", "episode": eid, "message": message})
    add_alarms(result, [])  # sorts them in


def _signers(path: Path, base: str, rev: str, result: Diff, approvers: Path | None) -> None:
    """Who signed each new decision: the commit that introduced it (a merge's own decisions included),
    verified with the repository's trust; the signer rule is ``core.rules_decisions.signer_problem``,
    as ``verify --approvers`` applies it (with ``approvers``, against that file's keys)."""
    if not (result.decisions or result.steps or result.completed):
        return  # no decision in the change: no commit to read
    found = signed_decisions(path, rev, base, approvers=approvers)
    by_decision = {(f.decided.episode, f.decided.what, f.decided.by, f.decided.at): f for f in found}
    for row in result.decisions:
        signed = by_decision.get((str(row["episode_id"]), row["status"], row["by"], row["at"]))
        if signed is not None:
            row["signature"], row["signer"] = signed.status, signed.signer or None
    for f in found:
        if f.problem is not None:
            result.alarms.append(
                {"kind": "decision signer mismatch", "episode": f.decided.episode, "message": f.problem}
            )
    result.alarms.sort(key=lambda a: ALARM_ORDER.index(a["kind"]) if a["kind"] in ALARM_ORDER else len(ALARM_ORDER))


def diff(
    path: Path, base: str, rev: str = "HEAD", *, progress: bool | None = None, approvers: Path | None = None
) -> Diff:
    """What changed in state/ and history/ from ``base`` to ``rev``. This is a read-only operation."""
    require_signers_file(approvers)
    cwd = locate(path)
    old = read_state(cwd, base, progress=progress)
    new = read_state(cwd, rev, progress=progress)
    result = compare_states(old, new)
    result.unreadable = [f"{base}: {u}" for u in old.unreadable] + result.unreadable
    touched = {str(c["period_id"]) for c in result.costs} | {str(a.get("period_id")) for a in result.allocated}
    touched |= {
        new.episodes[str(s["episode_id"])].period_id for s in result.steps if s.get("episode_id") in new.episodes
    }
    acknowledged = appended(old.acknowledgements, new.acknowledgements)
    result.acknowledged = [entry.to_yaml_dict() for entry in acknowledged]
    result.budgets = budget_use(new, touched, also={entry.period for entry in acknowledged})
    _key_alarms(new, result)
    for eid, text in merge_findings(cwd, old.commit, new.commit, work_tree=False):
        result.alarms.append({"kind": "ID handed out twice", "episode": eid, "message": text})
    per_commit, notes = range_violations(cwd, base, rev)
    add_alarms(result, per_commit)
    tip = Revision(cwd, new.commit)
    try:
        add_alarms(result, tracked_private(tip.tracked(PRIVATE)))
    finally:
        tip.close()
    result.unreadable += notes
    _removals(cwd, old, new, result)
    _signers(cwd, base, rev, result, approvers)
    if result.migrations:
        snap = Revision(cwd, rev)
        try:
            facts = collect(snap, hash_artifacts=False)[0]
        finally:
            snap.close()
        moves = {m["episode_id"]: m["from_id"] for m in result.migrations}
        result.preservation = preservation(cwd, base, moves, facts)
        result.alarms += [{"kind": "migration drift", "episode": "-", "message": x} for x in result.preservation]
    return result
