"""Chunked, parallel sha256 of artifacts, from files or from Git blobs.

hashlib releases the GIL while it hashes a chunk and so do pipe reads, so a
thread per core is enough to use every core. Nothing here writes.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
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


class BlobHasher:
    """Hashes Git blobs by streaming them out of one ``git cat-file --batch`` per thread."""

    def __init__(self, cwd: Path, progress: Progress | None = None) -> None:
        self.cwd = cwd
        self.progress = progress
        self._local = threading.local()
        self._procs: list[subprocess.Popen[bytes]] = []
        self._lock = threading.Lock()

    def _proc(self) -> subprocess.Popen[bytes]:
        proc: subprocess.Popen[bytes] | None = getattr(self._local, "proc", None)
        if proc is None:
            proc = subprocess.Popen(
                ["git", "cat-file", "--batch"],
                cwd=self.cwd,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
            )
            self._local.proc = proc
            with self._lock:
                self._procs.append(proc)
        return proc

    def hash(self, sha: str) -> Digest:
        """(sha256, size) of the blob ``sha``."""
        proc = self._proc()
        assert proc.stdin is not None
        assert proc.stdout is not None
        proc.stdin.write(sha.encode("ascii") + b"\n")
        proc.stdin.flush()
        header = proc.stdout.readline().split()
        if len(header) != 3:
            raise OSError(f"blob {sha} is missing")
        remaining = int(header[2])
        digest = hashlib.sha256()
        size = remaining
        while remaining:
            chunk = proc.stdout.read(min(CHUNK, remaining))
            if not chunk:
                raise OSError(f"blob {sha} was cut short")
            digest.update(chunk)
            remaining -= len(chunk)
            if self.progress is not None:
                self.progress.add(len(chunk))
        proc.stdout.read(1)  # the newline after each object
        return digest.hexdigest(), size

    def hash_many(self, shas: Iterable[str], workers: int | None = None) -> dict[str, Digest | OSError]:
        """Hash many blobs in parallel."""
        items = list(dict.fromkeys(shas))

        def one(sha: str) -> Digest | OSError:
            try:
                return self.hash(sha)
            except OSError as exc:
                return exc

        with ThreadPoolExecutor(max_workers=workers or default_workers()) as pool:
            return dict(zip(items, pool.map(one, items), strict=True))

    def close(self) -> None:
        """Stop every cat-file process."""
        for proc in self._procs:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        self._procs.clear()


ProgressFactory = Callable[[int], Progress]
