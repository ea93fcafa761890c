"""jobstate inside a Git hook of another repository: inherited GIT_* variables do not redirect it (class 9)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from jobstate.core.layout import episode_dir
from jobstate.main import main

from .conftest import git, plain_repo, status

EID = "2026-W32-0"


def test_run_from_a_pre_commit_hook_of_another_repository(repo: Path, tmp_path: Path) -> None:
    assert main(["--repo", str(repo), "allocate", "--key", "k", "--week", "2026-W32"]) == 0
    pipeline = plain_repo(tmp_path / "pipeline")
    out = tmp_path / "hook-out"
    # git commit -a runs pre-commit with GIT_INDEX_FILE set to the pipeline's absolute .git/index.lock
    run = [sys.executable, "-m", "jobstate", "--repo", str(repo), "run", "--episode", EID, "--step", "generate"]
    hook = pipeline / ".git" / "hooks" / "pre-commit"
    hook.write_text(
        "#!/bin/sh\n"
        f"{shlex.join(run)} -- {shlex.quote(sys.executable)} -c pass > {shlex.quote(str(out))} 2>&1\n"
        f'echo "exit $?" >> {shlex.quote(str(out))}\n'
        "env | grep '^GIT_INDEX_FILE=' >> " + shlex.quote(str(out)) + "\n"
    )
    hook.chmod(0o755)
    (pipeline / "README").write_text("y\n")
    git(pipeline, "commit", "-qam", "trigger the hook")
    report = out.read_text()
    assert f"GIT_INDEX_FILE={pipeline}" in report  # the hook really ran with the other repository's index
    assert "exit 0" in report, report
    assert "state: completed" in (repo / episode_dir(EID) / "submissions.yaml").read_text()
    assert status(repo) == ""
    assert git(pipeline, "log", "-1", "--format=%s").strip() == "trigger the hook"
