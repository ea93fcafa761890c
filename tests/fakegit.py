"""The one fake git: a shell script on PATH in front of the real git, doing something to its caller
(jobstate) at one chosen moment."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path


def git_on_path(tmp_path: Path, script: str) -> dict[str, str]:
    """The environment that puts ``script`` (sh; ``{real}`` is the real git) first on PATH as git."""
    real = shutil.which("git")
    assert real is not None
    bindir = tmp_path / "fakebin"
    bindir.mkdir()
    (bindir / "git").write_text(script.format(real=real))
    (bindir / "git").chmod(0o755)
    return {"PATH": f"{bindir}:{os.environ['PATH']}"}


def fake_git(tmp_path: Path, kill_on: str) -> dict[str, str]:
    """A git on PATH that SIGKILLs its caller (jobstate) when asked to run ``kill_on``."""
    script = (
        f'#!/bin/sh\nif [ "$1" = "{kill_on}" ] && [ -f "$KILL_ARMED" ]; then\n'
        '  rm -f "$KILL_ARMED"; kill -9 $PPID; sleep 5; exit 1\nfi\nexec {real} "$@"\n'
    )
    armed = tmp_path / "armed"
    armed.write_text("")
    return {**git_on_path(tmp_path, script), "KILL_ARMED": str(armed)}


def run_killed(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m jobstate ARGS`` with the fake git armed; it must die of SIGKILL."""
    proc = subprocess.run(
        [sys.executable, "-m", "jobstate", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        check=False,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    return proc
