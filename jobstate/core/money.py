"""Money: decimal amounts as strings, currencies, exact totals, and cost ledger entries. Pure.

A charge's identity is (step, remote task, charge id); without a remote task the attempt
stands in for it, and without a caller-chosen charge id the n-th charge reported for that
task is the n-th recorded one. A replay of a recorded charge is recognised, a contradicting
replay is an error naming both, and anything else is a new charge: nothing is dropped in silence.
"""

from __future__ import annotations

import re
import reprlib
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from jobstate.core.names import validate_remote_ref, validate_step
from jobstate.errors import ChargeConflict, StateInvalid, UsageError

_AMOUNT = re.compile(r"-?(0|[1-9]\d{0,14})(\.\d{1,8})?")
_CURRENCY = re.compile(r"[A-Z]{3}")


def validate_amount(amount: object) -> str:
    """A decimal amount as a string (``12.40``); floats are refused: they cannot hold money exactly."""
    if isinstance(amount, Decimal):
        amount = format(amount, "f")
    if not isinstance(amount, str) or not _AMOUNT.fullmatch(amount):
        raise UsageError(f"invalid amount {amount!r}: give a decimal string such as '12.40' (never a float)")
    return amount


def validate_charge_amount(amount: object) -> str:
    """An amount a step reports: a decimal string, zero or more (refunds are not modelled)."""
    if isinstance(amount, int | float):  # bool included
        raise UsageError(
            f'invalid amount {amount!r}: give a decimal string such as "12.40", not a number '
            "(a number cannot hold money exactly)"
        )
    if amount is None:
        raise UsageError('cost without an amount: give a decimal string such as "12.40"')
    text = validate_amount(amount)
    if text.startswith("-"):
        raise UsageError(f"invalid amount {text!r}: a charge cannot be negative (refunds are not recorded by jobstate)")
    return text


def validate_currency(currency: object) -> str:
    """An ISO 4217 code such as USD."""
    if currency is None:
        raise UsageError("cost without a currency: give a three-letter ISO 4217 code such as USD")
    if not isinstance(currency, str) or not _CURRENCY.fullmatch(currency):
        raise UsageError(f"invalid currency {currency!r}: use a three-letter ISO 4217 code such as USD")
    return currency


def totals(entries: list[dict[str, Any]]) -> dict[str, str]:
    """Exact totals per currency, as decimal strings."""
    sums: dict[str, Decimal] = {}
    for entry in entries:
        try:
            sums[entry["currency"]] = sums.get(entry["currency"], Decimal(0)) + Decimal(entry["amount"])
        except (KeyError, TypeError, InvalidOperation):
            raise StateInvalid(f"cost entry {reprlib.repr(entry)} is malformed") from None
    return {currency: format(total, "f") for currency, total in sorted(sums.items())}


def check_cost_entry(entry: Any, source: str) -> dict[str, Any]:
    """One ledger entry as read from costs.yaml; StateInvalid when malformed."""
    if not isinstance(entry, dict):
        raise StateInvalid(f"{source}: a cost entry must be a mapping")
    try:
        validate_step(entry.get("step"))
        validate_amount(entry.get("amount"))
        validate_currency(entry.get("currency"))
        if entry.get("remote_ref") is not None:
            validate_remote_ref(entry["remote_ref"])
        if entry.get("charge_id") is not None:
            validate_charge_id(entry["charge_id"])
    except UsageError as exc:
        raise StateInvalid(f"{source}: {exc}") from None
    attempt = entry.get("attempt")
    if attempt is not None and (not isinstance(attempt, int) or isinstance(attempt, bool) or attempt < 1):
        raise StateInvalid(f"{source}: cost entry attempt {attempt!r} must be a whole number from 1")
    if not isinstance(entry.get("at"), str):
        raise StateInvalid(f"{source}: cost entry without 'at' time")
    return entry


_CHARGE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,99}")


def validate_charge_id(charge_id: object) -> str:
    """A caller-chosen charge identity (e.g. the vendor's invoice line): 1 to 100 characters."""
    if not isinstance(charge_id, str) or not _CHARGE_ID.fullmatch(charge_id):
        raise UsageError(
            f"invalid charge_id {reprlib.repr(charge_id)}: 1 to 100 letters, digits and . _ : / @ + - "
            "(starting with a letter or digit)"
        )
    return charge_id


@dataclass(frozen=True)
class Charge:
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

    def entry(self, at: str) -> dict[str, Any]:
        """The ledger entry (keys in a fixed order)."""
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
        return out


def _identity_text(step: str, ref: str | None, charge_id: str | None) -> str:
    where = f"remote task {ref}" if ref is not None else "no remote task"
    return f"step {step}, {where}" + (f", charge_id {charge_id}" if charge_id is not None else "")


def _same_task(entry: dict[str, Any], charge: Charge) -> bool:
    if entry.get("step") != charge.step or entry.get("remote_ref") != charge.remote_ref:
        return False
    # without a remote task only the attempt tells charges apart (entries without one never match)
    return charge.remote_ref is not None or entry.get("attempt") == charge.attempt


def recorded_charge(entries: list[dict[str, Any]], charge: Charge, ordinal: int) -> dict[str, Any] | None:
    """The ledger entry ``charge`` replays, or None when it is a new charge.

    ``ordinal`` (1, 2, ...) is the charge's place among those without a charge id reported
    for the same task in this run. ChargeConflict when the recorded entry says another amount
    or currency.
    """
    same = [e for e in entries if _same_task(e, charge)]
    if charge.charge_id is not None:
        found = next((e for e in same if e.get("charge_id") == charge.charge_id), None)
    else:
        unnamed = [e for e in same if e.get("charge_id") is None]
        found = unnamed[ordinal - 1] if ordinal <= len(unnamed) else None
    if found is None:
        return None
    if found.get("currency") != charge.currency or Decimal(str(found.get("amount"))) != Decimal(charge.amount):
        raise ChargeConflict(
            f"cost {charge.amount} {charge.currency} contradicts the recorded {found.get('amount')} "
            f"{found.get('currency')} (recorded at {found.get('at')}) for the same charge: "
            f"{_identity_text(charge.step, charge.remote_ref, charge.charge_id)}"
            + ("" if charge.charge_id is not None else f", charge {ordinal} reported without charge_id")
            + "; if it is another charge, give it its own charge_id; nothing was recorded"
        )
    return found
