"""``verify --format github``: GitHub workflow commands that point at the YAML line.

This is a read-only operation: files are read from the work tree or from Git
objects (``snapshot``), never written.
"""

from __future__ import annotations

import re
from pathlib import Path

from jobstate.review.escape import text
from jobstate.review.problem import Problem
from jobstate.review.verify_report import Report
from jobstate.store.snapshot import Revision, Snapshot, WorkTree, locate
from jobstate.store.yamlio import key_line

# what a problem message names first -> where that lives in its YAML file
_KEYS: list[tuple[re.Pattern[str], tuple[str, ...]]] = [
    (re.compile(r"^step '([^']+)'"), ("steps", "{0}")),
    (re.compile(r"^artifact '([^']+)'"), ("artifacts", "{0}")),
    (re.compile(r"^field '([^']+)'"), ("{0}",)),
    (re.compile(r"^(episode_id|period_id|week_id|sequence|allocation_key|completed_at) "), ("{0}",)),
    (re.compile(r"^(a )?cost entr"), ("entries",)),
    (re.compile(r"^'steps'"), ("steps",)),
]


def _escape_data(value: str) -> str:
    # GitHub's own encoding first (a line break stays one, in the message); then every other control or bidi
    # character from state reaches the log as its escape (escape.text): shown, never obeyed
    return text(value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"))


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def problem_line(snap: Snapshot, problem: Problem) -> int:
    """The line a problem is about: its own, or the key its message names, or 1."""
    if problem.line is not None:
        return problem.line
    if not problem.path.endswith(".yaml"):
        return 1
    for pattern, keys in _KEYS:
        found = pattern.search(problem.message)
        if found:
            try:
                data = snap.read(problem.path)
            except OSError:
                return 1
            return key_line(data, tuple(k.format(*found.groups()) for k in keys)) or 1
    return 1


def github_annotations(report: Report, path: Path, *, rev: str | None, strict: bool) -> list[str]:
    """One ``::error``/``::warning`` line per problem and per drift, then a ``::notice`` summary."""
    cwd = locate(path)
    snap: Snapshot = Revision(cwd, rev) if rev is not None else WorkTree(cwd)
    lines = []
    try:
        for p in report.problems:
            level = "error" if report.fails(p, strict) else "warning"
            where = f"file={_escape_property(p.path)},line={problem_line(snap, p)}"
            lines.append(f"::{level} {where},title=jobstate verify::{_escape_data(p.message)}")
    finally:
        snap.close()
    for drift in report.differences:
        lines.append(
            f"::error title=jobstate verify --against {_escape_property(str(report.against))}::{_escape_data(drift)}"
        )
    level = "notice" if report.ok(strict) else "error"
    lines.append(f"::{level} title=jobstate verify::{_escape_data(report.summary(strict))}")
    return lines
