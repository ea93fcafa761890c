"""A smart-HTTP Git server on 127.0.0.1: ``git http-backend`` run as CGI behind HTTP basic auth.

The way GitHub, GitLab and Gitea serve a repository, small enough to start per test. Run as a
process of its own (``python tests/httpgit.py ROOT PORTFILE USER PASSWORD [PORT]``), so that a
test can freeze it (SIGSTOP), kill it and start it again on the same port.

One-shot faults, switched on by a file in ROOT while the server runs:

- ``lose-answer`` holding ``reset`` or ``empty``: the next push is run to its end (it lands),
  then the connection is reset, or closed with no reply, before git hears the answer.
"""

from __future__ import annotations

import base64
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class _GitHandler(BaseHTTPRequestHandler):
    server: _GitServer

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass  # quiet: the test's output is what matters

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _serve(self) -> None:
        expected = "Basic " + base64.b64encode(self.server.credentials.encode()).decode()
        if self.headers.get("Authorization") != expected:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="git"')
            self.end_headers()
            return
        path, _, query = self.path.partition("?")
        body = self._body() if self.command == "POST" else b""
        env = {
            **os.environ,
            "GIT_PROJECT_ROOT": str(self.server.root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "REQUEST_METHOD": self.command,
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_USER": self.server.credentials.split(":", 1)[0],
            "REMOTE_ADDR": self.client_address[0],
        }
        for header in ("Content-Encoding", "Git-Protocol"):
            if self.headers.get(header):
                env["HTTP_" + header.upper().replace("-", "_")] = self.headers[header]
        proc = subprocess.run(["git", "http-backend"], input=body, capture_output=True, env=env, check=False)
        if self.command == "POST" and path.endswith("/git-receive-pack") and self._lose_answer():
            return
        head, _, payload = proc.stdout.partition(b"\r\n\r\n")
        if not _:
            head, _, payload = proc.stdout.partition(b"\n\n")
        status = 200
        headers = []
        for line in head.decode("latin-1").splitlines():
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.split()[0])
            elif name:
                headers.append((name, value.strip()))
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)

    def _lose_answer(self) -> bool:
        switch = self.server.root / "lose-answer"
        try:
            how = switch.read_text().strip()
        except FileNotFoundError:
            return False
        switch.unlink()
        if how == "reset":  # RST instead of FIN: git sees "connection reset by peer"
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
        self.close_connection = True  # and nothing of the answer was written
        return True


class _GitServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, port: int, root: Path, credentials: str) -> None:
        super().__init__(("127.0.0.1", port), _GitHandler)
        self.root = root
        self.credentials = credentials


class ServerProcess:
    """A server run as a child process, which a test can freeze and kill."""

    proc: subprocess.Popen[bytes] | None

    def kill(self) -> None:
        """SIGKILL, as a crashed server (stopped or not), and reap it."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait()

    @contextmanager
    def frozen(self) -> Iterator[None]:
        """SIGSTOP the server for the block: the kernel still accepts connections, and nothing is said."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)
        try:
            yield
        finally:
            with suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGCONT)


@dataclass
class HttpGit(ServerProcess):
    """A running server: its process, port, base URL (no credentials in it) and credentials; ``kill``
    it and ``start`` brings it back on the same port."""

    root: Path
    user: str = "ci"
    password: str = "s3cret"
    port: int = 0
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def auth_header(self) -> str:
        """The ``http.extraHeader`` value that logs in, as CI passes a token."""
        return "Authorization: Basic " + base64.b64encode(f"{self.user}:{self.password}".encode()).decode()

    def start(self) -> None:
        portfile = self.root / "port"
        portfile.unlink(missing_ok=True)
        self.proc = subprocess.Popen(
            [sys.executable, __file__, str(self.root), str(portfile), self.user, self.password, str(self.port)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 15
        while not portfile.exists() or not portfile.read_text().strip():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the HTTP git server did not start")
            time.sleep(0.02)
        self.port = int(portfile.read_text())


def _serve(root: str, portfile: str, user: str, password: str, port: str = "0") -> None:
    server = _GitServer(int(port), Path(root), f"{user}:{password}")
    tmp = Path(portfile + ".tmp")
    tmp.write_text(str(server.server_address[1]))
    tmp.replace(portfile)
    server.serve_forever()


if __name__ == "__main__":
    _serve(*sys.argv[1:])
