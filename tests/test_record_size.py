"""Bounded resources in review (issue 29, point 4): a record is size-checked from its Git object header
before it is read, so a pull request with a huge costs.yaml cannot exhaust the runner that reviews it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from jobstate.core.layout import episode_dir

from .conftest import git
from .merges import EID, cli, merge_pr

HUGE = 96 * 1024 * 1024

# VmHWM, not ru_maxrss: the latter keeps the forking parent's peak across exec
_PEAK = """
import re, sys
from jobstate.main import main
code = main(sys.argv[1:])
status = open("/proc/self/status").read()
print(code, int(re.search(r"VmHWM:\\s+(\\d+)", status)[1]) // 1024)
"""


def _peak(repo: Path, *args: str) -> tuple[int, int, str]:
    proc = subprocess.run(
        [sys.executable, "-c", _PEAK, "--repo", str(repo), *args], capture_output=True, text=True, check=False
    )
    code, mib = proc.stdout.split()[-2:]
    return int(code), int(mib), proc.stderr + proc.stdout


def test_a_huge_record_in_a_pull_request_is_refused_unread_by_diff_and_verify(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli(repo, capsys, "allocate", "--key", "k", "--week", "2026-W32")[0] == 0
    costs = repo / episode_dir(EID) / "costs.yaml"

    def edit() -> None:
        with costs.open("wb") as fh:
            fh.write(b"schema: 1\nentries: []\n# ")
            for _ in range(HUGE // (1 << 20)):
                fh.write(b"x" * (1 << 20))
            fh.write(b"\n")

    merge_pr(repo, edit)
    costs.unlink()  # the work tree is not what review reads
    git(repo, "checkout", "--", ".")
    for args in (("diff", "--strict", "HEAD^1", "HEAD"), ("verify", "--rev", "HEAD")):
        code, mib, out = _peak(repo, *args)
        assert code != 0, out
        assert "over the 4 MiB limit" in out, out
        assert mib < HUGE // (1024 * 1024), (args, mib)  # never held whole


def test_many_records_near_the_limit_are_read_one_at_a_time_past_a_small_read_ahead(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each file under the limit, together far over it: review reads ahead a bounded amount, never the lot."""
    assert cli(repo, capsys, "allocate", "--key", "k", "--week", "2026-W32")[0] == 0
    count, size = 40, 3 * 1024 * 1024  # 120 MiB in all, every file under the 4 MiB limit

    def edit() -> None:
        for n in range(count):
            with (repo / episode_dir(EID) / f"notes-{n}.yaml").open("wb") as fh:
                fh.write(b"# %d\n# " % n + b"x" * size + b"\n")  # distinct blobs: none shared in memory

    merge_pr(repo, edit)
    code, mib, out = _peak(repo, "verify", "--rev", "HEAD", "--strict")
    assert code == 1, out
    assert "notes-39.yaml: error: file is not a jobstate record" in out
    assert mib < 72, (mib, out)  # the interpreter, the 16 MiB read ahead and a record; not 120 MiB
