"""``costs.yaml``: the cost ledger of an episode, typed. One reader, one writer. Pure.

A charge's identity is (step, remote task, charge id); without a remote task the attempt
stands in for it, and without a caller-chosen charge id the n-th charge reported for that
task is the n-th recorded one. A replay of a recorded charge is recognised, a contradicting
replay is an error naming both, and anything else is a new charge: nothing is dropped in silence.

The reader also takes the ``costs:`` list of a legacy episode.yaml (kept byte for byte by a
migration), whose entries have no time and looser fields.
"""

from __future__ import annotations

import reprlib
from collections.abc import Collection, Iterable, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any, NamedTuple

from jobstate.core.attempts import Attempt, Reservation
from jobstate.core.money import sum_by_currency, validate_charge_amount, validate_charge_id, validate_currency
from jobstate.core.names import validate_remote_ref, validate_step
from jobstate.core.records import mapping_of, report_or_raise
from jobstate.errors import ChargeConflict, StateInvalid, UsageError

SCHEMA = 1


class CostEntry(NamedTuple):
    """One recorded charge. Build it with the readers below, or from a Charge."""

    step: str
    amount: str  # a decimal string: never a float
    currency: str
    remote_ref: str | None
    attempt: int | None  # the attempt that reported it (None in older and legacy entries)
    charge_id: str | None
    at: str | None  # when it was recorded; None only in a legacy episode.yaml
    legacy: bool  # from a legacy episode.yaml
    fields: dict[str, Any]  # the mapping as stored, in its order; the writer writes exactly this

    def to_yaml_dict(self) -> dict[str, Any]:
        """The mapping costs.yaml holds for this entry."""
        return dict(self.fields)


def cost_entry_from_yaml_dict(data: Any, source: str) -> CostEntry:
    """Check one entry of costs.yaml; anything malformed is StateInvalid naming ``source``."""
    data = mapping_of(data, source, "a cost entry")
    where = f"{source}: cost entry {reprlib.repr(data)}"
    try:
        step = validate_step(data.get("step"))
        amount = validate_charge_amount(data.get("amount"))
        currency = validate_currency(data.get("currency"))
        ref = None if data.get("remote_ref") is None else validate_remote_ref(data["remote_ref"])
        charge_id = None if data.get("charge_id") is None else validate_charge_id(data["charge_id"])
    except UsageError as exc:
        raise StateInvalid(f"{where}: {exc}") from None
    attempt = data.get("attempt")
    if attempt is not None and (not isinstance(attempt, int) or isinstance(attempt, bool) or attempt < 1):
        raise StateInvalid(f"{where}: attempt {attempt!r} must be a whole number from 1")
    at = data.get("at")
    if not isinstance(at, str):
        raise StateInvalid(f"{where}: without 'at' time")
    return CostEntry(step, amount, currency, ref, attempt, charge_id, at, False, dict(data))


def legacy_cost_from_yaml_dict(data: Any, source: str) -> CostEntry:
    """Check one entry of a legacy episode.yaml's ``costs:``: step, currency and a decimal-string amount."""
    data = mapping_of(data, source, "a cost entry")
    where = f"{source}: cost entry {reprlib.repr(data)}"
    missing = [name for name in ("step", "amount", "currency") if name not in data]
    if missing:
        raise StateInvalid(f"{where}: no {missing[0]}")
    amount = data["amount"]
    if not isinstance(amount, str):
        raise StateInvalid(f"{where}: amount {amount!r} must be a decimal string, not a number")
    try:
        Decimal(amount)
    except InvalidOperation:
        raise StateInvalid(f"{where}: invalid amount {amount!r}") from None
    ref = data.get("remote_ref")
    return CostEntry(
        str(data["step"]),
        amount,
        str(data["currency"]),
        None if ref is None else str(ref),
        None,
        None,
        None,
        True,
        dict(data),
    )


def cost_list(value: Any, source: str, problems: list[str] | None = None, *, legacy: bool = False) -> list[CostEntry]:
    """A list of entries (costs.yaml's ``entries``, or a legacy episode.yaml's ``costs``).

    Without ``problems`` the first malformed entry raises StateInvalid; with it (verify, reviews),
    each is described there, without ``source``, and left out.
    """
    if value is None:
        return []
    if not isinstance(value, list):
        raise StateInvalid(f"{source}: costs must be a list of entries")
    read = legacy_cost_from_yaml_dict if legacy else cost_entry_from_yaml_dict
    out: list[CostEntry] = []
    for entry in value:
        try:
            out.append(read(entry, source))
        except StateInvalid as exc:
            report_or_raise(exc, source, problems)
    return out


def costs_from_yaml_dict(data: Any, source: str, problems: list[str] | None = None) -> list[CostEntry]:
    """Check a loaded costs.yaml: its entries, oldest first."""
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise StateInvalid(f"{source}: expected a mapping with schema: {SCHEMA}")
    if not isinstance(data.get("entries", []), list):
        raise StateInvalid(f"{source}: 'entries' must be a list")
    return cost_list(data.get("entries", []), source, problems)


def costs_to_yaml_dict(entries: Sequence[CostEntry]) -> dict[str, Any]:
    """The whole file for ``entries``."""
    return {"schema": SCHEMA, "entries": [e.to_yaml_dict() for e in entries]}


def totals(entries: Iterable[CostEntry]) -> dict[str, str]:
    """Exact totals per currency, as decimal strings."""
    return sum_by_currency((e.amount, e.currency) for e in entries)


class Charge(NamedTuple):
    """One charge a step reports, before it is recorded."""

    step: str
    amount: str
    currency: str
    remote_ref: str | None
    attempt: int
    charge_id: str | None = None

    def describe(self) -> str:
        """``12.40 USD`` with what identifies it."""
        return f"{self.amount} {self.currency} ({_identity_text(self.step, self.remote_ref, self.charge_id)})"

    def entry(self, at: str) -> CostEntry:
        """The ledger entry (fields in a fixed order)."""
        out: dict[str, Any] = {
            "step": self.step,
            "amount": self.amount,
            "currency": self.currency,
            "remote_ref": self.remote_ref,
            "attempt": self.attempt,
        }
        if self.charge_id is not None:
            out["charge_id"] = self.charge_id
        out["at"] = at
        return cost_entry_from_yaml_dict(out, "charge")


def _identity_text(step: str, ref: str | None, charge_id: str | None) -> str:
    where = f"remote task {ref}" if ref is not None else "no remote task"
    return f"step {step}, {where}" + (f", charge_id {charge_id}" if charge_id is not None else "")


def _same_task(entry: CostEntry, charge: Charge) -> bool:
    if entry.step != charge.step or entry.remote_ref != charge.remote_ref:
        return False
    # without a remote task only the attempt tells charges apart (entries without one never match)
    return charge.remote_ref is not None or entry.attempt == charge.attempt


def recorded_charge(entries: list[CostEntry], charge: Charge, ordinal: int) -> CostEntry | None:
    """The ledger entry ``charge`` replays, or None when it is a new charge.

    ``ordinal`` (1, 2, ...) is the charge's place among those without a charge id reported
    for the same task in this run. ChargeConflict when the recorded entry says another amount
    or currency.
    """
    same = [e for e in entries if _same_task(e, charge)]
    if charge.charge_id is not None:
        found = next((e for e in same if e.charge_id == charge.charge_id), None)
    else:
        unnamed = [e for e in same if e.charge_id is None]
        found = unnamed[ordinal - 1] if ordinal <= len(unnamed) else None
    if found is None:
        return None
    if found.currency != charge.currency or Decimal(found.amount) != Decimal(charge.amount):
        raise ChargeConflict(
            f"cost {charge.amount} {charge.currency} contradicts the recorded {found.amount} "
            f"{found.currency} (recorded at {found.at}) for the same charge: "
            f"{_identity_text(charge.step, charge.remote_ref, charge.charge_id)}"
            + ("" if charge.charge_id is not None else f", charge {ordinal} reported without charge_id")
            + "; if it is another charge, give it its own charge_id; nothing was recorded"
        )
    return found


def charged_to(
    entries: Iterable[CostEntry], step: str, attempts: Collection[int], remote_ref: str | None
) -> dict[str, Decimal]:
    """What one attempt of ``step`` has been charged so far, per currency: the entries that name the
    attempt (or an attempt it replaces: ``attempts``), or (older entries, which name none) its remote task."""
    out: dict[str, Decimal] = {}
    for e in entries:
        mine = e.attempt in attempts if e.attempt is not None else e.remote_ref == remote_ref
        if e.step == step and mine:
            out[e.currency] = out.get(e.currency, Decimal(0)) + Decimal(e.amount)
    return out


def same_task(attempt: Attempt, attempts: Iterable[Attempt]) -> set[int]:
    """The numbers of ``attempt`` and of the attempts of its step it replaces or that replace it: they
    share its idempotency key (resolve --replaces) and so one vendor task, its charges and reservation."""
    key = attempt.idempotency_key
    found = {attempt.number}
    if key is not None:
        found |= {a.number for a in attempts if a.step == attempt.step and a.idempotency_key == key}
    return found


def still_held(attempt: Attempt, entries: Iterable[CostEntry], attempts: Iterable[Attempt] = ()) -> Reservation | None:
    """What an open attempt's reservation still holds against its budget: its amount less what its
    task (``same_task`` among ``attempts``) has been charged in that currency already (never below 0),
    which the ledger counts as spent. Counting both would refuse other steps between a charge and its
    step's completion."""
    held = attempt.held
    if held is None:
        return None
    numbers = same_task(attempt, attempts)
    used = charged_to(entries, attempt.step, numbers, attempt.remote_ref).get(held.currency, Decimal(0))
    left = max(Decimal(held.amount) - used, Decimal(0))
    return Reservation(format(left, "f"), held.currency)
