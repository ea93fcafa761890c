"""jobstate.store.transaction: changes that land whole or not at all, whatever runs beside them."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from jobstate.allocation.allocation import allocate
from jobstate.core.layout import episode_dir
from jobstate.core.periods import parse_period
from jobstate.store.store import Store

from .conftest import committed_files, git, run_cli, status
from .fakegit import fake_git, git_on_path

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
    assert {f"{episode_dir(i)}/episode.yaml" for i in ids} <= committed_files(repo)


def test_soft_reset_does_not_hand_an_existing_episode_to_a_new_key(store: Store, repo: Path) -> None:
    allocate(store, "a", W32)
    assert allocate(store, "b", W32).episode_id == "2026-W32-1"
    git(repo, "reset", "-q", "--soft", "HEAD~1")
    assert allocate(store, "z", W32).episode_id == "2026-W32-2"
    assert allocate(store, "b", W32).episode_id == "2026-W32-1"
    assert "allocation_key: b" in (repo / episode_dir("2026-W32-1") / "episode.yaml").read_text()


def test_kill_before_a_paid_record_lands_is_undone_by_the_next_command(repo: Path, tmp_path: Path) -> None:
    eid = run_cli("allocate", "--key", "a", "--week", "2026-W32", cwd=repo).stdout.strip()
    env = fake_git(tmp_path, "update-ref")
    script = "import sys; sys.exit(0)"
    proc = subprocess.run(
        [sys.executable, "-m", "jobstate", "run", "--episode", eid, "--step", "generate", "--", sys.executable, "-c",
         script],
        cwd=repo, capture_output=True, text=True, env={**__import__("os").environ, **env}, check=False,
    )  # fmt: skip
    assert proc.returncode == -9
    assert (repo / episode_dir(eid) / "submissions.yaml").exists()  # written, never committed
    again = run_cli("run", "--episode", eid, "--step", "generate", "--", sys.executable, "-c", script, cwd=repo)
    assert again.returncode == 0, again.stderr
    assert status(repo) == ""


_HOLD_INDEX = """#!/bin/sh
if [ "$1" = "update-index" ] && [ -f "$HOLD_ARMED" ]; then
  rm -f "$HOLD_ARMED"; touch "$HOLDING"; while [ ! -f "$RELEASE" ]; do sleep 0.05; done
fi
exec {real} "$@"
"""


def test_a_user_commit_while_jobstate_commits_fails_instead_of_deleting_episodes(repo: Path, tmp_path: Path) -> None:
    # jobstate holds index.lock from before the branch moves until the index has the new episode:
    # a git commit of the user's at that moment is refused, and the next one keeps the episode
    fake = git_on_path(tmp_path, _HOLD_INDEX)
    armed, holding, release = tmp_path / "armed", tmp_path / "holding", tmp_path / "release"
    armed.write_text("")
    env = {
        **os.environ,
        **fake,
        "HOLD_ARMED": str(armed),
        "HOLDING": str(holding),
        "RELEASE": str(release),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "jobstate", "allocate", "--key", "k", "--week", "2026-W32"],
        cwd=repo,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not holding.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert holding.exists(), proc.stderr.read() if proc.stderr else ""
        (repo / "notes.txt").write_text("mine\n")
        added = subprocess.run(["git", "add", "notes.txt"], cwd=repo, capture_output=True, text=True, check=False)
        assert added.returncode != 0
        assert "index.lock" in added.stderr
    finally:
        release.write_text("")
        out, err = proc.communicate(timeout=60)
    assert (proc.returncode, out) == (0, "2026-W32-0\n"), err
    git(repo, "add", "notes.txt")
    git(repo, "commit", "-qm", "the user's own commit")
    assert git(repo, "log", "--diff-filter=D", "--name-only", "--format=", "--", "state").strip() == ""
    assert "state/2026/2026-W32/2026-W32-0/episode.yaml" in committed_files(repo)
    assert status(repo) == ""


def test_a_stale_ref_lock_is_reported_at_once_with_the_file_not_retried_as_a_race(repo: Path) -> None:
    head = git(repo, "rev-parse", "HEAD")
    lock = repo / ".git" / "refs" / "heads" / "main.lock"
    lock.write_text("")  # what a killed git update-ref leaves behind
    proc = run_cli("allocate", "--key", "k", "--week", "2026-W32", "--lock-timeout", "0.3", cwd=repo)
    assert proc.returncode == 3, proc.stderr
    assert f"{lock} exists" in proc.stderr
    assert f"rm {lock}" in proc.stderr
    assert "kept moving" not in proc.stderr
    assert git(repo, "rev-parse", "HEAD") == head
    lock.unlink()
    again = run_cli("allocate", "--key", "k", "--week", "2026-W32", cwd=repo)
    assert (again.returncode, again.stdout) == (0, "2026-W32-0\n"), again.stderr
    assert status(repo) == ""
