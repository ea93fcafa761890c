"""``jobstate verify``."""

from __future__ import annotations

from pathlib import Path

from jobstate.commands._output import note, print_json
from jobstate.errors import STATE_INVALID, VERIFY_PROBLEMS
from jobstate.review import escape
from jobstate.review.annotations import github_annotations
from jobstate.review.verify import verify as verify_state
from jobstate.review.verify_report import Report
from jobstate.store.store import repo_path


def verify(
    repo: str | None,
    *,
    rev: str | None,
    against: str | None,
    strict: bool,
    fmt: str,
    jobs: int | None,
    uncommitted_ok: bool = False,
    require_signed: bool = False,
    allowed_signers: str | None = None,
    approvers: str | None = None,
) -> int:
    """Check the state read-only; exit 1 when problems are found."""
    path = repo_path(repo)
    report = verify_state(
        path,
        rev=rev,
        against=against,
        workers=jobs,
        check_clean=not uncommitted_ok,
        require_signed=require_signed,
        allowed_signers=None if allowed_signers is None else Path(allowed_signers),
        approvers=None if approvers is None else Path(approvers),
    )
    if fmt == "json":
        print_json(report.to_json(strict))
    elif fmt == "github":
        print("\n".join(github_annotations(report, path, rev=rev, strict=strict)))
    else:
        _print_text(report, strict)
    if not report.ok(strict):
        note(f"{report.summary(strict)}; see the report on stdout")
        # state that cannot be read at all is exit 7 in every command, verify included
        return STATE_INVALID if report.unreadable() else VERIFY_PROBLEMS
    return 0


def _print_text(report: Report, strict: bool) -> None:
    for problem in report.problems:
        level = "error" if report.fails(problem, strict) else "warning"
        print(escape.text(f"{problem.path}: {level}: {problem.message}"))
    if report.against is not None:
        if not report.migrated:
            print(
                escape.text(
                    f"against {report.against}: no legacy ID migrated (a move into state/<year>/<period>/<id>/ "
                    "keeping every byte is no change); every change checked against the model"
                )
            )
        elif report.differences:
            print(escape.text(f"against {report.against}: NOT preserved (base beside now):"))
            for line in report.differences:
                print(f"  {escape.text(line)}")
        else:
            print(
                f"against {escape.text(report.against)}: {report.migrated} migrated episode(s) preserved: "
                "artifact hashes, cost entries and totals, "
                "remote tasks, approvals, completion times"
            )
    print(report.summary(strict))
