from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobstate.allocation.allocation import allocate
from jobstate.core.layout import episode_dir, period_dir
from jobstate.core.periods import parse_period
from jobstate.errors import AllocationConflict, DirtyState, JobstateError, StateInvalid, UsageError
from jobstate.store.store import Store
from jobstate.store.yamlio import dumps

from .audit import touches
from .conftest import both_formats, committed_files, git, run_cli, status
from .snapshots import written_state

W32 = parse_period("2026-W32")
W33 = parse_period("2026-W33")


@both_formats
def test_sequence_increments_within_a_week_and_restarts_next_week(store: Store, repo: Path) -> None:
    ids = [allocate(store, f"run:{i}", W32).episode_id for i in range(3)]
    assert ids == ["2026-W32-0", "2026-W32-1", "2026-W32-2"]
    assert allocate(store, "run:next", W33).episode_id == "2026-W33-0"
    assert allocate(store, "run:3", W32).episode_id == "2026-W32-3"
    assert {f"{episode_dir(i)}/episode.yaml" for i in [*ids, "2026-W33-0", "2026-W32-3"]} <= committed_files(repo)
    assert status(repo) == ""


@both_formats
def test_same_key_returns_same_episode_and_writes_nothing(store: Store, repo: Path) -> None:
    first = allocate(store, "scheduled-run:2026-08-07", W32)
    head = git(repo, "rev-parse", "HEAD")
    again = allocate(store, "scheduled-run:2026-08-07", W32)
    assert (first.episode_id, first.created) == ("2026-W32-0", True)
    assert (again.episode_id, again.created) == ("2026-W32-0", False)
    assert git(repo, "rev-parse", "HEAD") == head


def test_commit_message_names_episode_and_key(store: Store, repo: Path) -> None:
    allocate(store, "scheduled-run:2026-08-07", W32)
    msg = git(repo, "log", "-1", "--format=%B")
    assert "2026-W32-0" in msg
    assert "scheduled-run:2026-08-07" in msg
    assert (
        git(repo, "show", "--stat", "--format=", "HEAD")
        .strip()
        .startswith("state/2026/2026-W32/2026-W32-0/episode.yaml")
    )


def test_key_cannot_silently_cross_weeks(store: Store, repo: Path) -> None:
    allocate(store, "k", W32)
    head = git(repo, "rev-parse", "HEAD")
    with pytest.raises(AllocationConflict, match=r"2026-W32.*2026-W33"):
        allocate(store, "k", W33)
    assert git(repo, "rev-parse", "HEAD") == head
    assert not (repo / episode_dir("2026-W33-0")).exists()


@contextlib.contextmanager
def _mtimes_kept(directory: Path) -> Iterator[None]:
    """What happens in the block leaves ``directory``'s mtime as it was (a coarse clock, a copy by hand)."""
    seen = directory.stat()
    yield
    os.utime(directory, ns=(seen.st_atime_ns, seen.st_mtime_ns))


def _write_episode(repo: Path, episode_id: str, key: str) -> None:
    period, seq = episode_id.rsplit("-", 1)
    data = {
        "schema": 1,
        "episode_id": episode_id,
        "period_id": period,
        "week_id": period,
        "sequence": int(seq),
        "allocation_key": key,
        "allocated_at": "2026-08-07T10:00:00Z",
        "status": "allocated",
    }
    path = repo / episode_dir(episode_id) / "episode.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(dumps(data))


def test_ambiguous_key_fails_and_lists_the_episodes(store: Store, repo: Path) -> None:
    allocate(store, "dup", W32)
    _write_episode(repo, "2026-W32-1", "dup")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "hand-made duplicate")
    with pytest.raises(AllocationConflict, match=r"2026-W32-0.*2026-W32-1"):
        allocate(store, "dup", W32)


@both_formats
def test_same_key_after_crash_returns_same_episode(store: Store, repo: Path) -> None:
    # what a kill between write and commit leaves: the file, uncommitted
    allocate(store, "other", W32)
    _write_episode(repo, "2026-W32-1", "crashed")
    result = allocate(store, "crashed", W32)
    assert (result.episode_id, result.created, result.recovered) == ("2026-W32-1", False, True)
    assert "state/2026/2026-W32/2026-W32-1/episode.yaml" in committed_files(repo)
    assert status(repo) == ""
    assert allocate(store, "crashed", W32).episode_id == "2026-W32-1"


def test_a_crashed_episode_the_mtimes_miss_is_still_recovered_by_its_retry(store: Store, repo: Path) -> None:
    """An episode directory that appeared without its year's mtime changing (an older jobstate killed, a
    coarse clock, a copy by hand) is found by the retry, which looks in its own period, even after a commit
    elsewhere recorded the new mtimes."""
    allocate(store, "k1", W32)
    allocate(store, "k2", parse_period("2026-W33"))
    with _mtimes_kept(repo / "state" / "2026"):
        _write_episode(repo, "2026-W32-1", "orphan")
    assert allocate(store, "elsewhere", parse_period("2026-W40")).episode_id == "2026-W40-0"
    result = allocate(store, "orphan", W32)
    assert (result.episode_id, result.created, result.recovered) == ("2026-W32-1", False, True)
    assert "state/2026/2026-W32/2026-W32-1/episode.yaml" in committed_files(repo)
    assert status(repo) == ""


def test_a_period_directory_that_is_a_link_is_refused_never_followed(store: Store, repo: Path, tmp_path: Path) -> None:
    """The allocation's own period walk reads what the whole walk reads: a link where the period's directory
    goes is a stray, even when the mtimes did not move; what it points at is never taken for an episode."""
    allocate(store, "k1", W32)
    outside = tmp_path / "outside"
    _write_episode(outside, "2026-W33-0", "ghost")
    year = repo / "state" / "2026"
    with _mtimes_kept(year):
        (year / "2026-W33").symlink_to(outside / "state" / "2026" / "2026-W33")
    head = git(repo, "rev-parse", "HEAD")
    with pytest.raises(DirtyState, match="state/2026/2026-W33"):
        allocate(store, "ghost", W33)
    assert git(repo, "rev-parse", "HEAD") == head


def test_an_uncommitted_episode_of_another_key_keeps_its_sequence(store: Store, repo: Path) -> None:
    _write_episode(repo, "2026-W32-0", "crashed")
    assert allocate(store, "new", W32).episode_id == "2026-W32-1"
    assert "state/2026/2026-W32/2026-W32-0/episode.yaml" in committed_files(repo)
    assert allocate(store, "crashed", W32).episode_id == "2026-W32-0"


def test_catalog_is_rebuilt_when_deleted_or_stale(store: Store, repo: Path) -> None:
    for i in range(3):
        allocate(store, f"k{i}", W32)
    store.close()
    (repo / ".jobstate" / "catalog.sqlite").unlink()
    assert allocate(store, "k1", W32).episode_id == "2026-W32-1"
    # a commit jobstate did not make (a git pull, a hand edit) makes the catalog stale
    _write_episode(repo, "2026-W32-3", "by-hand")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "by hand")
    assert allocate(store, "by-hand", W32).episode_id == "2026-W32-3"
    assert allocate(store, "k3", W32).episode_id == "2026-W32-4"


def test_garbage_catalog_is_replaced(store: Store, repo: Path) -> None:
    allocate(store, "a", W32)
    store.close()
    (repo / ".jobstate" / "catalog.sqlite").write_bytes(b"not a database at all" * 100)
    assert allocate(store, "a", W32).episode_id == "2026-W32-0"
    assert allocate(store, "b", W32).episode_id == "2026-W32-1"


def test_catalog_that_disagrees_with_files_is_not_trusted(store: Store, repo: Path) -> None:
    allocate(store, "a", W32)
    path = repo / episode_dir("2026-W32-0") / "episode.yaml"
    path.write_text(path.read_text().replace("allocation_key: a", "allocation_key: b"))
    with pytest.raises(UsageError, match="uncommitted changes"):
        allocate(store, "a", W32)


def test_dirty_committed_episode_in_target_period_refuses(store: Store, repo: Path) -> None:
    allocate(store, "a", W32)
    head = git(repo, "rev-parse", "HEAD")
    (repo / episode_dir("2026-W32-0") / "episode.yaml").write_text("schema: 1\n")
    with pytest.raises(UsageError, match=r"state/2026/2026-W32/2026-W32-0/episode.yaml has uncommitted changes"):
        allocate(store, "b", W32)
    assert git(repo, "rev-parse", "HEAD") == head


def test_stray_file_in_state_refuses(store: Store, repo: Path) -> None:
    (repo / "state" / "notes.txt").write_text("hi")
    with pytest.raises(DirtyState, match=r"state/notes\.txt"):
        allocate(store, "a", W32)
    assert not (repo / episode_dir("2026-W32-0")).exists()


def test_deleted_committed_episode_refuses(store: Store, repo: Path) -> None:
    allocate(store, "a", W32)
    shutil.rmtree(repo / episode_dir("2026-W32-0"))
    with pytest.raises(UsageError, match="missing from the work tree"):
        allocate(store, "b", W32)


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (b"schema: 1\nepisode_id: [unclosed\n", "invalid YAML"),
        (b"!!python/object/apply:os.system ['echo pwned']\n", "invalid YAML"),
        (b"schema: 99\n", "unknown schema 99"),
        (b"- a list\n", "expected a mapping"),
    ],
)
def test_invalid_uncommitted_state_is_exit_7_and_nothing_written(
    store: Store, repo: Path, content: bytes, match: str
) -> None:
    path = repo / episode_dir("2026-W32-0") / "episode.yaml"
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    before = written_state(repo)
    with pytest.raises(StateInvalid, match=match) as info:
        allocate(store, "a", W32)
    assert info.value.exit_code == 7
    assert written_state(repo) == before


def test_directory_name_must_equal_episode_id(store: Store, repo: Path) -> None:
    _write_episode(repo, "2026-W32-0", "a")
    (repo / episode_dir("2026-W32-0")).rename(repo / episode_dir("2026-W32-5"))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "renamed by hand")
    with pytest.raises(StateInvalid, match="does not match its name"):
        allocate(store, "b", W32)


@pytest.mark.parametrize("key", ["", "x" * 513, "a\nb", "a\x00b", "tab\there", "\x7f", "bad\ud800"])
def test_bad_keys_are_rejected_before_anything_is_read(repo: Path, key: str) -> None:
    with Store(repo) as store:
        with touches(repo) as seen, pytest.raises(UsageError) as info:
            allocate(store, key, W32)
        assert info.value.exit_code == 2
        assert seen == []  # no file of the repository opened or listed, no git run
        with touches(repo) as seen:  # the same watch does see what a good key reads
            allocate(store, "good", W32)
        assert seen


def test_keys_are_opaque_never_paths(store: Store, repo: Path) -> None:
    keys = ["../../etc/passwd", "$(rm -rf /)", "; ls", "x" * 512, "ключ", "'quoted' \"double\"", "*"]
    ids = [allocate(store, k, W32).episode_id for k in keys]
    assert ids == [f"2026-W32-{i}" for i in range(len(keys))]
    assert [allocate(store, k, W32).episode_id for k in keys] == ids
    assert sorted(p.name for p in (repo / period_dir("2026-W32")).iterdir() if not p.name.startswith(".")) == sorted(
        ids
    )


def test_period_kind_must_match_the_repository(store: Store) -> None:
    with pytest.raises(UsageError, match="counts iso-week periods"):
        allocate(store, "a", parse_period("2026-08-07"))


def test_day_periods_from_config(repo: Path) -> None:
    (repo / "jobstate.yaml").write_text("period: day\n")
    git(repo, "commit", "-qam", "days")
    with Store(repo) as s:
        assert allocate(s, "a", parse_period("2026-08-07")).episode_id == "2026-08-07-0"
        assert allocate(s, "b", parse_period("2026-08-07")).episode_id == "2026-08-07-1"
        assert allocate(s, "c", parse_period("2026-08-08")).episode_id == "2026-08-08-0"


def test_foreign_index_lock_is_waited_for_then_refused_with_nothing_changed(repo: Path) -> None:
    lock = repo / ".git" / "index.lock"
    lock.write_text("")  # another git command at work (or its stale lock): never ours to delete
    head = git(repo, "rev-parse", "HEAD")
    with Store(repo, lock_timeout=0.3) as store, pytest.raises(JobstateError) as info:
        started = time.monotonic()
        try:
            allocate(store, "a", W32)
        finally:
            waited = time.monotonic() - started
    assert info.value.exit_code == 3
    assert waited >= 0.3  # it waited out its timeout before refusing (a lower bound only: machines are slow)
    assert "index.lock is held by another git command" in str(info.value)
    assert lock.exists()
    assert git(repo, "rev-parse", "HEAD") == head
    assert not (repo / episode_dir("2026-W32-0")).exists()
    lock.unlink()
    with Store(repo, lock_timeout=0.3) as store:
        assert allocate(store, "a", W32).episode_id == "2026-W32-0"
    assert status(repo) == ""


def test_foreign_index_lock_released_while_waiting(repo: Path) -> None:
    lock = repo / ".git" / "index.lock"
    lock.write_text("")
    timer = threading.Timer(0.3, lock.unlink)
    timer.start()
    try:
        with Store(repo, lock_timeout=10) as store:
            assert allocate(store, "a", W32).episode_id == "2026-W32-0"
    finally:
        timer.join()
    assert status(repo) == ""


def test_leftover_private_index_lock_from_a_killed_jobstate_is_cleared(store: Store, repo: Path) -> None:
    (repo / ".git" / "jobstate-index.lock").write_text("")
    (repo / ".git" / "jobstate-index").write_text("junk")
    assert allocate(store, "a", W32).episode_id == "2026-W32-0"
    assert status(repo) == ""
    assert not (repo / ".git" / "jobstate-index.lock").exists()


def test_uninitialized_repo_is_refused(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    git(plain, "init", "-q")
    with Store(plain) as s, pytest.raises(UsageError, match="jobstate init"):
        allocate(s, "a", W32)


def test_at_beyond_the_calendar_is_a_usage_error(repo: Path) -> None:
    proc = run_cli("allocate", "--key", "c", "--at", "9999-12-31T23:59:59-12:00", cwd=repo)
    assert proc.returncode == 2
    assert "outside the calendar" in proc.stderr


@pytest.mark.parametrize("key", ["right\u202eto-left", "line\u2028sep", "zero\u200bwidth"])
def test_format_characters_are_refused_in_keys(store: Store, key: str) -> None:
    with pytest.raises(UsageError):
        allocate(store, key, W32)


def test_non_utf8_key_says_so(repo: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "jobstate", "allocate", "--key", b"caf\xff".decode("utf-8", "surrogateescape"),
         "--week", "2026-W32"],
        cwd=repo, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "not valid UTF-8" in proc.stderr


def test_an_episode_an_outside_commit_removed_is_found_in_its_period(store: Store, repo: Path) -> None:
    """A commit from outside (a pull, a reset, a hand commit) that removes an episode but leaves its directory
    makes it uncommitted; the catalog's refresh names its period, and the next allocation, in any period,
    looks there and commits it again, as it does a killed allocate's."""
    allocate(store, "k1", W32)
    allocate(store, "k2", W33)
    git(repo, "rm", "-rq", "--cached", episode_dir("2026-W32-0"))
    git(repo, "commit", "-qm", "untrack an episode")
    assert allocate(store, "k3", W33).episode_id == "2026-W33-1"
    assert "state/2026/2026-W32/2026-W32-0/episode.yaml" in committed_files(repo)
    assert "recover 2026-W32-0 for key 'k1'" in git(repo, "log", "-1", "--format=%B")
    assert status(repo) == ""


def test_an_outside_commit_costs_a_walk_of_what_it_changed_not_of_every_episode(store: Store, repo: Path) -> None:
    """After a commit from outside that removed no episode (another host's, a hand edit of a README), an
    allocation walks its own period only: a directory hidden from the mtimes in another period is not met
    (the whole state used to be walked after any commit jobstate did not make: minutes at a million)."""
    allocate(store, "k1", W32)
    allocate(store, "k2", parse_period("2026-W40"))
    with _mtimes_kept(repo / "state" / "2026"):
        _write_episode(repo, "2026-W40-1", "orphan")
    (repo / "README").write_text("notes\n")
    git(repo, "add", "README")
    git(repo, "commit", "-qm", "notes")
    assert allocate(store, "k3", W33).episode_id == "2026-W33-0"
    assert "state/2026/2026-W40/2026-W40-1/episode.yaml" not in committed_files(repo)
    result = allocate(store, "orphan", parse_period("2026-W40"))  # its retry still finds it
    assert (result.episode_id, result.recovered) == ("2026-W40-1", True)
    assert status(repo) == ""
