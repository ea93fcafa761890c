"""Money: decimal amounts as strings (never floats), currencies, charge ids, exact sums. Pure.

The cost ledger that records charges is jobstate.core.costs.
"""

from __future__ import annotations

import re
import reprlib
from collections.abc import Iterable
from decimal import Decimal

from jobstate.errors import UsageError

_AMOUNT = re.compile(r"-?(0|[1-9]\d{0,14})(\.\d{1,8})?", re.ASCII)
_DECIMAL = re.compile(r"-?(\d+)(?:\.(\d+))?", re.ASCII)  # ASCII: \d alone also takes other scripts' digits
_CURRENCY = re.compile(r"[A-Z]{3}")


def validate_amount(amount: object) -> str:
    """A decimal amount as a string (``12.40``); floats are refused: they cannot hold money exactly."""
    if isinstance(amount, Decimal):
        amount = format(amount, "f")
    if isinstance(amount, str) and _AMOUNT.fullmatch(amount):
        return amount
    shown = reprlib.repr(amount)
    if not isinstance(amount, str):
        raise UsageError(f"invalid amount {shown}: give a decimal string such as '12.40' (never a float)")
    m = _DECIMAL.fullmatch(amount)
    if m is None:
        raise UsageError(f"invalid amount {shown}: give a decimal string of digits and one point, such as '12.40'")
    whole, fraction = m[1], m[2] or ""
    if len(whole) > 15:
        raise UsageError(f"invalid amount {shown}: too large, at most 15 digits before the point")
    if len(fraction) > 8:
        raise UsageError(f"invalid amount {shown}: too precise, at most 8 digits after the point")
    raise UsageError(f"invalid amount {shown}: write it without leading zeros, such as '12.40'")


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


def sum_by_currency(amounts: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Exact sums per currency of (amount, currency) pairs, as decimal strings."""
    sums: dict[str, Decimal] = {}
    for amount, currency in amounts:
        sums[currency] = sums.get(currency, Decimal(0)) + Decimal(amount)
    return {currency: format(total, "f") for currency, total in sorted(sums.items())}


_CHARGE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,99}")


def validate_charge_id(charge_id: object) -> str:
    """A caller-chosen charge identity (e.g. the vendor's invoice line): 1 to 100 characters."""
    if not isinstance(charge_id, str) or not _CHARGE_ID.fullmatch(charge_id):
        raise UsageError(
            f"invalid charge_id {reprlib.repr(charge_id)}: 1 to 100 letters, digits and . _ : / @ + - "
            "(starting with a letter or digit)"
        )
    return charge_id
