"""verify's view of money controls: reservations well formed and settled, overruns named, and no
budget period whose spend plus open reservations exceeds its cap. Pure over collected facts."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

from jobstate.config import config_from_yaml_dict
from jobstate.core.budget import Budget, budget_period
from jobstate.core.money import validate_amount, validate_currency
from jobstate.core.periods import parse_period
from jobstate.core.records import AttemptState
from jobstate.errors import StateInvalid, UsageError
from jobstate.facts import Facts, Problem, Reservation
from jobstate.yamlio import loads

OPEN = (AttemptState.INTENT.value, AttemptState.ACCEPTED.value)


def reservation_of(step: str, attempt: dict[str, Any], path: str, problems: list[Problem]) -> Reservation | None:
    """The reservation an attempt recorded, checked; None when it declared none."""
    value = attempt.get("reservation")
    if value is None:
        return None
    try:
        if not isinstance(value, dict):
            raise UsageError("a reservation must be a mapping of amount and currency")
        amount, currency = validate_amount(value.get("amount")), validate_currency(value.get("currency"))
    except UsageError as exc:
        problems.append(Problem(path, f"step {step!r} attempt {attempt.get('attempt')}: {exc}"))
        return None
    state = str(attempt.get("state"))
    settled = attempt.get("settled")
    if state == AttemptState.COMPLETED.value and not isinstance(settled, dict):
        problems.append(Problem(path, f"step {step!r} attempt {attempt.get('attempt')}: completed but not settled"))
    elif isinstance(settled, dict) and settled.get("overrun") is not None:
        problems.append(
            Problem(
                path,
                f"step {step!r} attempt {attempt.get('attempt')} cost {settled.get('spent')} {currency}, "
                f"{settled.get('overrun')} over its reservation of {amount}",
                "warning",
            )
        )
    return Reservation(step, int(attempt.get("attempt", 0)), amount, currency, state in OPEN)


def check_budgets(config_text: bytes | None, facts: dict[str, Facts], problems: list[Problem]) -> None:
    """Spend plus open reservations of every budget period within its caps (errors name period and currency)."""
    budget = _budget(config_text)
    if budget is None:
        return
    used: dict[tuple[str, str], Decimal] = {}
    for f in facts.values():
        if f.legacy or not f.period_id:
            continue
        try:
            period = budget_period(parse_period(f.period_id), budget.per).id
        except UsageError:
            continue
        for _step, amount, currency, _ref in f.costs:
            used[(period, currency)] = used.get((period, currency), Decimal(0)) + Decimal(amount)
        for r in f.reservations:
            if r.open:
                used[(period, r.currency)] = used.get((period, r.currency), Decimal(0)) + Decimal(r.amount)
    for (period, currency), total in sorted(used.items()):
        cap = budget.limits.get(currency)
        if cap is not None and total > Decimal(cap):
            problems.append(
                Problem("jobstate.yaml", f"budget {period} {currency}: spent and reserved {total}, over the cap {cap}")
            )


def _budget(config_text: bytes | None) -> Budget | None:
    if not config_text or not config_text.strip():
        return None
    try:
        return config_from_yaml_dict(loads(config_text, "jobstate.yaml")).budget
    except (StateInvalid, InvalidOperation):
        return None  # verify reports a broken jobstate.yaml once, where it checks the settings
