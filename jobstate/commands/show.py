"""``jobstate show``."""

from __future__ import annotations

import sys

from jobstate.commands._output import print_json
from jobstate.store import StoreOptions
from jobstate.yamlio import dumps


def show(options: StoreOptions, episode_id: str, *, as_json: bool) -> int:
    """Print one episode. Read-only."""
    with options.open() as store:
        episode = store.episode(episode_id)
    data = episode.to_yaml_dict()
    if as_json:
        print_json(data)
    else:
        sys.stdout.write(dumps(data).decode("utf-8"))
    return 0
