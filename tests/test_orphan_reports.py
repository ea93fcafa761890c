"""An orphan's report is evidence and its charges are never dropped (issue 29, point 6): the charge a
killed run's CMD reported is recorded before anything is decided on the step, and resolve
--not-submitted is refused while a report of the attempt names a charge or a task."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobstate.main import main
from jobstate.store.records import cost_entries
from jobstate.store.store import Store

from .conftest import stable_cmd
from .test_running import EID, _cli, _killed_after

NOT_SUBMITTED = ["resolve", "--episode", EID, "--step", "generate", "--not-submitted", "--by", "ops", "--reason", "r"]


@pytest.fixture
def episode(repo: Path) -> str:
    assert main(["--repo", str(repo), "allocate", "--key", "k", "--week", "2026-W32"]) == 0
    return EID


def _report(text: str) -> str:
    return f"pathlib.Path(os.environ['JOBSTATE_RESULT']).write_text(json.dumps({text}))\n"


@pytest.mark.parametrize(
    "report",
    [
        "{'cost': {'amount': '3.50', 'currency': 'USD'}}",
        "{'submitted': False, 'error': 'quota', 'cost': {'amount': '3.50', 'currency': 'USD'}}",
    ],
)
def test_a_charge_an_orphaned_cmd_reported_is_recorded_and_not_submitted_is_refused(
    repo: Path, episode: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], report: str
) -> None:
    _killed_after(repo, tmp_path, _report(report))
    code, err = _cli(repo, capsys, "run", "--episode", EID, "--step", "generate", "--", *stable_cmd("pass"))
    assert code == 6, err  # still unknown: no task was named, a person decides
    assert "3.50 USD that an interrupted run of step generate reported" in err, err
    with Store(repo) as store:
        assert [(c.amount, c.attempt) for c in cost_entries(store, EID)] == [("3.50", 1)]
    code, err = _cli(repo, capsys, *NOT_SUBMITTED)
    assert code == 2, err
    assert "names a charge" in err, err
    code, err = _cli(repo, capsys, "run", "--episode", EID, "--step", "generate", "--", *stable_cmd("pass"))
    assert code == 6, err  # recorded once: a replay is recognised
    with Store(repo) as store:
        assert len(cost_entries(store, EID)) == 1


def test_a_charge_with_a_task_is_recorded_once_when_the_task_is_resumed(
    repo: Path, episode: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _killed_after(repo, tmp_path, _report("{'remote_ref': 'task-7', 'cost': {'amount': '3.50', 'currency': 'USD'}}"))
    code, err = _cli(repo, capsys, *NOT_SUBMITTED)
    assert code == 2, err
    assert "task-7" in err, err
    code, err = _cli(repo, capsys, "run", "--episode", EID, "--step", "generate", "--", *stable_cmd("pass"))
    assert code == 0, err
    with Store(repo) as store:
        assert [(c.amount, c.remote_ref) for c in cost_entries(store, EID)] == [("3.50", "task-7")]
