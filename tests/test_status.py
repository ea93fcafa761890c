"""list and show tell what an episode is now, derived from its records (issue 10, class 7)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jobstate.core.approvals import Decision, new_decision
from jobstate.core.attempts import Attempt, attempt_from_yaml_dict
from jobstate.core.status import STATUSES, episode_status
from jobstate.main import main

from .conftest import run_cli, stable_cmd
from .snapshots import tree_state

EID = "2026-W32-0"


def _decision(status: str) -> Decision:
    return new_decision(status, "editor", "2026-08-07T10:00:00Z", None)


def _attempt(state: str) -> Attempt:
    return attempt_from_yaml_dict({"attempt": 1, "state": state}, "submissions.yaml", "gen")


@pytest.mark.parametrize(
    ("steps", "approval", "completed", "running", "expected"),
    [
        ({}, None, False, (), "allocated"),
        ({"gen": [_attempt("not-submitted")]}, None, False, (), "allocated"),
        ({"gen": [_attempt("intent")]}, None, False, (), "unknown"),
        ({"gen": [_attempt("intent")]}, None, False, ("gen",), "running"),
        ({}, None, False, ("gen",), "running"),  # locked, intent not yet written
        ({"gen": [_attempt("accepted")]}, None, False, (), "running"),
        ({"gen": [_attempt("completed")]}, None, False, (), "awaiting-review"),
        ({"gen": [_attempt("completed")]}, _decision("approved"), False, (), "approved"),
        ({"gen": [_attempt("completed")]}, _decision("rejected"), False, (), "rejected"),
        ({"gen": [_attempt("completed")], "fix": [_attempt("intent")]}, _decision("rejected"), False, (), "unknown"),
        ({"gen": [_attempt("completed")]}, _decision("approved"), True, (), "completed"),
    ],
)
def test_episode_status_is_derived_from_the_records(
    steps: dict[str, list[Attempt]],
    approval: Decision | None,
    completed: bool,
    running: tuple[str, ...],
    expected: str,
) -> None:
    assert expected in STATUSES
    assert episode_status(steps=steps, approval=approval, completed=completed, running=running) == expected


def _cli(repo: Path, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    capsys.readouterr()
    code = main(["--repo", str(repo), *args])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def _status(repo: Path, capsys: pytest.CaptureFixture[str]) -> tuple[str, str, str]:
    listed = _cli(repo, capsys, "list").split("\t")[1]
    shown = json.loads(_cli(repo, capsys, "show", EID, "--json"))["status"]
    text = next(line for line in _cli(repo, capsys, "show", EID).splitlines() if line.startswith("status:"))
    return listed, shown, text.removeprefix("status: ")


def _run(repo: Path, capsys: pytest.CaptureFixture[str], script: str, step: str = "generate") -> int:
    capsys.readouterr()
    return main(["--repo", str(repo), "run", "--episode", EID, "--step", step, "--", *stable_cmd(script)])


def test_list_and_show_follow_the_episode_through_its_life(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _cli(repo, capsys, "allocate", "--key", "k", "--week", "2026-W32")
    assert _status(repo, capsys) == ("allocated",) * 3
    assert _run(repo, capsys, "raise SystemExit(1)") == 9  # nothing reported: unknown
    assert _status(repo, capsys) == ("unknown",) * 3
    _cli(
        repo,
        capsys,
        "resolve",
        "--episode",
        EID,
        "--step",
        "generate",
        "--accepted",
        "t-1",
        "--by",
        "o",
        "--reason",
        "r",
    )
    assert _status(repo, capsys) == ("running",) * 3  # accepted by the vendor, not collected yet
    report = json.dumps({"remote_ref": "t-1", "cost": {"amount": "12.40", "currency": "USD"}})
    assert _run(repo, capsys, f"import os; open(os.environ['JOBSTATE_RESULT'], 'w').write({report!r})") == 0
    assert _status(repo, capsys) == ("awaiting-review",) * 3  # done at the vendor, nobody decided yet
    _cli(repo, capsys, "approve", "--episode", EID, "--by", "ed", "--reject", "--reason", "too long")
    assert _status(repo, capsys) == ("rejected",) * 3
    _cli(repo, capsys, "approve", "--episode", EID, "--by", "ed")
    assert _status(repo, capsys) == ("approved",) * 3
    _cli(repo, capsys, "complete", "--episode", EID)
    assert _status(repo, capsys) == ("completed",) * 3
    shown = json.loads(_cli(repo, capsys, "show", EID, "--json"))
    assert shown["steps"]["generate"]["status"] == "completed"
    assert [a["state"] for a in shown["steps"]["generate"]["attempts"]] == ["completed"]
    assert shown["cost_totals"] == {"USD": "12.40"}
    assert shown["costs"][0]["remote_ref"] == "t-1"
    assert shown["approval"]["status"] == "approved"
    assert shown["completed_at"]
    text = _cli(repo, capsys, "show", EID, "--records")
    assert "cost_totals:" in text
    assert "USD: '12.40'" in text
    assert "cost_totals" not in _cli(repo, capsys, "show", EID)


def test_a_step_running_now_is_running(repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _cli(repo, capsys, "allocate", "--key", "k", "--week", "2026-W32")
    started, go = tmp_path / "started", tmp_path / "go"
    script = (
        "import pathlib, time\n"
        f"pathlib.Path({str(started)!r}).write_text('x')\n"
        f"while not pathlib.Path({str(go)!r}).exists(): time.sleep(0.05)\n"
    )
    args = ["run", "--episode", EID, "--step", "generate", "--", *stable_cmd(script)]
    proc = subprocess.Popen([sys.executable, "-m", "jobstate", "--repo", str(repo), *args], stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not started.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert started.exists(), f"jobstate run did not start CMD (exit {proc.poll()})"
        assert _status(repo, capsys) == ("running",) * 3
    finally:
        go.write_text("go")
        _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert _status(repo, capsys) == ("awaiting-review",) * 3  # the step completed, nobody decided yet


def test_show_and_list_are_read_only(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _cli(repo, capsys, "allocate", "--key", "k", "--week", "2026-W32")
    assert _run(repo, capsys, "raise SystemExit(1)") == 9
    before = tree_state(repo)
    _cli(repo, capsys, "show", EID, "--json")
    _cli(repo, capsys, "show", EID, "--records")
    _cli(repo, capsys, "list", "--json")
    assert tree_state(repo) == before


def test_show_in_a_clone_that_may_be_behind_the_remote_does_not_advise_allocating(tmp_path: Path) -> None:
    from .test_transaction_remote import make_hosts

    _bare, (one, two) = make_hosts(tmp_path, 2)
    eid = run_cli("allocate", "--key", "k", "--week", "2026-W32", cwd=one).stdout.strip()
    proc = run_cli("show", eid, cwd=two)  # two has not fetched yet
    assert proc.returncode == 5
    assert "may be behind origin" in proc.stderr
    assert "allocate it first" not in proc.stderr
    assert run_cli("show", eid, cwd=one).returncode == 0


@pytest.mark.parametrize("content", ["empty", "notes"])
def test_unknown_content_in_state_is_named_and_kept(
    repo: Path, capsys: pytest.CaptureFixture[str], content: str
) -> None:
    _cli(repo, capsys, "allocate", "--key", "k", "--week", "2026-W32")
    stray = repo / "state" / "drafts"
    stray.mkdir()
    if content == "notes":
        (stray / "notes.txt").write_text("mine\n")
    capsys.readouterr()
    code = main(["--repo", str(repo), "list"])
    err = capsys.readouterr().err
    assert code == 2, err  # untracked: dirty state
    assert "state/drafts is not an episode (it has no episode.yaml)" in err
    assert stray.is_dir()
    assert content == "empty" or (stray / "notes.txt").read_text() == "mine\n"


def test_awaiting_review_is_its_own_word_in_list_show_report_and_json(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _cli(repo, capsys, "allocate", "--key", "k", "--week", "2026-W32")
    assert _run(repo, capsys, "import os; open(os.environ['JOBSTATE_RESULT'], 'w').write('{}')") == 0
    assert _status(repo, capsys) == ("awaiting-review",) * 3
    listed = json.loads(_cli(repo, capsys, "list", "--json"))
    assert [e["status"] for e in listed] == ["awaiting-review"]
    report = json.loads(_cli(repo, capsys, "report", "--format", "json"))
    assert report["periods"][0]["statuses"] == {"awaiting-review": 1}
    assert "awaiting-review" in _cli(repo, capsys, "report")
    assert "awaiting-review" in _cli(repo, capsys, "report", "--format", "html")
    _cli(repo, capsys, "approve", "--episode", EID, "--by", "ed")
    assert _status(repo, capsys) == ("approved",) * 3
