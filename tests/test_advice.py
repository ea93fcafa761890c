"""Wherever an error suggests a command, running that command in that situation does what the
message says (issue 18, part 2). The suggestion is taken from the message itself, never retyped."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from jobstate import errors
from jobstate.core.layout import episode_dir
from jobstate.main import main

from .conftest import git, status
from .legacy import make_legacy_repo

EID = "2026-W32-0"
EDIR = f"{episode_dir(EID)}"
CMD = """import json, os, sys
spec = json.load(open(sys.argv[1]))
for name, text in spec.get("write", {}).items():  # outputs go to the attempt's staging directory
    open(os.path.join(os.environ["JOBSTATE_OUTPUT_DIR"], name), "w").write(text)
for name, text in spec.get("write_episode", {}).items():  # a CMD that breaks the rule
    open(os.path.join(os.environ["JOBSTATE_EPISODE_DIR"], name), "w").write(text)
if spec["fields"] is not None:
    json.dump(spec["fields"], open(os.environ["JOBSTATE_RESULT"], "w"))
sys.exit(spec["code"])
"""


def _cli(repo: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["--repo", str(repo), *args])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


def _run(
    repo: Path,
    capsys: pytest.CaptureFixture[str],
    step: str,
    fields: dict[str, object] | None,
    *,
    code: int = 0,
    write: dict[str, str] | None = None,
    write_episode: dict[str, str] | None = None,
    request: str = "one",
) -> tuple[int, str]:
    """jobstate run with a CMD whose argv stays the same (so does its fingerprint unless ``request`` changes)."""
    spec = repo.parent / "spec.json"
    spec.write_text(
        json.dumps({"fields": fields, "code": code, "write": write or {}, "write_episode": write_episode or {}})
    )
    req = repo.parent / "request.txt"
    req.write_text(request)
    cmd = [sys.executable, "-c", CMD, str(spec)]
    return _cli(repo, capsys, "run", "--episode", EID, "--step", step, "--request", str(req), "--", *cmd)


def _suggested(err: str, program: str) -> list[str]:
    """The ``program`` command the message suggests, as argv (the message shell-quotes it)."""
    found = re.search(rf"(?:with|run): ({program} [^;()\n]*?)(?: \(|;|$)", err, re.MULTILINE)
    assert found, f"no {program} command suggested in: {err}"
    return shlex.split(found[1])


def _git_advice(repo: Path, err: str) -> None:
    argv = _suggested(err, "git")
    subprocess.run(argv, cwd=repo, check=True, capture_output=True)


@pytest.fixture
def allocated(repo: Path) -> Path:
    assert main(["--repo", str(repo), "allocate", "--key", "k", "--week", "2026-W32"]) == 0
    return repo


def test_a_staged_new_file_is_unstaged_by_the_advice(allocated: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = allocated
    (repo / EDIR / "draft.txt").write_text("mine\n")
    git(repo, "add", f"{EDIR}/draft.txt")
    code, err = _run(repo, capsys, "generate", {})
    assert code == errors.USAGE, err
    assert "git checkout --" not in err, "checkout does not unstage a new file"
    _git_advice(repo, err)
    assert git(repo, "diff", "--cached", "--name-only") == "", "the advice unstaged it"
    assert (repo / EDIR / "draft.txt").read_text() == "mine\n", "and kept the file"
    code, err = _run(repo, capsys, "generate", {})
    assert code == errors.USAGE, "untracked now, and still in the episode: the fence still refuses"
    assert "move it out of the episode directory" in err
    (repo / EDIR / "draft.txt").rename(repo.parent / "draft.txt")
    code, err = _run(repo, capsys, "generate", {})
    assert code == 0, err


@pytest.mark.parametrize("staged", [False, True])
def test_a_changed_or_deleted_committed_file_is_restored_by_the_advice(
    allocated: Path, capsys: pytest.CaptureFixture[str], staged: bool
) -> None:
    repo = allocated
    assert _run(repo, capsys, "generate", {"remote_ref": "t1", "artifacts": ["a.txt"]}, write={"a.txt": "v1"})[0] == 0
    if staged:
        git(repo, "rm", "-q", f"{EDIR}/a.txt")  # a staged deletion: checkout from the index alone would fail
    else:
        (repo / EDIR / "a.txt").write_text("edited by hand")
    code, err = _run(repo, capsys, "cover", {})
    assert code == errors.USAGE, err
    _git_advice(repo, err)
    assert (repo / EDIR / "a.txt").read_text() == "v1"
    assert status(repo) == ""
    assert _run(repo, capsys, "cover", {})[0] == 0


@pytest.mark.parametrize("command", ["run", "show", "allocate"])
def test_a_deleted_committed_episode_is_restored_by_the_advice(
    allocated: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    repo = allocated
    shutil.rmtree(repo / EDIR)
    args = {
        "run": ["run", "--episode", EID, "--step", "generate", "--", sys.executable, "-c", "pass"],
        "show": ["show", EID],
        "allocate": ["allocate", "--key", "k", "--week", "2026-W32"],
    }[command]
    code, err = _cli(repo, capsys, *args)
    assert code == errors.USAGE, err
    assert "allocate it first" not in err, "allocating again would give the same run another ID"
    _git_advice(repo, err)
    assert status(repo) == ""
    code, err = _cli(repo, capsys, "show", EID)
    assert code == 0, err


def test_a_command_that_changes_a_committed_file_unreported_fails_and_the_advice_restores_it(
    allocated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = allocated
    assert _run(repo, capsys, "generate", {"remote_ref": "t1", "artifacts": ["a.txt"]}, write={"a.txt": "v1"})[0] == 0
    code, err = _run(repo, capsys, "cover", {"remote_ref": "t2"}, write_episode={"a.txt": "v2"})
    assert code == errors.USAGE, f"run never exits 0 leaving the tree dirty: {err}; {git(repo, 'status', '--short')}"
    assert f"{EDIR}/a.txt" in err
    _git_advice(repo, err)
    assert status(repo) == ""
    code, err = _run(repo, capsys, "cover", {})
    assert code == 0, err
    assert "already completed" in err, "the step itself was recorded as completed"


def test_an_empty_remote_ref_is_refused_and_the_advice_resolves_it(
    allocated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = allocated
    code, err = _run(repo, capsys, "generate", {"remote_ref": ""})
    assert code == errors.USAGE, err
    assert "--accepted  " not in err
    assert "remote_ref" in err
    argv = _suggested(err, "jobstate")  # up to the choice, which is the operator's: (--accepted REF | --not-submitted)
    assert "(--accepted REMOTE_REF | --not-submitted) --by NAME --reason TEXT" in err
    code, err = _cli(repo, capsys, *argv[1:], "--not-submitted", "--by", "ops", "--reason", "vendor has no task")
    assert code == 0, err
    code, err = _run(repo, capsys, "generate", {"remote_ref": "t1"})
    assert code == 0, err


def test_accepted_and_not_submitted_at_once_is_refused(allocated: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = allocated
    code, err = _run(repo, capsys, "generate", {"remote_ref": "t", "submitted": False})
    assert code == errors.USAGE, err
    assert "contradicts itself" in err
    assert "completed" not in (repo / EDIR / "submissions.yaml").read_text()
    assert _run(repo, capsys, "generate", {"remote_ref": "t"})[0] == errors.SUBMISSION_UNKNOWN


def test_a_later_step_reporting_the_same_artifact_is_warned_about(
    allocated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = allocated
    assert _run(repo, capsys, "generate", {"artifacts": ["a.txt"]}, write={"a.txt": "v1"})[0] == 0
    code, err = _run(repo, capsys, "cover", {"artifacts": ["a.txt"]}, write={"a.txt": "v2"})
    assert code == 0, err
    assert "warning: step cover reports artifact a.txt, which step generate recorded earlier" in err


def test_a_changed_request_on_an_accepted_attempt_gets_advice_that_is_accepted(
    allocated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = allocated
    assert _run(repo, capsys, "generate", {"remote_ref": "t1"}, code=1)[0] == errors.COMMAND_FAILED  # accepted
    code, err = _run(repo, capsys, "generate", {}, request="two")
    assert code == errors.ALLOCATION_CONFLICT, err
    assert "collect it first" in err
    # the advice, in its order: the recorded request again (it resumes), then the supersede it names
    assert _run(repo, capsys, "generate", {"remote_ref": "t1"})[0] == 0
    argv = _suggested(err, "jobstate")
    code, err = _cli(repo, capsys, *[{"NAME": "ops", "TEXT": "new brief"}.get(a, a) for a in argv[1:]])
    assert code == 0, err
    code, err = _run(repo, capsys, "generate", {"remote_ref": "t2"}, request="two")
    assert code == 0, err


def test_a_changed_request_on_an_unknown_attempt_gets_advice_that_is_accepted(
    allocated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = allocated
    assert _run(repo, capsys, "generate", None, code=1)[0] == errors.COMMAND_FAILED  # unknown
    code, err = _run(repo, capsys, "generate", {}, request="two")
    assert code == errors.ALLOCATION_CONFLICT, err
    assert "settle it first with: jobstate resolve" in err
    # the advice, in its order: settle the unknown attempt (not submitted here), then the changed request runs
    resolve = ["resolve", "--episode", EID, "--step", "generate", "--by", "ops", "--reason", "r", "--not-submitted"]
    assert _cli(repo, capsys, *resolve)[0] == 0
    code, err = _run(repo, capsys, "generate", {"remote_ref": "t2"}, request="two")
    assert code == 0, err


def test_resolve_names_the_decision_on_record(allocated: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = allocated
    assert _run(repo, capsys, "generate", None, code=1)[0] == errors.COMMAND_FAILED  # unknown
    resolve = ["resolve", "--episode", EID, "--step", "generate", "--by", "ops", "--reason", "r"]
    assert _cli(repo, capsys, *resolve, "--not-submitted")[0] == 0
    code, err = _cli(repo, capsys, *resolve, "--accepted", "t1")
    assert code == errors.USAGE, err
    assert "already resolved as not-submitted" in err
    assert "resolved as accepted" not in err


def test_a_legacy_repository_says_run_jobstate_migrate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = tmp_path / "legacy"
    make_legacy_repo(repo, ["2026-W30", "2026-W31"])
    code, err = _cli(repo, capsys, "list")
    assert code == errors.STATE_INVALID, err
    assert "upgrade jobstate" not in err
    argv = _suggested(err, "jobstate")
    assert argv == ["jobstate", "migrate"]
    assert _cli(repo, capsys, *argv[1:])[0] == 0
    code, err = _cli(repo, capsys, "list")
    assert code == 0, err


@pytest.mark.parametrize("command", ["allocate", "list", "report"])
def test_a_short_week_gets_the_week_format(allocated: Path, capsys: pytest.CaptureFixture[str], command: str) -> None:
    args = {
        "allocate": ["allocate", "--key", "x", "--week", "2026-W1"],
        "list": ["list", "--period", "2026-W1"],
        "report": ["report", "--period", "2026-W1"],
    }[command]
    code, err = _cli(allocated, capsys, *args)
    assert code == errors.USAGE, err
    assert "YYYY-Www" in err
    assert "YYYY-MM-DD" not in err
