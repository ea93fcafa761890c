"""Budget use of one revision as reviewers see it (``report`` and ``diff``). Pure: values in, values out."""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from jobstate.core.budget import Budget, budget_period
from jobstate.core.costs import still_held
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
    spent: dict[tuple[str, str], Decimal] = {}
    held: dict[tuple[str, str], Decimal] = {}
    for view in state.episodes.values():
        bp = _budget_period(view.period_id, budget)
        if bp is None or (wanted is not None and bp not in wanted):
            continue
        for entry in view.costs:
            slot = (bp, entry.currency)
            spent[slot] = spent.get(slot, Decimal(0)) + Decimal(entry.amount)
        for attempts in view.steps.values():
            for attempt in attempts:
                holds = still_held(attempt, view.costs, attempts)
                if holds is not None:
                    slot = (bp, holds.currency)
                    held[slot] = held.get(slot, Decimal(0)) + Decimal(holds.amount)
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
