"""The fence holds (issue 20, parts 1, 3 and 5): a paid step runs only on an episode exactly as HEAD has it,
nothing a user put there is moved; a step runs while its CMD lives; artifacts are regular files with one link.

Real processes, real git, real SIGKILL and SIGTERM."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jobstate.core.layout import episode_dir
from jobstate.paid.step import paid_step
from jobstate.store.records import artifacts, cost_entries, submissions
from jobstate.store.store import Store

from .conftest import committed_files, git, run_cli, stable_cmd, status
from .procs import wait_until_exited

EID = "2026-W32-0"
EDIR = f"{episode_dir(EID)}"


@pytest.fixture
def episode(repo: Path) -> str:
    assert run_cli("allocate", "--key", "k", "--week", "2026-W32", cwd=repo).returncode == 0
    return EID


def _marker_cmd(tmp_path: Path) -> tuple[list[str], Path]:
    ran = tmp_path / "cmd-ran"
    return stable_cmd(f"import pathlib\npathlib.Path({str(ran)!r}).write_text('x')\n"), ran


def _run(repo: Path, step: str, cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return run_cli("run", "--episode", EID, "--step", step, "--", *cmd, cwd=repo)


def _refused_untouched(repo: Path, tmp_path: Path, path: str, content: bytes, words: str) -> None:
    head, index = git(repo, "rev-parse", "HEAD"), (repo / ".git" / "index").read_bytes()
    cmd, ran = _marker_cmd(tmp_path)
    proc = _run(repo, "gen", cmd)
    assert proc.returncode == 2, proc.stderr
    assert f"{path} in episode {EID} {words}" in proc.stderr
    assert f"git status --ignored -- {EDIR}" in proc.stderr
    assert not ran.exists()  # CMD never started
    assert (repo / path).read_bytes() == content  # neither moved nor deleted
    assert git(repo, "rev-parse", "HEAD") == head
    assert (repo / ".git" / "index").read_bytes() == index
    assert not (repo / ".jobstate" / "leftovers").exists()


def test_a_users_new_file_in_the_episode_is_refused_untouched_and_cmd_never_runs(
    repo: Path, episode: str, tmp_path: Path
) -> None:
    (repo / EDIR / "prompt.txt").write_bytes(b"shorter intro\n")  # echo "shorter intro" > state/E/prompt.txt
    _refused_untouched(repo, tmp_path, f"{EDIR}/prompt.txt", b"shorter intro\n", "is not committed")
    assert "submissions.yaml" not in " ".join(committed_files(repo))  # no intent, no reservation


def test_a_git_ignored_file_in_the_episode_is_refused(repo: Path, episode: str, tmp_path: Path) -> None:
    (repo / ".git" / "info" / "exclude").write_text("*.log\n")
    (repo / EDIR / "notes.log").write_bytes(b"my notes\n")
    assert status(repo) == ""  # git status alone does not show it
    _refused_untouched(repo, tmp_path, f"{EDIR}/notes.log", b"my notes\n", "is git-ignored")


def test_a_modified_record_is_refused(repo: Path, episode: str, tmp_path: Path) -> None:
    path = repo / EDIR / "episode.yaml"
    edited = path.read_bytes() + b"# edited\n"
    path.write_bytes(edited)
    _refused_untouched(repo, tmp_path, f"{EDIR}/episode.yaml", edited, "differs from what is committed")


def test_a_deleted_artifact_is_refused(repo: Path, episode: str, tmp_path: Path) -> None:
    write = (
        "import json, os, pathlib\n"
        "pathlib.Path(os.environ['JOBSTATE_OUTPUT_DIR'], 'a.txt').write_text('out')\n"
        "pathlib.Path(os.environ['JOBSTATE_RESULT']).write_text(json.dumps({'artifacts': ['a.txt']}))\n"
    )
    assert _run(repo, "first", stable_cmd(write)).returncode == 0
    (repo / EDIR / "a.txt").unlink()
    cmd, ran = _marker_cmd(tmp_path)
    proc = _run(repo, "gen", cmd)
    assert proc.returncode == 2, proc.stderr
    assert f"{EDIR}/a.txt in episode {EID} differs from what is committed" in proc.stderr
    assert not ran.exists()


@pytest.mark.parametrize("kind", ["symlinked file", "symlinked directory", "fifo"])
def test_links_and_special_files_in_the_episode_are_refused(
    repo: Path, episode: str, tmp_path: Path, kind: str
) -> None:
    where = repo / EDIR / "thing"
    (tmp_path / "outside").mkdir()
    if kind == "fifo":
        os.mkfifo(where)
    else:
        where.symlink_to(tmp_path / "outside" if kind == "symlinked directory" else repo / EDIR / "episode.yaml")
    cmd, ran = _marker_cmd(tmp_path)
    proc = _run(repo, "gen", cmd)
    assert proc.returncode == 2, proc.stderr
    assert f"{EDIR}/thing in episode {EID} is not a plain file or directory" in proc.stderr
    assert not ran.exists()
    assert os.path.lexists(where)


def test_an_episode_directory_replaced_by_a_symlink_is_refused_and_the_index_untouched(
    repo: Path, episode: str, tmp_path: Path
) -> None:
    outside = tmp_path / "elsewhere"
    shutil.copytree(repo / EDIR, outside)  # the same files, outside state/
    shutil.rmtree(repo / EDIR)
    (repo / EDIR).symlink_to(outside)
    head, index = git(repo, "rev-parse", "HEAD"), (repo / ".git" / "index").read_bytes()
    cmd, ran = _marker_cmd(tmp_path)
    proc = _run(repo, "gen", cmd)
    assert proc.returncode == 2, proc.stderr
    assert f"{EDIR} in episode {EID} is not a plain file or directory" in proc.stderr
    assert not ran.exists()
    assert (repo / ".git" / "index").read_bytes() == index
    assert git(repo, "diff", "--cached", "--name-only") == ""
    assert git(repo, "rev-parse", "HEAD") == head
    assert sorted(p.name for p in outside.iterdir()) == ["episode.yaml"]


# ---------------------------------------------------------------- a step runs while its CMD lives


def _start_run(repo: Path, script: str, *, stderr: int = subprocess.PIPE) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "jobstate", "run", "--episode", EID, "--step", "gen", "--", *stable_cmd(script)],
        cwd=repo,
        stdout=subprocess.DEVNULL,
        stderr=stderr,
    )


def _wait_for(path: Path, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while not path.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert path.exists(), f"jobstate run did not start CMD (exit {proc.poll()})"


REPORT = {"remote_ref": "task-5", "cost": {"amount": "12.40", "currency": "USD"}}


def test_an_orphaned_cmd_keeps_its_step_running_and_its_report_is_recorded_afterwards(
    repo: Path, episode: str, tmp_path: Path, store: Store
) -> None:
    ready, go = tmp_path / "ready", tmp_path / "go"
    script = (
        "import json, os, pathlib, time\n"
        "if os.environ.get('JOBSTATE_REMOTE_REF'):\n"  # the resume, by the next run: the same report
        f"    pathlib.Path(os.environ['JOBSTATE_RESULT']).write_text(json.dumps({REPORT!r}))\n"
        "    raise SystemExit(0)\n"
        f"pathlib.Path({str(ready) + '.tmp'!r}).write_text(str(os.getpid()))\n"
        f"os.replace({str(ready) + '.tmp'!r}, {str(ready)!r})\n"  # whole: the test reads it as soon as it exists
        f"while not pathlib.Path({str(go)!r}).exists(): time.sleep(0.02)\n"
        f"pathlib.Path(os.environ['JOBSTATE_RESULT']).write_text(json.dumps({REPORT!r}))\n"
    )
    proc = _start_run(repo, script, stderr=subprocess.DEVNULL)
    _wait_for(ready, proc)
    cmd_pid = int(ready.read_text())
    proc.kill()  # SIGKILL jobstate alone: CMD runs on, an orphan
    proc.wait(timeout=60)
    try:
        head = git(repo, "rev-parse", "HEAD")
        decide = ["--episode", EID, "--step", "gen", "--by", "ops", "--reason", "r"]
        for args in (
            ["run", "--episode", EID, "--step", "gen", "--", *stable_cmd(script)],
            ["resolve", "--not-submitted", *decide],
            ["resolve", "--supersede", *decide],
            ["approve", "--episode", EID, "--by", "ed"],
            ["complete", "--episode", EID],
        ):
            answer = run_cli(*args, cwd=repo)
            assert answer.returncode == 3, (args, answer.stderr)
            assert f"command pid {cmd_pid}" in answer.stderr, answer.stderr
            assert "step_cmd.py" in answer.stderr  # its command line
        assert git(repo, "rev-parse", "HEAD") == head
    finally:
        go.write_text("go")
    wait_until_exited(cmd_pid)
    # the orphan said the vendor accepted: "not submitted" now would pay for a second task
    refused = run_cli("resolve", "--not-submitted", *decide, cwd=repo)
    assert refused.returncode == 2, refused.stderr
    assert "result file says the vendor accepted remote task task-5" in refused.stderr
    assert git(repo, "rev-parse", "HEAD") == head
    answer = run_cli("run", "--episode", EID, "--step", "gen", "--", *stable_cmd(script), cwd=repo)
    assert answer.returncode == 0, answer.stderr
    assert "names remote task task-5; recorded as accepted" in answer.stderr
    attempts = submissions(store, EID)["gen"]
    assert [(a.number, a.state, a.remote_ref) for a in attempts] == [(1, "completed", "task-5")]
    assert [(e.amount, e.remote_ref) for e in cost_entries(store, EID)] == [("12.40", "task-5")]
    assert status(repo) == ""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_signal_to_jobstate_reaches_cmd_and_what_cmd_reports_then_is_recorded(
    repo: Path, episode: str, tmp_path: Path, store: Store, sig: signal.Signals
) -> None:
    ready, got = tmp_path / "ready", tmp_path / "got"
    script = (
        "import json, os, pathlib, signal, time\n"
        "def stop(signum, frame):\n"
        f"    pathlib.Path({str(got)!r}).write_text(str(signum))\n"
        f"    pathlib.Path(os.environ['JOBSTATE_RESULT']).write_text(json.dumps({REPORT!r}))\n"
        "    raise SystemExit(1)\n"
        f"signal.signal({int(sig)}, stop)\n"
        f"pathlib.Path({str(ready) + '.tmp'!r}).write_text(str(os.getpid()))\n"
        f"os.replace({str(ready) + '.tmp'!r}, {str(ready)!r})\n"  # whole: the test reads it as soon as it exists
        "time.sleep(600)\n"
    )
    proc = _start_run(repo, script)
    _wait_for(ready, proc)
    proc.send_signal(sig)  # to jobstate only: CMD is in a session of its own
    _out, err = proc.communicate(timeout=60)
    assert got.read_text() == str(int(sig))
    assert proc.returncode == 9, err  # CMD's failure, after its report was recorded
    attempts = submissions(store, EID)["gen"]
    assert [(a.state, a.remote_ref) for a in attempts] == [("accepted", "task-5")]
    assert [(e.amount, e.remote_ref) for e in cost_entries(store, EID)] == [("12.40", "task-5")]
    assert status(repo) == ""


# ---------------------------------------------------------------- artifacts: regular files, one link


def test_a_reported_artifact_moves_into_the_episode_in_the_commit_that_records_it(
    repo: Path, episode: str, store: Store
) -> None:
    write = (
        "import json, os, pathlib\n"
        "out = pathlib.Path(os.environ['JOBSTATE_OUTPUT_DIR'])\n"
        "(out / 'parts').mkdir()\n"
        "(out / 'parts' / 'final.mp4').write_bytes(b'video')\n"
        "assert not pathlib.Path(os.environ['JOBSTATE_EPISODE_DIR'], 'parts').exists()\n"
        "pathlib.Path(os.environ['JOBSTATE_RESULT']).write_text(json.dumps({'artifacts': ['parts/final.mp4']}))\n"
    )
    proc = _run(repo, "gen", stable_cmd(write))
    assert proc.returncode == 0, proc.stderr
    assert git(repo, "show", f"HEAD:{EDIR}/parts/final.mp4") == "video"
    assert git(repo, "show", f"HEAD:{EDIR}/artifacts.yaml").count("parts/final.mp4") == 1
    assert git(repo, "log", "-1", "--format=%s").startswith(f"done {EID} gen attempt 1: {EID}/parts/final.mp4")
    assert artifacts(store, EID)["parts/final.mp4"].size == 5
    assert not (repo / ".jobstate" / "work" / EID / "gen" / "1").exists()  # recorded: removed
    assert status(repo) == ""


@pytest.mark.parametrize("kind", ["hard link", "symlink", "fifo", "directory"])
def test_an_artifact_that_is_not_a_regular_file_with_one_link_is_refused(
    repo: Path, episode: str, tmp_path: Path, kind: str
) -> None:
    secret = tmp_path / "secret"
    secret.write_text("the key")
    make = {
        "hard link": f"os.link({str(secret)!r}, out / 'final.mp4')",
        "symlink": f"(out / 'final.mp4').symlink_to({str(secret)!r})",
        "fifo": "os.mkfifo(out / 'final.mp4')",
        "directory": "(out / 'final.mp4').mkdir()",
    }[kind]
    script = (
        "import json, os, pathlib\n"
        "out = pathlib.Path(os.environ['JOBSTATE_OUTPUT_DIR'])\n"
        f"{make}\n"
        "pathlib.Path(os.environ['JOBSTATE_RESULT']).write_text(json.dumps({'artifacts': ['final.mp4']}))\n"
    )
    proc = _run(repo, "gen", stable_cmd(script))
    assert proc.returncode == 2, proc.stderr
    reason = {"hard link": "has 2 hard links", "symlink": "goes through a symlink", "fifo": "is a fifo"}
    assert reason.get(kind, "is a directory") in proc.stderr
    assert not any("final.mp4" in p or "artifacts.yaml" in p for p in committed_files(repo))
    assert not (repo / EDIR / "final.mp4").exists()
    assert secret.read_text() == "the key"
    assert status(repo) == ""


def test_an_artifact_written_into_the_episode_directory_is_refused_with_where_to_write_it(
    repo: Path, episode: str
) -> None:
    old_style = (
        "import json, os, pathlib\n"
        "pathlib.Path(os.environ['JOBSTATE_EPISODE_DIR'], 'final.mp4').write_text('video')\n"
        "pathlib.Path(os.environ['JOBSTATE_RESULT']).write_text(json.dumps({'artifacts': ['final.mp4']}))\n"
    )
    proc = _run(repo, "gen", stable_cmd(old_style))
    assert proc.returncode == 2, proc.stderr
    assert "write it into $JOBSTATE_OUTPUT_DIR (.jobstate/work/2026-W32-0/gen/1)" in proc.stderr
    assert (repo / EDIR / "final.mp4").read_text() == "video"  # the user's to move: never moved by jobstate


def test_a_resumed_attempt_that_reports_an_artifact_moved_already_gets_its_record(store: Store, episode: str) -> None:
    with pytest.raises(RuntimeError), paid_step(store, EID, "gen") as step:
        step.accepted("task-1")
        (step.output_dir / "a.txt").write_text("out")
        first = step.artifact("a.txt")
        raise RuntimeError("interrupted after the artifact was moved and committed")
    with paid_step(store, EID, "gen") as step:
        assert not (step.output_dir / "a.txt").exists()
        assert step.artifact("a.txt") == first  # the resumed run reports it again: recognised, not refused
    assert [a.state for a in submissions(store, EID)["gen"]] == ["completed"]


def test_an_orphans_report_that_nothing_was_submitted_is_recorded_by_the_next_run(
    repo: Path, episode: str, tmp_path: Path, store: Store
) -> None:
    ready, go = tmp_path / "ready", tmp_path / "go"
    script = (
        "import json, os, pathlib, time\n"
        f"if pathlib.Path({str(go)!r}).exists(): raise SystemExit(0)\n"  # the next run's attempt 2
        f"pathlib.Path({str(ready) + '.tmp'!r}).write_text(str(os.getpid()))\n"
        f"os.replace({str(ready) + '.tmp'!r}, {str(ready)!r})\n"  # whole: the test reads it as soon as it exists
        f"while not pathlib.Path({str(go)!r}).exists(): time.sleep(0.02)\n"
        "report = {'submitted': False, 'error': 'the vendor refused: quota'}\n"
        "pathlib.Path(os.environ['JOBSTATE_RESULT']).write_text(json.dumps(report))\n"
    )
    proc = _start_run(repo, script, stderr=subprocess.DEVNULL)
    _wait_for(ready, proc)
    cmd_pid = int(ready.read_text())
    proc.kill()
    proc.wait(timeout=60)
    go.write_text("go")
    wait_until_exited(cmd_pid)
    answer = run_cli("run", "--episode", EID, "--step", "gen", "--", *stable_cmd(script), cwd=repo)
    assert answer.returncode == 0, answer.stderr
    assert "says nothing was submitted: the vendor refused: quota; recorded as not submitted" in answer.stderr
    attempts = submissions(store, EID)["gen"]
    assert [(a.number, a.state) for a in attempts] == [(1, "not-submitted"), (2, "completed")]


def test_a_symlinked_staging_directory_is_refused_before_the_intent(repo: Path, episode: str, tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (repo / ".jobstate" / "work").symlink_to(tmp_path / "elsewhere")
    cmd, ran = _marker_cmd(tmp_path)
    proc = _run(repo, "gen", cmd)
    assert proc.returncode == 2, proc.stderr
    assert ".jobstate/work is a symlink" in proc.stderr
    assert not ran.exists()
    assert not any("submissions.yaml" in p for p in committed_files(repo))  # nothing to resolve afterwards
    assert list((tmp_path / "elsewhere").iterdir()) == []


# --- found in review after the merges -------------------------------------------------------------


def test_a_symlinked_attempt_directory_is_refused_before_the_intent(repo: Path, episode: str, tmp_path: Path) -> None:
    work = repo / ".jobstate" / "work" / EID / "gen"
    work.mkdir(parents=True)
    (work / "1").symlink_to(tmp_path)
    head = git(repo, "rev-parse", "HEAD")
    cmd, ran = _marker_cmd(tmp_path)
    proc = _run(repo, "gen", cmd)
    assert proc.returncode == 2, proc.stderr
    assert "is a symlink" in proc.stderr
    assert not ran.exists()
    assert git(repo, "rev-parse", "HEAD") == head, "no intent: nothing was submitted, nothing to resolve"
    (work / "1").unlink()
    assert _run(repo, "gen", cmd).returncode == 0


def test_a_failing_cmd_with_a_half_written_report_is_exit_9(repo: Path, episode: str) -> None:
    script = "import os, sys\nopen(os.environ['JOBSTATE_RESULT'], 'w').write('{\"remote_ref\": \"T')\nsys.exit(7)\n"
    proc = _run(repo, "gen", stable_cmd(script))
    assert proc.returncode == 9, proc.stderr
    assert "exited with 7" in proc.stderr
    assert "jobstate resolve --episode" in proc.stderr


def _leave_report(repo: Path, report: dict[str, object]) -> None:
    """An unknown attempt 1 whose CMD left ``report`` (a run killed after it wrote its result file)."""
    failing = stable_cmd("raise SystemExit(1)")
    assert _run(repo, "gen", failing).returncode == 9  # no report: the step is unknown
    results = repo / ".jobstate" / "results"
    results.mkdir(parents=True, exist_ok=True)
    (results / f"{EID}.gen.1.json").write_text(json.dumps(report))


def test_a_self_contradicting_report_does_not_block_not_submitted(repo: Path, episode: str) -> None:
    _leave_report(repo, {"remote_ref": "T1", "submitted": False})
    decide = ["--episode", EID, "--step", "gen", "--by", "ops", "--reason", "the vendor has no task"]
    proc = run_cli("resolve", "--not-submitted", *decide, cwd=repo)
    assert proc.returncode == 0, proc.stderr


def test_an_early_not_submitted_report_with_a_charge_is_left_to_the_operator(
    repo: Path, episode: str, store: Store
) -> None:
    # a charge is never dropped: jobstate does not settle such an attempt by itself, and (issue 29)
    # records the charge before anything else is decided on the step
    _leave_report(repo, {"submitted": False, "cost": {"amount": "1.50", "currency": "USD"}})
    head = git(repo, "rev-parse", "HEAD")
    proc = _run(repo, "gen", stable_cmd("pass"))
    assert proc.returncode == 6, proc.stderr
    assert git(repo, "rev-parse", "HEAD^") == head  # one commit: the charge
    assert [a.state for a in submissions(store, EID)["gen"]] == ["intent"]
