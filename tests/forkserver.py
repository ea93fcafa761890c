"""A Python with jobstate already imported that forks a fresh process for each command (the crash sweep's).

Most of what one kill point costs is interpreter start-up and imports, paid again by every jobstate process it
starts: the hooked command, the operator's retries. The sweep runs thousands of them, so it asks this server
instead of ``python -c``. Each command is still a process of its own, in a session of its own, with its own
environment, working directory and output files, killed for real by SIGKILL and ended by a normal interpreter
exit (atexit, finalizers); only the imports are inherited, done once before any command ran.

The server never runs a command itself and stays single-threaded: for each request it forks a manager that forks
the command, sends its process ID (the session to wait for), then its wait status.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

_SERVER = r"""
import json, os, pkgutil, signal, socket, sys
import jobstate, jobstate_demo.vendor_sim
for info in pkgutil.walk_packages(jobstate.__path__, "jobstate."):
    if not info.name.endswith("__main__"):
        __import__(info.name)
signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # managers are reaped by the kernel
listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
listener.bind(sys.argv[1])
listener.listen(64)
os.write(1, b"ready\n")
os.close(1)
while True:
    conn, _ = listener.accept()
    data, fds, _flags, _addr = socket.recv_fds(conn, 1 << 20, 3)
    if os.fork():
        conn.close()
        for fd in fds:
            os.close(fd)
        continue
    # the manager: fork the command, report its pid, then how it ended
    listener.close()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    request = json.loads(data)
    pid = os.fork()
    if pid == 0:
        conn.close()
        os.setsid()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.dont_write_bytecode = True
        sys.argv = request["argv"]
        exec(compile(request["code"], "<command>", "exec"), {"__name__": "__main__"})
        sys.exit(0)
    for fd in fds:
        os.close(fd)
    conn.sendall(b"%d\n" % pid)
    _pid, status = os.waitpid(pid, 0)
    conn.sendall(b"%d\n" % os.waitstatus_to_exitcode(status))
    conn.close()
    os._exit(0)
"""

JOBSTATE = "import sys\nfrom jobstate.main import main\nsys.exit(main(sys.argv[1:]))\n"


@dataclass
class Started:
    """A command the server started: its pid (and session), and the files holding its stdout and stderr."""

    conn: socket.socket
    reader: BinaryIO
    pid: int
    out_dir: Path

    def wait(self) -> int:
        """The exit code (-N when signal N ended it)."""
        with self.conn, self.reader:
            line = self.reader.readline()
        if not line:
            raise RuntimeError("the fork server's manager ended without an answer")
        return int(line)

    def output(self) -> tuple[str, str]:
        """stdout and stderr, once the whole session is gone; the files are removed."""
        out = (self.out_dir / "out").read_text(encoding="utf-8", errors="replace")
        err = (self.out_dir / "err").read_text(encoding="utf-8", errors="replace")
        shutil.rmtree(self.out_dir)
        return out, err


class ForkServer:
    """One server process; ``run`` may be called from several threads at once."""

    def __init__(self) -> None:
        self._dir = tempfile.mkdtemp(prefix="jobstate-fork-")
        self._path = os.path.join(self._dir, "s")
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _SERVER, self._path], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env
        )
        assert self._proc.stdout is not None
        if self._proc.stdout.readline() != b"ready\n":
            raise RuntimeError("the fork server did not start")
        self._proc.stdout.close()

    def start(self, code: str, argv: list[str], cwd: Path, env: dict[str, str]) -> Started:
        """Start ``code`` as a process of its own, in a session of its own."""
        out_dir = Path(tempfile.mkdtemp(prefix="cmd-", dir=self._dir))
        with open(out_dir / "out", "wb") as out, open(out_dir / "err", "wb") as err, open(os.devnull, "rb") as null:
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            conn.settimeout(180)
            conn.connect(self._path)
            payload = json.dumps({"code": code, "argv": argv, "cwd": str(cwd), "env": env}).encode()
            socket.send_fds(conn, [payload], [null.fileno(), out.fileno(), err.fileno()])
        started = Started(conn, conn.makefile("rb"), 0, out_dir)
        started.pid = int(started.reader.readline())
        return started

    def close(self) -> None:
        self._proc.send_signal(signal.SIGTERM)
        self._proc.wait(timeout=30)
        shutil.rmtree(self._dir, ignore_errors=True)
