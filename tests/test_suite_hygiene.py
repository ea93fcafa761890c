"""The suite's own promises (tests/conftest.py): a failed test's leftovers never fail the next test, and a
fast test that does more than its share of work fails make test."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# each test starts a pytest of its own (a few CPU seconds, but over 45 s of wall time on a loaded machine)
pytestmark = pytest.mark.timeout(180)

_LEAKY = """
import subprocess, sys, threading, time
import pytest

SLEEP = [sys.executable, "-c", "import time; time.sleep(float(__import__('sys').argv[1]))"]

@pytest.mark.timeout(2)
def test_times_out_holding_a_running_process_and_its_pipe():
    proc = subprocess.Popen([*SLEEP, "60"], stdout=subprocess.PIPE)
    time.sleep(60)

@pytest.mark.timeout(2)
def test_times_out_while_a_thread_feeds_a_process_that_ends_later():
    proc = subprocess.Popen([*SLEEP, "4"], stdin=subprocess.PIPE)
    def feed():
        while True:
            proc.stdin.write(b"x" * 65536)  # BrokenPipeError once the process has ended
    threading.Thread(target=feed, daemon=True).start()
    time.sleep(60)

def test_next():
    time.sleep(6)
"""

_BUSY = """
import time

def test_busy():
    end = time.process_time() + 1.5
    while time.process_time() < end:
        pass
"""


def _pytest(tmp_path: Path, source: str, **env: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "pytest.ini").write_text("[pytest]\nfilterwarnings = error\n")
    (tmp_path / "test_it.py").write_text(source)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "tests.conftest", "-p", "no:randomly", "-p", "no:cacheprovider",
         "-c", str(tmp_path / "pytest.ini"), "--rootdir", str(tmp_path), str(tmp_path / "test_it.py")],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), **env}, capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip


# Both tests here are slow: each nested pytest usually does 2 to 3 CPU seconds, but now and then 10 to 28
# (twice in five runs of this one here, idle; once in CI for the budget test; never in 40 runs of the nested
# pytest alone), past make test's 20 s budget, and where it goes is not found yet. make test-slow runs them,
# with no budget, so the budget is still proven in every CI run.
@pytest.mark.slow
def test_a_timed_out_test_leaves_nothing_that_fails_the_next_one(tmp_path: Path) -> None:
    proc = _pytest(tmp_path, _LEAKY)
    assert "Timeout" in proc.stdout, proc.stdout
    assert "2 failed, 1 passed" in proc.stdout, proc.stdout
    assert "ResourceWarning" not in proc.stdout + proc.stderr


@pytest.mark.slow
def test_a_fast_test_over_its_cpu_budget_fails_the_run(tmp_path: Path) -> None:
    proc = _pytest(tmp_path, _BUSY, JOBSTATE_TEST_CPU_BUDGET="1")
    assert proc.returncode == 1, proc.stdout
    assert "1 passed" in proc.stdout
    assert "test_busy: 1." in proc.stdout
    assert "over the 1 s of a fast test" in proc.stdout
