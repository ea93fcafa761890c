"""The lifecycle model of the state: which changes between two versions of the records are allowed.

Pure: records in, violations out. The one place these rules live. The writers call it before a
change is committed (``store.records.record_change``), ``diff`` and ``verify --against``
call it on every change between two revisions, commit by commit, so what no jobstate command
would write is exactly what review flags.

The rules:
- episode.yaml: written once, by allocate: no field and no byte of it changes (period and sequence are the ID).
- submissions.yaml: attempts are appended, never removed; a field once written keeps its value;
  ``state`` moves only along ``TRANSITIONS``, each move with the decision it needs.
- costs.yaml and approval.yaml: append-only ledgers.
- artifacts.yaml: no artifact changes once the episode is approved, in the record or in its bytes.
- history/<id>.yaml: written once, and only for an approved episode with no step open
  (its agreement with the records is checked on each revision: ``history_problems``).
- jobstate.yaml: a cap raised or removed, a budget removed or its ``per`` changed, or the period
  kind changed once episodes exist.
- .jobstate/: never in a revision (``core.rules_state.tracked_private``, with the rules of a whole state).
"""

from __future__ import annotations

import reprlib
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, NamedTuple, Protocol, TypeVar

from jobstate.core.approvals import Decision, approved
from jobstate.core.artifacts import Artifact, artifact_map
from jobstate.core.attempts import CLOSED, Attempt, Steps, open_steps_of
from jobstate.core.costs import CostEntry, totals
from jobstate.core.layout import (
    APPROVAL,
    ARTIFACTS,
    COSTS,
    EPISODE_FILE,
    SUBMISSIONS,
    history_path,
    record_path,
)
from jobstate.core.records import AttemptState, Episode

E = TypeVar("E")

# what each state may become, and the operator's decision that move needs (None: jobstate's own)
TRANSITIONS: dict[AttemptState, dict[AttemptState, str | None]] = {
    AttemptState.INTENT: {
        AttemptState.ACCEPTED: None,
        AttemptState.COMPLETED: None,
        AttemptState.NOT_SUBMITTED: None,
    },
    AttemptState.ACCEPTED: {AttemptState.COMPLETED: None, AttemptState.SUPERSEDED: "superseded"},
    AttemptState.COMPLETED: {AttemptState.SUPERSEDED: "superseded"},
    AttemptState.NOT_SUBMITTED: {},
    AttemptState.SUPERSEDED: {},
}


class Violation(NamedTuple):
    """A change no jobstate command makes: the record, the field, its old and new value, and the rule."""

    kind: str  # the alarm's kind, as diff groups them
    episode: str
    record: str  # the file, e.g. submissions.yaml
    field: str
    old: Any
    new: Any
    rule: str

    @property
    def message(self) -> str:
        """One line: what changed and which rule it breaks."""
        return f"{self.record} {self.field}: {_show(self.old)} -> {_show(self.new)} ({self.rule})"


def _show(value: Any) -> str:
    return "(none)" if value is None else reprlib.repr(value)


class Completed(Protocol):
    """What the rule for history reads of an episode."""

    episode_id: str
    period_id: str
    sequence: int
    allocation_key: str | None
    steps: Steps
    costs: list[CostEntry]
    decisions: list[Decision]
    artifacts: dict[str, Artifact]
    history: dict[str, Any] | None
    legacy_approval: bool  # approval: in a legacy episode.yaml, kept as it was by a migration: not judged


class Records(Completed, Protocol):
    """What an episode records at one revision, as the model reads it."""

    allocated_at: str | None
    blobs: dict[str, str]  # every file of the episode -> its Git blob ID
    episode: Episode | None  # episode.yaml, strictly read (None for a legacy or unreadable one)

    @property
    def completed_at(self) -> str | None: ...


def episode_change(old: Records, new: Records) -> list[Violation]:
    """Every rule the change of one episode from ``old`` to ``new`` breaks."""
    eid = new.episode_id
    full = old.episode is not None and new.episode is not None
    before, after = _allocation(old, full), _allocation(new, full)
    # a record that lacks a field may gain it (a legacy one, a new one); a read episode.yaml gains nothing
    changed = [k for k in dict.fromkeys([*before, *after]) if before.get(k) != after.get(k) and (full or k in before)]
    out = [
        Violation(
            "key moved" if name == "allocation_key" else "episode rewritten",
            eid,
            record_path(eid, EPISODE_FILE),
            name,
            before.get(name),
            after.get(name),
            "never changes once allocated",
        )
        for name in changed
        if name != "content" or changed == ["content"]  # the bytes alone: a field differs says more
    ]
    out += steps_change(eid, old.steps, new.steps)
    known = attempts_violations(eid, old.steps)
    out += [v for v in attempts_violations(eid, new.steps) if v not in known]
    out += ledger_change(eid, record_path(eid, COSTS), "entries", old.costs, new.costs, kind="cost entry rewritten")
    out += charges_change(eid, old.steps, new.steps, old.costs, new.costs)
    out += ledger_change(
        eid, record_path(eid, APPROVAL), "decisions", old.decisions, new.decisions, kind="decision rewritten"
    )
    if not approved(old.decisions):  # once approved, any change is the rule below's
        out += artifacts_change(eid, old.artifacts, new.artifacts)
    elif _artifact_values(old.artifacts) != _artifact_values(new.artifacts):
        changed = sorted(
            p
            for p in set(old.artifacts) | set(new.artifacts)
            if _artifact_value(old.artifacts.get(p)) != _artifact_value(new.artifacts.get(p))
        )
        first = changed[0]
        out.append(
            Violation(
                "artifact changed after approval",
                eid,
                record_path(eid, ARTIFACTS),
                first,
                _artifact_value(old.artifacts.get(first)),
                _artifact_value(new.artifacts.get(first)),
                "no artifact changes once the episode is approved",
            )
        )
    elif old.completed_at is None and old.blobs and new.blobs:
        # the records unchanged, the bytes swapped (for a Git LFS pointer, say): the files are final too
        before, after = _files(eid, old.blobs), _files(eid, new.blobs)
        swapped = sorted(p for p in old.artifacts if p in before and before[p] != after.get(p))
        if swapped:
            out.append(
                Violation(
                    "artifact changed after approval",
                    eid,
                    record_path(eid, swapped[0]),
                    "content",
                    before[swapped[0]],
                    after.get(swapped[0]),
                    "no artifact changes once the episode is approved",
                )
            )
    if old.completed_at is not None:
        changed = sorted(p for p in set(old.blobs) | set(new.blobs) if old.blobs.get(p) != new.blobs.get(p))
        if changed:
            out.append(
                Violation(
                    "completed episode edited",
                    eid,
                    changed[0],
                    f"content ({len(changed)} file{'s' if len(changed) != 1 else ''} changed)",
                    old.blobs.get(changed[0]),
                    new.blobs.get(changed[0]),
                    f"completed at {old.completed_at}: a completed episode never changes",
                )
            )
    if old.history is None and new.history is not None:
        out += completion_problems(new)
    return out


def _allocation(records: Records, full: bool) -> dict[str, Any]:
    """What the model compares of episode.yaml: the key and time (a legacy one's too), and with ``full`` (both
    sides read) every field and its bytes: the file is written once, by allocate."""
    found = {"allocation_key": records.allocation_key, "allocated_at": records.allocated_at}
    if full and records.episode is not None:
        found["content"] = _files(records.episode_id, records.blobs).get(EPISODE_FILE)
        found.update(records.episode.to_yaml_dict())  # a field of that name says more than the bytes
    return {k: v for k, v in found.items() if v is not None}


def _files(eid: str, blobs: Mapping[str, str]) -> dict[str, str]:
    """An episode's blobs by their path in its directory (the same in either layout)."""
    return {p.split(f"/{eid}/", 1)[1]: blob for p, blob in blobs.items() if f"/{eid}/" in p}


def artifacts_change(eid: str, old: Mapping[str, Artifact], new: Mapping[str, Artifact]) -> list[Violation]:
    """An artifact, once recorded, stays recorded (a step may record it again: a later step's report
    replaces the record, with a warning to the operator)."""
    out: list[Violation] = []
    for path, before in sorted(old.items()):
        after = new.get(path)
        if after is not None:  # re-recorded (a later step may, with a warning): only removal is refused
            continue
        rule = (
            "an artifact, once recorded, is never removed"
            if after is None
            else f"recorded by step {before.step}: another step ({after.step}) never overwrites it"
        )
        out.append(
            Violation(
                "artifact overwritten",
                eid,
                record_path(eid, ARTIFACTS),
                path,
                _artifact_value(before),
                _artifact_value(after),
                rule,
            )
        )
    return out


def charges_change(
    eid: str, old_steps: Steps, new_steps: Steps, old: list[CostEntry], new: list[CostEntry]
) -> list[Violation]:
    """A charge belongs to the attempt that reported it: one appended for a step that never ran, for an
    attempt that does not exist, or to an attempt completed with its reservation settled (the settlement
    would no longer add up) is no charge a command records, and would be counted against the budget."""
    out: list[Violation] = []
    if new[: len(old)] != old:
        return out  # rewritten, not appended: ledger_change says so
    for n, entry in enumerate(new[len(old) :], start=len(old)):
        attempts = new_steps.get(entry.step) or []
        settled = {a.number for a in old_steps.get(entry.step) or [] if a.settled is not None}
        rule = None
        if entry.legacy:
            continue
        if not attempts:
            rule = f"step {entry.step} never ran: a charge is recorded by the attempt that reported it"
        elif entry.attempt is not None and all(a.number != entry.attempt for a in attempts):
            rule = f"step {entry.step} has no attempt {entry.attempt}: a charge is recorded by its attempt"
        elif entry.attempt in settled:
            rule = (
                f"{entry.step} attempt {entry.attempt} was completed and its reservation settled before this "
                "charge: a charge of a settled attempt is recorded before it completes"
            )
        if rule is not None:
            where, what = f"entries[{n}]", f"{entry.amount} {entry.currency} for {entry.step}"
            out.append(Violation("charge without its attempt", eid, record_path(eid, COSTS), where, None, what, rule))
    return out


def _artifact_value(artifact: Artifact | None) -> tuple[str, int | None] | None:
    return None if artifact is None else (artifact.sha256, artifact.size)


def _artifact_values(artifacts: Mapping[str, Artifact]) -> dict[str, tuple[str, int | None] | None]:
    return {path: _artifact_value(a) for path, a in artifacts.items()}


def steps_change(eid: str, old: Steps, new: Steps) -> list[Violation]:
    """Attempts appended, never removed; written fields kept; states moved only along TRANSITIONS."""
    out: list[Violation] = []
    for step, attempts in sorted(old.items()):
        after = {a.number: a for a in new.get(step, [])}
        for attempt in attempts:
            now = after.get(attempt.number)
            if now is None:
                out.append(
                    Violation(
                        "submission rewritten",
                        eid,
                        record_path(eid, SUBMISSIONS),
                        f"{step} attempt {attempt.number}",
                        attempt.state.value,
                        None,
                        "attempts are never removed",
                    )
                )
                continue
            out += attempt_change(eid, attempt, now)
    return out


def attempt_change(eid: str, old: Attempt, new: Attempt) -> list[Violation]:
    """The rules one attempt's change breaks."""
    where = f"{old.step} attempt {old.number}"
    out: list[Violation] = []
    if new.state != old.state:
        allowed = TRANSITIONS[old.state]
        rule = None
        if new.state not in allowed:
            rule = f"{old.state.value} may become only {', '.join(s.value for s in allowed) or 'nothing'}"
        elif allowed[new.state] is not None and (new.resolution or {}).get("decision") != allowed[new.state]:
            rule = f"needs the operator's decision {allowed[new.state]} (jobstate resolve)"
        if rule is not None:
            out.append(
                Violation(
                    "submission rewritten",
                    eid,
                    record_path(eid, SUBMISSIONS),
                    f"{where} state",
                    old.state.value,
                    new.state.value,
                    rule,
                )
            )
    for name, value in old.fields.items():
        if name == "resolution" and new.state != old.state and (new.resolution or {}).get("previous") == value:
            continue  # a later decision keeps the earlier one under ``previous``
        if name != "state" and new.fields.get(name) != value:
            out.append(
                Violation(
                    "submission rewritten",
                    eid,
                    record_path(eid, SUBMISSIONS),
                    f"{where} {name}",
                    value,
                    new.fields.get(name),
                    "a field once written keeps its value",
                )
            )
    return out


def ledger_change(eid: str, record: str, field: str, old: list[E], new: list[E], *, kind: str) -> list[Violation]:
    """An append-only list: the old entries stay first and unchanged."""
    if new[: len(old)] == old:
        return []
    index = next((i for i, entry in enumerate(old) if i >= len(new) or new[i] != entry), len(old))
    before = old[index] if index < len(old) else None
    after = new[index] if index < len(new) else None
    return [
        Violation(
            kind,
            eid,
            record,
            f"{field}[{index}]",
            _fields(before),
            _fields(after),
            "append-only: entries are never changed or removed",
        )
    ]


def appended(old: list[E], new: list[E]) -> list[E]:
    """The entries an append-only list gained: none when it was not only appended to (the change is then
    ``ledger_change``'s alarm, never also an ordinary addition)."""
    return new[len(old) :] if new[: len(old)] == old else []


def _fields(entry: Any) -> Any:
    return getattr(entry, "fields", entry)


def attempts_violations(eid: str, steps: Steps) -> list[Violation]:
    """Attempts no jobstate command writes: numbers not 1, 2, ... in order, or a new attempt after
    one that is open or completed and not superseded."""
    out: list[Violation] = []
    where = record_path(eid, SUBMISSIONS)
    for step, attempts in sorted(steps.items()):
        for index, attempt in enumerate(attempts):
            if attempt.number != index + 1:
                rule = "attempts count 1, 2, ... in order"
                out.append(
                    Violation("submission rewritten", eid, where, f"{step} attempt", index + 1, attempt.number, rule)
                )
                break
            before = attempts[index - 1].state if index else None
            problem = replacement_problem(attempts[index - 1], attempt) if index else None
            if problem is not None:
                out.append(
                    Violation(
                        "submission rewritten",
                        eid,
                        where,
                        f"{step} attempt {attempt.number} remote_ref",
                        attempts[index - 1].remote_ref,
                        attempt.remote_ref,
                        problem,
                    )
                )
            if before is not None and before not in CLOSED:
                rule = "a new attempt follows only a not-submitted or superseded one"
                out.append(
                    Violation(
                        "submission rewritten",
                        eid,
                        where,
                        f"{step} attempt {attempt.number - 1} state",
                        before.value,
                        f"followed by attempt {attempt.number}",
                        rule,
                    )
                )
    return out


def replacement_problem(before: Attempt, attempt: Attempt) -> str | None:
    """Why ``attempt`` is no valid replacement of ``before``'s task, when either says it is one; else None.
    A replacement follows the attempt it replaces, superseded with ``replaced_by`` its reference, and keeps
    that attempt's idempotency key and request (it is the same submission)."""
    replaces = (attempt.resolution or {}).get("replaces")
    replaced_by = (before.resolution or {}).get("replaced_by") if before.state == AttemptState.SUPERSEDED else None
    if replaces is None and replaced_by is None:
        return None
    if (
        replaces != before.remote_ref
        or replaced_by != attempt.remote_ref
        or attempt.idempotency_key != before.idempotency_key
        or attempt.fingerprint != before.fingerprint
    ):
        return (
            "a replacing task follows the attempt whose task it replaces (superseded with replaced_by: its "
            "reference), with the same idempotency key and request (jobstate resolve --accepted NEW --replaces OLD)"
        )
    return None


def completion_problems(records: Completed) -> list[Violation]:
    """What makes the episode's history file wrong: no approval, a step open, or disagreement with the
    records (approval, references, cost totals, artifacts). Empty without a history file."""
    history = records.history
    if history is None:
        return []
    eid = records.episode_id
    where = history_path(eid)
    out: list[Violation] = []

    def wrong(field: str, recorded: Any, found: Any, rule: str, kind: str = "history disagrees") -> None:
        out.append(Violation(kind, eid, where, field, recorded, found, rule))

    for field in ("period_id", "sequence", "allocation_key"):
        mine, theirs = getattr(records, field), history.get(field)
        if theirs is not None and mine not in (None, "", -1) and theirs != mine:
            wrong(field, mine, theirs, f"must copy the episode's {field}")
    early = "history without approval"
    if not approved(records.decisions) and not records.legacy_approval:
        latest = records.decisions[-1].status if records.decisions else None
        wrong("approval", latest, history.get("approval"), "history is written only for an approved episode", early)
    open_steps = sorted(open_steps_of(records.steps))
    if open_steps:
        wrong("steps", ", ".join(open_steps), "completed", "history is written only when no step is open", early)
    if "approval" in history and records.decisions and history["approval"] != records.decisions[-1].fields:
        wrong("approval", records.decisions[-1].fields, history["approval"], "must copy the latest decision")
    if "remote_refs" in history:
        refs = sorted({a.remote_ref for s in records.steps.values() for a in s if a.remote_ref})
        if history["remote_refs"] != refs:
            wrong("remote_refs", refs, history["remote_refs"], "must list the references the attempts record")
    if "cost_totals" in history:
        mine = totals(records.costs)
        theirs = history["cost_totals"]
        if not isinstance(theirs, dict) or {k: _decimal(v) for k, v in theirs.items()} != {
            k: Decimal(v) for k, v in mine.items()
        }:
            wrong("cost_totals", mine, theirs, "must equal the ledger's totals")
    out += history_artifact_problems(eid, history, records.artifacts)
    return out


def history_artifact_problems(
    eid: str, history: Mapping[str, Any], artifacts: Mapping[str, Artifact]
) -> list[Violation]:
    """The artifacts a history file lists (when it lists them) are the ones the records hold."""
    if history.get("artifacts") is None:
        return []
    where = history_path(eid)
    found: list[str] = []
    listed = {k: a.sha256 for k, a in artifact_map(history.get("artifacts"), where, found, legacy=True).items()}
    actual = {k: a.sha256 for k, a in artifacts.items()}
    if listed == actual and not found:
        return []
    first = sorted(set(listed.items()) ^ set(actual.items()))
    path = first[0][0] if first else "artifacts"
    return [
        Violation(
            "history disagrees",
            eid,
            where,
            f"artifacts {path}",
            actual.get(path),
            listed.get(path),
            "must list the artifacts the records hold",
        )
    ]


def _decimal(value: Any) -> Decimal | None:
    try:
        return Decimal(str(value)) if isinstance(value, str) else None
    except ArithmeticError:
        return None
