"""The pre-push hook on the first push of a branch, which has no upstream (issue 30, 4)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

from jobstate.store.yamlio import loads

from .conftest import git, run_cli

ROOT = Path(__file__).parent.parent


def _install_pre_push(clone: Path) -> None:
    hooks = loads((ROOT / ".pre-commit-hooks.yaml").read_bytes(), ".pre-commit-hooks.yaml")
    entry = next(h for h in hooks if h["id"] == "jobstate-diff")["entry"]
    hook = clone / ".git" / "hooks" / "pre-push"
    bin_dir = Path(sys.executable).parent
    # as pre-commit runs it outside a pre-commit run: no PRE_COMMIT_FROM_REF
    hook.write_text(f"#!/bin/sh\nPATH={shlex.quote(str(bin_dir))}:$PATH\nexport PATH\n{entry}\n")
    hook.chmod(0o755)


def _push(clone: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRE_COMMIT")}
    return subprocess.run(["git", "push", "-q", *args], cwd=clone, capture_output=True, text=True, check=False, env=env)


def _clone(repo: Path, tmp_path: Path) -> Path:
    bare = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(bare))
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(bare), str(clone))
    _install_pre_push(clone)
    return clone


def test_the_first_push_of_a_new_branch_is_checked_against_the_default_branch(repo: Path, tmp_path: Path) -> None:
    run_cli("allocate", "--key", "k", "--week", "2026-W33", cwd=repo)
    clone = _clone(repo, tmp_path)
    git(clone, "checkout", "-qb", "feature")
    (clone / "notes.txt").write_text("x\n")
    git(clone, "add", "notes.txt")
    git(clone, "commit", "-qm", "work on a branch")
    ok = _push(clone, "-u", "origin", "feature")
    assert ok.returncode == 0, ok.stderr
    assert "unknown revision" not in ok.stderr
    git(clone, "checkout", "-qb", "bad", "main")
    git(clone, "rm", "-rq", "state/2026/2026-W33/2026-W33-0")
    git(clone, "commit", "-qm", "an episode deleted")
    refused = _push(clone, "-u", "origin", "bad")
    assert refused.returncode != 0
    assert "episode deleted" in refused.stdout + refused.stderr
    assert "refs/heads/bad" not in git(clone, "ls-remote", "--heads", "origin")  # a commit ID may hold "bad"


def test_a_push_to_an_empty_remote_checks_nothing_and_says_so(repo: Path, tmp_path: Path) -> None:
    bare = tmp_path / "empty.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    git(repo, "remote", "add", "origin", str(bare))
    _install_pre_push(repo)
    proc = _push(repo, "-u", "origin", "main")
    assert proc.returncode == 0, proc.stderr
    assert "nothing to check" in proc.stderr
