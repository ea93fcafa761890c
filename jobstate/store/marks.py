"""The private marks of what this clone checked (``.jobstate/checked.json``): per episode, the last
commit whose records passed the lifecycle model here (store.delivered), moved on by jobstate's own
commits. Host-local, written only by jobstate, atomically; a mark lost or half written only means the
episode is taken as HEAD has it, once."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

from jobstate.atomic import atomic_write
from jobstate.core.layout import CHECKED_FILE
from jobstate.store.private import read_private
from jobstate.store.store import Store
from jobstate.store.yamlio import json_dumps

_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
KEPT = 1000  # marks kept: an episode whose mark was dropped is taken as it is on its next use


def marks(store: Store) -> dict[str, str]:
    """Episode ID -> the last commit checked for it, oldest first."""
    raw = read_private(store, store.path(CHECKED_FILE))
    try:
        data = json.loads(raw or b"{}")
    except ValueError:
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str) and _SHA.fullmatch(v)}


def set_marks(store: Store, found: dict[str, str], changed: Iterable[str]) -> None:
    """Write ``found`` with the ``changed`` episodes moved to the end (the newest are kept)."""
    for episode_id in changed:
        found[episode_id] = found.pop(episode_id)
    store.ensure_private()
    atomic_write(store.path(CHECKED_FILE), json_dumps(dict(list(found.items())[-KEPT:])))


def advance(store: Store, parent: str | None, new: str, episodes: Iterable[str]) -> None:
    """After jobstate's own commit ``new`` on ``parent``: the episodes it wrote whose mark was ``parent``
    are checked at ``new`` too (jobstate wrote it, through the model)."""
    found = marks(store)
    moved = [e for e in episodes if parent is not None and found.get(e) == parent]
    for episode_id in moved:
        found[episode_id] = new
    if moved:
        set_marks(store, found, moved)
