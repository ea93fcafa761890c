"""The settings every network git child gets: the deadline's source, the user's ssh command with
jobstate's options added (never replaced), and what a server says made inert."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from jobstate.git.network import inert, remote_reasons
from jobstate.store.init import init

from .conftest import git, git_init, run_cli, status
from .test_transaction_remote import make_hosts


@pytest.mark.parametrize("value", ["0", "-1", ".nan", "soon", "true", "86401", "[1]"])
def test_a_bad_remote_timeout_is_refused_with_a_clear_error(tmp_path: Path, value: str) -> None:
    repo = tmp_path / "repo"
    git_init(repo)
    init(repo, git_init=True)[0].close()
    (repo / "jobstate.yaml").write_text(f"remote_timeout: {value}\n")
    git(repo, "commit", "-qam", "settings")
    proc = run_cli("allocate", "--key", "k", "--week", "2026-W32", cwd=repo)
    assert proc.returncode == 7, proc.stderr
    assert "remote_timeout must be a number of seconds above 0 and at most 86400" in proc.stderr
    assert status(repo) == ""


def test_a_good_remote_timeout_is_accepted(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    git_init(repo)
    init(repo, git_init=True)[0].close()
    (repo / "jobstate.yaml").write_text("remote_timeout: 2.5\n")
    git(repo, "commit", "-qam", "settings")
    proc = run_cli("allocate", "--key", "k", "--week", "2026-W32", cwd=repo)
    assert proc.returncode == 0, proc.stderr


def _ssh_host(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """A host whose origin is an ssh URL, and a PATH whose ``ssh`` only records its arguments."""
    _bare, (clone,) = make_hosts(tmp_path, 1)
    git(clone, "remote", "set-url", "origin", "ssh://git@127.0.0.1:1/remote.git")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    calls = tmp_path / "calls"
    for name in ("ssh", "wrapper"):
        tool = bindir / name
        tool.write_text(f'#!/bin/sh\necho "{name} $*" >> {calls}\necho "ssh: connect refused" >&2\nexit 255\n')
        tool.chmod(0o755)
    return clone, calls, {"PATH": f"{bindir}:/usr/bin:/bin"}


OURS = "-o BatchMode=yes -o ConnectTimeout=9 -o ServerAliveInterval=3 -o ServerAliveCountMax=3"


@pytest.mark.parametrize(
    ("core", "env_command", "expected"),
    [
        (None, None, f"ssh {OURS} "),
        ("{bin}/ssh -i /keys/deploy -o ConnectTimeout=99", None, f"ssh -i /keys/deploy -o ConnectTimeout=99 {OURS} "),
        ("{bin}/ssh -i /keys/config", "{bin}/ssh -i /keys/env", f"ssh -i /keys/env {OURS} "),
        ("{bin}/wrapper --flag", None, "wrapper --flag "),  # not OpenSSH: left exactly as configured
    ],
)
def test_the_users_ssh_command_is_kept_and_ours_are_added(
    tmp_path: Path, core: str | None, env_command: str | None, expected: str
) -> None:
    clone, calls, env = _ssh_host(tmp_path)
    bindir = shlex.quote(str(tmp_path / "bin"))
    if core:
        git(clone, "config", "core.sshCommand", core.format(bin=bindir))
    if env_command:
        env["GIT_SSH_COMMAND"] = env_command.format(bin=bindir)
    proc = run_cli("allocate", "--key", "k", "--week", "2026-W32", "--lock-timeout", "9", cwd=clone, env=env)
    assert proc.returncode == 3, proc.stderr
    assert "cannot push to origin (ssh://127.0.0.1:1/remote.git)" in proc.stderr  # no user name in messages
    (line,) = calls.read_text().splitlines()
    assert line.startswith(expected), line
    if expected.startswith("wrapper"):
        assert "BatchMode" not in line
    assert status(clone) == ""


def test_what_a_server_says_is_escaped_and_kept_to_one_line() -> None:
    said = "remote: protected\x1b[2J branch\rcarriage\nremote: \nremote: second\u202eline\nerror: failed to push\n"
    quoted = remote_reasons(said)
    assert "\n" not in quoted
    assert "\x1b" not in quoted
    assert "\r" not in quoted
    assert "\\x1b[2J" in quoted
    assert "second\\u202eline" in quoted
    assert "failed to push" not in quoted
    assert inert("tab\there") == "tab\\there"
