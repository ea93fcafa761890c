"""The marks of what this clone checked: per episode, the last commit whose records passed the lifecycle
model here (store.delivered). Kept inside the Git directory (``.git/jobstate/checked.json``), where no
merge, pull or checkout can deliver a file: a pull request cannot bring marks of its own. Written only
under the lock, by jobstate's own commits; a mark lost or unreadable only means the episode is taken as
HEAD has it, once.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterable
from pathlib import Path
from weakref import WeakKeyDictionary

from jobstate.atomic import atomic_write
from jobstate.store.store import Store
from jobstate.store.yamlio import json_dumps

_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
KEPT = 1000  # marks kept: an episode whose mark was dropped is taken as it is on its next use
_MAX = 1024 * 1024
# what this command checked and found sound (episode -> HEAD then); written with its next commit
_CHECKED: WeakKeyDictionary[Store, dict[str, str]] = WeakKeyDictionary()


def marks_path(store: Store) -> Path:
    """``<git common dir>/jobstate/checked.json``."""
    return store.git.common_dir / "jobstate" / "checked.json"


def marks(store: Store) -> dict[str, str]:
    """Episode ID -> the last commit checked for it, oldest first; {} for anything but a plain file
    this user owns (never followed through a symlink)."""
    path = marks_path(store)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return {}
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_size > _MAX:
            return {}
        try:
            data = json.loads(fh.read())
        except ValueError:
            return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str) and _SHA.fullmatch(v)}


def checked(store: Store, episode_id: str, commit: str) -> None:
    """Remember, for this command, that the episode's records at ``commit`` passed the check."""
    _CHECKED.setdefault(store, {})[episode_id] = commit


def advance(store: Store, parent: str | None, new: str, episodes: Iterable[str]) -> None:
    """After jobstate's own commit ``new`` on ``parent`` (under the lock): every episode it wrote whose
    records at ``parent`` were checked (by this command, or by the mark) is checked at ``new`` too, since
    jobstate wrote it through the model. An episode never checked here takes ``new`` as its first mark."""
    found = marks(store)
    seen = _CHECKED.get(store, {})
    moved = [e for e in episodes if e not in found or found[e] == parent or seen.get(e) == parent]
    if moved:
        _write(store, found, moved, new)


def remember(store: Store, episode_id: str, commit: str) -> None:
    """The first mark of an episode this clone never checked (call under the lock)."""
    _write(store, marks(store), [episode_id], commit)


def _write(store: Store, found: dict[str, str], episodes: list[str], commit: str) -> None:
    seen = _CHECKED.setdefault(store, {})
    for episode_id in episodes:
        found.pop(episode_id, None)
        found[episode_id] = commit  # the newest last: the oldest marks are the ones dropped
        seen[episode_id] = commit
    path = marks_path(store)
    path.parent.mkdir(exist_ok=True)
    atomic_write(path, json_dumps(dict(list(found.items())[-KEPT:])))
