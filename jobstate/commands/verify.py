"""``jobstate verify``."""

from __future__ import annotations

from jobstate.commands._output import note, print_json
from jobstate.errors import VERIFY_PROBLEMS
from jobstate.store import repo_path
from jobstate.verify import Report
from jobstate.verify import verify as verify_state


def verify(
    repo: str | None,
    *,
    rev: str | None,
    against: str | None,
    strict: bool,
    as_json: bool,
    jobs: int | None,
    require_signed: bool = False,
) -> int:
    """Check the state read-only; exit 1 when problems are found."""
    report = verify_state(repo_path(repo), rev=rev, against=against, workers=jobs, require_signed=require_signed)
    if as_json:
        print_json(report.to_json(strict))
    else:
        _print_text(report, strict)
    if not report.ok(strict):
        note(f"{report.summary(strict)}; see the report on stdout")
        return VERIFY_PROBLEMS
    return 0


def _print_text(report: Report, strict: bool) -> None:
    for problem in report.problems:
        level = "error" if strict or problem.severity == "error" else "warning"
        print(f"{problem.path}: {level}: {problem.message}")
    if report.against is not None:
        if report.differences:
            print(f"against {report.against}: NOT preserved (base beside now):")
            for line in report.differences:
                print(f"  {line}")
        else:
            print(
                f"against {report.against}: preserved: artifact hashes, cost entries and totals, "
                "remote tasks, approvals, completion times"
            )
    print(report.summary(strict))
