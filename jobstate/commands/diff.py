"""``jobstate diff``."""

from __future__ import annotations

from pathlib import Path

from jobstate.commands._output import emit, note
from jobstate.errors import VERIFY_PROBLEMS
from jobstate.review.diff import diff as diff_states
from jobstate.review.render import render
from jobstate.store.store import repo_path


def diff(
    repo: str | None,
    *,
    base: str,
    rev: str,
    fmt: str,
    max_chars: int,
    output: str | None,
    strict: bool,
    approvers: str | None = None,
) -> int:
    """Print what changed in the state between two revisions. Read-only."""
    result = diff_states(repo_path(repo), base, rev, approvers=None if approvers is None else Path(approvers))
    emit(render(result, fmt, max_chars=max_chars), output)
    if strict and result.alarms:
        note(f"{len(result.alarms)} change(s) that should never happen; see the diff")
        return VERIFY_PROBLEMS
    return 0
