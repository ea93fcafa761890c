"""What the code under test opens, lists and runs: audit events seen through one process-wide hook."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_WATCHED = ("open", "os.listdir", "os.scandir", "sqlite3.connect", "subprocess.Popen", "os.exec", "os.posix_spawn")
_ACTIVE: list[tuple[str, list[str]]] = []  # (root, events seen) while a ``touches`` block runs
_INSTALLED: list[bool] = []


def _hook(event: str, args: tuple[object, ...]) -> None:
    if not _ACTIVE or event not in _WATCHED:
        return
    root, seen = _ACTIVE[-1]
    first = args[0] if args else None
    if event in ("subprocess.Popen", "os.exec", "os.posix_spawn"):
        seen.append(f"{event} {args[1]!r}")  # every program run is a read of something
    elif isinstance(first, str | bytes | os.PathLike):
        path = os.path.abspath(os.fsdecode(first))
        if path == root or path.startswith(root + os.sep):
            seen.append(f"{event} {path}")


@contextmanager
def touches(root: Path) -> Iterator[list[str]]:
    """Collect every file opened (a database included) or directory listed under ``root`` and every program started,
    in this process, while the block runs. (Audit hooks cannot be removed: the one hook does nothing
    outside a block.)"""
    if not _INSTALLED:
        sys.addaudithook(_hook)
        _INSTALLED.append(True)
    seen: list[str] = []
    _ACTIVE.append((os.path.realpath(root), seen))
    try:
        yield seen
    finally:
        _ACTIVE.pop()
