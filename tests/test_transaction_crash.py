"""Real SIGKILLs at random and at chosen moments; the next allocate recovers."""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from jobstate.core.layout import episode_dir, period_dir
from jobstate.store.store import Store
from jobstate_demo.vendor_sim import VendorSimulator

from .conftest import both_formats, committed_files, git, plain_repo, run_cli, status, vendor_step
from .fakegit import fake_git, git_on_path, run_killed
from .killpoints import run_hooked
from .legacy import make_legacy_repo
from .test_transaction_remote import make_hosts

KILLS = int(os.environ.get("JOBSTATE_TEST_KILLS", "100"))


def _assert_consistent(repo: Path, keys: list[str], week: str) -> None:
    answers = {}
    for key in keys:
        proc = run_cli("allocate", "--key", key, "--week", week, cwd=repo)
        assert proc.returncode == 0, proc.stderr
        answers[key] = proc.stdout.strip()
    # same answer the second time, and one episode per key
    for key in keys:
        assert run_cli("allocate", "--key", key, "--week", week, cwd=repo).stdout.strip() == answers[key]
    assert len(set(answers.values())) == len(keys)
    with Store(repo) as s:
        episodes = s.episodes(week)
    assert [e.sequence for e in episodes] == list(range(len(episodes)))
    assert {e.allocation_key for e in episodes} == set(keys)
    committed = committed_files(repo)
    assert all(f"{episode_dir(e.episode_id)}/episode.yaml" in committed for e in episodes)
    assert status(repo) == ""
    assert not (repo / ".git" / "index.lock").exists()
    git(repo, "fsck", "--no-progress")


# allocate, telling a progress file how far it got: "s" once the interpreter has started and
# jobstate is imported, one "w" for each write it makes under the repository, "d" once it is done
# (with the seconds since its first write);
# so a kill is known to have landed in start-up, before the first write, mid-write or after the end
_TRACED = """
import os, sys, time
first = []
progress = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
here = os.getcwd() + os.sep
WRITES = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
def ours(path):
    if isinstance(path, int):
        return False
    return os.path.abspath(os.fsdecode(path)).startswith(here)
def hook(event, args):
    if event == "open" and args[2] & WRITES and ours(args[0]) or (
        event in ("os.rename", "os.replace", "os.mkdir", "os.remove", "os.rmdir") and ours(args[0])
    ):
        first.append(first[0] if first else time.monotonic())
        os.write(progress, b"w")
from jobstate.main import main
sys.addaudithook(hook)
os.write(progress, b"s")
code = main(sys.argv[2:])
os.write(progress, b"d%f" % (time.monotonic() - first[0] if first else 0.0))
sys.exit(code)
"""


def _allocate_killed(repo: Path, progress: Path, key: str, delay: float | None) -> bytes:
    """One allocate SIGKILLed ``delay`` seconds after its first write (never killed with None); what it had
    done by then."""
    with subprocess.Popen(
        [sys.executable, "-c", _TRACED, str(progress), "allocate", "--key", key, "--week", "2026-W32"],
        cwd=repo,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ) as proc:
        # the delay counts from the first write: a kill while the interpreter starts proves nothing
        while proc.poll() is None and b"w" not in (progress.read_bytes() if progress.exists() else b""):
            time.sleep(0.001)
        if delay is not None:
            time.sleep(delay)
            proc.send_signal(signal.SIGKILL)
        proc.wait()
    done = progress.read_bytes()
    progress.unlink()
    return done


# a long loop of real processes: 100 kills take a minute or two on a loaded 2-core machine
@pytest.mark.timeout(900)
@pytest.mark.slow
def test_sigkill_at_random_moments_loses_and_duplicates_nothing(repo: Path, tmp_path: Path) -> None:
    rng = random.Random(20260807)
    progress = tmp_path / "progress"
    # how long allocate writes on this machine now, so the kills spread over that span
    done = _allocate_killed(repo, progress, "calibration", None)
    assert b"d" in done, done
    span = float(done.partition(b"d")[2])
    keys: list[str] = ["calibration"]
    landed: Counter[str] = Counter()
    for i in range(KILLS):
        key = f"run:{i % (KILLS // 3 + 1)}"  # a third of the keys come back: retries of killed runs
        if key not in keys:
            keys.append(key)
        done = _allocate_killed(repo, progress, key, rng.uniform(0.0, span))
        landed["after the end" if b"d" in done else "mid-write" if b"w" in done else "before a write"] += 1
    # most kills must land while allocate writes, or the loop proves little
    assert landed["mid-write"] >= KILLS // 3, landed
    _assert_consistent(repo, keys, "2026-W32")


@pytest.mark.parametrize("kill_on", ["update-ref", "update-index"])
@both_formats
def test_kill_between_write_and_commit_or_commit_and_index(repo: Path, tmp_path: Path, kill_on: str) -> None:
    run_cli("allocate", "--key", "before", "--week", "2026-W32", cwd=repo)
    env = fake_git(tmp_path, kill_on)
    run_killed(repo, env, "allocate", "--key", "victim", "--week", "2026-W32")
    assert (repo / episode_dir("2026-W32-1") / "episode.yaml").exists()
    if kill_on == "update-ref":
        assert "state/2026/2026-W32/2026-W32-1/episode.yaml" not in committed_files(repo)
    else:
        assert "state/2026/2026-W32/2026-W32-1/episode.yaml" in committed_files(repo)
        assert status(repo) != ""  # the index is behind until the next command
    again = run_cli("allocate", "--key", "victim", "--week", "2026-W32", cwd=repo)
    assert again.stdout == "2026-W32-1\n", again.stderr
    _assert_consistent(repo, ["before", "victim"], "2026-W32")


def test_kill_inside_the_index_update_leaves_nothing_that_wedges(repo: Path, tmp_path: Path) -> None:
    # git itself killed while it holds the private index lock
    fake = git_on_path(
        tmp_path,
        '#!/bin/sh\nif [ "$1" = update-index ] && [ -n "$GIT_INDEX_FILE" ]; then\n'
        '  : > "$GIT_INDEX_FILE.lock"; kill -9 $PPID; kill -9 $$\nfi\n'
        'exec {real} "$@"\n',
    )
    proc = subprocess.run(
        [sys.executable, "-m", "jobstate", "allocate", "--key", "victim", "--week", "2026-W32"],
        cwd=repo,
        capture_output=True,
        text=True,
        env={**os.environ, **fake},
        check=False,
    )
    assert proc.returncode == -signal.SIGKILL
    assert (repo / ".git" / "jobstate-index.lock").exists()
    # jobstate held git's own index.lock when it was killed: the proof it left lets the next one clear it
    assert (repo / ".git" / "index.lock").exists()
    assert (repo / ".jobstate" / "index-lock.json").exists()
    assert run_cli("allocate", "--key", "next", "--week", "2026-W32", cwd=repo).stdout == "2026-W32-1\n"
    assert not (repo / ".git" / "index.lock").exists()
    _assert_consistent(repo, ["victim", "next"], "2026-W32")


_KILLED_REF_LOCK = """#!/bin/sh
if [ "$1" = "update-ref" ] && [ -f "$KILL_ARMED" ]; then
  rm -f "$KILL_ARMED"; : > "$REF_LOCK"; kill -9 $PPID; exit 1
fi
exec {real} "$@"
"""


def test_a_ref_lock_left_by_a_git_killed_with_jobstate_is_removed_by_the_next_command(
    repo: Path, tmp_path: Path
) -> None:
    fake = git_on_path(tmp_path, _KILLED_REF_LOCK)
    armed, lock = tmp_path / "armed", repo / ".git" / "refs" / "heads" / "main.lock"
    armed.write_text("")
    env = {**fake, "KILL_ARMED": str(armed), "REF_LOCK": str(lock)}
    run_killed(repo, env, "allocate", "--key", "victim", "--week", "2026-W32")
    assert lock.exists()  # what git update-ref leaves when it dies holding the lock
    again = run_cli("allocate", "--key", "victim", "--week", "2026-W32", cwd=repo)
    assert (again.returncode, again.stdout) == (0, "2026-W32-0\n"), again.stderr
    assert f"removed {lock}" in again.stderr
    assert not lock.exists()
    _assert_consistent(repo, ["victim"], "2026-W32")


# Kill allocate inside the build of its new episode directory (issue 20: an empty state/<id>/ left by a
# kill between the mkdir and the first file wedged every later allocate with exit 7).
_KILL_IN_BUILD = """
import os, signal, sys
point = sys.argv[1]
def hook(event, args):
    if point == "mkdir" and event == "os.mkdir" and os.path.basename(str(args[0])).startswith(".tmp-"):
        # after the temp directory exists, before any file is in it
        sys.addaudithook(lambda e, a: e == "open" and os.kill(os.getpid(), signal.SIGKILL))
    if point == "rename" and event == "os.rename" and os.path.isdir(str(args[0])):
        os.kill(os.getpid(), signal.SIGKILL)
sys.addaudithook(hook)
from jobstate.main import main
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.parametrize("point", ["mkdir", "rename"])
def test_a_kill_while_a_new_episode_directory_is_built_wedges_nothing(repo: Path, point: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _KILL_IN_BUILD, point, "allocate", "--key", "k", "--week", "2026-W32"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert not (repo / episode_dir("2026-W32-0")).exists()  # whole or not at all
    period = repo / period_dir("2026-W32")
    assert [p.name for p in period.iterdir() if p.name.startswith(".tmp-")]  # the kill landed mid-build
    again = run_cli("allocate", "--key", "k", "--week", "2026-W32", cwd=repo)
    assert (again.returncode, again.stdout.strip()) == (0, "2026-W32-0"), again.stderr
    assert run_cli("allocate", "--key", "other", "--week", "2026-W32", cwd=repo).stdout.strip() == "2026-W32-1"
    assert not [p for p in period.iterdir() if p.name.startswith(".tmp-")]
    assert status(repo) == ""


# Found by the crash sweep (tests/test_crash_sweep.py): a kill between an atomic write's temp file and its rename
# left the temp file for good (init then refused it as a file it did not write, migrate as an uncommitted change),
# and an init killed after its commit never brought the index up to it.
def _killed(repo: Path, tmp_path: Path, match: str, *args: str) -> None:
    outcome = run_hooked(list(args), repo, tmp_path / "ops.json", 0, match=match)
    assert outcome.killed, outcome.stderr
    assert re.search(match, outcome.last)


@pytest.mark.parametrize(
    "match",
    [
        r"^rename .*/state/\.tmp-\w+ -> .*/state/\.gitkeep$",  # init refused its own temp file
        r"^rename .*/\.tmp-\w+ -> .*/jobstate\.yaml$",  # the temp file stayed untracked
        r"^popen git update-index",  # committed, the index left behind
    ],
)
def test_init_killed_mid_write_or_after_its_commit_is_finished_by_the_next_init(tmp_path: Path, match: str) -> None:
    repo = plain_repo(tmp_path / "r")
    _killed(repo, tmp_path, match, "init")
    assert status(repo) != ""
    again = run_cli("init", cwd=repo)
    assert again.returncode == 0, again.stderr
    assert status(repo) == ""
    assert {"jobstate.yaml", "state/.gitkeep", "history/.gitkeep", ".gitignore"} <= committed_files(repo)
    assert run_cli("verify", "--strict", cwd=repo).returncode == 0


@pytest.mark.parametrize("where", ["state/2026/2026-W30/2026-W30-0", "history/2026/2026-W30"])
def test_migrate_killed_between_a_temp_file_and_its_rename_is_finished_by_the_next_migrate(
    tmp_path: Path, where: str
) -> None:
    repo = tmp_path / "legacy"
    make_legacy_repo(repo, ["2026-W30", "2026-W31"])
    _killed(repo, tmp_path, rf"^rename .*/{re.escape(where)}/\.tmp-\w+ -> ", "migrate")
    assert any(p.name.startswith(".tmp-") for p in (repo / where).iterdir())
    again = run_cli("migrate", cwd=repo)
    assert again.returncode == 0, again.stderr
    assert status(repo) == ""
    assert "state/2026/2026-W30/2026-W30-0/episode.yaml" in committed_files(repo)


def test_a_run_killed_after_pushing_its_artifact_and_before_its_branch_moved_is_finished_by_the_next_run(
    tmp_path: Path, vendor: VendorSimulator
) -> None:
    # found by the crash sweep: the remote had the artifact's commit, the local branch did not, and the artifact
    # CMD wrote (the very bytes of the tip) was refused as "local changes that the origin tip also changes"
    bare, (clone,) = make_hosts(tmp_path, 1)
    git(clone, "remote", "set-url", "origin", f"file://{bare}")
    eid = run_cli("allocate", "--key", "k", "--week", "2026-W32", cwd=clone).stdout.strip()
    run = [
        "run",
        "--episode",
        eid,
        "--step",
        "generate",
        "--",
        *vendor_step(vendor.url, "generate", "--artifact", "a.txt"),
    ]
    _killed(clone, tmp_path, r"^popen git update-ref -m jobstate: done ", *run)
    assert f"{episode_dir(eid)}/a.txt" in git(bare, "ls-tree", "-r", "--name-only", "main")
    assert f"{episode_dir(eid)}/a.txt" not in committed_files(clone)
    again = run_cli(*run, cwd=clone)
    assert again.returncode == 0, again.stderr
    assert status(clone) == ""
    assert git(clone, "rev-parse", "HEAD") == git(bare, "rev-parse", "main")
    assert len(vendor.charges()) == 1
    assert run_cli("verify", "--strict", cwd=clone).returncode == 0
