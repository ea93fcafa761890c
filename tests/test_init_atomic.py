"""A failed init leaves nothing; an interrupted one is finished by the next (issue 10, class 5)."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobstate.main import main

from .conftest import committed_files, git, status
from .snapshots import tree_state

INIT_FILES = {"state/.gitkeep", "history/.gitkeep", "jobstate.yaml", ".gitignore", ".gitattributes"}


@pytest.fixture
def no_identity(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git configuration without user.name/email that also forbids guessing one from the host name."""
    config = tmp_path / "no-identity.gitconfig"
    config.write_text("[init]\n\tdefaultBranch = main\n[user]\n\tuseConfigOnly = true\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    for var in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "EMAIL"):
        monkeypatch.delenv(var, raising=False)
    return config


def test_git_init_without_identity_leaves_nothing(
    tmp_path: Path, no_identity: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    code = main(["--repo", str(plain), "init", "--git-init"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "no identity" in err
    assert "wrote nothing" in err
    assert list(plain.iterdir()) == []


def test_init_in_a_repository_without_identity_writes_nothing(
    tmp_path: Path, no_identity: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    git(plain, "init", "-q")
    before = tree_state(plain)
    assert main(["--repo", str(plain), "init"]) == 2
    assert "no identity" in capsys.readouterr().err
    assert tree_state(plain) == before


def test_a_second_init_finishes_what_an_interrupted_one_left(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    git(plain, "init", "-q")
    # what an init killed before its commit leaves: the files, uncommitted
    for rel, text in (("state/.gitkeep", ""), ("history/.gitkeep", ""), ("jobstate.yaml", "period: iso-week\n")):
        (plain / rel).parent.mkdir(parents=True, exist_ok=True)
        (plain / rel).write_text(text)
    (plain / ".gitignore").write_text(".jobstate/\n")
    assert main(["--repo", str(plain), "init"]) == 0
    assert "initialized" in capsys.readouterr().err
    assert committed_files(plain) == INIT_FILES
    assert (plain / "jobstate.yaml").read_text() == "period: iso-week\n"  # kept, not overwritten
    assert status(plain) == ""
    assert main(["--repo", str(plain), "init"]) == 0
    assert "already initialized" in capsys.readouterr().err
    assert git(plain, "rev-list", "--count", "HEAD").strip() == "1"


@pytest.mark.parametrize(
    "args", [["init", "--git-init"], ["init"], ["list"], ["allocate", "--key", "k", "--week", "2026-W32"]]
)
def test_a_bare_repository_is_named_and_nothing_is_written_into_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    bare = tmp_path / "some.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    before = tree_state(bare)
    code = main(["--repo", str(bare), *args])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "is a bare Git repository" in err
    assert "git clone" in err
    assert tree_state(bare) == before
