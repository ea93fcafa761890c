"""``jobstate allocate``."""

from __future__ import annotations

from jobstate.allocation import allocate as allocate_episode
from jobstate.commands._output import note, print_json
from jobstate.core.periods import period_from
from jobstate.store import StoreOptions


def allocate(
    options: StoreOptions,
    *,
    key: str,
    date: str | None,
    week: str | None,
    period: str | None,
    at: str | None,
    as_json: bool,
) -> int:
    """Print the episode ID for ``key`` in the period given."""
    with options.open() as store:
        config = store.config
        when = period_from(config.period, config.timezone, date_text=date, week=week, period=period, at=at)
        result = allocate_episode(store, key, when)
    if result.recovered:
        note(f"recovered {result.episode_id}, left uncommitted by an interrupted allocate")
    if as_json:
        print_json(result.to_json())
    else:
        print(result.episode_id)
    return 0
