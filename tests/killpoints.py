"""Kill a jobstate process at its K-th file or process operation (the deterministic crash sweep of issue 20).

The child is ``python -c KILLER jobstate-args...``: an audit hook installed in that interpreter only (CMD and git,
started by it, are not hooked) counts the operations below and, at the K-th, SIGKILLs its own process before the
operation happens. Every operation before it has happened, so K = 1..K_max visits every state a kill can leave
between two operations. With K = 0 nothing is killed and the list of operations is written to the log at exit:
that run gives K_max and names each operation in a failure message.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from .forkserver import ForkServer

KILL_AT = "JOBSTATE_TEST_KILL_AT"
# (command, mode, K_max, kill points swept, seconds) of every sweep, printed at the end (see conftest.py)
SWEPT: list[tuple[str, str, int, int, float]] = []
SWEEP_ROW = "crash_sweep"  # the user property that carries one row of SWEPT from the test (an xdist worker)
KILL_LOG = "JOBSTATE_TEST_KILL_LOG"
KILL_MATCH = "JOBSTATE_TEST_KILL_MATCH"  # a regex: kill at the first operation whose description matches

# Reads are not counted: between two writes a kill at a read leaves the same files as a kill at the next write.
KILLER = r"""
import json, os, re, signal, sys
_at = int(os.environ.get("JOBSTATE_TEST_KILL_AT", "0"))
_match = os.environ.get("JOBSTATE_TEST_KILL_MATCH", "")
_log = os.environ["JOBSTATE_TEST_KILL_LOG"]
_WRITE = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_EVENTS = {
    "os.rename": "rename", "os.mkdir": "mkdir", "os.remove": "remove", "os.rmdir": "rmdir",
    "os.link": "link", "os.symlink": "symlink", "subprocess.Popen": "popen",
}
_ops = []
_busy = [False]

def _describe(event, args):
    if event == "open":
        path, _mode, flags = args
        if not isinstance(path, (str, bytes, os.PathLike)) or not flags & _WRITE:
            return None
        return "open-write " + os.fsdecode(path)
    name = _EVENTS.get(event)
    if name is None:
        return None
    if name == "popen":
        argv = args[1] if isinstance(args[1], (list, tuple)) else [args[1]]
        return "popen " + " ".join(os.fsdecode(a) if isinstance(a, (str, bytes)) else str(a) for a in argv)[:200]
    if name in ("rename", "link", "symlink"):
        return f"{name} {os.fsdecode(args[0])} -> {os.fsdecode(args[1])}"
    return f"{name} {os.fsdecode(args[0])}"

def _dump(ops, killed):
    _busy[0] = True
    with open(_log, "w", encoding="utf-8") as f:
        json.dump({"ops": ops, "killed": killed}, f)

def _hook(event, args):
    if _busy[0]:
        return
    what = _describe(event, args)
    if what is None:
        return
    _ops.append(what)
    if len(_ops) == _at or (_match and re.search(_match, what)):
        _dump(_ops, True)
        os.kill(os.getpid(), signal.SIGKILL)

sys.dont_write_bytecode = True
sys.addaudithook(_hook)
from jobstate.main import main
try:
    code = main(sys.argv[1:])
finally:
    _dump(_ops, False)
sys.exit(code)
"""


@dataclass(frozen=True)
class Outcome:
    """What one hooked run did: its exit code (-9 when killed), its output and the operations it reached."""

    code: int
    stdout: str
    stderr: str
    ops: list[str]

    @property
    def killed(self) -> bool:
        return self.code == -signal.SIGKILL

    @property
    def last(self) -> str:
        """The operation the kill landed on."""
        return self.ops[-1] if self.ops else "(none)"


def wait_for_group(pgid: int, timeout: float = 60) -> None:
    """Wait until every process of a session is gone: an orphaned CMD finishes, as an operator would let it."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.02)
    os.killpg(pgid, signal.SIGKILL)
    raise AssertionError(f"processes of session {pgid} still ran after {timeout}s")


def run_hooked(
    args: list[str],
    cwd: Path,
    log: Path,
    kill_at: int,
    env: dict[str, str] | None = None,
    *,
    match: str = "",
    server: ForkServer | None = None,
) -> Outcome:
    """``jobstate ARGS`` in its own session, killed at operation ``kill_at`` (0: never) or at the first one
    ``match`` finds; waits for any orphan. With ``server``, the process is forked from it (jobstate imported)."""
    full = {**os.environ, **(env or {}), KILL_AT: str(kill_at), KILL_LOG: str(log), KILL_MATCH: match}
    full["PYTHONDONTWRITEBYTECODE"] = "1"
    log.unlink(missing_ok=True)
    if server is not None:
        started = server.start(KILLER, ["-c", *args], cwd, full)
        code = started.wait()
        wait_for_group(started.pid)
        out, err = started.output()
        ops = json.loads(log.read_text(encoding="utf-8"))["ops"] if log.exists() else []
        return Outcome(code, out, err, ops)
    with subprocess.Popen(
        [sys.executable, "-c", KILLER, *args],
        cwd=cwd,
        env=full,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as proc:
        # an orphaned CMD keeps the pipes open: read them only after the whole session is gone
        code = proc.wait(timeout=120)
        wait_for_group(proc.pid)
        out, err = proc.communicate()
    ops = json.loads(log.read_text(encoding="utf-8"))["ops"] if log.exists() else []
    return Outcome(code, out, err, ops)
