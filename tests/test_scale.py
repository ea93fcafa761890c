"""What keeps the per-commit cost flat and the repository bounded: the split index without a cache
tree, and git gc --auto started in the background after a commit."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from jobstate.allocation.allocation import allocate
from jobstate.core.layout import episode_dir
from jobstate.core.periods import parse_period
from jobstate.git.cache_tree import drop_cache_tree
from jobstate.store.store import Store

from .conftest import git, run_cli, status

WEEK = parse_period("2026-W32")


def _loose_objects(repo: Path) -> int:
    for line in git(repo, "count-objects", "-v").splitlines():
        if line.startswith("count: "):
            return int(line.split()[1])
    raise AssertionError("git count-objects printed no count")


def test_allocations_leave_a_split_index_git_reads_as_clean(store: Store, repo: Path) -> None:
    for i in range(3):
        allocate(store, f"k:{i}", WEEK)
    assert status(repo) == ""
    assert "state/2026/2026-W32/2026-W32-2/episode.yaml" in git(repo, "ls-files", "state")
    assert b"link" in (repo / ".git" / "index").read_bytes()  # the split index's pointer to its shared part
    assert list((repo / ".git").glob("sharedindex.*"))
    git(repo, "fsck", "--no-progress")


def test_a_cache_tree_written_by_git_commit_is_dropped_and_state_stays_clean(store: Store, repo: Path) -> None:
    allocate(store, "first", WEEK)
    (repo / "notes.txt").write_text("by hand\n")
    git(repo, "add", "notes.txt")
    git(repo, "commit", "-qm", "by hand")  # git commit writes the whole cache tree back
    assert b"TREE" in (repo / ".git" / "index").read_bytes()
    allocate(store, "second", WEEK)
    assert b"TREE" not in (repo / ".git" / "index").read_bytes()
    assert status(repo) == ""
    assert git(repo, "diff", "--cached", "--name-only", "HEAD") == ""


@pytest.mark.parametrize("version", ["2", "3", "4"])
def test_dropping_the_cache_tree_keeps_every_entry(repo: Path, version: str) -> None:
    for i in range(5):
        (repo / episode_dir(f"2026-W01-{i}")).mkdir(parents=True)
        (repo / episode_dir(f"2026-W01-{i}") / "episode.yaml").write_text(f"n: {i}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "files")
    git(repo, "update-index", "--index-version", version)
    git(repo, "read-tree", "HEAD")  # a full cache tree
    if version == "3":
        (repo / "new.txt").write_text("new\n")
        git(repo, "add", "--intent-to-add", "new.txt")  # an entry with extended flags
    index = repo / ".git" / "index"
    before = git(repo, "ls-files", "--stage")
    assert b"TREE" in index.read_bytes()
    assert drop_cache_tree(index) is True
    assert b"TREE" not in index.read_bytes()
    assert git(repo, "ls-files", "--stage") == before
    assert git(repo, "diff", "--cached", "--name-only", "HEAD") == ""
    assert drop_cache_tree(index) is False  # nothing left to drop: the file is not rewritten


def test_a_file_that_is_not_an_index_is_left_alone(tmp_path: Path) -> None:
    other = tmp_path / "not-an-index"
    other.write_bytes(b"DIRX" + bytes(40))
    assert drop_cache_tree(other) is False
    assert other.read_bytes() == b"DIRX" + bytes(40)


# hundreds of allocations, each a commit, until git's auto-gc has run several times
@pytest.mark.timeout(600)
@pytest.mark.slow
def test_background_gc_keeps_loose_objects_bounded(store: Store, repo: Path) -> None:
    git(repo, "config", "gc.auto", "100")
    git(repo, "config", "gc.autoDetach", "false")
    allocations = 500  # about 2,500 objects without packing: well past gc.auto, as git estimates it
    for i in range(allocations):
        allocate(store, f"k:{i}", WEEK)
    deadline = time.monotonic() + 60
    while (repo / ".git" / "gc.pid").exists() and time.monotonic() < deadline:
        time.sleep(0.1)  # a gc started by the last commits may still be running
    packs = list((repo / ".git" / "objects" / "pack").glob("*.pack"))
    assert packs, "no git gc ever packed the objects"
    assert _loose_objects(repo) < allocations * 5 // 2
    assert status(repo) == ""
    git(repo, "fsck", "--no-progress")
    again = run_cli("allocate", "--key", "k:7", "--week", "2026-W32", cwd=repo)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == "2026-W32-7"


def test_a_failing_gc_never_fails_the_command(store: Store, repo: Path) -> None:
    git(repo, "config", "gc.auto", "1")
    git(repo, "config", "gc.autoDetach", "false")
    # git refuses to run gc at all with this setting, and says so on stderr
    git(repo, "config", "gc.pruneExpire", "not-a-date")
    for i in range(60):
        assert allocate(store, f"k:{i}", WEEK).episode_id == f"2026-W32-{i}"
    assert status(repo) == ""


def test_a_catalog_brought_up_to_date_across_thousands_of_new_episodes_works(store: Store, repo: Path) -> None:
    allocate(store, "first", WEEK)  # the catalog now knows HEAD: the next refresh goes by the diff
    for n in range(1200):  # more changed paths than jobstate names on one git command line
        d = repo / episode_dir(f"2026-W01-{n}")
        d.mkdir(parents=True)
        (d / "episode.yaml").write_text(
            f"schema: 1\nepisode_id: 2026-W01-{n}\nperiod_id: 2026-W01\nweek_id: 2026-W01\nsequence: {n}\n"
            f"allocation_key: old:{n}\nallocated_at: '2026-01-01T00:00:00Z'\nstatus: allocated\n"
        )
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "many episodes at once")
    assert allocate(store, "old:1199", parse_period("2026-W01")).episode_id == "2026-W01-1199"
    assert allocate(store, "new", parse_period("2026-W01")).episode_id == "2026-W01-1200"
