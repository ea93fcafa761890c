"""``jobstate budget acknowledge``: a person records that a budget period's overrun was reviewed, in
one commit of ``history/budget/acknowledged.yaml`` (append-only). verify and diff then no longer
fail on that overrun, up to what was spent and reserved when it was acknowledged; anything spent in
the period after it is judged again."""

from __future__ import annotations

from jobstate.core.budget import (
    Acknowledgement,
    acknowledged,
    acknowledgement_from_yaml_dict,
    acknowledgements_to_yaml_dict,
    asked_budget_period,
    episode_periods,
)
from jobstate.core.clock import format_time
from jobstate.core.layout import BUDGET_ACKNOWLEDGED
from jobstate.core.tombstones import MAX_BY, MAX_REASON, validate_note
from jobstate.errors import AlreadyRecorded, UsageError
from jobstate.git.loose import Content
from jobstate.paid.reservation import refuse_uncommitted_inputs
from jobstate.store.catalog import Catalog
from jobstate.store.records import budget_usage, checked, read_acknowledgements
from jobstate.store.store import Store
from jobstate.store.transaction import StateChange, transact
from jobstate.store.yamlio import dumps


def acknowledge(store: Store, period: str, *, by: str, reason: str) -> list[Acknowledgement]:
    """Record the overrun of every capped currency of the budget period that contains ``period``.

    Refuses (exit 2) without a budget or without an overrun to acknowledge; an overrun already
    acknowledged at its current amount records nothing (AlreadyRecorded, exit 0).
    """
    validate_note(by, "--by", MAX_BY)
    validate_note(reason, "--reason", MAX_REASON)
    store.require_initialized()
    budget = store.config.budget
    if budget is None:
        raise UsageError(f"{store.root} has no budget: there is nothing to acknowledge")
    target = asked_budget_period(period, budget.per)

    def decide(_cat: Catalog) -> StateChange[list[Acknowledgement]]:
        refuse_uncommitted_inputs(store, episode_periods(target.id, store.config.period), BUDGET_ACKNOWLEDGED)
        path = store.path(BUDGET_ACKNOWLEDGED)
        before = read_acknowledgements(path.read_bytes(), BUDGET_ACKNOWLEDGED) if path.is_file() else []
        over = [
            u
            for u in budget_usage(store, budget, target.id).values()
            if u.currency in budget.limits and u.remaining < 0
        ]
        if not over:
            raise UsageError(
                f"budget {target.id} is within its caps: there is no overrun to acknowledge; nothing was written"
            )
        at = format_time(store.now())
        new = [
            acknowledgement_from_yaml_dict(
                {
                    "period": target.id,
                    "currency": u.currency,
                    "total": str(u.spent + u.reserved),
                    "cap": str(u.cap),
                    "by": by,
                    "at": at,
                    "reason": reason,
                },
                BUDGET_ACKNOWLEDGED,
            )
            for u in over
            if acknowledged(before, target.id, u.currency, u.spent + u.reserved) is None
        ]
        if not new:
            raise AlreadyRecorded(f"the overrun of budget {target.id} is already acknowledged; nothing new recorded")
        files: dict[str, Content | None] = {BUDGET_ACKNOWLEDGED: dumps(acknowledgements_to_yaml_dict(before + new))}
        said = ", ".join(f"{e.total} of {e.cap} {e.currency}" for e in new)
        message = f"budget acknowledge {target.id} ({said}) by {by}\n\n{reason}"
        return checked(store, StateChange(new, files, message))

    return transact(store, decide)
