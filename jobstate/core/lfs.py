"""(pure) Git LFS pointer files, read without the git-lfs binary.

A pointer is what Git stores, and what a checkout without the LFS object
holds, in place of a file kept in LFS (https://github.com/git-lfs/git-lfs/blob/main/docs/spec.md):

    version https://git-lfs.github.com/spec/v1
    oid sha256:4d7a2146...
    size 12345
"""

from __future__ import annotations

import re
from dataclasses import dataclass

POINTER_MAX = 1024  # the spec: a pointer is smaller than 1024 bytes
_VERSIONS = ("https://git-lfs.github.com/spec/v1", "https://hawser.github.com/spec/v1")
_OID = re.compile(r"sha256:([0-9a-f]{64})")
_SIZE = re.compile(r"0|[1-9][0-9]{0,18}")


@dataclass(frozen=True)
class Pointer:
    """The object a pointer stands for: its sha256 and size."""

    sha256: str
    size: int


def parse_pointer(data: bytes) -> Pointer | None:
    """The pointer in ``data``, or None when ``data`` is not an LFS pointer."""
    if len(data) >= POINTER_MAX or not data.startswith(b"version ") or not data.endswith(b"\n"):
        return None
    try:
        lines = data.decode("ascii").splitlines()
    except UnicodeDecodeError:
        return None
    fields: dict[str, str] = {}
    for line in lines:
        key, sep, value = line.partition(" ")
        if not sep or key in fields:
            return None
        fields[key] = value
    oid = _OID.fullmatch(fields.get("oid", ""))
    size = fields.get("size", "")
    if lines[0].split(" ", 1)[1] not in _VERSIONS or oid is None or not _SIZE.fullmatch(size):
        return None
    return Pointer(oid.group(1), int(size))
