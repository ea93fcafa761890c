"""Helpers that start real jobstate processes together."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

# imports jobstate, says it is ready, waits for the start file, then runs the CLI: every process
# starts deciding at once, however slowly the machine started them
_GATED = """
import os, sys, time
gate, ready = sys.argv[1], sys.argv[2]
from jobstate.main import main
with open(ready, "w"):
    pass
while not os.path.exists(gate):
    time.sleep(0.001)
raise SystemExit(main(sys.argv[3:]))
"""


def run_together(
    cwd: Path | list[Path], arglists: list[list[str]], gate: Path, timeout: float = 120
) -> list[tuple[int, str, str]]:
    """Start one process per argument list (in ``cwd``, or the matching one of a list of
    directories), wait until every one is ready, open the gate, and collect (code, stdout, stderr)."""
    cwds = cwd if isinstance(cwd, list) else [cwd] * len(arglists)
    readies = [gate.with_name(f"{gate.name}.ready-{i}") for i in range(len(arglists))]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _GATED, str(gate), str(ready), *args],
            cwd=where,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ),
        )
        for args, ready, where in zip(arglists, readies, cwds, strict=True)
    ]
    try:
        wait_until_ready(procs, readies, timeout)
    except BaseException:
        for p in procs:
            p.kill()
            p.communicate()
        raise
    gate.write_text("go")
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=timeout)
        out.append((p.returncode, stdout, stderr))
    return out


def wait_until_ready(procs: list[subprocess.Popen[str]], readies: list[Path], timeout: float) -> None:
    """The start barrier: return once every process has written its ready file; a process that
    exits before it is ready is a failure of the test, not a process quietly left out of the race."""
    deadline = time.monotonic() + timeout
    while not all(r.exists() for r in readies):
        for p, r in zip(procs, readies, strict=True):
            if p.poll() is not None and not r.exists():
                raise AssertionError(f"a process exited with {p.returncode} before the start: {p.args!r}")
        if time.monotonic() > deadline:
            raise AssertionError(f"the processes were not all ready after {timeout} s")
        time.sleep(0.005)


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
