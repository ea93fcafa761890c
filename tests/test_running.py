"""What a killed jobstate run leaves does not wedge later runs (issue 10, classes 2-3), and nothing a user
put in the episode directory is moved or deleted (issue 20)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from jobstate.core.layout import episode_dir
from jobstate.main import main
from jobstate.store.records import cost_entries
from jobstate.store.store import Store

from .conftest import stable_cmd, status
from .procs import wait_until_exited

EID = "2026-W32-0"


@pytest.fixture
def episode(repo: Path) -> str:
    assert main(["--repo", str(repo), "allocate", "--key", "k", "--week", "2026-W32"]) == 0
    return EID


def _cli(repo: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["--repo", str(repo), *args])
    return code, capsys.readouterr().err


def _wait_for(path: Path, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while not path.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert path.exists(), f"jobstate run did not start CMD (exit {proc.poll()})"


def _start_run(repo: Path, step: str, script: str) -> subprocess.Popen[bytes]:
    args = ["run", "--episode", EID, "--step", step, "--", *stable_cmd(script)]
    return subprocess.Popen(
        [sys.executable, "-m", "jobstate", "--repo", str(repo), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group: the kill takes CMD with it
    )


def _hold(ready: Path) -> str:
    """CMD's last lines: say it is ready (its pid), then wait for the SIGKILL. A CMD run a second time
    (a regression) fails at once instead of waiting, and one the kill missed ends by itself."""
    return (
        f"if pathlib.Path({str(ready)!r}).exists(): raise SystemExit('CMD ran a second time')\n"
        f"pathlib.Path({str(ready) + '.tmp'!r}).write_text(str(os.getpid()))\n"
        f"os.replace({str(ready) + '.tmp'!r}, {str(ready)!r})\n"  # whole: the test reads it as soon as it exists
        "time.sleep(30)\n"
        "raise SystemExit('CMD outlived the SIGKILL')\n"
    )


def _kill_both(proc: subprocess.Popen[bytes], ready: Path) -> None:
    """SIGKILL jobstate and CMD (its own session: its pid, written to ``ready``, is its group)."""
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    os.killpg(int(ready.read_text()), signal.SIGKILL)
    wait_until_exited(int(ready.read_text()))  # only then is the step lock it inherited free


def _killed_after(repo: Path, tmp_path: Path, work: str) -> None:
    """A run of generate whose CMD does ``work`` (Python), then is SIGKILLed with jobstate."""
    ready = tmp_path / "ready"
    script = f"import json, os, pathlib, time\n{work}{_hold(ready)}"
    proc = _start_run(repo, "generate", script)
    _wait_for(ready, proc)
    _kill_both(proc, ready)


def test_output_of_a_killed_run_stays_in_its_staging_directory_and_show_names_it(
    repo: Path, episode: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    work = (
        "d = pathlib.Path(os.environ['JOBSTATE_OUTPUT_DIR'])\n"
        "(d / 'parts').mkdir()\n"
        "(d / 'parts' / 'out.bin').write_bytes(b'half a video')\n"
    )
    _killed_after(repo, tmp_path, work)
    assert status(repo) == ""  # CMD never wrote into the episode directory
    staged = repo / ".jobstate" / "work" / EID / "generate" / "1" / "parts" / "out.bin"
    assert staged.read_bytes() == b"half a video"

    code, err = _cli(repo, capsys, "run", "--episode", EID, "--step", "generate", "--", *stable_cmd("pass"))
    assert code == 6, err  # the right refusal: the attempt is unknown, not "the episode is dirty"
    capsys.readouterr()
    assert main(["--repo", str(repo), "show", EID]) == 0
    assert "unrecorded_output:\n  generate:\n  - .jobstate/work/2026-W32-0/generate/1\n" in capsys.readouterr().out

    resolve = ["resolve", "--episode", EID, "--step", "generate", "--not-submitted", "--by", "ops", "--reason", "r"]
    assert _cli(repo, capsys, *resolve)[0] == 0
    code, err = _cli(repo, capsys, "run", "--episode", EID, "--step", "generate", "--", *stable_cmd("pass"))
    assert code == 0, err
    assert staged.read_bytes() == b"half a video"  # the interrupted attempt's output is the operator's
    assert not (repo / ".jobstate" / "work" / EID / "generate" / "2").exists()  # recorded: removed


@pytest.mark.parametrize(
    "where", ["state/2026/2026-W32/2026-W32-0/.tmp-k1ll3d", "state/2026/2026-W32/2026-W32-0/sub/.tmp-x"]
)
def test_a_killed_writes_temp_file_is_removed_under_the_lock_and_nothing_else(
    repo: Path, episode: str, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    (repo / where).parent.mkdir(parents=True, exist_ok=True)
    (repo / where).write_bytes(b"schema: 1\nsteps: {gen")
    code, err = _cli(repo, capsys, "run", "--episode", EID, "--step", "generate", "--", *stable_cmd("pass"))
    if "/sub/" not in where:
        assert code == 0, err  # jobstate's own temp files sit beside the records: its own to remove
        assert f"removed {where}" in err
        assert not (repo / where).exists()
        assert status(repo) == ""
    else:
        assert code == 2, err  # one deeper is not jobstate's: refused, never moved or deleted
        assert f"{where} in episode {EID} is not committed" in err
        assert (repo / where).read_bytes() == b"schema: 1\nsteps: {gen"


def test_output_of_a_step_running_now_does_not_block_another_step(
    repo: Path, episode: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ready, go = tmp_path / "ready", tmp_path / "go"
    script = (
        "import os, pathlib, time\n"
        "(pathlib.Path(os.environ['JOBSTATE_OUTPUT_DIR']) / 'writing.bin').write_bytes(b'...')\n"
        f"pathlib.Path({str(ready)!r}).write_text('x')\n"
        f"while not pathlib.Path({str(go)!r}).exists(): time.sleep(0.05)\n"
    )
    proc = _start_run(repo, "generate", script)
    try:
        _wait_for(ready, proc)
        code, err = _cli(repo, capsys, "run", "--episode", EID, "--step", "render", "--", *stable_cmd("pass"))
        assert code == 0, err  # generate writes in its own staging directory: the episode is as committed
        assert (repo / ".jobstate" / "work" / EID / "generate" / "1" / "writing.bin").exists()
    finally:
        go.write_text("go")
        proc.wait(timeout=60)
    assert proc.returncode == 0
    assert status(repo) == ""


def test_an_early_remote_ref_of_a_killed_run_is_taken_as_acceptance(
    repo: Path, episode: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # jobstate and CMD killed: the reference was never recorded
    _killed_after(
        repo, tmp_path, "pathlib.Path(os.environ['JOBSTATE_RESULT']).write_text(json.dumps({'remote_ref': 'task-9'}))\n"
    )
    seen = tmp_path / "seen"
    resume = (
        "import json, os, pathlib\n"
        f"pathlib.Path({str(seen)!r}).write_text(os.environ.get('JOBSTATE_REMOTE_REF', 'none'))\n"
        "report = {'remote_ref': 'task-9', 'cost': {'amount': '12.40', 'currency': 'USD'}}\n"
        "pathlib.Path(os.environ['JOBSTATE_RESULT']).write_text(json.dumps(report))\n"
    )
    code, err = _cli(repo, capsys, "run", "--episode", EID, "--step", "generate", "--", *stable_cmd(resume))
    assert code == 0, err
    assert "names remote task task-9; recorded as accepted" in err
    assert seen.read_text() == "task-9"  # resumed, not resubmitted
    subs = (repo / episode_dir(EID) / "submissions.yaml").read_text()
    assert "by: jobstate" in subs
    assert subs.count("attempt: ") == 1
    assert status(repo) == ""


def test_a_half_written_early_result_proves_nothing(
    repo: Path, episode: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        _cli(repo, capsys, "run", "--episode", EID, "--step", "generate", "--", *stable_cmd("raise SystemExit(1)"))[0]
        == 9
    )
    result = repo / ".jobstate" / "results" / f"{EID}.generate.1.json"
    result.write_text('{"remote_ref": "task-')  # killed mid-write
    code, err = _cli(repo, capsys, "run", "--episode", EID, "--step", "generate", "--", *stable_cmd("pass"))
    assert code == 6, err
    assert "jobstate resolve" in err


def test_a_killed_completes_temp_file_in_history_is_removed_by_the_next_complete(
    repo: Path, episode: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _cli(repo, capsys, "approve", "--episode", EID, "--by", "ed")[0] == 0
    (repo / "history" / ".tmp-k1ll3d").write_text("schema: 1\nepisode_id: 2026-W3")
    code, err = _cli(repo, capsys, "complete", "--episode", EID)
    assert code == 0, err
    assert "removed history/.tmp-k1ll3d" in err
    assert status(repo) == ""
    assert _cli(repo, capsys, "verify", "--strict")[0] == 0


def test_a_charge_a_killed_run_reported_is_recorded_by_the_next_run(
    repo: Path, episode: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], store: Store
) -> None:
    ready = tmp_path / "ready"
    report = {"remote_ref": "task-7", "cost": {"amount": "12.40", "currency": "USD"}}
    script = (
        "import json, os, pathlib, time\n"
        f"if not os.environ.get('JOBSTATE_REMOTE_REF'):\n"
        f"    pathlib.Path(os.environ['JOBSTATE_RESULT']).write_text(json.dumps({report!r}))\n"
        + textwrap.indent(_hold(ready), "    ")
    )
    proc = _start_run(repo, "generate", script)
    _wait_for(ready, proc)
    _kill_both(proc, ready)  # charged and reported, then killed before jobstate recorded it
    code, err = _cli(repo, capsys, "run", "--episode", EID, "--step", "generate", "--", *stable_cmd(script))
    assert code == 0, err
    assert "recorded 12.40 USD that an interrupted run" in err
    entries = cost_entries(store, EID)
    assert [(e.amount, e.currency, e.remote_ref) for e in entries] == [("12.40", "USD", "task-7")]
    assert status(repo) == ""
