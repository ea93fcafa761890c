"""Money: decimal amounts as strings, currencies, exact totals, and cost ledger entries. Pure."""

from __future__ import annotations

import re
import reprlib
from decimal import Decimal, InvalidOperation
from typing import Any

from jobstate.core.names import validate_remote_ref, validate_step
from jobstate.errors import StateInvalid, UsageError

_AMOUNT = re.compile(r"-?(0|[1-9]\d{0,14})(\.\d{1,8})?")
_CURRENCY = re.compile(r"[A-Z]{3}")


def validate_amount(amount: object) -> str:
    """A decimal amount as a string (``12.40``); floats are refused: they cannot hold money exactly."""
    if isinstance(amount, Decimal):
        amount = format(amount, "f")
    if not isinstance(amount, str) or not _AMOUNT.fullmatch(amount):
        raise UsageError(f"invalid amount {amount!r}: give a decimal string such as '12.40' (never a float)")
    return amount


def validate_currency(currency: object) -> str:
    """An ISO 4217 code such as USD."""
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
    except UsageError as exc:
        raise StateInvalid(f"{source}: {exc}") from None
    if not isinstance(entry.get("at"), str):
        raise StateInvalid(f"{source}: cost entry without 'at' time")
    return entry
