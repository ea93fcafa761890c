"""jobstate.transaction: changes that land whole or not at all, whatever runs beside them."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

from jobstate.allocation import allocate
from jobstate.core.periods import parse_period
from jobstate.errors import JobstateError
from jobstate.store import Store

from .conftest import committed_files, git, run_cli, status

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


def test_kill_before_a_paid_record_lands_is_undone_by_the_next_command(repo: Path, tmp_path: Path) -> None:
    from .fakegit import fake_git

    eid = run_cli("allocate", "--key", "a", "--week", "2026-W32", cwd=repo).stdout.strip()
    env = fake_git(tmp_path, "update-ref")
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
