"""``jobstate budget`` and ``jobstate budget acknowledge``."""

from __future__ import annotations

from zoneinfo import ZoneInfo

from jobstate.commands._output import note, print_json
from jobstate.core.budget import asked_budget_period
from jobstate.core.periods import period_of
from jobstate.errors import UsageError
from jobstate.paid.budget_acknowledgement import acknowledge
from jobstate.store.records import budget_usage
from jobstate.store.store import StoreOptions


def budget(
    options: StoreOptions,
    *,
    period: str | None,
    as_json: bool,
    action: str | None = None,
    by: str | None = None,
    reason: str | None = None,
) -> int:
    """Print cap, spent, reserved and remaining per currency of one budget period (read-only); with
    ``action`` ``acknowledge``, record that a person reviewed the period's overrun."""
    if action == "acknowledge":
        if period is None or by is None or reason is None:
            raise UsageError("jobstate budget acknowledge needs --period P, --by NAME and --reason TEXT")
        with options.open() as store:
            recorded = acknowledge(store, period, by=by, reason=reason)
        for entry in recorded:
            note(f"acknowledged: budget {entry.period} {entry.currency} at {entry.total} of its cap {entry.cap}")
        if as_json:
            print_json({"acknowledged": [entry.to_yaml_dict() for entry in recorded]})
        return 0
    if by is not None or reason is not None:
        raise UsageError("--by and --reason belong to jobstate budget acknowledge")
    with options.open() as store:
        store.require_initialized()
        config = store.config
        if config.budget is None:
            raise UsageError(f"{store.root} has no budget: add budget: to jobstate.yaml (see docs/money.md)")
        if period is None:
            today = store.now().astimezone(ZoneInfo(config.timezone)).date()
            target = period_of(today, config.budget.per)
        else:
            target = asked_budget_period(period, config.budget.per)
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
