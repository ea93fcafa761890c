"""``jobstate key``."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from datetime import datetime

from jobstate.allocation.from_scheduler import Request, key_for, read_podinfo
from jobstate.commands._output import print_json
from jobstate.review import escape
from jobstate.store.store import repo_path

_SOURCE = {
    "intended": "the intended time",
    "schedule": "the latest tick of --schedule",
    "option": "an option",
    "start": "the start time",
}


def key(
    repo: str | None, *, scheduled: Request, podinfo: str | None, now: Callable[[], datetime], as_json: bool
) -> int:
    """Print the key, intended time and period a scheduler run gets. Read-only."""
    found = key_for(repo_path(repo), scheduled, dict(os.environ), read_podinfo(podinfo), now())
    for line in found.warnings:
        print(f"jobstate: warning: {escape.text(line)}", file=sys.stderr)
    if as_json:
        print_json(found.to_json())
    else:
        print(f"key: {found.key}")
        print(f"intended: {found.to_json()['intended_at'] or 'none'}")
        print(f"period: {found.period.id} (from {_SOURCE[found.period_source]})")
    return 0
