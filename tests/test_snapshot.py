"""jobstate.store.snapshot: read-only views of one revision."""

from __future__ import annotations

from pathlib import Path

from jobstate.store.snapshot import Revision

from .conftest import git


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
