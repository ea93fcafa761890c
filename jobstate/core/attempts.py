"""``submissions.yaml``: the attempts of each paid step, typed. One reader, one writer. Pure.

Every reader of the file goes through ``submissions_from_yaml_dict``: the paid-step commands
(which refuse a malformed file, exit 7), ``verify`` (which reports each bad attempt as a problem
and goes on) and ``diff``/``report`` (which list the file as unreadable). An attempt keeps the
mapping it was read from, unknown fields included, so writing it back changes only what a
command changed.
"""

from __future__ import annotations

import reprlib
from collections.abc import Mapping
from typing import Any, NamedTuple

from jobstate.core.money import validate_charge_amount, validate_currency
from jobstate.core.names import validate_person, validate_reason, validate_remote_ref, validate_step
from jobstate.core.probe import evidence_problem
from jobstate.core.records import AttemptState, mapping_of, one_of, report_or_raise
from jobstate.errors import StateInvalid, UsageError

SCHEMA = 1
STATES = frozenset(state.value for state in AttemptState)
OPEN = frozenset({AttemptState.INTENT, AttemptState.ACCEPTED})  # may still be charged: holds its reservation
# what a new attempt may follow: nothing, or an attempt that certainly holds nothing open
CLOSED = frozenset({AttemptState.NOT_SUBMITTED, AttemptState.SUPERSEDED})

Steps = dict[str, list["Attempt"]]


class Reservation(NamedTuple):
    """The maximum cost an attempt declared: a decimal string and a currency code."""

    amount: str
    currency: str


class Attempt(NamedTuple):
    """One attempt of a paid step. Build it with ``attempt_from_yaml_dict``; change it with ``updated``."""

    step: str
    number: int  # ``attempt:`` 1, 2, ...
    state: AttemptState
    idempotency_key: str | None
    remote_ref: str | None
    fingerprint: str | None
    reservation: Reservation | None
    settled: Mapping[str, Any] | None  # spent, reserved, overrun, unreserved: written at completion
    resolution: Mapping[str, Any] | None  # an operator's decision: decision, by, at, reason
    fields: Mapping[str, Any]  # the mapping as stored, in its order; the writer writes exactly this

    @property
    def open(self) -> bool:
        """Intent or accepted: the vendor may still charge it, so its reservation is held."""
        return self.state in OPEN

    @property
    def held(self) -> Reservation | None:
        """The reservation this attempt still holds against its budget: its own, while it is open."""
        return self.reservation if self.open else None

    def get(self, name: str) -> Any:
        """A field the record keeps for people (host, pid, started_at, ...), or None."""
        return self.fields.get(name)

    def updated(self, **changes: Any) -> Attempt:
        """This attempt with ``changes`` merged into its fields (checked again, as a reader would)."""
        plain = {k: v.value if isinstance(v, AttemptState) else v for k, v in changes.items()}
        return attempt_from_yaml_dict({**self.fields, **plain}, f"attempt {self.number} of {self.step}", self.step)

    def to_yaml_dict(self) -> dict[str, Any]:
        """The mapping submissions.yaml holds for this attempt."""
        return dict(self.fields)


def attempt_from_yaml_dict(data: Any, source: str, step: str) -> Attempt:
    """Check one attempt of ``step``; anything malformed is StateInvalid naming ``source``."""
    where = f"{source}: step {step!r}"
    data = mapping_of(data, where, "an attempt")
    state = one_of(data.get("state"), STATES, where, "state")
    number = data.get("attempt")
    if not isinstance(number, int) or isinstance(number, bool) or number < 1:
        raise StateInvalid(f"{where}: attempt must be a whole number from 1, found {reprlib.repr(number)}")
    where = f"{where} attempt {number}"
    texts = {}
    for name in ("idempotency_key", "remote_ref", "fingerprint"):
        value = data.get(name)
        if value is not None and (not isinstance(value, str) or not value):
            raise StateInvalid(f"{where}: {name} must be text, found {reprlib.repr(value)}")
        texts[name] = value
    if texts["remote_ref"] is not None:
        try:
            validate_remote_ref(texts["remote_ref"])
        except UsageError as exc:
            raise StateInvalid(f"{where}: {exc}") from None
    mappings = {}
    for name in ("settled", "resolution"):
        value = data.get(name)
        if value is not None and not isinstance(value, dict):
            raise StateInvalid(f"{where}: {name} must be a mapping, found {reprlib.repr(value)}")
        mappings[name] = value
    if state == AttemptState.SUPERSEDED and (mappings["resolution"] or {}).get("decision") != "superseded":
        # only an operator closes an attempt this way, and a new attempt (a new charge) follows it
        raise StateInvalid(f"{where}: superseded without the operator's decision (resolution: decision: superseded)")
    if mappings["resolution"] is not None:
        _check_resolution(mappings["resolution"], where)
        problem = evidence_problem(mappings["resolution"], texts["remote_ref"], data.get("started_at"))
        if problem is not None:
            raise StateInvalid(f"{where}: resolution: {problem}")
    return Attempt(
        step=step,
        number=number,
        state=AttemptState(state),
        idempotency_key=texts["idempotency_key"],
        remote_ref=texts["remote_ref"],
        fingerprint=texts["fingerprint"],
        reservation=_reservation(data.get("reservation"), where),
        settled=mappings["settled"],
        resolution=mappings["resolution"],
        fields=dict(data),
    )


def _check_resolution(resolution: Mapping[str, Any], where: str) -> None:
    # resolve's rules for --by and --reason, so a reader never takes what resolve would refuse
    try:
        validate_person(resolution.get("by"))
        if resolution.get("reason") is not None:
            validate_reason(resolution["reason"])
    except UsageError as exc:
        raise StateInvalid(f"{where}: resolution: {exc}") from None


def _reservation(value: Any, where: str) -> Reservation | None:
    if value is None:
        return None
    try:
        if not isinstance(value, dict):
            raise UsageError("a reservation must be a mapping of amount and currency")
        return Reservation(validate_charge_amount(value.get("amount")), validate_currency(value.get("currency")))
    except UsageError as exc:
        raise StateInvalid(f"{where}: reservation: {exc}") from None


def submissions_from_yaml_dict(data: Any, source: str, problems: list[str] | None = None) -> Steps:
    """Check a loaded submissions.yaml: attempts per step, in order.

    Without ``problems`` the first malformed part raises StateInvalid. With it (verify), each
    malformed step or attempt is described there, without ``source``, and left out.
    """
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise StateInvalid(f"{source}: expected a mapping with schema: {SCHEMA}")
    steps = data.get("steps", {})
    if not isinstance(steps, dict):
        raise StateInvalid(f"{source}: 'steps' must map step names to lists of attempts")
    out: Steps = {}
    for step, attempts in steps.items():
        try:
            validate_step(step)  # the writer's rule: a name no command would write is not read either
        except UsageError as exc:
            report_or_raise(StateInvalid(f"{source}: {exc}"), source, problems)
            continue
        if not isinstance(attempts, list):
            report_or_raise(
                StateInvalid(f"{source}: step {step!r}: attempts must be a list of mappings"), source, problems
            )
            continue
        out[str(step)] = []
        for attempt in attempts:
            try:
                out[str(step)].append(attempt_from_yaml_dict(attempt, source, str(step)))
            except StateInvalid as exc:
                report_or_raise(exc, source, problems)
    return out


def submissions_to_yaml_dict(steps: Mapping[str, list[Attempt]]) -> dict[str, Any]:
    """The whole file for ``steps``."""
    return {"schema": SCHEMA, "steps": {name: [a.to_yaml_dict() for a in attempts] for name, attempts in steps.items()}}


def open_steps_of(steps: Steps) -> list[str]:
    """The steps that are open: the last attempt is an intent (unknown) or accepted (at the vendor).
    The one definition every command that needs no step open (approve, complete, retire) asks."""
    return sorted(s for s, attempts in steps.items() if attempts and attempts[-1].state in OPEN)
