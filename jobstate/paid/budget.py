"""What a budget period has spent and holds in open reservations, read from the work tree's records.

Under the lock (a paid step's intent) this is the input of the budget decision; outside it
(``jobstate budget``) it is a read-only view.
"""

from __future__ import annotations

import os
from decimal import Decimal

from jobstate.core.budget import Budget, Usage, episode_periods
from jobstate.core.costs import still_held
from jobstate.core.layout import STATE
from jobstate.core.periods import parse_episode_id
from jobstate.errors import UsageError
from jobstate.store.episode_files import cost_entries, submissions
from jobstate.store.store import Store


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
        entries = cost_entries(store, eid)
        for entry in entries:
            spent[entry.currency] = spent.get(entry.currency, Decimal(0)) + Decimal(entry.amount)
        for attempts in submissions(store, eid).values():
            for attempt in attempts:
                held = still_held(attempt, entries, attempts)
                if held is not None:
                    amount, currency = held
                    reserved[currency] = reserved.get(currency, Decimal(0)) + Decimal(amount)
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
