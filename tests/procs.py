"""Helpers that start real jobstate processes together."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

# waits for a start file, then runs the CLI: every process starts deciding at once
_GATED = """
import os, sys, time
gate = sys.argv[1]
while not os.path.exists(gate):
    time.sleep(0.001)
from jobstate.main import main
raise SystemExit(main(sys.argv[2:]))
"""


def run_together(
    cwd: Path | list[Path], arglists: list[list[str]], gate: Path, timeout: float = 120
) -> list[tuple[int, str, str]]:
    """Start one process per argument list (in ``cwd``, or the matching one of a list of
    directories), open the gate, and collect (code, stdout, stderr)."""
    cwds = cwd if isinstance(cwd, list) else [cwd] * len(arglists)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _GATED, str(gate), *args],
            cwd=where,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ),
        )
        for args, where in zip(arglists, cwds, strict=True)
    ]
    time.sleep(0.5)  # let every interpreter finish starting
    gate.write_text("go")
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=timeout)
        out.append((p.returncode, stdout, stderr))
    return out


def parse_json_lines(results: list[tuple[int, str, str]]) -> list[dict[str, object]]:
    """The --json answers, asserting every process succeeded."""
    for code, _out, err in results:
        assert code == 0, err
    return [json.loads(out) for _code, out, _err in results]


def wait_until_exited(pid: int, timeout: float = 60) -> None:
    """Wait for a process that is not our child (an orphaned CMD) to exit: gone, or a zombie, whose
    descriptors (and so the step lock it inherited) the kernel has released already."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return
        if stat.rpartition(")")[2].split()[0] == "Z":
            return
        time.sleep(0.02)
    raise AssertionError(f"process {pid} still runs after {timeout:g}s")
