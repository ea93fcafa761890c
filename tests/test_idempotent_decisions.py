"""Decisions run again after a kill that landed record nothing new and say so (issue 10, class 3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jobstate.core.layout import episode_dir
from jobstate.main import main

from .conftest import git, stable_cmd

EID = "2026-W32-0"


@pytest.fixture
def episode(repo: Path) -> str:
    assert main(["--repo", str(repo), "allocate", "--key", "k", "--week", "2026-W32"]) == 0
    return EID


def _cli(repo: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["--repo", str(repo), *args])
    out, err = capsys.readouterr()
    return code, out, err


def _head(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD")


def _unknown_step(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # CMD dies without a word: nobody knows whether the vendor accepted
    code, _out, err = _cli(
        repo, capsys, "run", "--episode", EID, "--step", "generate", "--", *stable_cmd("raise SystemExit(1)")
    )
    assert code == 9, err
    assert "unknown" in err


@pytest.mark.parametrize("how", [["--by", "editor"], ["--by", "editor", "--reject", "--reason", "intro too long"]])
def test_the_same_decision_again_records_nothing_and_says_so(
    repo: Path, episode: str, capsys: pytest.CaptureFixture[str], how: list[str]
) -> None:
    code, _out, err = _cli(repo, capsys, "approve", "--episode", episode, *how)
    assert code == 0, err
    head = _head(repo)
    code, _out, err = _cli(repo, capsys, "approve", "--episode", episode, *how)
    assert code == 0, err
    assert "already" in err
    assert "nothing new recorded" in err
    assert _head(repo) == head
    assert (repo / episode_dir(episode) / "approval.yaml").read_text().count("status:") == 1


def test_another_decision_or_person_is_recorded(repo: Path, episode: str, capsys: pytest.CaptureFixture[str]) -> None:
    reject = ["approve", "--episode", episode, "--by", "editor", "--reject", "--reason", "too long"]
    assert _cli(repo, capsys, *reject)[0] == 0
    assert _cli(repo, capsys, "approve", "--episode", episode, "--by", "editor")[0] == 0
    assert _cli(repo, capsys, "approve", "--episode", episode, "--by", "chief")[0] == 0
    assert (repo / episode_dir(episode) / "approval.yaml").read_text().count("status:") == 3


@pytest.mark.parametrize("decision", [["--accepted", "task-1"], ["--not-submitted"]])
def test_resolve_again_records_nothing_and_says_so(
    repo: Path, episode: str, capsys: pytest.CaptureFixture[str], decision: list[str]
) -> None:
    _unknown_step(repo, capsys)
    args = ["resolve", "--episode", episode, "--step", "generate", *decision, "--by", "ops", "--reason", "vendor log"]
    code, _out, err = _cli(repo, capsys, *args)
    assert code == 0, err
    head = _head(repo)
    code, _out, err = _cli(repo, capsys, *args)
    assert code == 0, err
    assert "already resolved" in err
    assert "by ops" in err
    assert _head(repo) == head


def test_resolve_with_another_reference_names_the_recorded_one(
    repo: Path, episode: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _unknown_step(repo, capsys)
    base = ["resolve", "--episode", episode, "--step", "generate", "--by", "ops", "--reason", "r"]
    assert _cli(repo, capsys, *base, "--accepted", "task-1")[0] == 0
    head = _head(repo)
    code, _out, err = _cli(repo, capsys, *base, "--accepted", "task-2")
    assert code == 2, err
    assert "already resolved as accepted as task-1" in err
    assert _head(repo) == head


def test_complete_again_records_nothing_and_says_so(
    repo: Path, episode: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _cli(repo, capsys, "approve", "--episode", episode, "--by", "editor")[0] == 0
    code, first, err = _cli(repo, capsys, "complete", "--episode", episode, "--json")
    assert code == 0, err
    head = _head(repo)
    code, out, err = _cli(repo, capsys, "complete", "--episode", episode)
    assert code == 0, err
    assert "already completed" in err
    assert out == f"{episode} completed (no costs)\n"  # the answer again, as a repeat of what landed
    assert _head(repo) == head
    # a script reading --json gets the answer again too: the history record the first complete wrote
    code, out, err = _cli(repo, capsys, "complete", "--episode", episode, "--json")
    assert (code, json.loads(out)) == (0, json.loads(first)), err
    assert "already completed" in err
