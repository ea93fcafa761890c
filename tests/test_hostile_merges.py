"""Each class of hostile pull request (issue 29), merged as people merge them: ``diff --strict`` and
``verify --strict --against`` flag it with the same rule, and the next command after the merge refuses
(exit 7) before any CMD runs or anything is written."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from jobstate import errors
from jobstate.core.layout import episode_dir

from .conftest import git, status
from .merges import EID, cli, counting_step, merge_pr, refused_in_review, runs

COSTS = f"{episode_dir(EID)}/costs.yaml"
SUBMISSIONS = f"{episode_dir(EID)}/submissions.yaml"


def _replace(repo: Path, rel: str, old: str, new: str) -> None:
    text = (repo / rel).read_text()
    assert old in text, text
    (repo / rel).write_text(text.replace(old, new))


def _reopen(repo: Path, _tmp: Path) -> None:
    _replace(repo, SUBMISSIONS, "state: completed", "state: not-submitted")


def _rewrite_charge(repo: Path, _tmp: Path) -> None:
    _replace(repo, COSTS, "amount: '12.40'", "amount: '1.40'")


def _charge_without_attempt(repo: Path, _tmp: Path) -> None:
    with (repo / COSTS).open("a") as fh:
        fh.write(
            "- step: publish\n  amount: '3.00'\n  currency: USD\n  remote_ref: task-7\n  at: '2026-08-07T10:00:00Z'\n"
        )


def _symlink_history(repo: Path, tmp: Path) -> None:
    outside = tmp / "outside"
    outside.mkdir()
    shutil.rmtree(repo / "history")
    (repo / "history").symlink_to(outside)


def _executable(repo: Path, _tmp: Path) -> None:
    (repo / COSTS).chmod(0o755)


def _crlf(repo: Path, _tmp: Path) -> None:
    (repo / ".gitattributes").write_text("* text=auto eol=crlf\n")


CLASSES: list[tuple[str, Callable[[Path, Path], None], str, str]] = [
    ("a paid attempt reopened", _reopen, "submission rewritten", "generate"),
    ("a charge rewritten", _rewrite_charge, "cost entry rewritten", "publish"),
    ("a charge for a step that never ran", _charge_without_attempt, "charge without its attempt", "publish"),
    ("history replaced by a symlink", _symlink_history, "is a symlink", "publish"),
    ("a record made executable", _executable, "is executable", "publish"),
    ("attributes that convert line endings", _crlf, "changes its bytes", "publish"),
]


@pytest.mark.parametrize("case", CLASSES, ids=[c[0] for c in CLASSES])
def test_a_hostile_merge_is_flagged_by_review_and_refused_by_the_next_paid_step(
    repo: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    case: tuple[str, Callable[[Path, Path], None], str, str],
) -> None:
    _name, edit, rule, step = case
    cmd = counting_step(tmp_path)
    assert cli(repo, capsys, "allocate", "--key", "k", "--week", "2026-W32") == (0, f"{EID}\n")
    code, out = cli(repo, capsys, "run", "--episode", EID, "--step", "generate", "--", *cmd)
    assert code == 0, out
    assert runs(tmp_path) == 1
    merge_pr(repo, lambda: edit(repo, tmp_path))
    refused_in_review(repo, capsys, rule)
    head = git(repo, "rev-parse", "HEAD")
    code, out = cli(repo, capsys, "run", "--episode", EID, "--step", step, "--", *cmd)
    assert code == errors.STATE_INVALID, out
    assert out.count("\n") == 1, out
    assert runs(tmp_path) == 1  # nothing paid again
    assert git(repo, "rev-parse", "HEAD") == head
    assert status(repo) == ""
