"""jobstate.store.snapshot: read-only views of one revision."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from jobstate.errors import UsageError
from jobstate.store.snapshot import Revision, locate

from .conftest import git, run_cli


def test_prefetch_serves_every_path_of_identical_files_sharing_one_blob(repo: Path) -> None:
    for name in ("a", "b"):
        (repo / "history" / f"{name}.yaml").write_text("same: content\n")
    git(repo, "add", "history")
    git(repo, "commit", "-qm", "two identical files")
    snap = Revision(repo, "HEAD")
    try:
        files = snap.files()
        snap.prefetch(sorted(files))
        assert {"history/a.yaml", "history/b.yaml"} <= set(snap._cache)
        assert snap.read("history/a.yaml") == snap.read("history/b.yaml") == b"same: content\n"
        assert not {"history/a.yaml", "history/b.yaml"} & set(snap._cache)  # a read gives up what was read ahead
    finally:
        snap.close()


def _blob_starting_with(prefix: str, n: int = 0) -> bytes:
    """Content (``n`` or after) whose SHA-1 blob ID starts with ``prefix`` (four hex digits: tens of
    thousands of tries)."""
    while True:
        data = b"%d\n" % n
        if hashlib.sha1(b"blob %d\0%s" % (len(data), data)).hexdigest().startswith(prefix):
            return data
        n += 1


def test_a_revision_is_a_commit_and_anything_else_is_one_line_of_ours(repo: Path) -> None:
    """--rev names a commit: tags are peeled, a short ID another object shares names the commit, and a
    tree, a blob, an ambiguous prefix, a name with a space or a line break is refused in one line of
    jobstate's (exit 2), never git's own error or hint lines, never an internal error."""
    head = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "tag", "-a", "t1", "-m", "t1", "HEAD")
    git(repo, "-c", "advice.nestedTag=false", "tag", "-a", "t2", "-m", "t2", "t1")
    git(repo, "tag", "-a", "to-tree", "-m", "tree", "HEAD^{tree}")
    shared = _blob_starting_with(head[:4])  # a blob whose ID starts as HEAD's does
    subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=repo, input=shared, check=True)
    for rev in ("t1", "t2", "HEAD", head[:10], head[:4]):
        snap = Revision(repo, rev)
        snap.close()
        assert snap.commit == head, rev
    # two blobs whose IDs share their first four hex digits: that prefix names no one object
    first = b"0\n"
    prefix = hashlib.sha1(b"blob 2\0" + first).hexdigest()[:4]
    for data in (first, _blob_starting_with(prefix, 1)):
        subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=repo, input=data, check=True)
    refused = ["HEAD^{tree}", "HEAD:jobstate.yaml", "to-tree", ":/no such", "HEAD b", "HEAD\nHEAD", "no-such"]
    for rev in [*refused, *([prefix] if prefix != head[:4] else [])]:
        with pytest.raises(UsageError, match="unknown revision"):
            Revision(repo, rev)
        proc = run_cli("verify", "--rev", rev, cwd=repo, process=True)
        assert proc.returncode == 2, (rev, proc.stderr)
        assert proc.stderr.count("\n") == 1, proc.stderr
        assert proc.stderr.startswith("jobstate: error:"), proc.stderr
    found = subprocess.run(["git", "cat-file", "-t", prefix], cwd=repo, capture_output=True, text=True, check=False)
    assert "ambiguous" in found.stderr  # the prefix above named two objects, not none


def test_a_repository_whose_path_holds_a_line_break_is_found(repo: Path, tmp_path: Path) -> None:
    """locate reads git's answer up to its last line break only: a directory name may hold one."""
    odd = tmp_path / "state\nrepo"
    repo.rename(odd)
    assert locate(odd / "state") == odd
    proc = run_cli("verify", "--rev", "HEAD", cwd=odd)
    assert proc.returncode == 0, proc.stderr
