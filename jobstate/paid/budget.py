"""What a budget period has spent and holds in open reservations, read from the work tree's records.

Under the lock (a paid step's intent) this is the input of the budget decision; outside it
(``jobstate budget``) it is a read-only view.
"""

from __future__ import annotations

import os
from decimal import Decimal

from jobstate.core.budget import Budget, Usage, episode_periods, spent_and_held
from jobstate.core.layout import STATE
from jobstate.core.periods import parse_episode_id
from jobstate.errors import UsageError
from jobstate.store.records import episode_records
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
    episodes = []
    for eid in _episodes_in(store, episode_periods(period_id, store.config.period)):
        found = episode_records(store, eid)
        episodes.append((found.period_id, found.costs, found.steps))
    used = {currency: use for (_period, currency), use in spent_and_held(episodes, budget.per).items()}
    return {
        c: Usage(
            period_id,
            c,
            Decimal(budget.limits[c]) if c in budget.limits else Decimal(0),
            *used.get(c, (Decimal(0), Decimal(0))),
        )
        for c in sorted(set(budget.limits) | set(used))
    }
