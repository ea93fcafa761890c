"""Budget use of one revision as reviewers see it (``report`` and ``diff``). Pure: values in, values out."""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from jobstate.core.budget import Budget, budget_period, spent_and_held
from jobstate.core.periods import parse_period
from jobstate.errors import UsageError

if TYPE_CHECKING:
    from jobstate.review.revision import StateView


def budget_use(state: StateView, periods: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """Cap, spent, open reservations and remaining per budget period and currency; with ``periods``
    (episode periods), only the budget periods those fall in. Empty without a budget."""
    budget: Budget | None = state.budget
    if budget is None:
        return []
    wanted = None if periods is None else {_budget_period(p, budget) for p in periods}
    used = spent_and_held(((v.period_id, v.costs, v.steps) for v in state.episodes.values()), budget.per)
    spent = {slot: s for slot, (s, _r) in used.items() if wanted is None or slot[0] in wanted}
    held = {slot: r for slot, (_s, r) in used.items() if wanted is None or slot[0] in wanted}
    out = []
    for bp, currency in sorted(set(spent) | set(held)):
        cap = budget.limits.get(currency)
        s, r = spent.get((bp, currency), Decimal(0)), held.get((bp, currency), Decimal(0))
        row: dict[str, Any] = {"period": bp, "currency": currency, "spent": str(s), "reserved": str(r)}
        if cap is None:
            row.update(cap=None, remaining=None, use=f"spent {s}, reserved {r} {currency}; no cap for {currency}")
        else:
            left = Decimal(cap) - s - r
            share = f" ({(s + r) * 100 / Decimal(cap):.0f}%)" if Decimal(cap) else ""
            over = " OVER THE CAP" if left < 0 else ""
            row.update(
                cap=cap,
                remaining=str(left),
                use=f"spent {s} + reserved {r} of {cap} {currency}{share}, {left} left{over}",
            )
        row["name"] = f"{bp} {currency}"
        out.append(row)
    return out


def _budget_period(period_id: str, budget: Budget) -> str | None:
    try:
        return budget_period(parse_period(period_id), budget.per).id
    except UsageError:
        return None  # a legacy or malformed name: not counted
