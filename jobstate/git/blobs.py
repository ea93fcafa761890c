"""sha256 of Git blobs, streamed out of one ``cat-file --batch`` per thread. Read-only."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from jobstate.git.objects import CatFile
from jobstate.hashing import CHUNK, Digest, Progress, default_workers


class BlobHasher:
    """Hashes Git blobs by streaming them out of one ``git cat-file --batch`` per thread."""

    def __init__(self, cwd: Path, progress: Progress | None = None) -> None:
        self.cwd = cwd
        self.progress = progress
        self._local = threading.local()
        self._readers: list[CatFile] = []
        self._lock = threading.Lock()

    def _reader(self) -> CatFile:
        reader: CatFile | None = getattr(self._local, "reader", None)
        if reader is None:
            reader = CatFile(self.cwd)
            self._local.reader = reader
            with self._lock:
                self._readers.append(reader)
        return reader

    def hash(self, sha: str) -> Digest:
        """(sha256, size) of the blob ``sha``."""
        digest = hashlib.sha256()
        progress = self.progress

        def sink(chunk: bytes) -> None:
            digest.update(chunk)
            if progress is not None:
                progress.add(len(chunk))

        size = self._reader().stream(sha, CHUNK, sink)
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
        for reader in self._readers:
            reader.close()
        self._readers.clear()
