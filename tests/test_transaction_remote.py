"""Several hosts (clones) coordinating through one shared remote, over file:// and git daemon."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobstate.core.layout import episode_dir
from jobstate.store.init import init

from .conftest import both_formats, git, git_init, run_cli, status
from .fakegit import git_on_path
from .procs import parse_json_lines, run_together


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[str]:
    """``git daemon`` on 127.0.0.1 serving tmp_path (push enabled); yields the base URL."""
    port = _free_port()
    proc = subprocess.Popen(
        [
            "git",
            "daemon",
            "--reuseaddr",
            "--export-all",
            "--enable=receive-pack",
            f"--base-path={tmp_path}",
            "--listen=127.0.0.1",
            f"--port={port}",
            str(tmp_path),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    pytest.skip("git daemon could not start here")
                time.sleep(0.05)
        yield f"git://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait()


def make_hosts(
    tmp_path: Path, hosts: int, url: str | None = None, object_format: str = "sha1"
) -> tuple[Path, list[Path]]:
    """A bare remote with an initialized state branch, and ``hosts`` clones of it."""
    bare = tmp_path / "remote.git"
    git_init(bare, object_format, bare=True)
    seed = tmp_path / "seed"
    git_init(seed, object_format)
    store, _ = init(seed, git_init=True)
    store.close()
    (seed / "jobstate.yaml").write_text("period: iso-week\nremote: origin\nlock_timeout: 60\n")
    git(seed, "commit", "-qam", "use the shared remote")
    git(seed, "push", "-q", str(bare), "main")
    clones = []
    for i in range(hosts):
        clone = tmp_path / f"host{i}"
        subprocess.run(["git", "clone", "-q", url or str(bare), str(clone)], check=True, capture_output=True)
        clones.append(clone)
    return bare, clones


def _check_remote(bare: Path, keys: set[str], week: str) -> None:
    assert git(bare, "rev-list", "--merges", "--count", "main").strip() == "0"
    listing = git(bare, "ls-tree", "-r", "--name-only", "main", "state").split()
    ids = sorted(p.split("/")[3] for p in listing if p.endswith("episode.yaml") and f"/{week}-" in p)
    assert sorted(int(i.rsplit("-", 1)[1]) for i in ids) == list(range(len(keys)))
    found: dict[str, str] = {}
    for eid in ids:
        text = git(bare, "show", f"main:{episode_dir(eid)}/episode.yaml")
        key = next(line.split(": ", 1)[1] for line in text.splitlines() if line.startswith("allocation_key"))
        assert key not in found, f"{key} allocated twice: {found[key]} and {eid}"
        found[key] = eid
    assert set(found) == keys
    proc = run_cli("verify", "--rev", "main", "--strict", cwd=bare)
    assert proc.returncode == 0, proc.stdout


def allocate_together(
    tmp_path: Path, clones: list[Path], per_host: int, distinct: int
) -> tuple[set[str], dict[object, set[object]]]:
    """``per_host`` processes on every host allocate at once, over ``distinct`` keys (new and repeated,
    across hosts); the keys, and the episodes each key got, asserted to be one per key."""
    cwds, args, keys = [], [], []
    for h, clone in enumerate(clones):
        for p in range(per_host):
            key = f"run:{(h * per_host + p) % distinct}"
            keys.append(key)
            cwds.append(clone)
            args.append(["allocate", "--key", key, "--week", "2026-W32", "--json"])
    answers = parse_json_lines(run_together(cwds, args, tmp_path / "gate", timeout=300))
    by_key: dict[object, set[object]] = {}
    for a in answers:
        by_key.setdefault(a["allocation_key"], set()).add(a["episode_id"])
    assert all(len(ids) == 1 for ids in by_key.values()), by_key
    return set(keys), by_key


# sixteen processes on four clones pushing to one remote: each loser fetches and decides again; about 10 CPU
# seconds by nature (sixteen interpreters), more than any fast test, so it runs in make test-slow
@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("transport", ["file", "daemon"])
def test_four_hosts_four_processes_each(tmp_path: Path, transport: str, request: pytest.FixtureRequest) -> None:
    url = f"{request.getfixturevalue('daemon')}/remote.git" if transport == "daemon" else None
    bare, clones = make_hosts(tmp_path, 4, url)
    if url is None:
        for c in clones:
            git(c, "remote", "set-url", "origin", f"file://{bare}")
    keys, by_key = allocate_together(tmp_path, clones, 4, 10)  # 10 keys over 16 processes
    _check_remote(bare, keys, "2026-W32")
    for clone in clones:  # every host reaches the same answers and a clean work tree
        for key in sorted(keys):
            again = run_cli("allocate", "--key", key, "--week", "2026-W32", cwd=clone)
            assert again.stdout.strip() == next(iter(by_key[key])), again.stderr
        assert status(clone) == ""


def test_unreachable_remote_is_exit_3_and_nothing_changes(tmp_path: Path) -> None:
    _bare, (clone,) = make_hosts(tmp_path, 1)
    git(clone, "remote", "set-url", "origin", str(tmp_path / "gone.git"))
    head = git(clone, "rev-parse", "HEAD")
    proc = run_cli("allocate", "--key", "k", "--week", "2026-W32", cwd=clone)
    assert proc.returncode == 3
    assert "cannot push to origin" in proc.stderr  # the branch was the remote's last tip: pushed first
    assert git(clone, "rev-parse", "HEAD") == head
    assert status(clone) == ""
    assert not (clone / episode_dir("2026-W32-0")).exists()


def test_push_refused_by_the_remote_is_exit_3_and_undone(tmp_path: Path) -> None:
    bare, (clone,) = make_hosts(tmp_path, 1)
    hook = bare / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'branch is protected' >&2\nexit 1\n")
    hook.chmod(0o755)
    head = git(clone, "rev-parse", "HEAD")
    proc = run_cli("allocate", "--key", "k", "--week", "2026-W32", cwd=clone)
    assert proc.returncode == 3, proc.stderr
    assert git(clone, "rev-parse", "HEAD") == head
    assert status(clone) == ""


def test_local_commits_not_on_the_remote_are_refused(tmp_path: Path) -> None:
    _bare, (clone,) = make_hosts(tmp_path, 1)
    (clone / "notes.txt").write_text("local")
    git(clone, "add", "notes.txt")
    git(clone, "commit", "-qm", "not pushed")
    proc = run_cli("allocate", "--key", "k", "--week", "2026-W32", cwd=clone)
    assert proc.returncode == 2
    assert "not on origin" in proc.stderr


@both_formats
def test_paid_step_records_go_through_the_remote(tmp_path: Path, object_format: str) -> None:
    bare, (one, two) = make_hosts(tmp_path, 2, object_format=object_format)
    eid = run_cli("allocate", "--key", "k", "--week", "2026-W32", cwd=one).stdout.strip()
    script = "import json, os; open(os.environ['JOBSTATE_RESULT'], 'w').write(json.dumps({'remote_ref': 't-1'}))"
    proc = run_cli("run", "--episode", eid, "--step", "generate", "--", sys.executable, "-c", script, cwd=two)
    assert proc.returncode == 0, proc.stderr
    assert "state: completed" in git(bare, "show", f"main:{episode_dir(eid)}/submissions.yaml")
    assert run_cli("approve", "--episode", eid, "--by", "ed", cwd=one).returncode == 0
    assert run_cli("complete", "--episode", eid, cwd=two).returncode == 0
    assert run_cli("verify", "--rev", "main", "--strict", cwd=bare).returncode == 0


def _armed_push(tmp_path: Path, then: str) -> dict[str, str]:
    """A git whose next push runs ``then`` (sh) in place of a plain push."""
    armed = tmp_path / "armed"
    armed.write_text("")
    script = f'#!/bin/sh\nif [ "$1" = push ] && [ -f "$ARMED" ]; then rm -f "$ARMED"; {then}; fi\nexec {{real}} "$@"\n'
    return {**git_on_path(tmp_path, script), "ARMED": str(armed)}


def _killing_git(tmp_path: Path, after_push: bool) -> dict[str, str]:
    return _armed_push(tmp_path, '{real} "$@"; kill -9 $PPID; exit 1' if after_push else "kill -9 $PPID; exit 1")


@pytest.mark.parametrize("after_push", [False, True])
def test_host_killed_mid_push_loses_and_duplicates_nothing(tmp_path: Path, after_push: bool) -> None:
    bare, (one, two) = make_hosts(tmp_path, 2)
    env = {**os.environ, **_killing_git(tmp_path, after_push)}
    proc = subprocess.run(
        [sys.executable, "-m", "jobstate", "allocate", "--key", "victim", "--week", "2026-W32"],
        cwd=one,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == -signal.SIGKILL
    pushed = "state/2026/2026-W32/2026-W32-0/episode.yaml" in git(bare, "ls-tree", "-r", "--name-only", "main")
    assert pushed is after_push
    # the other host allocates meanwhile; then the killed host retries its key
    other = run_cli("allocate", "--key", "other", "--week", "2026-W32", cwd=two).stdout.strip()
    victim = run_cli("allocate", "--key", "victim", "--week", "2026-W32", cwd=one)
    assert victim.returncode == 0, victim.stderr
    assert victim.stdout.strip() == ("2026-W32-0" if after_push else "2026-W32-1")
    assert other == ("2026-W32-1" if after_push else "2026-W32-0")
    assert run_cli("allocate", "--key", "victim", "--week", "2026-W32", cwd=two).stdout == victim.stdout
    _check_remote(bare, {"victim", "other"}, "2026-W32")
    assert status(one) == ""
    assert status(two) == ""


def test_a_push_that_landed_is_never_reported_as_nothing_changed(tmp_path: Path) -> None:
    bare, (one,) = make_hosts(tmp_path, 1)
    lock = one / ".git" / "refs" / "heads" / "main.lock"
    # the push lands, then something holds the local branch's lock: jobstate cannot move it
    env = {**_armed_push(tmp_path, f'{{real}} "$@"; rc=$?; : > {lock}; exit $rc'), "JOBSTATE_LOCK_TIMEOUT": "1"}
    proc = run_cli("allocate", "--key", "victim", "--week", "2026-W32", cwd=one, env=env)
    assert proc.returncode == 3, proc.stderr
    assert "is on origin but the local branch could not follow" in proc.stderr
    assert "nothing was changed" not in proc.stderr
    assert "state/2026/2026-W32/2026-W32-0/episode.yaml" in git(bare, "ls-tree", "-r", "--name-only", "main")
    lock.unlink()  # as the message says
    again = run_cli("allocate", "--key", "victim", "--week", "2026-W32", cwd=one)
    assert (again.returncode, again.stdout) == (0, "2026-W32-0\n"), again.stderr
    assert git(one, "rev-parse", "main") == git(bare, "rev-parse", "main")
    assert status(one) == ""


def test_remote_that_went_backwards_is_refused_even_for_retries(tmp_path: Path) -> None:
    bare, (one,) = make_hosts(tmp_path, 1)
    for key in ("a", "b"):
        assert run_cli("allocate", "--key", key, "--week", "2026-W32", cwd=one).returncode == 0
    git(bare, "update-ref", "refs/heads/main", "main~1")  # someone force-pushed the branch backwards
    new = run_cli("allocate", "--key", "c", "--week", "2026-W32", cwd=one)
    assert new.returncode == 3  # a rewritten remote is refused, never followed (issue 22)
    assert "origin/main was rewritten" in new.stderr
    retry = run_cli("allocate", "--key", "b", "--week", "2026-W32", cwd=one)
    assert retry.returncode == 3  # no answer from a commit the remote no longer has


def test_accepted_ref_that_cannot_be_recorded_is_reported(tmp_path: Path) -> None:
    bare, (one,) = make_hosts(tmp_path, 1)
    eid = run_cli("allocate", "--key", "k", "--week", "2026-W32", cwd=one).stdout.strip()
    hook = bare / "hooks" / "pre-receive"
    hook.write_text(
        "#!/bin/sh\nwhile read old new ref; do\n"
        "  git log -1 --format=%s \"$new\" | grep -q '^accept' && { echo 'no accepts today' >&2; exit 1; }\n"
        "done\nexit 0\n"
    )
    hook.chmod(0o755)
    script = "import json, os; open(os.environ['JOBSTATE_RESULT'], 'w').write(json.dumps({'remote_ref': 'task-77'}))"
    proc = run_cli("run", "--episode", eid, "--step", "generate", "--", sys.executable, "-c", script, cwd=one)
    assert proc.returncode == 3
    assert "--accepted task-77" in proc.stderr
    # the result file still names the task: the next run records it (as a resolution) and resumes it
    again = run_cli("run", "--episode", eid, "--step", "generate", "--", sys.executable, "-c", script, cwd=one)
    assert again.returncode == 0, again.stderr
    assert "names remote task task-77; recorded as accepted" in again.stderr
    assert "resuming remote task task-77" in again.stderr
    assert "remote_ref: task-77" in git(bare, "show", f"main:{episode_dir(eid)}/submissions.yaml")
