"""The Makefile's pipeline targets, run by real make against a real repo and the simulator."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from jobstate.core.layout import history_path
from jobstate_demo.vendor_sim import VendorSimulator

from .conftest import status

ROOT = Path(__file__).resolve().parent.parent


def _make(target: str, **variables: str) -> subprocess.CompletedProcess[str]:
    bindir = Path(sys.executable).parent
    # -o: never remake the install stamp; a fresh clone's pyproject.toml is newer than any stamp, and a
    # reinstall here would rewrite .venv/bin/jobstate under the tests running beside this one
    stamp = str(bindir / ".installed-by-tests")
    args = ["make", "-s", "-C", str(ROOT), "-o", stamp, target, f"BIN={bindir}", f"STAMP={stamp}"]
    args += [f"{k}={v}" for k, v in variables.items()]
    return subprocess.run(args, capture_output=True, text=True, check=False)


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
# seven make targets, each a jobstate process, one a vendor step
@pytest.mark.timeout(180)
def test_pipeline_targets(repo: Path) -> None:
    if not (Path(sys.executable).parent / "jobstate").exists():
        pytest.skip("the jobstate console script is not installed next to this python")
    with VendorSimulator() as vendor:
        alloc = _make("allocate", REPO=str(repo), KEY="scheduled-run:2026-08-07", DATE="2026-08-07")
        assert alloc.returncode == 0, alloc.stderr
        episode = alloc.stdout.strip()
        assert episode == "2026-W32-0"
        for target, extra in [
            ("generate", {}),
            ("approve", {"BY": "editor", "REJECT": "1", "REASON": "too long"}),
            ("rework", {}),
            ("reassemble", {}),
            ("approve", {"BY": "editor"}),
            ("complete", {}),
        ]:
            proc = _make(target, REPO=str(repo), EPISODE=episode, VENDOR_URL=vendor.url, **extra)
            assert proc.returncode == 0, (target, proc.stderr)
        assert len(vendor.charges()) == 3
    missing = _make("generate", REPO=str(repo))
    assert missing.returncode != 0
    assert "EPISODE is required" in missing.stderr
    assert (repo / history_path(episode)).exists()
    assert status(repo) == ""
