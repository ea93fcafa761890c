"""Git's index file format, just enough to drop its cache-tree extension.

The cache tree (extension ``TREE``) holds one node per directory: with
``state/<episode_id>/`` that is one node per episode, so reading and writing it
is most of what ``git update-index`` costs in a large state repository (about
6 ms of 18 at 10,000 episodes, and the split index cannot share it). Git treats
it as an optional cache: commands that need it (``git commit``, ``write-tree``)
rebuild it, so an index without it is valid and means the same.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

_HASH = 20  # SHA-1 repositories; jobstate's object IDs are SHA-1 throughout
_DROP = (b"TREE", b"EOIE")  # EOIE checksums the extension list, so it goes when TREE goes


def _entries_end(raw: bytes, version: int, count: int) -> int:
    """Offset just past the last index entry."""
    pos = 12
    for _ in range(count):
        flags = int.from_bytes(raw[pos + 60 : pos + 62], "big")
        header = 64 if version >= 3 and flags & 0x4000 else 62
        if version == 4:
            # a varint (bytes of the previous name to drop), then the NUL-terminated rest
            pos += header
            while raw[pos] & 0x80:
                pos += 1
            pos = raw.index(b"\0", pos + 1) + 1
        else:
            length = flags & 0xFFF
            if length == 0xFFF:
                length = raw.index(b"\0", pos + header) - pos - header
            pos += (header + length + 8) & ~7
    return pos


def drop_cache_tree(path: Path) -> bool:
    """Rewrite the index at ``path`` without its cache tree; False (file untouched) when it has none
    or the file is not an index this code understands."""
    raw = path.read_bytes()
    if len(raw) < 12 + _HASH or raw[:4] != b"DIRC":
        return False
    version = int.from_bytes(raw[4:8], "big")
    if version not in (2, 3, 4):
        return False
    try:
        pos = _entries_end(raw, version, int.from_bytes(raw[8:12], "big"))
    except (ValueError, IndexError):
        return False
    end = len(raw) - _HASH
    kept = [raw[:pos]]
    dropped = False
    while pos + 8 <= end:
        size = int.from_bytes(raw[pos + 4 : pos + 8], "big")
        if raw[pos : pos + 4] in _DROP:
            dropped = True
        else:
            kept.append(raw[pos : pos + 8 + size])
        pos += 8 + size
    if pos != end or not dropped:
        return False
    body = b"".join(kept)
    tmp = path.with_name(path.name + ".drop")
    tmp.write_bytes(body + hashlib.sha1(body, usedforsecurity=False).digest())
    os.replace(tmp, path)
    return True
