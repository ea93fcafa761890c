"""The host-local jobstate lock: the only module that imports portalocker.

An OS lock (flock through portalocker) on ``.jobstate/lock``: a holder that is
killed releases it by itself. The holder writes who it is into the file so
``jobstate lock-info`` can name it, as Terraform's lock info does.
"""

from __future__ import annotations

import getpass
import json
import os
import socket
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import portalocker

from jobstate.core.clock import format_time, utc_now
from jobstate.errors import LockTimeout
from jobstate.store.yamlio import json_dumps


def _holder_record() -> dict[str, Any]:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "user": user,
        "command": " ".join(sys.argv)[:500],
        "since": format_time(utc_now()),
    }


def describe(holder: dict[str, Any] | None) -> str:
    """One line naming a holder, for messages."""
    if not holder or holder.get("pid") is None:
        # locked, but the record is empty: the holder is between taking the lock and writing it, or wrote none
        return "a process that left no holder record (holder unknown)"
    line = (
        f"pid {holder.get('pid')} on {holder.get('host')} (user {holder.get('user')}, "
        f"since {holder.get('since')}, command: {holder.get('command')})"
    )
    if holder.get("cmd_pid") is not None:
        # a step's CMD holds the lock too (it inherited it): after jobstate was killed, only CMD does
        line += f", and its step command pid {holder.get('cmd_pid')} ({holder.get('cmd')})"
    return line


class FileLock:
    """Exclusive lock on ``path``, waited for up to ``timeout`` seconds."""

    def __init__(self, path: Path, timeout: float) -> None:
        self.path = path
        self.timeout = timeout
        self._fh: IO[str] | None = None
        self._holder: dict[str, Any] = {}

    def __enter__(self) -> FileLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fh = open(self.path, "a+", encoding="utf-8")
        deadline = time.monotonic() + self.timeout
        delay = 0.002
        while True:
            try:
                portalocker.lock(fh, portalocker.LockFlags.EXCLUSIVE | portalocker.LockFlags.NON_BLOCKING)
                break
            except portalocker.exceptions.LockException:
                if time.monotonic() >= deadline:
                    fh.close()
                    holder = read_holder(self.path)
                    raise LockTimeout(
                        f"lock {self.path} not acquired within {self.timeout:g}s: held by {describe(holder)}; "
                        "retry later, or see: jobstate lock-info",
                        str(self.path),
                        holder,
                    ) from None
                time.sleep(delay)
                delay = min(delay * 2, 0.05)
        self._fh = fh
        self._holder = _holder_record()
        self._write_holder()
        return self

    def _write_holder(self) -> None:
        fh = self._fh
        if fh is None:
            return
        fh.seek(0)
        fh.truncate()
        fh.write(json_dumps(self._holder).decode("utf-8"))
        fh.flush()

    def fileno(self) -> int:
        """The locked file's descriptor: a child given it (``pass_fds``) holds the lock as long as it
        lives, since flock locks belong to the open file description, not to a process."""
        if self._fh is None:
            raise ValueError(f"lock {self.path} is not held")
        return self._fh.fileno()

    def note(self, **fields: Any) -> None:
        """Add ``fields`` to the holder record (a step's CMD pid and command line, for messages)."""
        if self._fh is None:
            raise ValueError(f"lock {self.path} is not held")
        self._holder.update(fields)
        self._write_holder()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        fh = self._fh
        self._fh = None
        if fh is None:
            return
        try:
            fh.seek(0)
            fh.truncate()
            fh.flush()
        finally:
            portalocker.unlock(fh)
            fh.close()


def read_holder(path: Path) -> dict[str, Any] | None:
    """Who holds the lock now, or None when nobody does. Writes nothing."""
    try:
        fh = open(path, encoding="utf-8")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        return None
    with fh:
        try:
            portalocker.lock(fh, portalocker.LockFlags.SHARED | portalocker.LockFlags.NON_BLOCKING)
        except portalocker.exceptions.LockException:
            pass
        else:
            portalocker.unlock(fh)
            return None
        try:
            data = json.loads(fh.read() or "{}")
        except ValueError:
            data = {}
        return data if isinstance(data, dict) and data else {"pid": None}
