"""jobstate.paid.run_protocol: the `jobstate run` protocol."""

from __future__ import annotations

from pathlib import Path

from jobstate.core.periods import parse_period

from .conftest import run_cli

W32 = parse_period("2026-W32")


def test_run_reports_a_signal_as_128_plus_n(repo: Path) -> None:
    eid = run_cli("allocate", "--key", "a", "--week", "2026-W32", cwd=repo).stdout.strip()
    proc = run_cli("run", "--episode", eid, "--step", "generate", "--", "sh", "-c", "kill -9 $$", cwd=repo)
    assert proc.returncode == 9, proc.stderr
    assert "exited with 137" in proc.stderr
