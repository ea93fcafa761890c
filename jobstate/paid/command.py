"""CMD as jobstate's child: it runs in its own session and inherits the step lock, so killed jobstate
or not, the step counts as running while the command lives; SIGTERM, SIGINT and SIGHUP that reach
jobstate are passed on to the command's process group, and jobstate waits for it to end.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import threading
from collections.abc import Sequence

from jobstate.paid.step import PaidStep

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def run_command(step: PaidStep, command: Sequence[str], env: dict[str, str]) -> int:
    """Run CMD to its end; its return code (negative: the signal that killed it).

    CMD gets its own session (a signal meant for jobstate's group does not reach it twice) and the
    step lock's descriptor: flock locks belong to the open file description, so the step stays locked
    while CMD lives, even after jobstate is killed. Signals jobstate receives meanwhile go to CMD's
    group; jobstate waits for CMD to end, so what CMD reports on its way out is recorded.
    """
    lock = step.lock
    started: list[subprocess.Popen[bytes]] = []
    early: list[int] = []

    def forward(signum: int, _frame: object) -> None:
        if not started:
            early.append(signum)  # before CMD exists: passed on as soon as it does
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(started[0].pid, signum)

    main_thread = threading.current_thread() is threading.main_thread()  # handlers only exist there
    previous = {sig: signal.signal(sig, forward) for sig in FORWARDED} if main_thread else {}
    try:
        proc = subprocess.Popen(
            list(command), env=env, start_new_session=True, pass_fds=() if lock is None else (lock.fileno(),)
        )
        started.append(proc)
        if lock is not None:
            lock.note(cmd_pid=proc.pid, cmd=shlex.join(command)[:500])
        for signum in early:
            forward(signum, None)
        returncode = proc.wait()
        if lock is not None:
            lock.note(cmd_pid=None, cmd=None)  # ended: jobstate alone holds the lock while it records
        return returncode
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
