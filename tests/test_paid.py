from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from jobstate.allocation.allocation import allocate
from jobstate.core.layout import episode_dir, history_path
from jobstate.core.periods import parse_period
from jobstate.errors import (
    EpisodeCompleted,
    JobstateError,
    LockTimeout,
    StepAlreadyCompleted,
    SubmissionUnknown,
    UsageError,
)
from jobstate.paid.approval import approve, complete
from jobstate.paid.resolution import resolve
from jobstate.paid.step import paid_step
from jobstate.store.records import cost_entries, submissions
from jobstate.store.store import Store
from jobstate.store.yamlio import loads
from jobstate_demo.vendor_sim import VendorSimulator, submit

from .conftest import FIXED, both_formats, committed_files, git, run_cli, status, vendor_step

W32 = parse_period("2026-W32")


@pytest.fixture
def episode(store: Store) -> str:
    return allocate(store, "scheduled-run:2026-08-07", W32).episode_id


class Spy:
    """A credential loader and vendor client that count how often they are reached."""

    def __init__(self) -> None:
        self.credentials_read = 0
        self.clients_built = 0

    def load_credentials(self) -> str:
        self.credentials_read += 1
        return "secret"

    def client(self) -> object:
        self.clients_built += 1
        return object()


def _dirty_modified(repo: Path, eid: str) -> None:
    path = repo / episode_dir(eid) / "episode.yaml"
    path.write_text(path.read_text() + "# edited\n")


# an untracked, ignored or replaced file is refused too, untouched: tests/test_fence.py
@pytest.mark.parametrize("case", ["malformed", "path-trick", "unknown", "uncommitted", "modified"])
def test_guard_refuses_before_credentials_or_client(store: Store, repo: Path, episode: str, case: str) -> None:
    target = {"malformed": "2026-W32", "path-trick": "../../etc", "unknown": "2026-W32-7"}.get(case, episode)
    if case == "uncommitted":
        allocate(store, "second", W32)
        git(repo, "reset", "-q", "--soft", "HEAD~1")
        git(repo, "reset", "-q")
        target = "2026-W32-1"
    elif case == "modified":
        _dirty_modified(repo, episode)
    head = git(repo, "rev-parse", "HEAD")
    spy = Spy()
    with pytest.raises(JobstateError) as info, paid_step(store, target, "generate"):
        spy.load_credentials()
        spy.client()
    # malformed ID and dirty state are bad input (2); unknown or uncommitted episodes 5
    assert info.value.exit_code == (5 if case in ("unknown", "uncommitted") else 2)
    assert (spy.credentials_read, spy.clients_built) == (0, 0)
    assert git(repo, "rev-parse", "HEAD") == head


def test_no_paid_or_state_command_creates_an_episode(repo: Path, vendor: VendorSimulator) -> None:
    cmd = vendor_step(vendor.url)
    for args in (
        ["run", "--episode", "2026-W32-0", "--step", "generate", "--", *cmd],
        ["approve", "--episode", "2026-W32-0", "--by", "ed"],
        ["complete", "--episode", "2026-W32-0"],
        ["resolve", "--episode", "2026-W32-0", "--step", "generate", "--not-submitted", "--by", "a", "--reason", "b"],
    ):
        proc = run_cli(*args, cwd=repo)
        assert proc.returncode == 5, (args, proc.stderr)
    assert run_cli("run", "--episode", "latest", "--step", "generate", "--", *cmd, cwd=repo).returncode == 2
    assert sorted(p.name for p in (repo / "state").iterdir()) == [".gitkeep"]
    assert vendor.charges() == []


@both_formats
def test_happy_path_records_intent_ref_cost_artifact(
    store: Store, repo: Path, episode: str, vendor: VendorSimulator
) -> None:
    with paid_step(store, episode, "generate") as step:
        assert step.remote_ref is None
        key = step.idempotency_key
        task = submit(vendor.url, {"kind": "generate"}, step.idempotency_key)
        step.accepted(str(task["task_id"]))
        (step.output_dir / "final.mp4").write_bytes(b"\x00video" * 1000)
        step.cost("12.40", "USD")
        step.artifact("final.mp4")
    subs = submissions(store, episode)["generate"]
    assert [a.state for a in subs] == ["completed"]
    assert subs[0].idempotency_key == key
    assert subs[0].remote_ref == "task-1"
    assert cost_entries(store, episode)[0].amount == "12.40"
    assert status(repo) == ""
    log = git(repo, "log", "--format=%s")
    assert "intent 2026-W32-0 generate attempt 1" in log
    assert "accept 2026-W32-0 generate attempt 1: remote task task-1" in log
    with pytest.raises(StepAlreadyCompleted), paid_step(store, episode, "generate"):
        pytest.fail("a completed step must not run again")
    assert len(vendor.charges()) == 1


def test_idempotency_key_is_deterministic_per_attempt(store: Store, episode: str) -> None:
    with pytest.raises(RuntimeError), paid_step(store, episode, "generate") as step:
        first = step.idempotency_key
        step.not_submitted("vendor said 503")
        raise RuntimeError("refused")
    with pytest.raises(RuntimeError), paid_step(store, episode, "generate") as step:
        assert step.attempt == 2
        assert step.idempotency_key != first
        raise RuntimeError("again")
    subs = submissions(store, episode)["generate"]
    assert subs[0].idempotency_key == first
    assert [a.state for a in subs] == ["not-submitted", "intent"]


def test_body_raising_after_accept_keeps_ref_and_next_run_resumes(
    store: Store, episode: str, vendor: VendorSimulator
) -> None:
    with pytest.raises(ConnectionError), paid_step(store, episode, "generate") as step:
        task = submit(vendor.url, {"kind": "generate"}, step.idempotency_key)
        step.accepted(str(task["task_id"]))
        raise ConnectionError("lost the connection while waiting")
    spy = Spy()
    with paid_step(store, episode, "generate") as step:
        assert step.remote_ref == "task-1"
        assert step.resumed
        spy.load_credentials()
        step.cost("12.40", "USD")
    assert len(vendor.charges()) == 1
    assert [e.remote_ref for e in cost_entries(store, episode)] == ["task-1"]


def test_body_raising_before_accept_is_unknown_then_refused(store: Store, episode: str) -> None:
    with pytest.raises(TimeoutError), paid_step(store, episode, "generate"):
        raise TimeoutError("no answer from the vendor")
    spy = Spy()
    with pytest.raises(SubmissionUnknown) as info, paid_step(store, episode, "generate"):
        spy.load_credentials()
    assert info.value.exit_code == 6
    assert "jobstate resolve --episode 2026-W32-0 --step generate" in str(info.value)
    assert spy.credentials_read == 0


_KILLED_BODY = """
import sys, time
from pathlib import Path
from jobstate.paid.step import paid_step
from jobstate.store.store import Store
from jobstate_demo.vendor_sim import submit
store = Store(Path(sys.argv[1]))
with paid_step(store, sys.argv[2], "generate") as step:
    if sys.argv[4] == "submit":
        submit(sys.argv[3], {"kind": "generate"}, step.idempotency_key)
    print("between intent and accept", flush=True)
    time.sleep(60)
    step.accepted("never")
"""


@pytest.mark.parametrize("submitted", [True, False])
def test_sigkill_between_intent_and_accept_then_resolve_charges_once(
    repo: Path, episode: str, vendor: VendorSimulator, submitted: bool
) -> None:
    with subprocess.Popen(
        [sys.executable, "-c", _KILLED_BODY, str(repo), episode, vendor.url, "submit" if submitted else "no"],
        stdout=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "between intent and accept\n"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    cmd = ["--", *vendor_step(vendor.url)]
    refused = run_cli("run", "--episode", episode, "--step", "generate", *cmd, cwd=repo)
    assert refused.returncode == 6
    assert f"jobstate resolve --episode {episode} --step generate" in refused.stderr
    decision = ["--accepted", "task-1"] if submitted else ["--not-submitted"]
    proc2 = run_cli(
        "resolve",
        "--episode",
        episode,
        "--step",
        "generate",
        *decision,
        "--by",
        "ops",
        "--reason",
        "checked the vendor's ledger",
        cwd=repo,
    )
    assert proc2.returncode == 0, proc2.stderr
    done = run_cli("run", "--episode", episode, "--step", "generate", *cmd, cwd=repo)
    assert done.returncode == 0, done.stderr
    assert len(vendor.charges()) == 1
    with Store(repo) as store:
        subs = submissions(store, episode)["generate"]
        assert subs[-1].state == "completed"
        assert subs[0].resolution is not None
        assert subs[0].resolution["by"] == "ops"
        assert [e.amount for e in cost_entries(store, episode)] == ["12.40"]
    assert status(repo) == ""


def test_run_passes_environment_and_exit_code(repo: Path, episode: str) -> None:
    script = (
        "import json, os, sys\n"
        "env = {k: v for k, v in os.environ.items() if k.startswith('JOBSTATE_')}\n"
        "open(os.environ['JOBSTATE_RESULT'], 'w').write(json.dumps({'submitted': False}))\n"
        "print(json.dumps(env))\n"
        "sys.exit(9)\n"
    )
    proc = run_cli("run", "--episode", episode, "--step", "render", "--", sys.executable, "-c", script, cwd=repo)
    assert proc.returncode == 9, proc.stderr  # jobstate's "the command failed", not CMD's own 9
    assert "exited with 9" in proc.stderr
    env = json.loads(proc.stdout)
    assert env["JOBSTATE_EPISODE"] == episode
    assert env["JOBSTATE_STEP"] == "render"
    assert env["JOBSTATE_IDEMPOTENCY_KEY"].startswith(f"{episode}.render.1.")
    assert "JOBSTATE_REMOTE_REF" not in env
    # declared not submitted: the next run is attempt 2 with a new key
    again = run_cli("run", "--episode", episode, "--step", "render", "--", sys.executable, "-c", script, cwd=repo)
    assert json.loads(again.stdout)["JOBSTATE_IDEMPOTENCY_KEY"].startswith(f"{episode}.render.2.")


def test_a_command_that_exits_0_saying_nothing_was_submitted_leaves_room_for_a_new_attempt(
    store: Store, repo: Path, episode: str
) -> None:
    script = "import json, os; open(os.environ['JOBSTATE_RESULT'], 'w').write(json.dumps({'submitted': False}))"
    cmd = ["run", "--episode", episode, "--step", "render", "--", sys.executable, "-c", script]
    first = run_cli(*cmd, cwd=repo)
    assert first.returncode == 0
    assert "attempt 1 was not submitted (no reason given); the next run starts attempt 2" in first.stderr
    assert [a.state for a in submissions(store, episode)["render"]] == ["not-submitted"]
    assert run_cli(*cmd, cwd=repo).returncode == 0  # not "already completed"
    assert [(a.number, a.state) for a in submissions(store, episode)["render"]] == [
        (1, "not-submitted"),
        (2, "not-submitted"),
    ]
    with paid_step(store, episode, "render") as step:  # the API alike: a body that says so is not a completion
        step.not_submitted("the vendor refused")
    assert submissions(store, episode)["render"][-1].state == "not-submitted"


def test_approve_keeps_what_else_approval_yaml_says(store: Store, repo: Path, episode: str) -> None:
    approve(store, episode, by="editor", reject=True, reason="audio glitch")
    path = repo / episode_dir(episode) / "approval.yaml"
    path.write_text(path.read_text() + "note: reviewed in ticket 42\n")
    git(repo, "commit", "-qam", "a note by hand")
    approve(store, episode, by="editor")
    text = path.read_text()
    assert "note: reviewed in ticket 42" in text
    assert [d["status"] for d in loads(text, "approval.yaml")["decisions"]] == ["rejected", "approved"]


_SEES_REF = """
import os, sys
ref = os.environ.get("JOBSTATE_REMOTE_REF")
print(ref)
sys.exit(0 if ref else 75)  # the first run: accepted, then the connection dropped
"""


def test_run_resume_sets_remote_ref(repo: Path, episode: str) -> None:
    cmd = ["--", sys.executable, "-c", _SEES_REF]
    dropped = run_cli("run", "--episode", episode, "--step", "generate", *cmd, cwd=repo)
    assert dropped.returncode == 9, dropped.stderr
    assert "exited with 75" in dropped.stderr
    args = ["resolve", "--episode", episode, "--step", "generate", "--accepted", "task-1", "--by", "ops"]
    assert run_cli(*args, "--reason", "the vendor's ledger", cwd=repo).returncode == 0
    proc = run_cli("run", "--episode", episode, "--step", "generate", *cmd, cwd=repo)
    assert (proc.returncode, proc.stdout.strip()) == (0, "task-1"), proc.stderr
    assert "resuming remote task task-1" in proc.stderr


def test_ledger_totals_are_exact_and_floats_refused(store: Store, episode: str) -> None:
    with paid_step(store, episode, "generate") as step:
        for i in range(3):
            step.cost("0.10", "USD", remote_ref=f"t-{i}")
        step.cost("7.5", "EUR", remote_ref="t-e")
        with pytest.raises(UsageError):
            step.cost(0.1, "USD")  # type: ignore[arg-type]
        with pytest.raises(UsageError):
            step.cost("1e3", "USD")
        with pytest.raises(UsageError):
            step.cost("1.00", "usd")
    with Store(store.root) as s:
        approve(s, episode, by="editor")
        record = complete(s, episode)
    assert record["cost_totals"] == {"EUR": "7.5", "USD": "0.30"}


@pytest.mark.parametrize(
    "bad", ["../outside.txt", "/etc/passwd", "a/../../b", "link-out", "episode.yaml", "missing.txt", ".hidden", "dir"]
)
def test_artifact_paths_that_escape_are_rejected(
    store: Store, repo: Path, episode: str, tmp_path: Path, bad: str
) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("secret")
    with pytest.raises(RuntimeError), paid_step(store, episode, "generate") as step:
        edir = step.output_dir
        (edir / "link-out").symlink_to(outside)
        (edir / "dir").mkdir()
        with pytest.raises(UsageError):
            step.artifact(bad)
        raise RuntimeError("stop here")
    assert "artifacts.yaml" not in git(repo, "ls-tree", "--name-only", "HEAD", f"{episode_dir(episode)}/")


def test_two_processes_same_step_do_not_both_submit(repo: Path, episode: str, vendor: VendorSimulator) -> None:
    vendor.arm_fault("slow", count=2, delay=2.0)
    cmd = [
        sys.executable,
        "-m",
        "jobstate",
        "run",
        "--episode",
        episode,
        "--step",
        "generate",
        "--",
        *vendor_step(vendor.url),
    ]
    procs = [
        subprocess.Popen(cmd, cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)
    ]
    results = [(*p.communicate(timeout=60), p.returncode) for p in procs]
    codes = sorted(r[2] for r in results)
    assert codes in ([0, 3], [0, 6]), results
    assert len(vendor.charges()) == 1


def test_held_step_lock_names_the_runner(store: Store, episode: str) -> None:
    with paid_step(store, episode, "generate"), pytest.raises(LockTimeout, match="already running") as info:  # noqa: SIM117
        with paid_step(Store(store.root), episode, "generate"):
            pytest.fail("second runner must not start")
    # the runner is this test's own process, the first paid_step: its pid in the message and the record
    assert f"step generate of {episode} is already running (jobstate pid {os.getpid()} on " in str(info.value)
    assert info.value.holder is not None
    assert (info.value.holder["pid"], info.value.holder["host"]) == (os.getpid(), socket.gethostname())
    assert info.value.path == str(store.root / ".jobstate" / "steps" / f"{episode}.generate.lock")


def test_complete_refuses_unknown_and_unapproved(store: Store, repo: Path, episode: str) -> None:
    with pytest.raises(TimeoutError), paid_step(store, episode, "generate"):
        raise TimeoutError
    with pytest.raises(SubmissionUnknown):
        complete(store, episode)
    resolve(store, episode, "generate", accepted=None, by="ops", reason="vendor has no such task")
    with pytest.raises(UsageError, match="not approved"):
        complete(store, episode)
    approve(store, episode, by="editor", reject=True, reason="audio glitch")
    with pytest.raises(UsageError, match="not approved"):
        complete(store, episode)
    approve(store, episode, by="editor")
    record = complete(store, episode)
    assert record["completed_at"] == "2026-08-07T10:00:00Z"
    assert (repo / history_path(episode)).exists()
    assert status(repo) == ""
    # the completed episode still owns its key, and nothing can be paid for it
    assert allocate(store, "scheduled-run:2026-08-07", W32).episode_id == episode
    with pytest.raises(EpisodeCompleted, match="is completed"), paid_step(store, episode, "rework"):
        pass
    with pytest.raises(StepAlreadyCompleted):
        complete(store, episode)


def test_resolve_requires_an_unknown_step_and_who_and_why(store: Store, episode: str) -> None:
    with pytest.raises(UsageError, match="never started"):
        resolve(store, episode, "generate", accepted="task-1", by="ops", reason="x")
    with pytest.raises(UsageError):
        resolve(store, episode, "generate", accepted=None, by=" ", reason="x")
    with pytest.raises(UsageError):
        resolve(store, episode, "Bad Step", accepted=None, by="a", reason="x")


def test_fixed_clock_is_used_for_records(store: Store, episode: str) -> None:
    with paid_step(store, episode, "generate") as step:
        step.accepted("t-9")
    assert submissions(store, episode)["generate"][0].get("accepted_at") == FIXED.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_artifact_through_a_symlinked_directory_or_into_dot_git_is_refused(store: Store, repo: Path) -> None:
    eid = allocate(store, "a", W32).episode_id
    with pytest.raises(RuntimeError), paid_step(store, eid, "generate") as step:
        edir = step.output_dir
        (edir / "real").mkdir()
        (edir / "real" / "f.txt").write_text("x")
        (edir / "sub").symlink_to("real")
        (edir / "out" / ".git").mkdir(parents=True)
        (edir / "out" / ".git" / "config").write_text("x")
        for bad in ("sub/f.txt", "out/.git/config"):
            with pytest.raises(UsageError):
                step.artifact(bad)
        step.artifact("real/f.txt")
        raise RuntimeError("done")
    assert "state/2026/2026-W32/2026-W32-0/real/f.txt" in committed_files(repo)
