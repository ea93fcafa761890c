"""``jobstate report``."""

from __future__ import annotations

from jobstate.commands._output import emit
from jobstate.review.html import to_html
from jobstate.review.render import render
from jobstate.review.report import report as build_report
from jobstate.store.store import repo_path


def report(
    repo: str | None,
    *,
    rev: str,
    period: str | None,
    since: str | None,
    until: str | None,
    fmt: str,
    max_chars: int,
    output: str | None,
) -> int:
    """Print episodes, statuses and spend per period of one revision. Read-only."""
    result = build_report(repo_path(repo), rev=rev, period=period, since=since, until=until)
    emit(to_html(result) if fmt == "html" else render(result, fmt, max_chars=max_chars), output)
    return 0
