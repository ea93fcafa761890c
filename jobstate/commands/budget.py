"""``jobstate budget``."""

from __future__ import annotations

from zoneinfo import ZoneInfo

from jobstate.commands._output import print_json
from jobstate.core.budget import PER, budget_period, longer
from jobstate.core.periods import parse_period, period_of
from jobstate.errors import UsageError
from jobstate.store.records import budget_usage
from jobstate.store.store import StoreOptions


def budget(options: StoreOptions, *, period: str | None, as_json: bool) -> int:
    """Print cap, spent, reserved and remaining per currency of one budget period. Read-only."""
    with options.open() as store:
        config = store.config
        if config.budget is None:
            raise UsageError(f"{store.root} has no budget: add budget: to jobstate.yaml (see docs/money.md)")
        if period is None:
            today = store.now().astimezone(ZoneInfo(config.timezone)).date()
            target = period_of(today, config.budget.per)
        else:
            asked = parse_period(period)
            per = next(name for name, kind in PER.items() if kind == config.budget.per)  # week, not iso-week
            if longer(asked.kind, config.budget.per):  # a month asked of weekly budgets: which week?
                raise UsageError(
                    f"--period {asked.id} is a {asked.kind}, longer than the budget's {per}: "
                    f"give a {per} or a day in it"
                )
            target = budget_period(asked, config.budget.per)
        rows = budget_usage(store, config.budget, target.id)
    if as_json:
        print_json({"period": target.id, "per": config.budget.per, "currencies": [u.to_json() for u in rows.values()]})
    else:
        for u in rows.values():
            print(
                f"{target.id}\t{u.currency}\tcap {u.cap}\tspent {u.spent}\treserved {u.reserved}\t"
                f"remaining {u.remaining}"
            )
    return 0
