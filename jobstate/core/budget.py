"""Budgets per period: caps per currency, what is spent and reserved, and the decision on a new reservation.

Pure: the caller gathers spend and open reservations (under the lock) and passes them in.
A charge or reservation counts in the budget period that contains the first day of its
episode's period, so a weekly episode counts in the month its Monday falls in.
"""

from __future__ import annotations

import re
import reprlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from decimal import Decimal
from typing import Any, NamedTuple

from jobstate.core.attempts import Attempt
from jobstate.core.costs import CostEntry, still_held
from jobstate.core.money import validate_amount, validate_currency
from jobstate.core.periods import Period, parse_period, parse_time, period_of
from jobstate.core.tombstones import MAX_BY, MAX_REASON, validate_note
from jobstate.errors import BudgetExceeded, StateInvalid, UsageError

# budget ``per`` name -> period kind; a budget period is never finer than an episode's period
PER = {"day": "day", "week": "iso-week", "month": "month"}
_FINENESS = {"day": 0, "iso-week": 1, "month": 2}
_PERCENT = re.compile(r"(\d{1,3})(\.\d{1,2})?%")


@dataclass(frozen=True)
class Budget:
    """``budget:`` of jobstate.yaml: caps per currency for each period of kind ``per``."""

    per: str  # a period kind: day, iso-week or month
    limits: dict[str, str] = field(default_factory=dict)  # currency -> decimal string
    warn_at: str | None = None  # a fraction of the cap as a decimal string, e.g. "0.8"
    since: str | None = None  # the first budget period review judges (a budget added to an older state)

    def to_json_dict(self) -> dict[str, Any]:
        """For the config cache."""
        return {"per": self.per, "limits": dict(self.limits), "warn_at": self.warn_at, "since": self.since}

    def judges(self, budget_period_id: str) -> bool:
        """Whether review (verify, diff, report) holds this budget period to the caps: the periods before
        ``since`` were spent before the budget existed. New reservations are checked in every period."""
        return self.since is None or first_day(parse_period(budget_period_id)) >= first_day(parse_period(self.since))


def budget_from_yaml_dict(data: Any, period_kind: str, source: str) -> Budget:
    """Check ``budget:``; every problem is StateInvalid naming the key."""
    if not isinstance(data, dict):
        raise StateInvalid(f"{source}: budget must be a mapping with per, limits and warn_at")
    unknown = sorted(set(data) - {"per", "limits", "warn_at", "since"})
    if unknown:
        raise StateInvalid(f"{source}: budget: unknown setting {unknown[0]!r}; known: per, limits, warn_at, since")
    per_name = data.get("per")
    if per_name is None:
        per = period_kind
    elif per_name in PER:
        per = PER[per_name]
    else:
        raise StateInvalid(f"{source}: budget.per {per_name!r} is not one of {', '.join(PER)}")
    if longer(period_kind, per):
        raise StateInvalid(
            f"{source}: budget.per {per_name!r} is finer than the episodes' period ({period_kind}): "
            "a budget period must hold whole episode periods"
        )
    limits = data.get("limits")
    if not isinstance(limits, dict) or not limits:
        raise StateInvalid(f"{source}: budget.limits must map currencies to decimal strings, e.g. {{USD: '200.00'}}")
    checked: dict[str, str] = {}
    for currency, cap in limits.items():
        try:
            validate_currency(currency)
            validate_amount(cap)
        except UsageError as exc:
            raise StateInvalid(f"{source}: budget.limits.{currency}: {exc}") from None
        if Decimal(cap) < 0:
            raise StateInvalid(f"{source}: budget.limits.{currency}: a cap cannot be negative")
        checked[currency] = cap
    return Budget(per, checked, _warn_fraction(data.get("warn_at"), source), _since(data.get("since"), per, source))


def _since(value: Any, per: str, source: str) -> str | None:
    """``since``: a period ID (the budget period that contains its first day is the first one judged)."""
    if value is None:
        return None
    if isinstance(value, date):  # an unquoted day, as YAML reads 2026-08-01
        value = value.isoformat()
    try:
        return budget_period(parse_period(value), per).id
    except (UsageError, TypeError):
        raise StateInvalid(
            f"{source}: budget.since must be a period ID such as '2026-W30' or '2026-08', found {value!r}"
        ) from None


def _warn_fraction(value: Any, source: str) -> str | None:
    if value is None:
        return None
    match = _PERCENT.fullmatch(value) if isinstance(value, str) else None
    if match is None or not 0 < Decimal(value[:-1]) <= 100:
        raise StateInvalid(f"{source}: budget.warn_at must be a percentage such as '80%', found {value!r}")
    return str(Decimal(value[:-1]) / 100)


def longer(kind: str, than: str) -> bool:
    """Whether periods of ``kind`` are longer than those of ``than`` (a month than a week)."""
    return _FINENESS[kind] > _FINENESS[than]


def first_day(period: Period) -> date:
    """The first calendar day of a period."""
    if period.kind == "iso-week":
        year, week = period.id.split("-W")
        return date.fromisocalendar(int(year), int(week), 1)
    if period.kind == "month":
        return date.fromisoformat(period.id + "-01")
    return date.fromisoformat(period.id)


def budget_period(period: Period, per: str) -> Period:
    """The budget period an episode's period counts in."""
    return period_of(first_day(period), per)


def asked_budget_period(period_id: str, per: str) -> Period:
    """The budget period ``--period`` names: the one that contains the period given, which may not be
    longer than a budget period (a month asked of weekly budgets names no one week)."""
    asked = parse_period(period_id)
    if longer(asked.kind, per):
        name = next(name for name, kind in PER.items() if kind == per)  # week, not iso-week
        raise UsageError(
            f"--period {asked.id} is a {asked.kind}, longer than the budget's {name}: give a {name} or a day in it"
        )
    return budget_period(asked, per)


def episode_periods(budget_period_id: str, period_kind: str) -> list[str]:
    """The IDs of every episode period of ``period_kind`` that counts in this budget period."""
    target = parse_period(budget_period_id)
    start = first_day(target)
    out: list[str] = []
    for offset in range(-7, 40):  # a budget period is at most a month; an episode period starts up to 6 days earlier
        pid = period_of(start + timedelta(days=offset), period_kind)
        if pid.id not in out and budget_period(pid, target.kind) == target:
            out.append(pid.id)
    return out


# one episode as a budget sees it: its period, its cost ledger, its attempts per step
Spending = tuple[str, Sequence[CostEntry], Mapping[str, Sequence[Attempt]]]


def spent_and_held(episodes: Iterable[Spending], per: str) -> dict[tuple[str, str], tuple[Decimal, Decimal]]:
    """(budget period, currency) -> (spent, still held in open reservations), over ``episodes``: the one
    sum behind a step's budget decision, ``jobstate budget``, ``report``, ``diff`` and ``verify``. A legacy
    week-only episode counts in its week; a name that is no period is left out."""
    spent: dict[tuple[str, str], Decimal] = {}
    held: dict[tuple[str, str], Decimal] = {}
    for period_id, costs, steps in episodes:
        try:
            period = budget_period(parse_period(period_id), per).id
        except UsageError:
            continue
        for entry in costs:
            slot = (period, entry.currency)
            spent[slot] = spent.get(slot, Decimal(0)) + Decimal(entry.amount)
        for attempts in steps.values():
            for attempt in attempts:
                holds = still_held(attempt, costs, attempts)
                if holds is not None:
                    slot = (period, holds.currency)
                    held[slot] = held.get(slot, Decimal(0)) + Decimal(holds.amount)
    return {slot: (spent.get(slot, Decimal(0)), held.get(slot, Decimal(0))) for slot in sorted(set(spent) | set(held))}


@dataclass(frozen=True)
class Usage:
    """One currency of one budget period."""

    period_id: str
    currency: str
    cap: Decimal
    spent: Decimal
    reserved: Decimal

    @property
    def remaining(self) -> Decimal:
        """What may still be reserved (negative after an overrun)."""
        return self.cap - self.spent - self.reserved

    def to_json(self) -> dict[str, str]:
        """Decimal strings, never floats."""
        return {
            "period": self.period_id,
            "currency": self.currency,
            "cap": str(self.cap),
            "spent": str(self.spent),
            "reserved": str(self.reserved),
            "remaining": str(self.remaining),
        }


class Acknowledgement(NamedTuple):
    """An overrun of one budget period and currency that a person has reviewed and accepted
    (``jobstate budget acknowledge``): review no longer fails on it, up to the ``total`` it saw."""

    period: str  # the budget period
    currency: str
    total: str  # spent and reserved when acknowledged, a decimal string
    cap: str
    by: str
    at: str
    reason: str
    fields: dict[str, Any]

    def to_yaml_dict(self) -> dict[str, Any]:
        """The entry as written."""
        return dict(self.fields)


ACK_SCHEMA = 1


def acknowledgement_from_yaml_dict(data: Any, source: str) -> Acknowledgement:
    """Check one entry of history/budget/acknowledged.yaml; anything malformed is StateInvalid."""
    if not isinstance(data, dict):
        raise StateInvalid(f"{source}: an acknowledgement must be a mapping")
    names = ("period", "currency", "total", "cap", "by", "at", "reason")
    missing = [name for name in names if not isinstance(data.get(name), str)]
    if missing:
        raise StateInvalid(f"{source}: acknowledgement {reprlib.repr(data)}: {missing[0]} must be text")
    unknown = sorted(str(name) for name in set(data) - set(names))
    if unknown:
        raise StateInvalid(f"{source}: acknowledgement of {data['period']!r}: unknown field {unknown[0]!r}")
    try:
        parse_period(data["period"])
        validate_currency(data["currency"])
        validate_amount(data["total"])
        validate_amount(data["cap"])
        parse_time(data["at"])
        validate_note(data["by"], "by", MAX_BY)  # the writer's rule (jobstate budget acknowledge --by)
        validate_note(data["reason"], "reason", MAX_REASON)
    except UsageError as exc:
        raise StateInvalid(f"{source}: acknowledgement of {data['period']!r}: {exc}") from None
    return Acknowledgement(
        data["period"], data["currency"], data["total"], data["cap"], data["by"], data["at"], data["reason"], dict(data)
    )


def acknowledgements_from_yaml_dict(data: Any, source: str) -> list[Acknowledgement]:
    """Check a loaded history/budget/acknowledged.yaml: its entries, oldest first."""
    if not isinstance(data, dict) or data.get("schema") != ACK_SCHEMA or not isinstance(data.get("entries"), list):
        raise StateInvalid(f"{source}: expected a mapping with schema: {ACK_SCHEMA} and a list of entries")
    return [acknowledgement_from_yaml_dict(entry, source) for entry in data["entries"]]


def acknowledgements_to_yaml_dict(entries: Sequence[Acknowledgement]) -> dict[str, Any]:
    """The whole file for ``entries``."""
    return {"schema": ACK_SCHEMA, "entries": [e.to_yaml_dict() for e in entries]}


def acknowledged(
    entries: Iterable[Acknowledgement], period: str, currency: str, total: Decimal
) -> Acknowledgement | None:
    """The acknowledgement that covers ``total`` spent and reserved in this budget period, if any: one
    made when at least as much was spent. Anything spent after it is judged again."""
    for entry in entries:
        # spent and reserved may shrink after it (a reservation settles lower): at most what was acknowledged
        if entry.period == period and entry.currency == currency and total <= Decimal(entry.total):
            return entry
    return None


def cap_verdict(
    budget: Budget, entries: Iterable[Acknowledgement], period: str, currency: str, total: Decimal
) -> tuple[str, Acknowledgement | None]:
    """How ``total`` spent and reserved in a budget period stands against its cap: ``no cap`` (a currency
    the limits do not cap), ``within``, ``not judged`` (over, before ``budget.since``), ``acknowledged``
    (over, with the acknowledgement that covers it) or ``over``. The one rule verify and the reports ask."""
    cap = budget.limits.get(currency)
    if cap is None:
        return "no cap", None
    if total <= Decimal(cap):
        return "within", None
    if not budget.judges(period):
        return "not judged", None
    entry = acknowledged(entries, period, currency, total)
    return ("over", None) if entry is None else ("acknowledged", entry)


def check_reservation(usage: Usage, asked: Decimal) -> None:
    """Refuse (exit 8) a reservation that would take the period past its cap."""
    if asked > usage.remaining:
        raise BudgetExceeded(
            f"budget for {usage.period_id} exceeded: cap {usage.cap} {usage.currency}, spent {usage.spent}, "
            f"reserved {usage.reserved}, asked {asked}; nothing was run: wait for the next period, "
            "raise budget.limits in jobstate.yaml, or lower --max-cost"
        )


def crosses_warning(usage: Usage, asked: Decimal, warn_at: str | None) -> bool:
    """Whether this reservation takes the period past the warning threshold."""
    if warn_at is None or usage.cap == 0:
        return False
    threshold = usage.cap * Decimal(warn_at)
    used = usage.spent + usage.reserved
    return used < threshold <= used + asked


def parse_max_cost(text: str) -> tuple[Decimal, str]:
    """``"12.40 USD"`` -> (Decimal('12.40'), 'USD'); a decimal string and a currency, nothing else."""
    parts = text.split() if isinstance(text, str) else []
    if len(parts) != 2:
        raise UsageError(f"invalid maximum cost {text!r}: give an amount and a currency, e.g. '12.40 USD'")
    amount = validate_amount(parts[0])
    currency = validate_currency(parts[1])
    if Decimal(amount) < 0:
        raise UsageError(f"invalid maximum cost {text!r}: it cannot be negative")
    return Decimal(amount), currency
