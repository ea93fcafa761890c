"""Chunked, parallel sha256 of artifact files, and the progress line.

hashlib releases the GIL while it hashes a chunk and so do pipe reads, so a
thread per core is enough to use every core. Nothing here writes.
"""

from __future__ import annotations

import hashlib
import os
import sys
import threading
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

CHUNK = 1 << 20
Digest = tuple[str, int]  # hex sha256, size


def default_workers() -> int:
    """One worker per usable core."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


class Progress:
    """A progress line on stderr, shown only when stderr is a terminal and hashing takes over a second."""

    def __init__(self, total_bytes: int, enabled: bool | None = None) -> None:
        self.total = total_bytes
        self.done = 0
        self.start = time.monotonic()
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self._lock = threading.Lock()
        self._shown = False
        self._last = 0.0

    def add(self, count: int) -> None:
        """Count ``count`` more bytes hashed."""
        with self._lock:
            self.done += count
            now = time.monotonic()
            if not self.enabled or now - self.start < 1.0 or now - self._last < 0.1:
                return
            self._last = now
            self._shown = True
            pct = 100.0 * self.done / self.total if self.total else 100.0
            print(
                f"\rverify: hashing {pct:5.1f}% ({self.done / 1e9:.2f} of {self.total / 1e9:.2f} GB)",
                end="",
                file=sys.stderr,
                flush=True,
            )

    def finish(self) -> None:
        """End the progress line if one was shown."""
        if self._shown:
            print("\r" + " " * 60 + "\r", end="", file=sys.stderr, flush=True)


def sha256_file(path: Path, progress: Progress | None = None) -> Digest:
    """(sha256, size) of one file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    size = 0
    with path.open("rb", buffering=0) as fh:
        buf = bytearray(CHUNK)
        view = memoryview(buf)
        while n := fh.readinto(buf):
            digest.update(view[:n])
            size += n
            if progress is not None:
                progress.add(n)
    return digest.hexdigest(), size


def hash_files(
    paths: Iterable[Path], workers: int | None = None, progress: Progress | None = None
) -> dict[Path, Digest | OSError]:
    """Hash many files in parallel; a file that cannot be read maps to its OSError."""
    items = list(paths)

    def one(path: Path) -> Digest | OSError:
        try:
            return sha256_file(path, progress)
        except OSError as exc:
            return exc

    with ThreadPoolExecutor(max_workers=workers or default_workers()) as pool:
        return dict(zip(items, pool.map(one, items), strict=True))
