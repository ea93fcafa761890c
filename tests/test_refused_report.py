"""No wedge from jobstate's own leftovers (issue 20, part 4): a refused report is kept for the operator
and stops blocking its step; a resumed task reported under another reference has a command that
records it (``resolve --accepted NEW --replaces OLD``) or is left unrecorded."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from jobstate.core.attempts import attempt_from_yaml_dict
from jobstate.core.model import attempt_change, attempts_violations
from jobstate.core.records import AttemptState
from jobstate.core.rules_attempts import replacement
from jobstate.store.records import cost_entries, submissions
from jobstate.store.store import Store

from .conftest import git, run_cli, status


@pytest.fixture
def episode(repo: Path) -> str:
    proc = run_cli("allocate", "--key", "k1", "--date", "2026-08-07", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()[0]


def _cmd(
    tmp_path: Path, name: str, report: dict[str, object], *, code: int = 0, resumes: str | None = None
) -> list[str]:
    """A step's command that writes ``report`` and exits ``code``; with ``resumes``, it first checks that
    jobstate handed it that remote task to resume (exit 3 otherwise). One file (``name`` is for the
    reader): the argv, and so the request's fingerprint, stays the same across runs."""
    script = tmp_path / "step.py"
    check = (
        f"if os.environ.get('JOBSTATE_REMOTE_REF') != {resumes!r}: raise SystemExit(3)\n" if resumes is not None else ""
    )
    script.write_text(
        f"import json, os\n{check}"
        f"open(os.environ['JOBSTATE_RESULT'], 'w').write(json.dumps({report!r}))\n"
        f"raise SystemExit({code})\n",
        encoding="utf-8",
    )
    return [sys.executable, str(script)]


def _run(repo: Path, episode: str, cmd: list[str]) -> tuple[int, str]:
    # not run_cli: a resumed run says so on stderr before the error line
    args = [sys.executable, "-m", "jobstate", "run", "--episode", episode, "--step", "generate", "--", *cmd]
    proc = subprocess.run(args, cwd=repo, capture_output=True, text=True, check=False, timeout=60)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, proc.stderr


def _attempts(store: Store, episode: str) -> list[tuple[int, str, str | None]]:
    return [(a.number, a.state.value, a.remote_ref) for a in submissions(store, episode)["generate"]]


def test_a_refused_report_is_kept_aside_and_the_step_goes_on(
    store: Store, repo: Path, episode: str, tmp_path: Path
) -> None:
    usd = {"currency": "USD"}
    assert (
        _run(repo, episode, _cmd(tmp_path, "a", {"remote_ref": "task-1", "cost": {"amount": "12.40", **usd}}, code=1))[
            0
        ]
        == 9
    )
    code, err = _run(repo, episode, _cmd(tmp_path, "b", {"remote_ref": "task-1", "cost": {"amount": "13.00", **usd}}))
    assert code == 4, err
    kept = re.search(r"kept at (\.jobstate/refused/\S+\.json)", err)
    assert kept, err
    assert json.loads((repo / kept[1]).read_text())["cost"]["amount"] == "13.00"
    assert not list((repo / ".jobstate" / "results").glob(f"{episode}.*"))
    shown = run_cli("show", episode, cwd=repo)
    assert kept[1] in shown.stdout

    # the refused report is not read again: the next run resumes the task and records its replay
    code, err = _run(
        repo,
        episode,
        _cmd(tmp_path, "c", {"remote_ref": "task-1", "cost": {"amount": "12.40", **usd}}, resumes="task-1"),
    )
    assert code == 0, err
    assert _attempts(store, episode) == [(1, "completed", "task-1")]
    assert [(e.amount, e.remote_ref) for e in cost_entries(store, episode)] == [("12.40", "task-1")]
    assert (repo / kept[1]).is_file()  # kept for the operator
    assert run_cli("approve", "--episode", episode, "--by", "ops", cwd=repo).returncode == 0
    assert status(repo) == ""


def test_a_killed_runs_contradicting_report_is_refused_once(
    store: Store, repo: Path, episode: str, tmp_path: Path
) -> None:
    usd = {"currency": "USD"}
    assert (
        _run(repo, episode, _cmd(tmp_path, "a", {"remote_ref": "task-1", "cost": {"amount": "12.40", **usd}}, code=1))[
            0
        ]
        == 9
    )
    # a resumed run killed after its command wrote this report, before jobstate recorded it
    result = repo / ".jobstate" / "results" / f"{episode}.generate.1.json"
    result.write_text(json.dumps({"remote_ref": "task-1", "cost": {"amount": "13.00", **usd}}), encoding="utf-8")
    replay = _cmd(tmp_path, "b", {"remote_ref": "task-1", "cost": {"amount": "12.40", **usd}}, resumes="task-1")
    code, err = _run(repo, episode, replay)
    assert code == 4, err
    assert "kept at .jobstate/refused/" in err
    assert not result.exists()
    code, err = _run(repo, episode, replay)
    assert code == 0, err
    assert _attempts(store, episode) == [(1, "completed", "task-1")]


def _reported_under_another_reference(repo: Path, episode: str, tmp_path: Path) -> str:
    """Attempt 1 accepted as task-A; resumed, the command reports task-B: refused, the advice returned."""
    assert _run(repo, episode, _cmd(tmp_path, "a", {"remote_ref": "task-A"}, code=1))[0] == 9
    code, err = _run(repo, episode, _cmd(tmp_path, "b", {"remote_ref": "task-B"}, resumes="task-A"))
    assert code == 2, err
    assert "kept at .jobstate/refused/" in err
    return err


def test_the_advised_command_records_a_resumed_task_under_its_new_reference(
    store: Store, repo: Path, episode: str, tmp_path: Path
) -> None:
    before = git(repo, "rev-parse", "HEAD").strip()
    err = _reported_under_another_reference(repo, episode, tmp_path)
    advised = re.search(r"record it with: (jobstate resolve [^;]*)", err)
    assert advised, err
    words = shlex.split(advised[1])
    assert words[-4:] == ["--by", "NAME", "--reason", "TEXT"]
    assert words[words.index("--accepted") + 1] == "task-B"
    assert words[words.index("--replaces") + 1] == "task-A"
    args = [*words[1:-4], "--by", "ops", "--reason", "the vendor moved the task to its new queue"]
    key = submissions(store, episode)["generate"][0].idempotency_key

    proc = run_cli(*args, cwd=repo)
    assert proc.returncode == 0, proc.stderr
    assert "will resume remote task task-B" in proc.stdout  # what the message says it does
    attempts = submissions(store, episode)["generate"]
    assert _attempts(store, episode) == [(1, "superseded", "task-A"), (2, "accepted", "task-B")]
    assert attempts[1].idempotency_key == key  # the same submission: nothing new is sent
    assert (attempts[0].resolution or {})["replaced_by"] == "task-B"
    assert run_cli(*args, cwd=repo).returncode == 0  # a re-run records nothing new
    assert len(submissions(store, episode)["generate"]) == 2

    code, err = _run(repo, episode, _cmd(tmp_path, "c", {"remote_ref": "task-B"}, resumes="task-B"))
    assert code == 0, err
    assert _attempts(store, episode) == [(1, "superseded", "task-A"), (2, "completed", "task-B")]
    assert run_cli("verify", "--strict", cwd=repo).returncode == 0
    diff = json.loads(run_cli("diff", before, "--format", "json", cwd=repo).stdout)
    assert diff["alarms"] == []
    assert status(repo) == ""


def test_a_new_reference_left_unrecorded_is_rejected_and_the_old_task_resumed(
    store: Store, repo: Path, episode: str, tmp_path: Path
) -> None:
    err = _reported_under_another_reference(repo, episode, tmp_path)
    assert "if not, nothing is recorded and the next run resumes task-A" in err
    code, err = _run(repo, episode, _cmd(tmp_path, "c", {"remote_ref": "task-A"}, resumes="task-A"))
    assert code == 0, err
    assert _attempts(store, episode) == [(1, "completed", "task-A")]


def test_replaces_is_refused_unless_the_step_resumes_that_task(repo: Path, episode: str, tmp_path: Path) -> None:
    assert _run(repo, episode, _cmd(tmp_path, "a", {"remote_ref": "task-A"}, code=1))[0] == 9
    head = git(repo, "rev-parse", "HEAD")
    base = ("resolve", "--episode", episode, "--step", "generate", "--by", "ops", "--reason", "moved")
    proc = run_cli(*base, "--accepted", "task-B", "--replaces", "task-X", cwd=repo)
    assert proc.returncode == 2, proc.stderr
    assert "not accepted as remote task task-X" in proc.stderr
    proc = run_cli(*base, "--not-submitted", "--replaces", "task-A", cwd=repo)
    assert proc.returncode == 2, proc.stderr
    assert "--replaces OLD_REF needs --accepted NEW_REF" in proc.stderr
    assert git(repo, "rev-parse", "HEAD") == head


def _accepted(number: int, ref: str, **extra: object) -> dict[str, object]:
    fields = {"attempt": number, "state": "accepted", "idempotency_key": f"key-{number}", "remote_ref": ref}
    return {**fields, **extra}


def test_the_model_checks_a_replacement_and_keeps_an_earlier_decision() -> None:
    resolved = {"decision": "accepted", "by": "ops", "at": "2026-08-07T10:00:00Z", "reason": "checked"}
    last = attempt_from_yaml_dict(_accepted(1, "task-A", resolution=resolved), "s", "gen")
    closed, new = replacement(last, "task-B", by="ops", at="2026-08-07T11:00:00Z", reason="moved")
    assert attempt_change("E", last, closed) == []  # the earlier decision is kept under previous
    assert (closed.resolution or {})["previous"] == resolved
    assert attempts_violations("E", {"gen": [closed, new]}) == []
    assert new.state == AttemptState.ACCEPTED
    assert new.idempotency_key == "key-1"
    forged = attempt_from_yaml_dict(
        _accepted(2, "task-B", resolution={"decision": "accepted", "replaces": "task-A", "by": "x"}), "s", "gen"
    )
    found = attempts_violations("E", {"gen": [closed, forged]})
    assert [v.field for v in found] == ["gen attempt 2 remote_ref"]
    assert "same idempotency key" in found[0].rule
    overwritten = last.updated(state="superseded", resolution={"decision": "superseded", "by": "x"})
    assert [v.field for v in attempt_change("E", last, overwritten)] == ["gen attempt 1 resolution"]
