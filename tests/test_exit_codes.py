"""One kind of failure, one exit code, in every command that can meet it (issue 10, class 6)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from jobstate import errors
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


def _dirty_modified(tmp_path: Path) -> Path:
    repo = _allocated(tmp_path)
    path = repo / "state" / EID / "episode.yaml"
    path.write_text(path.read_text() + "# edited\n")
    return repo


def _uncommitted(tmp_path: Path) -> Path:
    """An episode directory on disk that HEAD does not have (its commit undone), with a file of the user's."""
    repo = _allocated(tmp_path)
    git(repo, "rm", "-r", "-q", "--cached", f"state/{EID}")
    git(repo, "commit", "-qm", "forget the episode")
    (repo / "state" / EID / "notes.txt").write_text("the user's own notes\n")
    return repo


def _malformed_episode(tmp_path: Path) -> Path:
    repo = _allocated(tmp_path)
    (repo / "state" / EID / "episode.yaml").write_text("schema: 1\nepisode_id: [unclosed\n")
    git(repo, "commit", "-qam", "break it")
    return repo


def _malformed_config(tmp_path: Path) -> Path:
    repo = _allocated(tmp_path)
    (repo / "jobstate.yaml").write_text("period: [iso-week\n")
    git(repo, "commit", "-qam", "break the settings")
    return repo


def _always_failing(tmp_path: Path) -> Path:
    return _allocated(tmp_path)


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
    # (an untracked file in an episode is a killed step's output: put aside, see tests/test_leftovers.py)
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
    "malformed YAML (jobstate.yaml)": (
        _malformed_config,
        EID,
        ("allocate", "show", "list", "run", "resolve", "approve", "complete", "verify", "migrate"),
        errors.STATE_INVALID,
    ),
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


def test_a_command_that_cannot_start_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = _allocated(tmp_path)
    code = main(["--repo", str(repo), "run", "--episode", EID, "--step", "generate", "--", str(tmp_path / "nope")])
    err = capsys.readouterr().err
    assert code == errors.USAGE, err
    assert "cannot run" in err


def test_the_readme_table_lists_every_code() -> None:
    readme = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    for code in errors.EXIT_CODES:
        if code != errors.INTERRUPTED:
            assert f"| {code} |" in readme, code
