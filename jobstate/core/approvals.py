"""``approval.yaml``: review decisions on an episode, typed. One reader, one writer. Pure.

The same reader checks the decisions ``approve`` appends, the copy ``complete`` puts into
history, and the single ``approval:`` mapping of a legacy episode.yaml; ``verify``, ``diff`` and
``report`` read them through it too.
"""

from __future__ import annotations

import reprlib
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from jobstate.core.clock import time_text
from jobstate.core.names import validate_person, validate_reason
from jobstate.core.records import mapping_of, one_of
from jobstate.errors import StateInvalid, UsageError

SCHEMA = 1
STATUSES = ("approved", "rejected")


class Decision(NamedTuple):
    """One review decision: approved or rejected, by whom, when, and (optionally) why."""

    status: str
    by: str
    at: str
    reason: str | None
    fields: dict[str, Any]  # the mapping as stored, in its order; the writer writes exactly this

    def same_as(self, other: Decision) -> bool:
        """The same decision by the same person for the same reason (a re-run), whenever it was made."""
        return (self.status, self.by, self.reason) == (other.status, other.by, other.reason)

    def to_yaml_dict(self) -> dict[str, Any]:
        """The mapping approval.yaml (or a history file) holds for this decision."""
        return dict(self.fields)


def new_decision(status: str, by: str, at: str, reason: str | None) -> Decision:
    """A decision as ``jobstate approve`` records it."""
    fields: dict[str, Any] = {"status": status, "by": validate_person(by), "at": at}
    if reason:
        fields["reason"] = validate_reason(reason)
    return decision_from_yaml_dict(fields, "approve")


def decision_from_yaml_dict(data: Any, source: str) -> Decision:
    """Check one decision; anything malformed is StateInvalid naming ``source``."""
    data = mapping_of(data, source, "a decision")
    status = one_of(data.get("status"), STATUSES, source, "decision status")
    by = data.get("by")
    if not isinstance(by, str) or not by.strip():
        raise StateInvalid(f"{source}: the {status} decision must say by whom, found {reprlib.repr(by)}")
    at = time_text(data.get("at"))
    if at is None:
        raise StateInvalid(f"{source}: the {status} decision must say when, found {reprlib.repr(data.get('at'))}")
    reason = data.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise StateInvalid(f"{source}: a decision's reason must be text, found {reprlib.repr(reason)}")
    try:  # the writer's rules (new_decision), so a reader never takes what approve would refuse
        validate_person(by)
        if reason is not None:
            validate_reason(reason)
    except UsageError as exc:
        raise StateInvalid(f"{source}: the {status} decision: {exc}") from None
    return Decision(status, by, at, reason, dict(data))


def legacy_decision(value: Any) -> Decision | None:
    """The ``approval:`` of a legacy episode.yaml (and of a history file), read as leniently as
    migrations always have: any mapping with a status is a decision, anything else is none."""
    if not isinstance(value, dict) or "status" not in value:
        return None
    reason = value.get("reason")
    return Decision(
        str(value["status"]),
        str(value.get("by")),
        time_text(value.get("at")) or str(value.get("at")),
        reason if isinstance(reason, str) else None,
        dict(value),
    )


def approvals_from_yaml_dict(data: Any, source: str) -> list[Decision]:
    """Check a loaded approval.yaml: its decisions, oldest first."""
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise StateInvalid(f"{source}: expected a mapping with schema: {SCHEMA}")
    decisions = data.get("decisions", [])
    if not isinstance(decisions, list):
        raise StateInvalid(f"{source}: 'decisions' must be a list")
    return [decision_from_yaml_dict(d, source) for d in decisions]


def approvals_to_yaml_dict(decisions: Sequence[Decision], read: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The whole file for ``decisions``; other top-level fields of the file as ``read`` are kept."""
    return {"schema": SCHEMA, **(read or {}), "decisions": [d.to_yaml_dict() for d in decisions]}


def approved(decisions: Sequence[Decision]) -> bool:
    """Whether the latest review decision approves."""
    return bool(decisions) and decisions[-1].status == "approved"
