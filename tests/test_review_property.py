"""diff and verify agree by construction: after any short sequence of jobstate's own commands and one
hand edit, ``diff --strict BASE HEAD`` fails exactly when ``verify --rev HEAD --strict --against BASE``
does, and both name the same rules (the kinds of core.model's violations)."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobstate.allocation.allocation import allocate
from jobstate.core.periods import parse_period
from jobstate.errors import JobstateError
from jobstate.paid.approval import approve, complete
from jobstate.paid.resolution import resolve
from jobstate.paid.step import paid_step
from jobstate.review.diff import ALARM_ORDER, diff
from jobstate.review.verify import verify
from jobstate.review.verify_report import Report
from jobstate.store.init import init
from jobstate.store.store import Store

from .conftest import FIXED, git
from .review_history import Interrupted, stepping_clock

W34 = parse_period("2026-W34")
# the commands; an unknown step is resolved at once (left unknown, it is a warning --strict fails on
# purpose in verify, and no change for diff to flag)
OPS = ["allocate", "run", "unknown-resolved", "approve", "reject", "complete", "supersede"]


def _latest(repo: Path) -> Path | None:
    found = sorted((repo / "state").glob("2026-W34-*"))
    return found[-1] if found else None


def _apply(store: Store, op: str, n: int) -> None:
    with contextlib.suppress(JobstateError, Interrupted):
        latest = _latest(store.root)
        eid = latest.name if latest else allocate(store, "k0", W34).episode_id
        if op == "allocate":
            allocate(store, f"k{n}", W34)
        elif op == "run":
            with paid_step(store, eid, "gen") as step:
                if step.remote_ref is None:
                    step.accepted(f"t{n}")
                step.cost("1.00", "USD")
                (step.output_dir / f"a{n}.txt").write_text(str(n))
                step.artifact(f"a{n}.txt")
        elif op == "unknown-resolved":
            with contextlib.suppress(Interrupted), paid_step(store, eid, "gen"):
                raise Interrupted
            resolve(store, eid, "gen", accepted=None, by="ops", reason="not there")
        elif op == "approve":
            approve(store, eid, by="editor")
        elif op == "reject":
            approve(store, eid, by="editor", reject=True, reason="again")
        elif op == "complete":
            complete(store, eid)
        elif op == "supersede":
            resolve(store, eid, "gen", accepted=None, by="ops", reason="new request", supersede=True)


def _replace(path: Path, old: str, new: str) -> bool:
    if not path.is_file() or old not in path.read_text():
        return False
    path.write_text(path.read_text().replace(old, new, 1))
    return True


def _append(path: Path, text: str) -> bool:
    if not path.is_file():
        return False
    path.write_text(path.read_text() + text)
    return True


def _remove(directory: Path) -> bool:
    shutil.rmtree(directory)
    return True


_LATE_FEE = (
    "- step: gen\n  amount: '0.10'\n  currency: USD\n  remote_ref: late\n  attempt: 1\n  charge_id: late-fee\n"
    "  at: '2026-08-07T12:00:00Z'\n"
)
EDITS: dict[str, Callable[[Path, Path], bool]] = {
    "nothing": lambda _r, _e: True,
    "cost rewritten": lambda _r, e: _replace(e / "costs.yaml", "'1.00'", "'0.50'"),
    "cost appended": lambda _r, e: _append(e / "costs.yaml", _LATE_FEE),
    "attempt state rewritten": lambda _r, e: _replace(e / "submissions.yaml", "state: completed", "state: accepted"),
    "reference rewritten": lambda _r, e: _replace(e / "submissions.yaml", "remote_ref: t", "remote_ref: x"),
    "key rewritten": lambda _r, e: _replace(e / "episode.yaml", "allocation_key: k", "allocation_key: z"),
    "decision rewritten": lambda _r, e: _replace(e / "approval.yaml", "by: editor", "by: boss"),
    "settings noted": lambda r, _e: _append(r / "jobstate.yaml", "# a note\n"),
    "episode deleted": lambda _r, e: _remove(e),
}


def _verify_kinds(report: Report) -> set[str]:
    """The rules verify names: the model's violation kinds it prefixes, and a record its strict readers
    refuse (unreadable), which diff calls "record refused"."""
    kinds = {k for p in report.errors(strict=True) for k in ALARM_ORDER if p.message.startswith(f"{k}:")}
    return kinds | ({"record refused"} if report.unreadable() else set())


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(st.sampled_from(OPS), min_size=1, max_size=5), edit=st.sampled_from(sorted(EDITS)))
def test_diff_strict_fails_exactly_when_verify_against_does_and_names_the_same_rule(
    tmp_path: Path, ops: list[str], edit: str
) -> None:
    repo = Path(tempfile.mkdtemp(dir=tmp_path))
    git(repo, "init", "-q")
    init(repo)[0].close()
    git(repo, "tag", "-f", "start")
    with Store(repo, now=stepping_clock(FIXED), lock_timeout=5) as store:
        for n, op in enumerate(ops):
            _apply(store, op, n)
    episode = _latest(repo)
    if episode is not None and EDITS[edit](repo, episode):
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "--allow-empty", "-m", f"hand edit: {edit}")
    found = diff(repo, "start", "HEAD", progress=False)
    report = verify(repo, rev="HEAD", against="start")
    diff_kinds = {a["kind"] for a in found.alarms}
    verify_kinds = _verify_kinds(report)
    problems = [f"{p.path}: {p.message}" for p in report.errors(strict=True)] + report.differences
    assert bool(found.alarms) == (not report.ok(strict=True)), (ops, edit, found.alarms, problems)
    assert diff_kinds == verify_kinds, (ops, edit, found.alarms, problems)
