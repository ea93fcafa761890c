"""Attacks from an independent review, kept as tests."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from jobstate.allocation import allocate
from jobstate.core.periods import parse_period
from jobstate.errors import JobstateError, UsageError
from jobstate.paid import paid_step
from jobstate.store import Store

from .conftest import committed_files, git, run_cli, status
from .legacy import make_legacy_repo

W32 = parse_period("2026-W32")


def test_concurrent_git_index_writers_do_not_lose_index_updates(store: Store, repo: Path) -> None:
    stop = threading.Event()

    def refresher() -> None:
        while not stop.is_set():
            subprocess.run(["git", "update-index", "-q", "--refresh"], cwd=repo, capture_output=True, check=False)

    thread = threading.Thread(target=refresher)
    thread.start()
    try:
        ids = [allocate(store, f"k{i}", W32).episode_id for i in range(25)]
    finally:
        stop.set()
        thread.join()
    allocate(store, "after", W32)  # finishes any index update that had to wait
    assert status(repo) == ""
    assert {f"state/{i}/episode.yaml" for i in ids} <= committed_files(repo)


def test_soft_reset_does_not_hand_an_existing_episode_to_a_new_key(store: Store, repo: Path) -> None:
    allocate(store, "a", W32)
    assert allocate(store, "b", W32).episode_id == "2026-W32-1"
    git(repo, "reset", "-q", "--soft", "HEAD~1")
    assert allocate(store, "z", W32).episode_id == "2026-W32-2"
    assert allocate(store, "b", W32).episode_id == "2026-W32-1"
    assert "allocation_key: b" in (repo / "state" / "2026-W32-1" / "episode.yaml").read_text()


def test_artifact_through_a_symlinked_directory_or_into_dot_git_is_refused(store: Store, repo: Path) -> None:
    eid = allocate(store, "a", W32).episode_id
    edir = repo / "state" / eid
    with pytest.raises(RuntimeError), paid_step(store, eid, "generate") as step:
        (edir / "real").mkdir()
        (edir / "real" / "f.txt").write_text("x")
        (edir / "sub").symlink_to("real")
        (edir / "out" / ".git").mkdir(parents=True)
        (edir / "out" / ".git" / "config").write_text("x")
        for bad in ("sub/f.txt", "out/.git/config"):
            with pytest.raises(UsageError):
                step.artifact(bad)
        step.artifact("real/f.txt")
        raise RuntimeError("done")
    assert "state/2026-W32-0/real/f.txt" in committed_files(repo)


BOMB = """\
schema: 1
episode_id: 2026-W32-0
period_id: 2026-W32
sequence: 0
allocation_key: a
a1: &a1 [x, x, x, x, x, x, x, x, x]
a2: &a2 [*a1, *a1, *a1, *a1, *a1, *a1, *a1, *a1, *a1]
a3: &a3 [*a2, *a2, *a2, *a2, *a2, *a2, *a2, *a2, *a2]
a4: &a4 [*a3, *a3, *a3, *a3, *a3, *a3, *a3, *a3, *a3]
a5: &a5 [*a4, *a4, *a4, *a4, *a4, *a4, *a4, *a4, *a4]
a6: &a6 [*a5, *a5, *a5, *a5, *a5, *a5, *a5, *a5, *a5]
a7: &a7 [*a6, *a6, *a6, *a6, *a6, *a6, *a6, *a6, *a6]
allocated_at: *a7
status: allocated
"""


def test_yaml_alias_bombs_are_refused_quickly(repo: Path) -> None:
    path = repo / "state" / "2026-W32-0" / "episode.yaml"
    path.parent.mkdir()
    path.write_text(BOMB)
    start = time.monotonic()
    for args in (["show", "2026-W32-0"], ["allocate", "--key", "b", "--week", "2026-W32"], ["verify"]):
        proc = run_cli(*args, cwd=repo, timeout=30)
        assert proc.returncode in (1, 7), proc.stderr
        assert "alias" in proc.stderr + proc.stdout
    assert time.monotonic() - start < 30


def test_at_beyond_the_calendar_is_a_usage_error(repo: Path) -> None:
    proc = run_cli("allocate", "--key", "c", "--at", "9999-12-31T23:59:59-12:00", cwd=repo)
    assert proc.returncode == 2
    assert "outside the calendar" in proc.stderr


def test_unusable_catalog_path_is_one_line_exit_7(repo: Path) -> None:
    (repo / ".jobstate").mkdir(exist_ok=True)
    (repo / ".jobstate" / "catalog.sqlite").unlink(missing_ok=True)
    (repo / ".jobstate" / "catalog.sqlite").mkdir()
    proc = run_cli("allocate", "--key", "c", "--week", "2026-W32", cwd=repo)
    assert proc.returncode == 7
    assert "catalog" in proc.stderr


@pytest.mark.parametrize("value", ["nan", "-5", "inf"])
def test_lock_timeout_must_be_a_sane_number(repo: Path, value: str) -> None:
    proc = run_cli("allocate", "--key", "c", "--week", "2026-W32", "--lock-timeout", value, cwd=repo)
    assert proc.returncode == 2
    assert not (repo / "state" / "2026-W32-0").exists()


def test_run_reports_a_signal_as_128_plus_n(repo: Path) -> None:
    eid = run_cli("allocate", "--key", "a", "--week", "2026-W32", cwd=repo).stdout.strip()
    proc = run_cli("run", "--episode", eid, "--step", "generate", "--", "sh", "-c", "kill -9 $$", cwd=repo)
    assert proc.returncode == 9, proc.stderr
    assert "exited with 137" in proc.stderr


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


def test_migrate_is_not_blamed_for_problems_it_did_not_make(tmp_path: Path) -> None:
    legacy = tmp_path / "legacy"
    make_legacy_repo(legacy, ["2026-W30"])
    (legacy / "state" / "junk").mkdir()
    (legacy / "state" / "junk" / "f").write_text("x")
    git(legacy, "add", "-A")
    git(legacy, "commit", "-qm", "junk that predates the migration")
    proc = run_cli("migrate", cwd=legacy)
    assert proc.returncode == 0, proc.stderr
    assert (legacy / "state" / "2026-W30-0" / "episode.yaml").exists()


def test_kill_before_a_paid_record_lands_is_undone_by_the_next_command(repo: Path, tmp_path: Path) -> None:
    from .test_crash import _fake_git

    eid = run_cli("allocate", "--key", "a", "--week", "2026-W32", cwd=repo).stdout.strip()
    env = _fake_git(tmp_path, "update-ref")
    script = "import sys; sys.exit(0)"
    proc = subprocess.run(
        [sys.executable, "-m", "jobstate", "run", "--episode", eid, "--step", "generate", "--", sys.executable, "-c",
         script],
        cwd=repo, capture_output=True, text=True, env={**__import__("os").environ, **env}, check=False,
    )  # fmt: skip
    assert proc.returncode == -9
    assert (repo / "state" / eid / "submissions.yaml").exists()  # written, never committed
    again = run_cli("run", "--episode", eid, "--step", "generate", "--", sys.executable, "-c", script, cwd=repo)
    assert again.returncode == 0, again.stderr
    assert status(repo) == ""


def test_user_commits_during_allocations_never_delete_episodes(store: Store, repo: Path) -> None:
    stop = threading.Event()

    def user() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            (repo / "notes.txt").write_text(f"{n}\n")
            subprocess.run(["git", "add", "notes.txt"], cwd=repo, capture_output=True, check=False)
            subprocess.run(["git", "commit", "-qm", f"user {n}"], cwd=repo, capture_output=True, check=False)
            time.sleep(0.02)  # a busy person, not a livelock

    thread = threading.Thread(target=user)
    thread.start()
    try:
        for i in range(15):
            for _ in range(50):  # the user's git may hold index.lock for a moment: retry like a scheduler
                try:
                    allocate(store, f"k{i}", W32)
                    break
                except JobstateError as exc:
                    if exc.exit_code != 3:
                        raise
    finally:
        stop.set()
        thread.join()
    deleted = git(repo, "log", "--diff-filter=D", "--name-only", "--format=", "--", "state")
    assert deleted.strip() == ""
    assert len([p for p in committed_files(repo) if p.endswith("episode.yaml")]) == 15


def test_remote_option_must_name_a_remote(repo: Path) -> None:
    proc = run_cli("allocate", "--remote", "", "--key", "a", "--week", "2026-W32", cwd=repo)
    assert proc.returncode == 2
    assert "--remote needs" in proc.stderr
