"""An OpenSSH server on 127.0.0.1 for Git over ssh: its own host key, one authorized client key.

Needs Debian's openssh-server (``/usr/sbin/sshd``; .ci/run installs it when missing); without it,
or when sshd cannot start here, the tests that use it are skipped with the reason.
"""

from __future__ import annotations

import getpass
import shlex
import shutil
import socket
import subprocess
import time
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

from .httpgit import ServerProcess

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


def sshd_missing() -> str | None:
    """Why ssh tests cannot run here, or None."""
    if not Path(SSHD).is_file() or shutil.which("ssh-keygen") is None:
        return "sshd is not installed (Debian's openssh-server; .ci/run installs it)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class SshGit(ServerProcess):
    """A running sshd, and the client side: a key, a known_hosts file, the ssh command that uses them."""

    root: Path
    port: int = 0
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def key(self) -> Path:
        return self.root / "client_key"

    def url(self, path: Path) -> str:
        return f"ssh://{getpass.getuser()}@127.0.0.1:{self.port}{path}"

    def ssh_command(self, key: Path | None = None) -> str:
        """core.sshCommand for a host: this key and known_hosts only, no user ssh configuration."""
        return (
            f"ssh -F /dev/null -i {shlex.quote(str(key or self.key))} -o IdentitiesOnly=yes "
            f"-o UserKnownHostsFile={shlex.quote(str(self.root / 'known_hosts'))}"
        )

    def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        host_key = self.root / "host_key"
        if not host_key.exists():
            for key in (host_key, self.key):
                subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
            (self.root / "authorized_keys").write_text((self.root / "client_key.pub").read_text())
        self.port = self.port or _free_port()
        public = (self.root / "host_key.pub").read_text().split()
        (self.root / "known_hosts").write_text(f"[127.0.0.1]:{self.port} {public[0]} {public[1]}\n")
        config = self.root / "sshd_config"
        config.write_text(
            f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {host_key}\nPidFile {self.root / 'sshd.pid'}\n"
            f"AuthorizedKeysFile {self.root / 'authorized_keys'}\nStrictModes no\nUsePAM no\n"
            "PasswordAuthentication no\nKbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n"
            "AcceptEnv GIT_PROTOCOL\n"
        )
        with suppress(OSError):
            Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege separation directory
        with (self.root / "sshd.log").open("ab") as log:
            self.proc = subprocess.Popen(
                [SSHD, "-D", "-e", "-f", str(config)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log
            )
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"sshd did not start: {(self.root / 'sshd.log').read_text()[-500:]}") from None
                time.sleep(0.05)
