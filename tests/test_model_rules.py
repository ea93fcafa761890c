"""The lifecycle model's rules on plain values, one by one: fast enough to run once per mutant (make mutate)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from jobstate.core.approvals import Decision, approved
from jobstate.core.artifacts import Artifact
from jobstate.core.attempts import Attempt, Steps
from jobstate.core.costs import CostEntry
from jobstate.core.model import (
    TRANSITIONS,
    Violation,
    appended,
    attempt_change,
    attempts_violations,
    completion_problems,
    episode_change,
    ledger_change,
    steps_change,
)
from jobstate.core.records import AttemptState as S
from jobstate.core.records import Episode
from jobstate.core.rules_state import Settings, settings_change

EID = "2026-W32-0"
SUBS = "state/2026/2026-W32/2026-W32-0/submissions.yaml"
REWRITTEN = "submission rewritten"


def att(number: int, state: S, step: str = "gen", **fields: Any) -> Attempt:
    stored = {"attempt": number, "state": state.value, **fields}
    resolution = fields.get("resolution")
    return Attempt(
        step, number, state, fields.get("key"), fields.get("remote_ref"), None, None, None, resolution, stored
    )


def decision(status: str) -> Decision:
    return Decision(status, "ed", "2026-08-07T10:00:00Z", None, {"status": status, "by": "ed"})


def cost(amount: str, ref: str = "t-1") -> CostEntry:
    fields = {"step": "gen", "amount": amount, "currency": "USD", "remote_ref": ref}
    return CostEntry("gen", amount, "USD", ref, 1, None, "2026-08-07T10:00:00Z", False, fields)


@dataclass
class Rec:
    """An episode's records as the model reads them."""

    episode_id: str = EID
    period_id: str = EID.rsplit("-", 1)[0]
    sequence: int = int(EID.rsplit("-", 1)[1])
    steps: Steps = field(default_factory=dict)
    costs: list[CostEntry] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)
    history: dict[str, Any] | None = None
    legacy_approval: bool = False
    allocation_key: str | None = "k"
    allocated_at: str | None = "2026-08-07T10:00:00Z"
    artifacts: dict[str, Artifact] = field(default_factory=dict)
    blobs: dict[str, str] = field(default_factory=dict)
    completed_at: str | None = None
    episode: Episode | None = None


def test_the_transitions_are_exactly_these() -> None:
    assert TRANSITIONS == {
        S.INTENT: {S.ACCEPTED: None, S.COMPLETED: None, S.NOT_SUBMITTED: None},
        S.ACCEPTED: {S.COMPLETED: None, S.SUPERSEDED: "superseded"},
        S.COMPLETED: {S.SUPERSEDED: "superseded"},
        S.NOT_SUBMITTED: {},
        S.SUPERSEDED: {},
    }


def test_a_violation_reads_as_one_line() -> None:
    v = Violation("k", EID, "submissions.yaml", "gen attempt 1 state", None, "x" * 100, "the rule")
    assert v.message == f"submissions.yaml gen attempt 1 state: (none) -> '{'x' * 12}...{'x' * 13}' (the rule)"
    assert Violation("k", EID, "r", "f", 1, "a", "why").message == "r f: 1 -> 'a' (why)"


@pytest.mark.parametrize(("name", "kind"), [("allocation_key", "key moved"), ("allocated_at", "episode rewritten")])
def test_the_key_and_allocation_time_never_change(name: str, kind: str) -> None:
    old = Rec()
    new, legacy = Rec(), Rec()
    setattr(new, name, "changed")
    setattr(legacy, name, None)  # a legacy record without it may gain it
    rule = "never changes once allocated"
    assert episode_change(old, new) == [
        Violation(kind, EID, "state/2026/2026-W32/2026-W32-0/episode.yaml", name, getattr(old, name), "changed", rule)
    ]
    assert episode_change(legacy, new) == []
    assert episode_change(old, Rec()) == []


@pytest.mark.parametrize("old", list(S))
@pytest.mark.parametrize("new", list(S))
def test_each_state_change_is_allowed_only_along_the_transitions(old: S, new: S) -> None:
    found = attempt_change(EID, att(1, old), att(1, new, resolution={"decision": "superseded"}))
    if old == new or new in TRANSITIONS[old]:
        assert found == []
        return
    allowed = ", ".join(s.value for s in TRANSITIONS[old]) or "nothing"
    rule = f"{old.value} may become only {allowed}"
    assert found == [Violation(REWRITTEN, EID, SUBS, "gen attempt 1 state", old.value, new.value, rule)]


def test_the_rules_say_what_a_state_may_become() -> None:
    found = attempt_change(EID, att(1, S.ACCEPTED), att(1, S.INTENT))
    assert found[0].rule == "accepted may become only completed, superseded"
    assert attempt_change(EID, att(1, S.SUPERSEDED), att(1, S.INTENT))[0].rule == "superseded may become only nothing"


@pytest.mark.parametrize("old", [S.ACCEPTED, S.COMPLETED])
def test_superseding_needs_the_operators_decision(old: S) -> None:
    rule = "needs the operator's decision superseded (jobstate resolve)"
    where = "gen attempt 2 state"
    for resolution in (None, {}, {"decision": "not-submitted"}):
        found = attempt_change(EID, att(2, old), att(2, S.SUPERSEDED, resolution=resolution))
        assert found == [Violation(REWRITTEN, EID, SUBS, where, old.value, "superseded", rule)]
    assert attempt_change(EID, att(2, old), att(2, S.SUPERSEDED, resolution={"decision": "superseded"})) == []


def test_a_field_once_written_keeps_its_value() -> None:
    old = att(1, S.INTENT, key="a", remote_ref=None)
    rule = "a field once written keeps its value"
    found = attempt_change(EID, old, att(1, S.ACCEPTED, key="b", remote_ref="t"))
    assert found == [
        Violation(REWRITTEN, EID, SUBS, "gen attempt 1 key", "a", "b", rule),
        Violation(REWRITTEN, EID, SUBS, "gen attempt 1 remote_ref", None, "t", rule),
    ]
    # a field dropped is rewritten too; one written as None and dropped is not
    assert attempt_change(EID, old, att(1, S.INTENT)) == [
        Violation(REWRITTEN, EID, SUBS, "gen attempt 1 key", "a", None, rule)
    ]
    assert attempt_change(EID, att(1, S.INTENT, key="a"), att(1, S.INTENT, key="a", remote_ref="t")) == []


def test_attempts_are_never_removed() -> None:
    old = {"gen": [att(1, S.NOT_SUBMITTED), att(2, S.COMPLETED)], "edit": [att(1, S.INTENT, step="edit")]}
    rule = "attempts are never removed"
    assert steps_change(EID, old, {"gen": [att(1, S.NOT_SUBMITTED)], "edit": old["edit"]}) == [
        Violation(REWRITTEN, EID, SUBS, "gen attempt 2", "completed", None, rule)
    ]
    assert steps_change(EID, old, {"gen": old["gen"]}) == [
        Violation(REWRITTEN, EID, SUBS, "edit attempt 1", "intent", None, rule)
    ]
    assert steps_change(EID, old, {**old, "gen": [*old["gen"], att(3, S.INTENT)]}) == []
    # the removed attempt is reported, and the rest still checked
    changed = {"gen": [att(2, S.ACCEPTED)], "edit": old["edit"]}
    assert [v.field for v in steps_change(EID, old, changed)] == ["gen attempt 1", "gen attempt 2 state"]


def test_attempts_count_from_one_in_order() -> None:
    rule = "attempts count 1, 2, ... in order"
    bad = {"gen": [att(1, S.NOT_SUBMITTED), att(3, S.INTENT), att(5, S.INTENT)]}
    assert attempts_violations(EID, bad) == [Violation(REWRITTEN, EID, SUBS, "gen attempt", 2, 3, rule)]
    assert attempts_violations(EID, {"gen": [att(2, S.INTENT)]}) == [
        Violation(REWRITTEN, EID, SUBS, "gen attempt", 1, 2, rule)
    ]
    assert attempts_violations(EID, {"gen": [att(1, S.INTENT)], "b": [att(1, S.INTENT, step="b")]}) == []


@pytest.mark.parametrize("before", list(S))
def test_a_new_attempt_follows_only_a_closed_one(before: S) -> None:
    steps = {"gen": [att(1, before), att(2, S.INTENT)]}
    found = attempts_violations(EID, steps)
    if before in (S.NOT_SUBMITTED, S.SUPERSEDED):
        assert found == []
        return
    rule = "a new attempt follows only a not-submitted or superseded one"
    assert found == [
        Violation(REWRITTEN, EID, SUBS, "gen attempt 1 state", before.value, "followed by attempt 2", rule)
    ]


def test_a_change_reports_only_attempt_problems_it_brings() -> None:
    old = Rec(steps={"gen": [att(2, S.INTENT)]})  # already wrong before: not this change's fault
    assert episode_change(old, Rec(steps={"gen": [att(2, S.INTENT)]})) == []
    new = Rec(steps={"gen": [att(2, S.INTENT)], "b": [att(1, S.INTENT, step="b"), att(2, S.INTENT, step="b")]})
    assert [v.field for v in episode_change(old, new)] == ["b attempt 1 state"]


def test_ledgers_are_append_only() -> None:
    rule = "append-only: entries are never changed or removed"
    a, b, c = cost("1.00", "a"), cost("2.00", "b"), cost("3.00", "c")
    assert ledger_change(EID, "r", "entries", [a, b], [a, b, c], kind="k") == []
    assert ledger_change(EID, "r", "entries", [], [a], kind="k") == []
    assert ledger_change(EID, "r", "entries", [a, b], [a, c], kind="k") == [
        Violation("k", EID, "r", "entries[1]", b.fields, c.fields, rule)
    ]
    assert ledger_change(EID, "r", "entries", [a, b], [a], kind="k") == [
        Violation("k", EID, "r", "entries[1]", b.fields, None, rule)
    ]
    assert ledger_change(EID, "r", "entries", [a, b], [b, a], kind="k") == [
        Violation("k", EID, "r", "entries[0]", a.fields, b.fields, rule)
    ]
    assert ledger_change(EID, "r", "items", [1, 2], [1, 3, 2], kind="x") == [
        Violation("x", EID, "r", "items[1]", 2, 3, rule)
    ]


def test_costs_and_decisions_are_ledgers_of_the_episode() -> None:
    old = Rec(costs=[cost("1.00")], decisions=[decision("rejected")])
    assert episode_change(old, Rec(costs=[], decisions=old.decisions)) == [
        Violation(
            "cost entry rewritten",
            EID,
            "state/2026/2026-W32/2026-W32-0/costs.yaml",
            "entries[0]",
            old.costs[0].fields,
            None,
            "append-only: entries are never changed or removed",
        )
    ]
    assert episode_change(old, Rec(costs=old.costs, decisions=[decision("approved")])) == [
        Violation(
            "decision rewritten",
            EID,
            "state/2026/2026-W32/2026-W32-0/approval.yaml",
            "decisions[0]",
            old.decisions[0].fields,
            {"status": "approved", "by": "ed"},
            "append-only: entries are never changed or removed",
        )
    ]


def test_appended_is_what_a_ledger_gained() -> None:
    assert appended([1, 2], [1, 2, 3]) == [3]
    assert appended([], [1]) == [1]
    assert appended([1, 2], [2, 9, 1, 1]) == []  # not an append: ledger_change's alarm, never also a row
    assert appended([1, 2], [1, 2]) == []


def test_approved_is_the_latest_decision() -> None:
    assert approved([]) is False
    assert approved([decision("approved")]) is True
    assert approved([decision("approved"), decision("rejected")]) is False
    assert approved([decision("rejected"), decision("approved")]) is True


def test_no_artifact_changes_once_approved() -> None:
    one, two = Artifact("aa", 1, "gen", {}), Artifact("bb", 1, "gen", {})
    rule = "no artifact changes once the episode is approved"
    where = "state/2026/2026-W32/2026-W32-0/artifacts.yaml"
    kind = "artifact changed after approval"
    ok = [decision("approved")]
    old = Rec(decisions=ok, artifacts={"a.txt": one, "z.txt": one})
    assert episode_change(old, Rec(decisions=ok, artifacts={"a.txt": one, "z.txt": two})) == [
        Violation(kind, EID, where, "z.txt", ("aa", 1), ("bb", 1), rule)
    ]
    assert episode_change(old, Rec(decisions=ok, artifacts={"z.txt": one})) == [
        Violation(kind, EID, where, "a.txt", ("aa", 1), None, rule)
    ]
    assert episode_change(old, Rec(decisions=ok, artifacts={**old.artifacts, "b.txt": one})) == [
        Violation(kind, EID, where, "b.txt", None, ("aa", 1), rule)
    ]
    assert episode_change(old, Rec(decisions=ok, artifacts={"a.txt": Artifact("aa", 2, "gen", {}), "z.txt": one})) == [
        Violation(kind, EID, where, "a.txt", ("aa", 1), ("aa", 2), rule)
    ]
    # the same sha and size written again by another step, or stored another way, is no change
    same = {"a.txt": Artifact("aa", 1, "other", "sha256:aa"), "z.txt": one}
    assert episode_change(old, Rec(decisions=ok, artifacts=same)) == []
    rejected = Rec(decisions=[decision("rejected")], artifacts=old.artifacts)
    # rework after a rejection: the step that recorded an artifact records it again
    assert episode_change(rejected, Rec(decisions=rejected.decisions, artifacts={**old.artifacts, "a.txt": two})) == []


def test_an_artifact_is_never_removed() -> None:
    one, two = Artifact("aa", 1, "gen", {}), Artifact("bb", 1, "polish", {})
    where = "state/2026/2026-W32/2026-W32-0/artifacts.yaml"
    old = Rec(artifacts={"a.txt": one, "z.txt": one})
    assert episode_change(old, Rec(artifacts={"a.txt": one})) == [
        Violation(
            "artifact overwritten", EID, where, "z.txt", ("aa", 1), None, "an artifact, once recorded, is never removed"
        )
    ]
    assert episode_change(old, Rec(artifacts={**old.artifacts, "a.txt": two})) == []  # re-recorded, warned


def test_a_completed_episode_never_changes() -> None:
    at = "2026-08-09T10:00:00Z"
    old = Rec(completed_at=at, blobs={"a": "1", "b": "2"})
    rule = f"completed at {at}: a completed episode never changes"
    kind = "completed episode edited"
    assert episode_change(old, Rec(completed_at=at, blobs={"a": "1", "b": "3"})) == [
        Violation(kind, EID, "b", "content (1 file changed)", "2", "3", rule)
    ]
    assert episode_change(old, Rec(completed_at=at, blobs={"b": "3", "c": "4"})) == [
        Violation(kind, EID, "a", "content (3 files changed)", "1", None, rule)
    ]
    assert episode_change(old, Rec(completed_at=at, blobs=dict(old.blobs))) == []
    assert episode_change(Rec(blobs={"a": "1"}), Rec(blobs={"a": "2"})) == []


def test_history_is_written_only_for_an_approved_episode() -> None:
    history = {"approval": {"status": "approved"}}
    found = episode_change(Rec(), Rec(history=history))
    assert found == [
        Violation(
            "history without approval",
            EID,
            "history/2026/2026-W32/2026-W32-0.yaml",
            "approval",
            None,
            {"status": "approved"},
            "history is written only for an approved episode",
        )
    ]
    # reported beside the change's other violations, not instead of them
    both = episode_change(Rec(), Rec(allocation_key="moved", history=history))
    assert [v.kind for v in both] == ["key moved", "history without approval"]
    ok = [decision("approved")]
    assert episode_change(Rec(decisions=ok), Rec(decisions=ok, history={})) == []
    # history already there: its agreement is checked per revision (completion_problems), not per change
    assert episode_change(Rec(history={}), Rec(history={})) == []


def _wrong(name: str, recorded: Any, found: Any, rule: str) -> Violation:
    # written too early (not approved, a step open) or not agreeing with the records: two kinds of alarm
    kind = "history without approval" if "is written only" in rule else "history disagrees"
    return Violation(kind, EID, "history/2026/2026-W32/2026-W32-0.yaml", name, recorded, found, rule)


def test_history_agrees_with_the_records() -> None:
    ok = [decision("approved")]
    assert completion_problems(Rec()) == []
    assert completion_problems(Rec(decisions=ok, history={})) == []
    assert completion_problems(Rec(history={"approval": 1})) == [
        _wrong("approval", None, 1, "history is written only for an approved episode")
    ]
    assert completion_problems(Rec(decisions=[decision("rejected")], history={})) == [
        _wrong("approval", "rejected", None, "history is written only for an approved episode")
    ]
    assert completion_problems(Rec(legacy_approval=True, history={})) == []
    steps = {
        "b": [att(1, S.ACCEPTED, step="b")],
        "a": [att(1, S.INTENT, step="a")],
        "c": [att(1, S.COMPLETED)],
        "d": [],
    }
    assert completion_problems(Rec(decisions=ok, steps=steps, history={})) == [
        _wrong("steps", "a, b", "completed", "history is written only when no step is open")
    ]
    copy = {"approval": {"status": "approved", "by": "someone else"}}
    assert completion_problems(Rec(decisions=ok, history=copy)) == [
        _wrong("approval", ok[0].fields, copy["approval"], "must copy the latest decision")
    ]
    assert completion_problems(Rec(decisions=ok, history={"approval": dict(ok[0].fields)})) == []
    # the episode's identity, copied: a history naming another key, period or sequence disagrees (the one rule,
    # which verify asks; it used to keep a copy of its own)
    same = {"period_id": "2026-W32", "sequence": 0, "allocation_key": "k"}
    assert completion_problems(Rec(decisions=ok, history=same)) == []
    for name, value in (("period_id", "2026-W33"), ("sequence", 1), ("allocation_key", "other")):
        assert completion_problems(Rec(decisions=ok, history={**same, name: value})) == [
            _wrong(name, same[name], value, f"must copy the episode's {name}")
        ]


def test_history_lists_the_references_and_totals() -> None:
    ok = [decision("approved")]
    steps = {
        "gen": [att(1, S.SUPERSEDED, remote_ref="t-2"), att(2, S.COMPLETED, remote_ref="t-1")],
        "x": [att(1, S.NOT_SUBMITTED)],
    }
    rule = "must list the references the attempts record"
    assert completion_problems(Rec(decisions=ok, steps=steps, history={"remote_refs": ["t-1", "t-2"]})) == []
    assert completion_problems(Rec(decisions=ok, steps=steps, history={"remote_refs": ["t-2", "t-1"]})) == [
        _wrong("remote_refs", ["t-1", "t-2"], ["t-2", "t-1"], rule)
    ]
    costs = [cost("1.50"), cost("2.50")]
    rule = "must equal the ledger's totals"
    for same in ({"USD": "4.00"}, {"USD": "4"}):
        assert completion_problems(Rec(decisions=ok, costs=costs, history={"cost_totals": same})) == []
    for other in ({"USD": "4.01"}, {"USD": 4}, {"USD": "four"}, {"EUR": "4.00"}, {}, ["USD"], "4.00 USD"):
        found = completion_problems(Rec(decisions=ok, costs=costs, history={"cost_totals": other}))
        assert found == [_wrong("cost_totals", {"USD": "4.00"}, other, rule)], other


def test_settings_that_loosen_money_controls_are_alarms() -> None:
    def alarm(name: str, before: Any, after: Any, rule: str) -> Violation:
        return Violation("settings loosened", "-", "jobstate.yaml", name, before, after, rule)

    base = Settings("iso-week", "week", {"EUR": "5", "USD": "20.00"})
    assert settings_change(base, base, episodes=True) == []
    assert settings_change(base, base._replace(period="day"), episodes=True) == [
        alarm("period", "iso-week", "day", "the period kind never changes once episodes exist")
    ]
    assert settings_change(base, base._replace(period="day"), episodes=False) == []
    assert settings_change(base, Settings("iso-week", None, {}), episodes=True) == [
        alarm("budget", "week", None, "a budget, once set, is not removed in review")
    ]
    assert settings_change(base, base._replace(budget_per="month"), episodes=True) == [
        alarm("budget.per", "week", "month", "the budget period never changes")
    ]
    cap = "a cap is never raised or removed without an alarm"
    assert settings_change(base, base._replace(limits={"EUR": "5", "USD": "20.01"}), episodes=True) == [
        alarm("budget.limits.USD", "20.00", "20.01", cap)
    ]
    assert settings_change(base, base._replace(limits={"USD": "20"}), episodes=True) == [
        alarm("budget.limits.EUR", "5", None, cap)
    ]
    assert settings_change(base, base._replace(limits={"EUR": "4.99", "USD": "20", "GBP": "1"}), episodes=True) == []
    unbudgeted = Settings("iso-week", None, {})
    assert settings_change(unbudgeted, base, episodes=True) == []
