"""``jobstate show``."""

from __future__ import annotations

import sys

from jobstate.commands._output import print_json
from jobstate.review.episode_view import describe
from jobstate.store.store import StoreOptions
from jobstate.store.yamlio import dumps


def show(options: StoreOptions, episode_id: str, *, as_json: bool, records: bool = False) -> int:
    """Print one episode with its status now (and, with ``records`` or ``as_json``, its records). Read-only."""
    with options.open() as store:
        data = describe(store, store.episode(episode_id), records=records or as_json)
    if as_json:
        print_json(data)
    else:
        sys.stdout.write(dumps(data).decode("utf-8"))
    return 0
