"""Hosts allocating through Git over ssh (OpenSSH on 127.0.0.1): keys only, never a prompt, never a hang."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobstate.core.layout import episode_dir

from .conftest import git
from .sshgit import SshGit, sshd_missing
from .test_remote_http import (
    WEEK,
    allocate,
    allocate_while_frozen,
    assert_nothing_left,
    hosts_take_turns,
    hosts_through,
)

pytestmark = pytest.mark.skipif(sshd_missing() is not None, reason=sshd_missing() or "")


@pytest.fixture
def sshd(tmp_path: Path) -> Iterator[SshGit]:
    server = SshGit(tmp_path / "sshd")
    try:
        server.start()
    except RuntimeError as exc:
        server.kill()
        pytest.skip(f"sshd cannot run here: {exc}")
    yield server
    server.kill()


def ssh_hosts(tmp_path: Path, sshd: SshGit, hosts: int) -> tuple[Path, list[Path]]:
    """Clones whose origin is the ssh URL of the bare remote, each with the client key in core.sshCommand."""
    return hosts_through(tmp_path, hosts, sshd.url(tmp_path / "remote.git"), ("core.sshCommand", sshd.ssh_command()))


def test_hosts_allocate_over_ssh_with_a_key(tmp_path: Path, sshd: SshGit) -> None:
    hosts_take_turns(*ssh_hosts(tmp_path, sshd, 2))


def test_a_key_with_a_passphrase_and_a_hanging_askpass_fails_at_once(tmp_path: Path, sshd: SshGit) -> None:
    _bare, (clone,) = ssh_hosts(tmp_path, sshd, 1)
    locked_key = tmp_path / "locked_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "passphrase", "-f", str(locked_key)], check=True)
    git(clone, "config", "core.sshCommand", sshd.ssh_command(locked_key))
    asked = tmp_path / "asked"
    hang = tmp_path / "askpass"
    hang.write_text(f"#!/bin/sh\ntouch {asked}\nsleep 600\n")
    hang.chmod(0o755)
    env = {"SSH_ASKPASS": str(hang), "SSH_ASKPASS_REQUIRE": "force", "DISPLAY": ":0", "GIT_ASKPASS": str(hang)}
    started = time.monotonic()
    proc = allocate(clone, "k", "--lock-timeout", "30", env=env)
    assert proc.returncode == 3, proc.stderr
    assert time.monotonic() - started < 20  # BatchMode: ssh asks nobody, so no deadline is needed
    assert not asked.exists()
    assert "Permission denied (publickey" in proc.stderr
    assert "docs/git-setups.md" in proc.stderr
    assert_nothing_left(clone)


def test_a_frozen_sshd_is_exit_3_within_the_deadline(tmp_path: Path, sshd: SshGit) -> None:
    bare, (clone,) = ssh_hosts(tmp_path, sshd, 1)
    proc = allocate_while_frozen(sshd, clone)
    assert "origin (ssh://127.0.0.1:" in proc.stderr  # the user name is not repeated in messages
    again = allocate(clone, "k")
    assert again.returncode == 0, again.stderr
    assert git(bare, "ls-tree", "-r", "--name-only", "main", episode_dir(f"{WEEK}-0"))
