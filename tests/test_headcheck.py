"""The paid-step guard's size-independent check that an episode directory is exactly as committed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jobstate.allocation.allocation import allocate
from jobstate.core.layout import episode_dir
from jobstate.core.periods import parse_period
from jobstate.git.headcheck import committed_files, matches_head
from jobstate.git.objects import BLOB_MODE, SHA1, SHA256, ObjectFormat, Tree, blob_sha
from jobstate.git.repo import GitRepo
from jobstate.store.store import Store

from .conftest import git


def _episode(store: Store, repo: Path) -> tuple[str, dict[str, tuple[str, str]]]:
    eid = allocate(store, "k", parse_period("2026-W32")).episode_id
    (repo / episode_dir(eid) / "final.txt").write_text("artifact\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "artifact")
    found = committed_files(GitRepo(repo), f"{episode_dir(eid)}")
    assert found is not None
    return f"{episode_dir(eid)}", found


def test_a_directory_as_committed_matches(store: Store, repo: Path) -> None:
    directory, committed = _episode(store, repo)
    assert set(committed) == {f"{directory}/episode.yaml", f"{directory}/final.txt"}
    assert matches_head(GitRepo(repo), repo, directory, committed) is True


def test_a_changed_extra_missing_or_executable_file_does_not_match(store: Store, repo: Path) -> None:
    directory, committed = _episode(store, repo)
    final = repo / directory / "final.txt"
    final.write_text("changed\n")
    assert matches_head(GitRepo(repo), repo, directory, committed) is False
    final.write_text("artifact\n")
    (repo / directory / "extra.txt").write_text("new\n")
    assert matches_head(GitRepo(repo), repo, directory, committed) is False
    (repo / directory / "extra.txt").unlink()
    final.unlink()
    assert matches_head(GitRepo(repo), repo, directory, committed) is False
    final.write_text("artifact\n")
    os.chmod(final, 0o755)
    assert matches_head(GitRepo(repo), repo, directory, committed) is False
    os.chmod(final, 0o644)
    assert matches_head(GitRepo(repo), repo, directory, committed) is True


def test_an_uncommitted_directory_has_no_committed_files(repo: Path) -> None:
    assert committed_files(GitRepo(repo), "state/2026/2026-W32/2026-W32-9") == {}


@pytest.mark.parametrize("fmt", [SHA1, SHA256])
def test_replacing_an_entry_in_place_equals_removing_and_adding_it(fmt: ObjectFormat) -> None:
    tree = Tree(b"", fmt.width)
    for name in (b"a", b"b", b"c"):
        tree = tree.edited(name, (BLOB_MODE, blob_sha(name, fmt)))
    swapped = tree.edited(b"b", (BLOB_MODE, blob_sha(b"new", fmt)))
    rebuilt = tree.edited(b"b", None).edited(b"b", (BLOB_MODE, blob_sha(b"new", fmt)))
    assert swapped.raw == rebuilt.raw
    assert swapped.get(b"b") == (BLOB_MODE, blob_sha(b"new", fmt))
