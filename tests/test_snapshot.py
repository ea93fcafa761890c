"""jobstate.store.snapshot: read-only views of one revision."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from jobstate.errors import UsageError
from jobstate.store.snapshot import Revision

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


def test_a_revision_is_a_commit_and_anything_else_is_one_line_of_ours(repo: Path) -> None:
    """--rev is resolved by the snapshot's own cat-file (no rev-parse): tags are peeled to their commit,
    and a tree, a blob, an ambiguous prefix or a name with a line break is refused in one line of
    jobstate's, never git's own error or hint lines."""
    head = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "tag", "-a", "t1", "-m", "t1", "HEAD")
    git(repo, "-c", "advice.nestedTag=false", "tag", "-a", "t2", "-m", "t2", "t1")
    git(repo, "tag", "-a", "to-tree", "-m", "tree", "HEAD^{tree}")
    for rev in ("t1", "t2", "HEAD", head[:10]):
        snap = Revision(repo, rev)
        snap.close()
        assert snap.commit == head, rev
    # two blobs whose IDs share their first four hex digits: that prefix names no one object
    objects: dict[str, bytes] = {}
    n = 0
    while True:
        data = b"%d\n" % n
        sha = hashlib.sha1(b"blob %d\0%s" % (len(data), data)).hexdigest()
        if sha[:4] in objects:
            break
        objects[sha[:4]] = data
        n += 1
    for data in (objects[sha[:4]], b"%d\n" % n):
        subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=repo, input=data, check=True)
    for rev in ("HEAD^{tree}", "HEAD:jobstate.yaml", "to-tree", sha[:4], "HEAD\nHEAD", "no-such"):
        with pytest.raises(UsageError, match="unknown revision"):
            Revision(repo, rev)
        proc = run_cli("verify", "--rev", rev, cwd=repo, process=True)
        assert proc.returncode == 2
        assert proc.stderr.count("\n") == 1, proc.stderr
        assert proc.stderr.startswith("jobstate: error:"), proc.stderr
