"""While a step runs, nobody decides about it: resolve, supersede, approve and complete wait (exit 3)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from .conftest import run_cli, stable_cmd
from .snapshots import written_state

EID = "2026-W32-0"


def test_decisions_about_a_running_step_are_exit_3_and_write_nothing(repo: Path, tmp_path: Path) -> None:
    assert run_cli("allocate", "--key", "k", "--week", "2026-W32", cwd=repo).returncode == 0
    started, go = tmp_path / "started", tmp_path / "go"
    script = (
        "import pathlib, time\n"
        f"pathlib.Path({str(started)!r}).write_text('x')\n"
        f"while not pathlib.Path({str(go)!r}).exists(): time.sleep(0.05)\n"
    )
    cmd = [sys.executable, "-m", "jobstate", "run", "--episode", EID, "--step", "slow", "--", *stable_cmd(script)]
    proc = subprocess.Popen(cmd, cwd=repo, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not started.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert started.exists(), f"jobstate run did not start its command (exit {proc.poll()})"
        before = written_state(repo)  # the running step waits: from here on nothing may change
        decide = ["--step", "slow", "--by", "ops", "--reason", "test"]
        for args in (
            ["resolve", "--episode", EID, "--not-submitted", *decide],
            ["resolve", "--episode", EID, "--supersede", *decide],
            ["approve", "--episode", EID, "--by", "ed"],
            ["complete", "--episode", EID],
        ):
            answer = run_cli(*args, cwd=repo)
            assert answer.returncode == 3, (args, answer.stderr)
            assert "running now" in answer.stderr
        assert written_state(repo) == before
    finally:
        go.write_text("go")
        _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
