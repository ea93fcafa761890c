"""``jobstate show``."""

from __future__ import annotations

import sys

from jobstate.commands._output import print_json
from jobstate.review import escape
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
        # YAML for people: PyYAML leaves bidi and zero-width characters raw, the terminal must not get them
        sys.stdout.write("\n".join(escape.text(line) for line in dumps(data).decode("utf-8").split("\n")))
    return 0
