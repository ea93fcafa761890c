"""make test-loaded: a command (make test) run while busy loops keep every core busy, and the load it ran under.

    python tests/under_load.py [--loops N] -- COMMAND...

The loops are processes of their own that stop when the command ends, however it ends: on exit, on a signal,
and by themselves within a second when this process dies (killed -9, they see their parent change). What they
used is measured, not assumed: each loop's CPU seconds (its rusage when reaped) over the command's wall time.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time

_LOOP = """
import os, sys
parent = int(sys.argv[1])
while os.getppid() == parent:
    for _ in range(200_000):
        pass
"""


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loops", type=int, default=len(os.sched_getaffinity(0)), help="busy loops (default: cores)")
    parser.add_argument("command", nargs="+")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # through the finally below
    print(f"under load: {args.loops} busy loops on {len(os.sched_getaffinity(0))} cores; load average {_load()}")
    loops = [subprocess.Popen([sys.executable, "-c", _LOOP, str(os.getpid())]) for _ in range(args.loops)]
    started = time.monotonic()
    code = 1
    try:
        code = subprocess.run(args.command, check=False).returncode
    finally:
        wall = time.monotonic() - started
        busy = 0.0
        for loop in loops:
            loop.kill()
            _pid, _status, usage = os.wait4(loop.pid, 0)
            loop.returncode = -9  # reaped here, with its rusage
            busy += usage.ru_utime + usage.ru_stime
        print(
            f"under load: {' '.join(args.command)} exited {code} after {wall:.0f} s while {args.loops} busy loops "
            f"used {busy:.0f} CPU seconds ({busy / max(wall, 1e-9):.2f} cores kept busy); load average {_load()}"
        )
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
