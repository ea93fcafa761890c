"""``jobstate allocate``."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from jobstate.allocation.allocation import allocate as allocate_episode
from jobstate.commands._output import note, print_json
from jobstate.core.periods import period_from
from jobstate.errors import UsageError
from jobstate.store.store import StoreOptions

if TYPE_CHECKING:
    from jobstate.allocation.from_scheduler import Request
from jobstate.allocation.unstable_keys import unstable_key_warning


def allocate(
    options: StoreOptions,
    *,
    key: str | None,
    date: str | None,
    week: str | None,
    period: str | None,
    at: str | None,
    as_json: bool,
    scheduled: Request | None = None,
    podinfo: str | None = None,
    any_branch: bool = False,
) -> int:
    """Print the episode ID for ``key`` (or for the scheduler run ``scheduled``) in the period given."""
    if scheduled is not None:
        # a plain --key (the retry path) loads no scheduler module and no cron library
        from jobstate.allocation.from_scheduler import allocate_from, notes, read_podinfo  # noqa: PLC0415 - start-up

        if key is not None:
            raise UsageError("give --key or --from SCHEDULER, not both: --from builds the key")
        with options.open() as store:
            result, found = allocate_from(
                store, scheduled, dict(os.environ), read_podinfo(podinfo), options.now(), any_branch=any_branch
            )
        for line in notes(result, found):
            note(line)
        if as_json:
            print_json({**result.to_json(), "scheduler": found.to_json()})
        else:
            print(result.episode_id)
        return 0
    if key is None:
        raise UsageError(
            "allocate: the following arguments are required: --key (or --from SCHEDULER) (see jobstate allocate --help)"
        )
    if (date, week, period, at) == (None, None, None, None):
        raise UsageError(
            "allocate: one of the arguments --date --week --period --at is required (see jobstate allocate --help)"
        )
    warning = unstable_key_warning(key, os.environ, options.now())
    if warning:
        note(f"warning: {warning}")
    with options.open() as store:
        config = store.config
        when = period_from(config.period, config.timezone, date_text=date, week=week, period=period, at=at)
        result = allocate_episode(store, key, when, any_branch=any_branch)
    if result.recovered:
        note(f"recovered {result.episode_id}, left uncommitted by an interrupted allocate")
    if as_json:
        print_json(result.to_json())
    else:
        print(result.episode_id)
    return 0
