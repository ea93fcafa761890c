"""``jobstate list``."""

from __future__ import annotations

from jobstate.commands._output import print_json
from jobstate.core.periods import parse_period
from jobstate.review import escape
from jobstate.review.episode_view import describe
from jobstate.store.store import StoreOptions


def list_episodes(options: StoreOptions, *, period: str | None, as_json: bool) -> int:
    """Print every episode (of one period) with its status now. Read-only."""
    with options.open() as store:
        if period is not None:
            store.require_period_kind(parse_period(period))  # another kind would silently list nothing
        episodes = [describe(store, e, records=False) for e in store.episodes(period)]
    if as_json:
        print_json(episodes)
    else:
        for e in episodes:
            print("\t".join(escape.text(e[name]) for name in ("episode_id", "status", "allocation_key")))
    return 0
