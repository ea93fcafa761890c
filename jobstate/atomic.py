"""Files written whole or not at all: temp file, fsync, rename, fsync of the directory."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

TEMP_PREFIX = ".tmp-"
# what mkstemp/mkdtemp make of TEMP_PREFIX: a name only a killed write of ours leaves
_TEMP_NAME = re.compile(re.escape(TEMP_PREFIX) + r"[a-z0-9_]{8}")


def is_temp_name(name: str) -> bool:
    """Whether ``name`` is one of the temp names ``atomic_write`` and ``atomic_dir`` use."""
    return _TEMP_NAME.fullmatch(name) is not None


def _umask() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    return 0o022


# gives its content to the write function it is passed, chunk by chunk (a file too large to hold)
Producer = Callable[[Callable[[bytes], object]], None]


def atomic_write(path: Path, data: bytes | Producer) -> None:
    """Write ``data`` (bytes, or a producer of chunks) to ``path`` so a reader sees the old file or the
    new one, never half.

    A temp file in the same directory is written, fsynced and renamed over the
    target; the directory is fsynced so the rename survives a crash.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX, dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; state files are as readable as any file
        with os.fdopen(fd, "wb") as fh:
            if isinstance(data, bytes):
                fh.write(data)
            else:
                data(fh.write)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def atomic_dir(path: Path, files: Mapping[str, bytes | Producer]) -> None:
    """Create the directory ``path`` holding ``files``, whole or not at all.

    The files are written into a temp directory beside it, which is renamed into
    place: a kill leaves either no ``path`` or ``path`` with every file, and at
    worst a temp directory that the next command under the lock removes.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=path.parent))
    try:
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes 0700; an episode directory is as readable as any
        for name, data in files.items():
            atomic_write(tmp / name, data)
        os.rename(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    """Make a rename in ``directory`` survive a crash."""
    dfd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
