"""Whether an episode directory is exactly as HEAD has it, without a repository-wide ``git status``.

``git status -- state/<id>`` still compares the whole index with HEAD, so its
cost grows with the number of episodes (about 40 ms at 10,000, twice per paid
step). Listing HEAD's files under one directory and hashing the few files in it
costs the same at any size. Only a clean answer is taken from here: anything
else (an extra, changed or missing file, an unusual mode) is left to
``git status``, which also knows the ignore rules and says what differs.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from jobstate.errors import GitError
from jobstate.git.head import head_files
from jobstate.git.repo import GitRepo

_REGULAR = {"100644": False, "100755": True}  # mode -> executable


def committed_files(git: GitRepo, directory: str) -> dict[str, tuple[str, str]] | None:
    """HEAD's files under ``directory`` (path -> (mode, blob sha)); None without a HEAD. Read-only."""
    try:
        return {path: (mode, sha) for mode, sha, path in head_files(git, f"{directory}/")}
    except GitError:
        return None  # no HEAD yet


def odd_entry(root: Path, directory: str) -> str | None:
    """The first path at or under ``directory`` (its parents included) that Git cannot hold as a plain
    file or directory: a symlink (a replaced or linked directory too), a fifo, a socket, a device; None
    when there is none. Git itself reports a symlinked directory only as deleted files, and os.walk
    follows a symlinked top directory, so this is looked at first. Read-only."""
    parts = directory.split("/")
    for n in range(1, len(parts) + 1):
        rel = "/".join(parts[:n])
        try:
            mode = os.lstat(root / rel).st_mode
        except FileNotFoundError:
            return None  # a missing directory is git status's to name (its files are deleted)
        if not stat.S_ISDIR(mode):
            return rel
    for here, dirs, files in os.walk(root / directory):
        dirs.sort()
        for name in sorted(dirs + files):
            path = os.path.join(here, name)
            mode = os.lstat(path).st_mode
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                return os.path.relpath(path, root).replace(os.sep, "/")
    return None


def matches_head(git: GitRepo, root: Path, directory: str, committed: dict[str, tuple[str, str]]) -> bool:
    """True when the work tree's ``directory`` holds exactly ``committed``, byte for byte. Read-only."""
    if odd_entry(root, directory) is not None:
        return False
    seen = 0
    for here, dirs, files in os.walk(root / directory):
        dirs.sort()
        for name in files:
            path = os.path.join(here, name)
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            entry = committed.get(rel)
            if entry is None or entry[0] not in _REGULAR or os.path.islink(path):
                return False
            if _REGULAR[entry[0]] != os.access(path, os.X_OK):
                return False
            if git.file_blob_sha(path) != entry[1]:  # streamed: an artifact may be gigabytes
                return False
            seen += 1
    return seen == len(committed)
