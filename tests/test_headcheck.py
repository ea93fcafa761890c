"""The paid-step guard's size-independent check that an episode directory is exactly as committed."""

from __future__ import annotations

import os
import subprocess
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


def test_many_edits_rebuild_the_tree_exactly_as_git_mktree_writes_it(tmp_path: Path) -> None:
    """Past a few edits a tree is rebuilt whole (a migration moves every entry of state/); the bytes
    must be the tree git itself writes: names sorted as git sorts them, a directory as name + '/'."""
    git(tmp_path, "init", "-q")
    final: dict[str, tuple[bytes, str]] = {f"e{i:02d}": (BLOB_MODE, blob_sha(b"%d" % i, SHA1)) for i in range(40)}
    base = Tree(b"", SHA1.width)
    for name, change in final.items():
        base = base.edited(name.encode(), change)
    edits: dict[str, tuple[bytes, str] | None] = {f"e{i:02d}": None for i in range(0, 40, 3)}
    empty_tree = _git_in(tmp_path, "mktree", "")
    edits |= {"e05": (BLOB_MODE, blob_sha(b"changed", SHA1)), "e0": (b"40000", empty_tree)}
    edits |= {"e0-x": (BLOB_MODE, blob_sha(b"x", SHA1)), "e0.y": (BLOB_MODE, blob_sha(b"y", SHA1))}
    edits |= {f"new{i}": (BLOB_MODE, blob_sha(b"n%d" % i, SHA1)) for i in range(20)}
    for name, edit in edits.items():
        if edit is None:
            del final[name]
        else:
            final[name] = edit
    rebuilt = base.with_edits({name.encode(): change for name, change in edits.items()})
    listing = "".join(
        f"{'040000 tree' if mode == b'40000' else '100644 blob'} {sha}\t{name}\n" for name, (mode, sha) in final.items()
    )
    assert SHA1.object_id(b"tree", rebuilt.raw) == _git_in(tmp_path, "mktree --missing", listing)


def _git_in(repo: Path, command: str, stdin: str) -> str:
    return subprocess.run(
        ["git", *command.split()], cwd=repo, input=stdin, check=True, capture_output=True, text=True
    ).stdout.strip()
