"""Through a shared remote, a host whose branch is the remote's last known tip pushes without fetching first."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from jobstate.core.layout import episode_dir

from .conftest import git, run_cli, status
from .test_transaction_remote import _check_remote, make_hosts


def _logging_git(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """A git on PATH that appends its subcommand to a log, then runs the real git."""
    real = shutil.which("git")
    assert real is not None
    bindir = tmp_path / "logbin"
    bindir.mkdir()
    log = tmp_path / "git.log"
    (bindir / "git").write_text(f'#!/bin/sh\necho "$1" >> "{log}"\nexec {real} "$@"\n')
    (bindir / "git").chmod(0o755)
    return {"PATH": f"{bindir}:{os.environ['PATH']}"}, log


def _allocate(clone: Path, key: str, env: dict[str, str] | None = None) -> str:
    proc = run_cli("allocate", "--key", key, "--week", "2026-W32", cwd=clone, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_a_host_at_the_remote_tip_pushes_without_fetching(tmp_path: Path) -> None:
    bare, (one,) = make_hosts(tmp_path, 1)
    assert _allocate(one, "first") == "2026-W32-0"
    env, log = _logging_git(tmp_path)
    assert _allocate(one, "second", env) == "2026-W32-1"
    calls = log.read_text().split()
    assert "push" in calls
    assert "fetch" not in calls
    _check_remote(bare, {"first", "second"}, "2026-W32")


def test_a_stale_decision_is_rejected_by_the_push_and_decided_again(tmp_path: Path) -> None:
    bare, (one, two) = make_hosts(tmp_path, 2)
    assert _allocate(one, "first") == "2026-W32-0"
    assert _allocate(two, "second") == "2026-W32-1"  # host one has not seen this yet
    env, log = _logging_git(tmp_path)
    assert _allocate(one, "third", env) == "2026-W32-2"
    calls = log.read_text().split()
    assert calls.count("push") == 2  # the first, decided on the stale tip, was rejected
    assert "fetch" in calls
    assert _allocate(one, "second") == "2026-W32-1"  # another host's key, now known here
    _check_remote(bare, {"first", "second", "third"}, "2026-W32")
    assert status(one) == ""


def test_a_refusal_on_an_unfetched_tip_is_decided_again_after_fetching(tmp_path: Path) -> None:
    bare, (one, two) = make_hosts(tmp_path, 2)
    eid = _allocate(one, "k")  # host two's branch is still the remote's tip as it last saw it
    assert not (two / episode_dir(eid)).exists()
    proc = run_cli("approve", "--episode", eid, "--by", "ed", cwd=two)
    assert proc.returncode == 0, proc.stderr  # not "unknown episode": fetched, then decided again
    assert "approved" in git(bare, "show", f"main:{episode_dir(eid)}/approval.yaml")
    assert status(two) == ""
