"""Byte-for-byte pictures of a directory tree, to prove read-only commands write nothing."""

from __future__ import annotations

import os
import re
from pathlib import Path


def tree_state(root: Path, skip: str | None = None) -> dict[str, tuple[bytes, int, int]]:
    """Every file and directory below root (.git included): content, mode and mtime
    (content and mode only for git's .git/sharedindex.* files)."""
    out: dict[str, tuple[bytes, int, int]] = {}
    if skip is not None:
        return {k: v for k, v in tree_state(root).items() if not k.startswith(skip)}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            full = Path(dirpath) / name
            st = full.lstat()
            out[str(full.relative_to(root)) + "/"] = (b"", st.st_mode, st.st_mtime_ns)
        for name in filenames:
            full = Path(dirpath) / name
            st = full.lstat()
            data = os.readlink(full).encode() if full.is_symlink() else full.read_bytes()
            # git itself touches (never rewrites) the shared part of a split index whenever it
            # reads the index, so that it does not expire: its bytes are compared, not its mtime
            mtime = 0 if name.startswith("sharedindex.") else st.st_mtime_ns
            out[str(full.relative_to(root))] = (data, st.st_mode, mtime)
    return out


# what a command that writes nothing may still touch: the lock files it takes (the repository's and a
# step's; their mtime moves, their content is empty) and the catalog, a cache of what Git holds that any
# command may refresh (with its journal, which moves the mtime of .jobstate/ itself)
_TOUCHED = re.compile(r"\.jobstate/(|lock|steps/|steps/[^/]+\.lock|catalog\.sqlite[^/]*)")


def written_state(root: Path) -> dict[str, tuple[bytes, int, int]]:
    """``tree_state`` of everything a command could write: the work tree, .git and .jobstate/ but for its
    locks and cache (records of runs, leftovers, pending and undo files are all compared)."""
    return {k: v for k, v in tree_state(root).items() if not _TOUCHED.fullmatch(k)}
