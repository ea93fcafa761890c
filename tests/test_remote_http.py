"""Hosts allocating through a real smart-HTTP Git server (git http-backend behind basic auth).

The remote never hangs (a frozen server, an askpass that never answers: exit 3 within the
deadline) and never guesses (a push whose answer was lost is exit 10, "outcome unknown", and the
next command finds the allocation).
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobstate.core.layout import episode_dir

from .conftest import git, run_cli, status
from .httpgit import HttpGit, ServerProcess
from .test_transaction_remote import _check_remote, allocate_together, make_hosts

WEEK = "2026-W32"
UNKNOWN = "outcome unknown: the change may be on the remote; run the same command again to find out"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[HttpGit]:
    """The HTTP server, serving tmp_path (the hosts' bare remote is tmp_path/remote.git)."""
    srv = HttpGit(tmp_path)
    srv.start()
    try:
        yield srv
    finally:
        srv.kill()


def hosts_through(tmp_path: Path, hosts: int, url: str, login: tuple[str, str]) -> tuple[Path, list[Path]]:
    """``hosts`` clones of the bare remote tmp_path/remote.git, reached at ``url``, logged in by one git setting."""
    bare, clones = make_hosts(tmp_path, hosts)
    for clone in clones:
        git(clone, "remote", "set-url", "origin", url)
        git(clone, "config", *login)
    return bare, clones


def http_hosts(tmp_path: Path, server: HttpGit, hosts: int) -> tuple[Path, list[Path]]:
    """Clones whose origin is the HTTP server, logged in with http.extraHeader (as in CI)."""
    return hosts_through(tmp_path, hosts, f"{server.url}/remote.git", ("http.extraHeader", server.auth_header()))


def allocate(clone: Path, key: str, *extra: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli("allocate", "--key", key, "--week", WEEK, *extra, cwd=clone, env=env, process=True)


def assert_nothing_left(clone: Path) -> None:
    """Nothing the next command would have to clean: a clean work tree, no marker of an interrupted change."""
    assert status(clone) == ""
    assert not (clone / ".jobstate" / "pending.json").exists()
    assert not (clone / ".jobstate" / "undo.json").exists()
    assert not list((clone / ".git" / "refs").glob("**/*.lock"))


def on_remote(bare: Path) -> list[str]:
    return sorted(p for p in git(bare, "ls-tree", "-r", "--name-only", "main", "state").split() if "episode" in p)


def hosts_take_turns(bare: Path, clones: list[Path]) -> None:
    """Two hosts allocate a key each, and a retry on the other host finds the first one's episode."""
    one, two = clones
    first = allocate(one, "a")
    assert first.returncode == 0, first.stderr
    second = allocate(two, "b")
    assert second.returncode == 0, second.stderr
    assert (first.stdout.strip(), second.stdout.strip()) == (f"{WEEK}-0", f"{WEEK}-1")
    assert allocate(two, "a").stdout.strip() == f"{WEEK}-0"  # a retry on the other host finds its episode
    _check_remote(bare, {"a", "b"}, WEEK)


def test_hosts_allocate_through_http_with_basic_auth(tmp_path: Path, server: HttpGit) -> None:
    hosts_take_turns(*http_hosts(tmp_path, server, 2))


def test_wrong_credentials_fail_at_once_with_a_hint(tmp_path: Path, server: HttpGit) -> None:
    _bare, (clone,) = http_hosts(tmp_path, server, 1)
    git(clone, "config", "http.extraHeader", "Authorization: Basic bm9ib2R5Om5vcGU=")
    started = time.monotonic()
    proc = allocate(clone, "k", "--lock-timeout", "30")
    assert proc.returncode == 3, proc.stderr
    assert time.monotonic() - started < 20
    assert "origin" in proc.stderr
    assert "docs/git-setups.md" in proc.stderr
    assert "nothing was changed" in proc.stderr
    assert_nothing_left(clone)


def test_an_askpass_that_never_answers_cannot_hang_it(tmp_path: Path, server: HttpGit) -> None:
    _bare, (clone,) = http_hosts(tmp_path, server, 1)
    git(clone, "config", "--unset", "http.extraHeader")  # no credential: git would ask
    asked = tmp_path / "asked"
    hang = tmp_path / "askpass"
    hang.write_text(f"#!/bin/sh\ntouch {asked}\nsleep 600\n")
    hang.chmod(0o755)
    git(clone, "config", "core.askPass", str(hang))
    env = {"GIT_ASKPASS": str(hang), "SSH_ASKPASS": str(hang), "SSH_ASKPASS_REQUIRE": "force", "DISPLAY": ":0"}
    started = time.monotonic()
    proc = allocate(clone, "k", "--lock-timeout", "30", env=env)
    assert proc.returncode == 3, proc.stderr
    assert time.monotonic() - started < 20  # not the deadline: git fails at once, asking nobody
    assert not asked.exists()
    assert "could not read Username" in proc.stderr
    assert "docs/git-setups.md" in proc.stderr
    assert_nothing_left(clone)


def allocate_while_frozen(server: ServerProcess, clone: Path) -> subprocess.CompletedProcess[str]:
    """An allocation with a 2 s deadline against a frozen server: it returns, with exit 3, and leaves nothing."""
    with server.frozen():
        started = time.monotonic()
        proc = allocate(clone, "k", "--lock-timeout", "2")
        took = time.monotonic() - started
    assert proc.returncode == 3, proc.stderr
    assert took < 2 + 20, took  # generous: the point is that it returns at all
    assert_nothing_left(clone)
    return proc


@pytest.mark.parametrize("first_call", ["push", "fetch"])
def test_a_frozen_server_is_exit_3_within_the_deadline(tmp_path: Path, server: HttpGit, first_call: str) -> None:
    bare, (clone,) = http_hosts(tmp_path, server, 1)
    if first_call == "fetch":  # the clone's view of the remote is stale: it fetches before deciding
        git(clone, "update-ref", "refs/remotes/origin/main", "HEAD~1")
    proc = allocate_while_frozen(server, clone)
    assert "timed out after 2 s" in proc.stderr
    assert f"origin ({server.url}/remote.git)" in proc.stderr
    assert ("push to" if first_call == "push" else "fetch of main from") in proc.stderr
    assert_nothing_left(clone)
    again = allocate(clone, "k")  # the server is back: nothing to clean, the key is allocated once
    assert again.returncode == 0, again.stderr
    assert on_remote(bare) == [f"{episode_dir(WEEK + '-0')}/episode.yaml"]


def test_remote_timeout_in_jobstate_yaml_bounds_the_network(tmp_path: Path, server: HttpGit) -> None:
    _bare, (clone,) = http_hosts(tmp_path, server, 1)
    (clone / "jobstate.yaml").write_text("remote: origin\nlock_timeout: 600\nremote_timeout: 1\n")
    git(clone, "commit", "-qam", "bound the remote to 1 s")
    git(clone, "-c", f"http.extraHeader={server.auth_header()}", "push", "-q", "origin", "main")
    with server.frozen():
        proc = allocate(clone, "k")
    assert proc.returncode == 3, proc.stderr
    assert "timed out after 1 s" in proc.stderr
    assert_nothing_left(clone)


def test_a_refusing_hook_is_quoted_and_nothing_changes(tmp_path: Path, server: HttpGit) -> None:
    bare, (clone,) = http_hosts(tmp_path, server, 1)
    hook = bare / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\nprintf 'protected branch: main is frozen \\033[31m\\n' >&2\nexit 1\n")
    hook.chmod(0o755)
    head = git(clone, "rev-parse", "HEAD")
    proc = allocate(clone, "k")
    assert proc.returncode == 3, proc.stderr
    assert "refused the push" in proc.stderr
    assert "pre-receive hook declined" in proc.stderr
    assert "protected branch: main is frozen \\x1b[31m" in proc.stderr  # the reason, its escape made inert
    assert "\x1b" not in proc.stderr
    assert git(clone, "rev-parse", "HEAD") == head
    assert_nothing_left(clone)


@pytest.mark.parametrize("how", ["reset", "empty"])
def test_a_lost_answer_is_outcome_unknown_and_the_next_command_settles_it(
    tmp_path: Path, server: HttpGit, how: str
) -> None:
    bare, (one, two) = http_hosts(tmp_path, server, 2)
    (tmp_path / "lose-answer").write_text(how)
    proc = allocate(one, "k")
    assert proc.returncode == 10, proc.stderr
    assert UNKNOWN in proc.stderr
    assert "nothing was changed" not in proc.stderr
    assert on_remote(bare) == [f"{episode_dir(WEEK + '-0')}/episode.yaml"]  # it did land
    assert_nothing_left(one)  # the work tree is as before: the next command fetches and advances it
    assert allocate(two, "other").stdout.strip() == f"{WEEK}-1"
    again = allocate(one, "k", "--json")
    assert again.returncode == 0, again.stderr
    assert '"episode_id": "2026-W32-0"' in again.stdout
    assert (one / episode_dir(f"{WEEK}-0") / "episode.yaml").is_file()
    assert git(one, "rev-parse", "HEAD") == git(bare, "rev-parse", "main")
    assert_nothing_left(one)
    _check_remote(bare, {"k", "other"}, WEEK)


# many hosts pushing through a real HTTP server, or a push waiting out a slow server's timeout
@pytest.mark.timeout(600)
@pytest.mark.slow
def test_a_push_sent_to_a_server_that_answers_too_late_is_outcome_unknown(tmp_path: Path, server: HttpGit) -> None:
    bare, (clone,) = http_hosts(tmp_path, server, 1)
    hook = bare / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\nsleep 4\n")  # the server takes the push, but answers after the deadline
    hook.chmod(0o755)
    proc = allocate(clone, "k", "--lock-timeout", "1")
    assert proc.returncode == 10, proc.stderr
    assert UNKNOWN in proc.stderr
    assert "timed out after 1 s" in proc.stderr
    assert_nothing_left(clone)
    hook.unlink()
    deadline = time.monotonic() + 30
    while not on_remote(bare) and time.monotonic() < deadline:  # the server's hook finishes by itself
        time.sleep(0.2)
    again = allocate(clone, "k")
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == f"{WEEK}-0"
    assert_nothing_left(clone)


# many hosts pushing through a real HTTP server, or a push waiting out a slow server's timeout
@pytest.mark.timeout(600)
@pytest.mark.slow
def test_parallel_hosts_over_http_are_gap_free(tmp_path: Path, server: HttpGit) -> None:
    bare, clones = http_hosts(tmp_path, server, 4)
    keys, _by_key = allocate_together(tmp_path, clones, 3, 8)  # 8 keys over 12 processes
    _check_remote(bare, keys, WEEK)


def _allocate_until_answered(clone: Path, keys: list[str], answers: dict[str, set[str]], lock: threading.Lock) -> None:
    """Allocate each key, running the same command again after exit 3 or 10, as a scheduler's retry would."""
    for key in keys:
        for _try in range(60):
            proc = allocate(clone, key, "--lock-timeout", "5")
            if proc.returncode == 0:
                with lock:
                    answers.setdefault(key, set()).add(proc.stdout.strip())
                break
            assert proc.returncode in (3, 10), proc.stderr
            if proc.returncode == 10:
                assert UNKNOWN in proc.stderr
            time.sleep(0.2)
        else:
            raise AssertionError(f"{key} was never allocated")


# many hosts pushing through a real HTTP server, or a push waiting out a slow server's timeout
@pytest.mark.timeout(600)
@pytest.mark.slow
def test_refusals_and_a_killed_server_lose_nothing(tmp_path: Path, server: HttpGit) -> None:
    bare, clones = http_hosts(tmp_path, server, 3)
    hook = bare / "hooks" / "pre-receive"  # refuses about one push in four
    hook.write_text(
        "#!/bin/sh\nif [ $(( $(od -An -N1 -tu1 /dev/urandom) % 4 )) = 0 ]; then\n"
        "  echo 'refused at random' >&2; exit 1\nfi\n"
    )
    hook.chmod(0o755)
    answers: dict[str, set[str]] = {}
    lock = threading.Lock()
    keys = [f"job:{i}" for i in range(5)]
    threads = [
        threading.Thread(target=_allocate_until_answered, args=(clone, keys[h:] + keys[:h], answers, lock))
        for h, clone in enumerate(clones)
    ]
    for t in threads:
        t.start()
    time.sleep(3)
    server.kill()  # mid-run: hosts see a dead server, then a new one on the same port
    time.sleep(1)
    server.start()
    for t in threads:
        t.join(timeout=600)
    assert set(answers) == set(keys)
    assert all(len(ids) == 1 for ids in answers.values()), answers  # every retry got its episode
    hook.unlink()
    _check_remote(bare, set(keys), WEEK)
    for clone in clones:
        assert allocate(clone, keys[0]).returncode == 0
        assert_nothing_left(clone)
