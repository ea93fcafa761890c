"""Helpers for tests of what a merged pull request delivers: a CLI call in-process, a pull request merged
with --no-ff, and the review that must flag it."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from jobstate.main import main

from .conftest import git

EID = "2026-W32-0"


def cli(repo: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["--repo", str(repo), *args])
    out = capsys.readouterr()
    return code, out.err + out.out


def merge_pr(repo: Path, edit: Callable[[], object], message: str = "hand edit") -> None:
    git(repo, "checkout", "-q", "-b", "pr")
    edit()
    git(repo, "add", "-A", ".")
    git(repo, "commit", "-q", "-m", message)
    git(repo, "checkout", "-q", "main")
    git(repo, "commit", "-q", "--allow-empty", "-m", "main moves on")
    git(repo, "merge", "-q", "--no-ff", "-m", "merge pr", "pr")


def refused_in_review(repo: Path, capsys: pytest.CaptureFixture[str], rule: str) -> None:
    code, out = cli(repo, capsys, "diff", "--strict", "HEAD^1", "HEAD")
    assert code != 0, out
    assert rule in out, out
    code, out = cli(repo, capsys, "verify", "--strict", "--against", "HEAD^1", "--rev", "HEAD")
    assert code != 0, out
    assert rule in out, out


def counting_step(tmp_path: Path, amount: str = "12.40") -> list[str]:
    """A paid step that counts its runs in runs.txt and reports a task and a charge."""
    script = tmp_path / "step.py"
    report = json.dumps({"remote_ref": "task-1", "cost": {"amount": amount, "currency": "USD"}})
    script.write_text(
        "import os, pathlib\n"
        f"with open({str(tmp_path / 'runs.txt')!r}, 'a') as fh:\n    fh.write('ran\\n')\n"
        f"pathlib.Path(os.environ['JOBSTATE_RESULT']).write_text({report!r})\n"
    )
    return [sys.executable, str(script)]


def runs(tmp_path: Path) -> int:
    """How many times ``counting_step`` ran."""
    found = tmp_path / "runs.txt"
    return len(found.read_text().splitlines()) if found.exists() else 0
