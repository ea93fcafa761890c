"""Loose objects written from Python, as git writes them: whole bodies, and blobs streamed from a descriptor.

A streamed blob never sits in memory whole (an artifact may be gigabytes): it is hashed and
compressed chunk by chunk into a temp file, which is renamed to its ID once the last chunk is read.
Every object this process creates (not one that was already there) is announced to ``on_created``,
so a commit that fails can take back what it wrote.
"""

from __future__ import annotations

import hashlib
import os
import time
import zlib
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import NamedTuple

from jobstate.errors import GitError
from jobstate.git.objects import ObjectFormat

CHUNK = 1 << 20
_STORE_TREES_OVER = 64 << 10  # trees larger than this are stored uncompressed (see write)

Created = Callable[[Path, int], None]  # (loose object path, its mtime in ns) of an object this process made


class StoredBlob(NamedTuple):
    """File content already in the object store, named by its blob ID: what a change commits in place of
    bytes when the content is too large to hold (an artifact)."""

    sha: str


Content = bytes | StoredBlob  # what a change writes to a path


def loose_path(objects: Path, sha: str) -> Path:
    return objects / sha[:2] / sha[2:]


def _freshen(path: Path) -> bool:
    """Whether the object is there; freshened as git does, so a concurrent git gc never prunes an object
    we now refer to (one that is not ours to touch, in a shared repository, counts as there)."""
    try:
        os.utime(path)
        return True
    except FileNotFoundError:
        return False
    except OSError:
        return True


def _place(objects: Path, tmp: Path, sha: str, on_created: Created | None) -> None:
    """Rename the finished temp file to the object's name; the fan-out directory may be removed by a
    background git gc between mkdir and rename, so both are retried as git does."""
    path = loose_path(objects, sha)
    for _attempt in range(20):
        with suppress(FileExistsError):
            os.mkdir(path.parent)
        try:
            os.link(tmp, path)  # never over an object another writer made meanwhile: that one is not ours
        except FileNotFoundError:
            continue  # git gc removed the directory after our mkdir: make it again
        except FileExistsError:
            tmp.unlink()
            return
        except OSError:
            os.replace(tmp, path)  # a file system without hard links: as git does, rename instead
        else:
            tmp.unlink()
        if on_created is not None:
            on_created(path, path.stat().st_mtime_ns)
        return
    tmp.unlink(missing_ok=True)
    raise GitError(f"cannot store object {sha} in {objects}: its directory keeps disappearing")


def _temp(objects: Path) -> Path:
    # where git gc never removes a directory
    return objects / f"tmp_obj_{os.getpid()}_{time.monotonic_ns()}"


def write(objects: Path, fmt: ObjectFormat, kind: bytes, body: bytes, on_created: Created | None = None) -> str:
    """Store an object as a loose object (atomically); returns its ID."""
    sha = fmt.object_id(kind, body)
    if _freshen(loose_path(objects, sha)):
        return sha
    tmp = _temp(objects)
    raw = kind + b" %d\0" % len(body) + body
    # a large tree (state/ with thousands of episodes) is half SHA-1s that do not compress:
    # storing it costs ~1 ms where compressing costs ~6 ms per commit at 10,000 episodes,
    # and the background git gc --auto packs it as a delta soon after
    tmp.write_bytes(zlib.compress(raw, 0 if kind == b"tree" and len(body) > _STORE_TREES_OVER else 1))
    _place(objects, tmp, sha, on_created)
    return sha


def file_blob_sha(fmt: ObjectFormat, path: os.PathLike[str] | str) -> str:
    """The blob ID of a file's bytes, read a chunk at a time (an artifact may be gigabytes)."""
    with open(path, "rb", buffering=0) as fh:
        size = os.fstat(fh.fileno()).st_size
        ident = hashlib.new(fmt.name, b"blob %d\0" % size, usedforsecurity=False)
        done = 0
        while chunk := fh.read(CHUNK):
            ident.update(chunk)
            done += len(chunk)
    if done != size:
        raise OSError(f"{path} changed while it was read")
    return ident.hexdigest()


def write_blob_from(
    objects: Path,
    fmt: ObjectFormat,
    fd: int,
    size: int,
    *,
    each_chunk: Callable[[bytes], None],
    on_created: Created | None = None,
) -> StoredBlob:
    """Store the ``size`` bytes read from ``fd`` as a blob, one chunk in memory at a time; each chunk is
    also given to ``each_chunk`` (the caller's sha256). ValueError when the file does not hold exactly
    ``size`` bytes (it changed while read): nothing is stored then."""
    ident = hashlib.new(fmt.name, b"blob %d\0" % size, usedforsecurity=False)
    packer = zlib.compressobj(1)
    tmp = _temp(objects)
    done = 0
    try:
        with tmp.open("xb") as out:
            out.write(packer.compress(b"blob %d\0" % size))
            while chunk := os.read(fd, CHUNK):
                done += len(chunk)
                if done > size:
                    break
                ident.update(chunk)
                each_chunk(chunk)
                out.write(packer.compress(chunk))
            out.write(packer.flush())
        if done != size:
            raise ValueError(f"the file changed while it was read ({size} bytes when opened, not {done})")
        sha = ident.hexdigest()
        if _freshen(loose_path(objects, sha)):
            tmp.unlink()
        else:
            _place(objects, tmp, sha, on_created)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return StoredBlob(sha)
