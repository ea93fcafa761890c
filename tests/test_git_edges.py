"""Real Git at the edges: linked worktrees, a .git file, safe.directory, hooks that call jobstate."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from jobstate.core.layout import episode_dir
from jobstate.main import main

from .conftest import git, run_cli, status


def _jobstate(repo: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["--repo", str(repo), *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_linked_worktree_commits_on_its_own_branch(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main_tip = git(repo, "rev-parse", "main").strip()
    linked = repo.parent / "linked"
    git(repo, "worktree", "add", "-q", "-b", "other", str(linked))
    assert (linked / ".git").is_file()
    # not the state's branch (jobstate.yaml's state_branch): refused unless the user says so
    code, _out, err = _jobstate(linked, capsys, "allocate", "--key", "a", "--week", "2026-W32")
    assert code == 4, err
    for key, expected in (("a", "2026-W32-0"), ("b", "2026-W32-1"), ("a", "2026-W32-0")):
        code, out, err = _jobstate(linked, capsys, "allocate", "--key", key, "--week", "2026-W32", "--any-branch")
        assert code == 0, err
        assert out == expected + "\n"
    assert git(repo, "rev-parse", "main").strip() == main_tip
    assert git(linked, "log", "-2", "--format=%s", "other").splitlines()[0] == "allocate 2026-W32-1 for key 'b'"
    assert status(linked) == ""
    assert status(repo) == ""
    assert not (repo / episode_dir("2026-W32-0")).exists()
    code, out, _err = _jobstate(linked, capsys, "verify", "--strict")
    assert code == 0, out


def test_a_git_file_pointing_at_a_separate_git_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = tmp_path / "work"
    git(tmp_path, "init", "-q", "-b", "main", f"--separate-git-dir={tmp_path / 'elsewhere.git'}", str(repo))
    assert (repo / ".git").is_file()
    assert _jobstate(repo, capsys, "init")[0] == 0
    code, out, err = _jobstate(repo, capsys, "allocate", "--key", "a", "--week", "2026-W32")
    assert (code, out) == (0, "2026-W32-0\n"), err
    assert status(repo) == ""
    assert _jobstate(repo, capsys, "verify", "--strict")[0] == 0


def test_a_repository_owned_by_another_user_names_the_safe_directory_command() -> None:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run jobstate as another user than the repository's owner")
    top = Path(tempfile.mkdtemp(prefix="jobstate-owner-", dir="/tmp"))
    try:
        top.chmod(0o755)
        repo = top / "repo"
        repo.mkdir()
        git(repo, "init", "-q")
        env = {**os.environ, "HOME": str(top), "GIT_CONFIG_GLOBAL": "/dev/null"}
        prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        probe = subprocess.run(
            [*prefix, sys.executable, "-c", "import jobstate"], env=env, capture_output=True, check=False
        )
        if probe.returncode != 0:
            pytest.skip("this checkout's interpreter cannot be run by an unprivileged user")
        proc = subprocess.run(
            [*prefix, sys.executable, "-m", "jobstate", "verify"],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == 2, proc.stderr
        assert "Traceback" not in proc.stderr
        assert proc.stderr.strip().splitlines() == [
            f"jobstate: error: git refuses {repo}: it is owned by another user; if you trust it, "
            f"allow it with: git config --global --add safe.directory {repo}"
        ]
    finally:
        shutil.rmtree(top)


HOOK = """#!/bin/sh
echo "{name} ran" >> "{log}"
env | grep '^GIT_' | sed 's/=.*//' | sort >> "{log}.env"
{commands}
"""


def _hook(hooks: Path, name: str, log: Path, commands: str) -> None:
    path = hooks / name
    path.write_text(HOOK.format(name=name, log=log, commands=commands))
    path.chmod(0o755)


def test_hooks_that_call_jobstate_and_jobstate_commits_that_run_no_hooks(repo: Path, tmp_path: Path) -> None:
    assert run_cli("allocate", "--key", "k", "--week", "2026-W32", cwd=repo).returncode == 0
    hooks, log = tmp_path / "hooks", tmp_path / "hook.log"
    hooks.mkdir()
    js = f"{sys.executable} -m jobstate"
    # pre-commit: git commit holds index.lock, so only reading works here (as for git itself)
    _hook(
        hooks,
        "pre-commit",
        log,
        f'{js} allocate --key k --week 2026-W32 >> "{log}" 2>&1 || exit 1\n'
        f'{js} verify --strict > /dev/null 2>> "{log}" || exit 1\n',
    )
    # post-commit: a paid step run from the hook, with the hook's GIT_INDEX_FILE inherited
    _hook(hooks, "post-commit", log, f'{js} run --episode 2026-W32-0 --step hooked -- true >> "{log}" 2>&1\n')
    git(repo, "config", "core.hooksPath", str(hooks))

    assert run_cli("allocate", "--key", "k2", "--week", "2026-W32", cwd=repo).returncode == 0
    assert not log.exists(), "jobstate's commits run no hooks"

    (repo / "notes.txt").write_text("a change of the pipeline's own\n")
    git(repo, "add", "notes.txt")
    proc = subprocess.run(
        ["git", "commit", "-qm", "pipeline notes"], cwd=repo, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr + log.read_text()
    ran = log.read_text()
    ours = [line for line in ran.splitlines() if not line.startswith("jobstate: warning: true exited 0 without")]
    assert ours == ["pre-commit ran", "2026-W32-0", "post-commit ran"], ran
    assert "GIT_INDEX_FILE" in (tmp_path / "hook.log.env").read_text().split()
    subjects = git(repo, "log", "--format=%s", "-3").splitlines()
    assert subjects == ["done 2026-W32-0 hooked attempt 1", "intent 2026-W32-0 hooked attempt 1", "pipeline notes"]
    assert "state: completed" in git(repo, "show", "HEAD:state/2026/2026-W32/2026-W32-0/submissions.yaml")
    assert status(repo) == ""
