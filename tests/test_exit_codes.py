"""One kind of failure, one exit code, in every command that can meet it (issue 10, class 6)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from jobstate import errors
from jobstate.core.layout import episode_dir
from jobstate.main import main
from jobstate.store.init import init

from .conftest import git, plain_repo
from .snapshots import written_state

EID = "2026-W32-0"


def _allocated(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    store, _ = init(path, git_init=True)
    store.close()
    assert main(["--repo", str(path), "allocate", "--key", "k", "--week", "2026-W32"]) == 0
    return path


def _uninitialised(tmp_path: Path) -> Path:
    return plain_repo(tmp_path / "plain-git")


def _not_git(tmp_path: Path) -> Path:
    path = tmp_path / "not-git"
    path.mkdir()
    return path


def _dirty_untracked(tmp_path: Path) -> Path:
    repo = _allocated(tmp_path)
    (repo / episode_dir(EID) / "prompt.txt").write_text("shorter intro\n")
    return repo


def _dirty_modified(tmp_path: Path) -> Path:
    repo = _allocated(tmp_path)
    path = repo / episode_dir(EID) / "episode.yaml"
    path.write_text(path.read_text() + "# edited\n")
    return repo


def _uncommitted(tmp_path: Path) -> Path:
    """An episode directory on disk that HEAD does not have (its commit undone), with a file of the user's."""
    repo = _allocated(tmp_path)
    git(repo, "rm", "-r", "-q", "--cached", f"{episode_dir(EID)}")
    git(repo, "commit", "-qm", "forget the episode")
    (repo / episode_dir(EID) / "notes.txt").write_text("the user's own notes\n")
    return repo


def _malformed_episode(tmp_path: Path) -> Path:
    repo = _allocated(tmp_path)
    (repo / episode_dir(EID) / "episode.yaml").write_text("schema: 1\nepisode_id: [unclosed\n")
    git(repo, "commit", "-qam", "break it")
    return repo


def _malformed_config(tmp_path: Path) -> Path:
    repo = _allocated(tmp_path)
    (repo / "jobstate.yaml").write_text("period: [iso-week\n")
    git(repo, "commit", "-qam", "break the settings")
    return repo


def _tracked_private(tmp_path: Path) -> Path:
    repo = _allocated(tmp_path)
    (repo / ".jobstate" / "undo.json").write_text("{}")
    git(repo, "add", "-f", ".jobstate/undo.json")
    git(repo, "commit", "-qm", "a pull request force-adds a private file")
    return repo


def _always_failing(tmp_path: Path) -> Path:
    return _allocated(tmp_path)


# CMD: writes what repo/../report.json says to $JOBSTATE_RESULT and exits with its code; its argv never
# changes, so that the step's request (its fingerprint) stays the same from one run to the next
CMD = """import json, os, sys
spec = json.load(open(sys.argv[1]))
if spec["fields"] is not None:
    json.dump(spec["fields"], open(os.environ["JOBSTATE_RESULT"], "w"))
sys.exit(spec["code"])
"""


def _step(repo: Path, step: str, fields: dict[str, object] | None, code: int = 0, eid: str = EID) -> int:
    spec = repo.parent / "report.json"
    spec.write_text(json.dumps({"fields": fields, "code": code}))
    return main(
        ["--repo", str(repo), "run", "--episode", eid, "--step", step, "--", sys.executable, "-c", CMD, str(spec)]
    )


def _completed(tmp_path: Path) -> Path:
    repo = _allocated(tmp_path)
    assert _step(repo, "generate", {"remote_ref": "t1"}) == 0
    assert main(["--repo", str(repo), "approve", "--episode", EID, "--by", "chief"]) == 0
    assert main(["--repo", str(repo), "complete", "--episode", EID]) == 0
    return repo


def _open_at_vendor(tmp_path: Path) -> Path:
    repo = _allocated(tmp_path)
    assert _step(repo, "generate", {"remote_ref": "t1"}, 1) == errors.COMMAND_FAILED
    return repo


def _untracked_in_state(tmp_path: Path) -> Path:
    repo = _allocated(tmp_path)
    (repo / "state" / "notes.txt").write_text("mine\n")
    return repo


def _untracked_dir_in_state(tmp_path: Path) -> Path:
    repo = _allocated(tmp_path)
    (repo / episode_dir("2026-W33-0")).mkdir(parents=True)
    (repo / episode_dir("2026-W33-0") / "draft.txt").write_text("mine\n")
    return repo


RUN = ["run", "--episode", "{eid}", "--step", "generate", "--", sys.executable, "-c", "pass"]
COMMANDS: dict[str, list[str]] = {
    "allocate": ["allocate", "--key", "new-key", "--week", "2026-W32"],
    "show": ["show", "{eid}"],
    "list": ["list"],
    "run": RUN,
    "resolve": ["resolve", "--episode", "{eid}", "--step", "generate", "--not-submitted", "--by", "a", "--reason", "b"],
    "approve": ["approve", "--episode", "{eid}", "--by", "editor"],
    "complete": ["complete", "--episode", "{eid}"],
    "verify": ["verify"],
    "lock-info": ["lock-info"],
    "migrate": ["migrate", "--dry-run"],
}
EPISODE_COMMANDS = ("show", "run", "resolve", "approve", "complete")
PAID_COMMANDS = ("run", "resolve", "approve", "complete")

# kind -> (how to make it, the episode ID to use, the commands that can meet it, the code they all give)
KINDS: dict[str, tuple[Callable[[Path], Path], str, tuple[str, ...], int]] = {
    "malformed episode ID": (_allocated, "2026-W32", EPISODE_COMMANDS, errors.USAGE),
    "episode ID with a path in it": (_allocated, "../../etc", EPISODE_COMMANDS, errors.USAGE),
    "unknown episode": (_allocated, "2026-W32-7", EPISODE_COMMANDS, errors.EPISODE_UNKNOWN),
    "dirty state (untracked file)": (_dirty_untracked, EID, PAID_COMMANDS, errors.USAGE),
    "dirty state (modified record)": (_dirty_modified, EID, (*PAID_COMMANDS, "migrate"), errors.USAGE),
    # the fence refuses an episode HEAD does not have before it looks at (or moves) anything in it
    "uncommitted episode": (_uncommitted, EID, PAID_COMMANDS, errors.EPISODE_UNKNOWN),
    "uninitialised repository": (
        _uninitialised,
        EID,
        ("allocate", "show", "list", "run", "resolve", "approve", "complete", "verify"),
        errors.USAGE,
    ),
    "not a git repository": (_not_git, EID, tuple(COMMANDS), errors.USAGE),
    "malformed YAML (episode)": (
        _malformed_episode,
        EID,
        ("allocate", "show", "list", "run", "resolve", "approve", "complete", "verify"),
        errors.STATE_INVALID,
    ),
    # an untracked file in state/ is dirty state like any other (2), not invalid state (7)
    "untracked file in state/": (_untracked_in_state, EID, ("allocate",), errors.USAGE),
    "untracked directory in state/": (_untracked_dir_in_state, EID, ("allocate", "list"), errors.USAGE),
    # a new step, another decision: nothing more can be paid or decided (a repeat is 0, below)
    "completed episode": (_completed, EID, ("run", "resolve", "approve"), errors.EPISODE_COMPLETED),
    # a step the vendor accepted and nobody collected yet runs, at the vendor: busy (3), as for retire
    "a step open at the vendor": (_open_at_vendor, EID, ("approve", "complete"), errors.LOCK_OR_REMOTE),
    "malformed YAML (jobstate.yaml)": (
        _malformed_config,
        EID,
        ("allocate", "show", "list", "run", "resolve", "approve", "complete", "verify", "migrate"),
        errors.STATE_INVALID,
    ),
    # what Git delivers into .jobstate/ is never read: every committing command refuses it
    "tracked private file": (_tracked_private, EID, ("allocate", *PAID_COMMANDS), errors.USAGE),
}
CASES = [(kind, command) for kind, (_make, _eid, commands, _code) in KINDS.items() for command in commands]


@pytest.mark.parametrize(("kind", "command"), CASES, ids=[f"{k}-{c}" for k, c in CASES])
def test_each_kind_of_failure_has_one_exit_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, command: str
) -> None:
    make, eid, _commands, expected = KINDS[kind]
    repo = make(tmp_path)
    before = written_state(repo)
    capsys.readouterr()
    args = [a.replace("{eid}", eid) for a in COMMANDS[command]]
    code = main(["--repo", str(repo), *args])
    err = capsys.readouterr().err
    assert code == expected, f"{kind} through {command}: exit {code}, expected {expected}\n{err}"
    lines = err.strip().splitlines()
    assert lines, "an error says what happened on stderr"
    assert lines[-1].startswith("jobstate: "), err
    assert "Traceback" not in err
    assert written_state(repo) == before, "a refused command writes nothing, commits nothing, moves nothing aside"


@pytest.mark.parametrize("own", [1, 3, 5, 6, 7])
def test_a_failing_command_of_run_exits_9_with_its_own_code_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], own: int
) -> None:
    repo = _always_failing(tmp_path)
    cmd = [sys.executable, "-c", f"raise SystemExit({own})"]
    code = main(["--repo", str(repo), "run", "--episode", EID, "--step", "generate", "--", *cmd])
    err = capsys.readouterr().err
    assert code == errors.COMMAND_FAILED == 9, err
    assert f"exited with {own}" in err


@pytest.mark.parametrize(("make", "own"), [("missing", 127), ("not executable", 126)])
def test_a_command_that_cannot_start_is_exit_9_with_a_shells_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make: str, own: int
) -> None:
    repo = _allocated(tmp_path)
    cmd = tmp_path / "generate.sh"
    if make == "not executable":
        cmd.write_text("#!/bin/sh\n")
    code = main(["--repo", str(repo), "run", "--episode", EID, "--step", "generate", "--", str(cmd)])
    err = capsys.readouterr().err
    assert code == errors.COMMAND_FAILED, err
    assert "cannot run" in err
    assert f"{own})" in err
    assert _step(repo, "generate", {}) == 0, "it was not submitted: the next run starts a new attempt"


def test_a_failing_command_whose_report_is_refused_too_is_exit_9(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _allocated(tmp_path)
    code = _step(repo, "generate", {"cost": {"amount": 12.4, "currency": "USD"}}, 3)
    err = capsys.readouterr().err
    assert code == errors.COMMAND_FAILED, err
    assert "exited with 3" in err
    assert "refused" in err
    assert "amount" in err


def test_decisions_repeated_on_a_completed_episode_are_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = _allocated(tmp_path)
    assert _step(repo, "generate", None, 1) == errors.COMMAND_FAILED  # unknown: no result file
    resolve = ["resolve", "--episode", EID, "--step", "generate", "--accepted", "t1", "--by", "ops", "--reason", "r"]
    assert main(["--repo", str(repo), *resolve]) == 0
    assert _step(repo, "generate", {"remote_ref": "t1"}) == 0
    approve = ["approve", "--episode", EID, "--by", "editor"]
    assert main(["--repo", str(repo), *approve]) == 0
    assert main(["--repo", str(repo), "complete", "--episode", EID]) == 0
    head = git(repo, "rev-parse", "HEAD")
    capsys.readouterr()
    for again in (approve, resolve, ["complete", "--episode", EID]):
        assert main(["--repo", str(repo), *again]) == errors.OK, capsys.readouterr().err
        assert "already" in capsys.readouterr().err
    assert _step(repo, "generate", {"remote_ref": "t1"}) == errors.OK
    assert "already completed" in capsys.readouterr().err
    assert git(repo, "rev-parse", "HEAD") == head, "a repeat records nothing"
    other = [*resolve[:5], "--not-submitted", *resolve[7:]]
    assert main(["--repo", str(repo), *other]) == errors.EPISODE_COMPLETED


def test_supersede_run_twice_is_0_the_second_time(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = _allocated(tmp_path)
    assert _step(repo, "generate", {"remote_ref": "t1"}) == 0
    supersede = ["resolve", "--episode", EID, "--step", "generate", "--supersede", "--by", "ops", "--reason", "r"]
    assert main(["--repo", str(repo), *supersede]) == 0
    head = git(repo, "rev-parse", "HEAD")
    capsys.readouterr()
    assert main(["--repo", str(repo), *supersede]) == errors.OK
    assert "already superseded" in capsys.readouterr().err
    assert git(repo, "rev-parse", "HEAD") == head


def test_a_closed_stdout_ends_quietly_like_git(tmp_path: Path) -> None:
    repo = _allocated(tmp_path)
    for n in range(3):
        assert main(["--repo", str(repo), "allocate", "--key", f"more-{n}", "--week", "2026-W32"]) == 0
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "jobstate"), "--repo", str(repo), "list", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    assert proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the first write, like head -c 10 after its bytes
    err = proc.stderr.read()
    proc.stderr.close()
    assert proc.wait() == errors.STDOUT_CLOSED == 141
    assert err == b"", "no error line, no traceback, as git"


def _jobstate(repo: Path, redirect: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI with stdout as the shell's ``redirect`` leaves it (``>&-`` closed, ``>/dev/full`` full)."""
    script = f'exec "$0" -m jobstate --repo "$1" "${{@:2}}" {redirect}'
    return subprocess.run(
        ["bash", "-c", script, sys.executable, str(repo), *args], capture_output=True, text=True, check=False
    )


@pytest.mark.parametrize("command", [("allocate", "--key", "new", "--week", "2026-W33"), ("show", "2026-W32-0")])
def test_a_stdout_closed_from_the_start_is_said_and_nothing_is_done(tmp_path: Path, command: tuple[str, ...]) -> None:
    repo = _allocated(tmp_path)
    head = git(repo, "rev-parse", "HEAD")
    proc = _jobstate(repo, ">&-", *command)
    assert (proc.returncode, proc.stderr) == (
        errors.STDOUT_CLOSED,
        "jobstate: error: stdout is closed, and the answer goes there; nothing was done\n",
    )
    assert git(repo, "rev-parse", "HEAD") == head  # no ID handed out to nobody


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_an_answer_stdout_refuses_is_said_and_the_same_command_answers_it_again(tmp_path: Path) -> None:
    repo = _allocated(tmp_path)
    allocate = ("allocate", "--key", "new", "--week", "2026-W33")
    proc = _jobstate(repo, ">/dev/full", *allocate)
    assert proc.returncode == errors.STDOUT_CLOSED
    assert proc.stderr == (
        "jobstate: error: cannot write the answer to stdout (No space left on device); what the command "
        "committed stays committed: run it again to be answered\n"
    )
    again = _jobstate(repo, "", *allocate)
    assert (again.returncode, again.stdout) == (errors.OK, "2026-W33-0\n")
    assert _jobstate(repo, ">/dev/full", "report").returncode == errors.STDOUT_CLOSED


@pytest.mark.parametrize(
    "command", [("report",), ("budget",), ("list",), ("verify",), ("allocate", "--key", "k", "--week", "2026-W32")]
)
def test_a_repository_jobstate_never_initialised_is_exit_2_in_every_command(
    tmp_path: Path, command: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    repo = plain_repo(tmp_path / "plain")
    assert main(["--repo", str(repo), *command]) == errors.USAGE
    out, err = capsys.readouterr()
    assert out == ""
    assert "jobstate init" in err


def test_docs_exit_codes_page_is_generated_from_the_table() -> None:
    root = Path(__file__).parent.parent
    assert "](docs/exit-codes.md)" in (root / "README.md").read_text(encoding="utf-8")
    page = root / "docs" / "exit-codes.md"
    assert page.read_text(encoding="utf-8") == errors.markdown_table(), f"regenerate it: {errors.REGENERATE}"
    for row in errors.EXIT_TABLE:
        assert f"| {row.code} |" in page.read_text(encoding="utf-8")


def test_help_ends_with_the_same_table(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    for row in errors.EXIT_TABLE:
        assert f"{row.code} {' '.join(row.meaning.split())}" in out
