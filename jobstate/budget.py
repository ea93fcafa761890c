"""What a budget period has spent and holds in open reservations, read from the work tree's records.

Under the lock (a paid step's intent) this is the input of the budget decision; outside it
(``jobstate budget``) it is a read-only view.
"""

from __future__ import annotations

import os
from decimal import Decimal
from typing import Any

from jobstate.core.budget import Budget, Usage, episode_periods
from jobstate.core.layout import STATE, SUBMISSIONS, record_path
from jobstate.core.money import validate_amount, validate_currency
from jobstate.core.periods import parse_episode_id
from jobstate.core.records import AttemptState
from jobstate.episode_files import cost_entries, submissions
from jobstate.errors import StateInvalid, UsageError
from jobstate.store import Store

OPEN = (AttemptState.INTENT, AttemptState.ACCEPTED)


def held(attempt: dict[str, Any], source: str) -> tuple[Decimal, str] | None:
    """The reservation an attempt still holds: (amount, currency), or None once it is settled."""
    reservation = attempt.get("reservation")
    if not isinstance(reservation, dict) or attempt.get("state") not in OPEN:
        return None
    try:
        amount = validate_amount(reservation.get("amount"))
        currency = validate_currency(reservation.get("currency"))
    except UsageError as exc:
        raise StateInvalid(f"{source}: reservation of attempt {attempt.get('attempt')}: {exc}") from None
    return Decimal(amount), currency


def _episodes_in(store: Store, period_ids: list[str]) -> list[str]:
    wanted = set(period_ids)
    found = []
    with os.scandir(store.path(STATE)) as entries:
        for entry in entries:
            try:
                period, _sequence = parse_episode_id(entry.name)
            except UsageError:
                continue
            if period.id in wanted and entry.is_dir(follow_symlinks=False):
                found.append(entry.name)
    return sorted(found)


def usage(store: Store, budget: Budget, period_id: str) -> dict[str, Usage]:
    """Cap, spent and reserved per currency of one budget period. Read-only."""
    spent: dict[str, Decimal] = {}
    reserved: dict[str, Decimal] = {}
    for eid in _episodes_in(store, episode_periods(period_id, store.config.period)):
        for entry in cost_entries(store, eid):
            spent[entry["currency"]] = spent.get(entry["currency"], Decimal(0)) + Decimal(entry["amount"])
        for attempts in submissions(store, eid).values():
            for attempt in attempts:
                hold = held(attempt, record_path(eid, SUBMISSIONS))
                if hold is not None:
                    reserved[hold[1]] = reserved.get(hold[1], Decimal(0)) + hold[0]
    currencies = sorted(set(budget.limits) | set(spent) | set(reserved))
    return {
        c: Usage(
            period_id,
            c,
            Decimal(budget.limits[c]) if c in budget.limits else Decimal(0),
            spent.get(c, Decimal(0)),
            reserved.get(c, Decimal(0)),
        )
        for c in currencies
    }
