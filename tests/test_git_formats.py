"""Object formats and ref storage: SHA-256 repositories end to end, reftable where git has it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from jobstate.git.repo import GitRepo
from jobstate.git.repoconfig import read_extensions
from jobstate.main import main

from .conftest import git, git_init, status


def _git_version() -> tuple[int, int]:
    out = subprocess.run(["git", "--version"], capture_output=True, text=True, check=True).stdout
    found = re.search(r"(\d+)\.(\d+)", out)
    assert found is not None
    return int(found.group(1)), int(found.group(2))


def _allocate_a_b_and_retry_a(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for key, expected in (("a", "2026-W32-0"), ("b", "2026-W32-1"), ("a", "2026-W32-0")):
        capsys.readouterr()
        code = main(["--repo", str(repo), "allocate", "--key", key, "--week", "2026-W32"])
        out, err = capsys.readouterr()
        assert code == 0, err
        assert out == expected + "\n"


def test_init_allocate_and_verify_on_a_fresh_sha256_repository(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = tmp_path / "r"
    git_init(repo, "sha256")
    code = main(["--repo", str(repo), "init"])
    assert code == 0, capsys.readouterr().err
    _allocate_a_b_and_retry_a(repo, capsys)
    assert status(repo) == ""
    git(repo, "fsck", "--strict", "--no-dangling")
    head = git(repo, "rev-parse", "HEAD").strip()
    assert len(head) == 64
    assert GitRepo(repo).head_commit() == head
    for args in (["verify", "--strict"], ["verify", "--rev", "HEAD", "--strict"]):
        code = main(["--repo", str(repo), *args])
        assert code == 0, capsys.readouterr().out


def test_extensions_are_read_from_the_repository_config(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text(
        '[core]\n\tbare = false\n# [extensions] in a comment\n[Extensions]\n\tobjectFormat = "sha256" ; why\n'
        "\trefStorage = reftable\n[user]\n\tobjectformat = sha1\n"
    )
    assert read_extensions(config) == {"objectformat": "sha256", "refstorage": "reftable"}
    assert read_extensions(tmp_path / "missing") == {}


def test_an_unknown_object_format_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = tmp_path / "r"
    git_init(repo)
    with (repo / ".git" / "config").open("a") as f:
        f.write("[extensions]\n\tobjectformat = sha512\n")
    code = main(["--repo", str(repo), "init"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "object format 'sha512'" in err
    for left in ("state", "history", "jobstate.yaml", ".gitignore"):
        assert not (repo / left).exists()


@pytest.mark.skipif(_git_version() < (2, 45), reason="reftable needs git 2.45 or newer")
def test_reftable_repository_allocates_and_retries(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main", "--ref-format=reftable")
    assert GitRepo(repo).reftable
    assert main(["--repo", str(repo), "init"]) == 0, capsys.readouterr().err
    _allocate_a_b_and_retry_a(repo, capsys)
    assert GitRepo(repo).head_commit() == git(repo, "rev-parse", "HEAD").strip()
    assert status(repo) == ""
