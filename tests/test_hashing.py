from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest

from jobstate.git.blobs import BlobHasher
from jobstate.hashing import Progress, hash_files

from .conftest import git


def test_files_hash_like_hashlib_in_parallel(tmp_path: Path) -> None:
    files = []
    for i, size in enumerate([0, 1, 2047, 2048, (1 << 20) + 17, 3 << 20]):
        f = tmp_path / f"f{i}"
        f.write_bytes(os.urandom(size))
        files.append(f)
    missing = tmp_path / "missing"
    found = hash_files([*files, missing], workers=2)
    for f in files:
        data = f.read_bytes()
        assert found[f] == (hashlib.sha256(data).hexdigest(), len(data))
    assert isinstance(found[missing], OSError)


def test_blobs_hash_like_their_content(repo: Path) -> None:
    data = os.urandom((2 << 20) + 5)
    (repo / "big.bin").write_bytes(data)
    sha = git(repo, "hash-object", "-w", "big.bin").strip()
    hasher = BlobHasher(repo)
    try:
        got = hasher.hash_many([sha, sha, "0" * 40], workers=2)
    finally:
        hasher.close()
    assert got[sha] == (hashlib.sha256(data).hexdigest(), len(data))
    assert isinstance(got["0" * 40], OSError)


def test_progress_line_only_after_a_second(capsys: pytest.CaptureFixture[str]) -> None:
    quick = Progress(100, enabled=True)
    quick.add(50)
    quick.finish()
    assert capsys.readouterr().err == ""
    slow = Progress(2_000_000_000, enabled=True)
    slow.start = time.monotonic() - 2
    slow.add(1_000_000_000)
    assert "verify: hashing  50.0% (1.00 of 2.00 GB)" in capsys.readouterr().err
    slow.finish()
    assert capsys.readouterr().err.startswith("\r ")  # the line is cleared
    silent = Progress(100, enabled=False)
    silent.start -= 5
    silent.add(100)
    assert capsys.readouterr().err == ""
