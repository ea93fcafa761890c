"""Episodes per period with their status, steps left unknown, and spend, from Git objects.

``report`` is a read-only operation. ``build_report`` is pure: a StateView in, a
Report out. Spend is counted in the period of the episode it was spent for.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from jobstate.core.periods import parse_period, require_kind
from jobstate.core.status import STATUSES, episode_status, step_status
from jobstate.errors import NotInitialized, UsageError
from jobstate.review.escape import shell_command
from jobstate.review.revision import StateView, read_state
from jobstate.review.spending import budget_use
from jobstate.store.running import steps_running_at
from jobstate.store.snapshot import git_read, is_bare, locate


@dataclass
class Report:
    """The report of one revision, optionally limited to a range of periods."""

    rev: str
    commit: str
    since: str | None = None
    until: str | None = None
    unknown: list[dict[str, Any]] = field(default_factory=list)
    episodes: list[dict[str, Any]] = field(default_factory=list)
    periods: list[dict[str, Any]] = field(default_factory=list)
    spend_by_step: dict[str, dict[str, str]] = field(default_factory=dict)
    totals: dict[str, str] = field(default_factory=dict)
    budgets: list[dict[str, Any]] = field(default_factory=list)  # use per budget period and currency
    unreadable: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """Everything, for ``--format json``."""
        return {
            "rev": self.rev,
            "commit": self.commit,
            "since": self.since,
            "until": self.until,
            "unknown_steps": self.unknown,
            "periods": self.periods,
            "episodes": self.episodes,
            "spend_by_step": self.spend_by_step,
            "totals": self.totals,
            "budgets": self.budgets,
            "unreadable": self.unreadable,
        }


def period_range(period: str | None, since: str | None, until: str | None) -> tuple[str | None, str | None]:
    """Check ``--period`` or ``--since``/``--until`` and return the inclusive range."""
    if period is not None and (since is not None or until is not None):
        raise UsageError("give --period P, or --since P and/or --until P, not both")
    if period is not None:
        since = until = period
    kinds = {parse_period(p).kind for p in (since, until) if p is not None}
    if len(kinds) > 1:
        raise UsageError(f"--since {since} and --until {until} are periods of different kinds: use one kind")
    if since is not None and until is not None and since > until:
        raise UsageError(f"--since {since} comes after --until {until}: nothing to report")
    return since, until


def _in_range(period_id: str, since: str | None, until: str | None) -> bool:
    bound = since or until
    if bound is not None and parse_period(period_id).kind != parse_period(bound).kind:
        return False
    # within one kind, period IDs are zero-padded and sort like their dates
    return (since is None or period_id >= since) and (until is None or period_id <= until)


def _add(sums: dict[str, Decimal], currency: str, amount: str | Decimal) -> None:
    sums[currency] = sums.get(currency, Decimal(0)) + Decimal(amount)


def _fmt(sums: dict[str, Decimal]) -> dict[str, str]:
    return {k: format(v, "f") for k, v in sorted(sums.items())}


def build_report(
    state: StateView,
    since: str | None = None,
    until: str | None = None,
    running: Mapping[str, set[str]] | None = None,
) -> Report:
    """The report of ``state`` for periods ``since``..``until`` (inclusive; None is open), with the steps
    running now per episode (``running``: when ``state`` is the checked-out HEAD). Pure."""
    running = running or {}
    out = Report(state.rev, state.commit, since, until, unreadable=list(state.unreadable))
    views = sorted(
        (v for v in state.episodes.values() if _in_range(v.period_id, since, until)),
        key=lambda v: (v.period_id, v.sequence, v.episode_id),
    )
    per_period: dict[str, dict[str, Any]] = {}
    by_step: dict[str, dict[str, Decimal]] = {}
    totals: dict[str, Decimal] = {}
    for v in views:
        now = running.get(v.episode_id, set())
        latest = v.decisions[-1] if v.decisions else None
        status = episode_status(steps=v.steps, approval=latest, completed=v.completed_at is not None, running=now)
        spent: dict[str, Decimal] = {}
        for entry in v.costs:
            _add(spent, entry.currency, entry.amount)
            _add(totals, entry.currency, entry.amount)
            _add(by_step.setdefault(entry.step, {}), entry.currency, entry.amount)
        for step, attempts in sorted(v.steps.items()):
            if step_status(attempts, running=step in now) == "unknown":
                last = attempts[-1]
                out.unknown.append(
                    {
                        "episode_id": v.episode_id,
                        "step": step,
                        "attempt": last.number,
                        "started_at": last.get("started_at"),
                        "idempotency_key": last.idempotency_key,
                        "resolve": shell_command(
                            "jobstate",
                            "resolve",
                            "--episode",
                            v.episode_id,
                            "--step",
                            step,
                            tail="(--accepted REMOTE_REF | --not-submitted) --by NAME --reason TEXT",
                        ),
                    }
                )
        out.episodes.append(
            {
                "episode_id": v.episode_id,
                "period_id": v.period_id,
                "sequence": v.sequence,
                "allocation_key": v.allocation_key,
                "status": status,
                "allocated_at": v.allocated_at,
                "completed_at": v.completed_at,
                "steps": sorted(v.steps),
                "spend": _fmt(spent),
            }
        )
        row = per_period.setdefault(v.period_id, {"statuses": Counter(), "spend": {}})
        row["statuses"][status] += 1
        for currency, amount in spent.items():
            _add(row["spend"], currency, amount)
    for period_id, row in per_period.items():
        out.periods.append(
            {
                "period_id": period_id,
                "episodes": sum(row["statuses"].values()),
                "statuses": {s: row["statuses"][s] for s in STATUSES if row["statuses"][s]},
                "spend": _fmt(row["spend"]),
            }
        )
    out.spend_by_step = {step: _fmt(sums) for step, sums in sorted(by_step.items())}
    out.totals = _fmt(totals)
    out.budgets = budget_use(state, _periods(state, since, until))
    return out


def report(
    path: Path,
    *,
    rev: str = "HEAD",
    period: str | None = None,
    since: str | None = None,
    until: str | None = None,
    progress: bool | None = None,
) -> Report:
    """The report of ``rev``. This is a read-only operation."""
    since, until = period_range(period, since, until)
    state = read_state(path, rev, progress=progress)
    if not state.config_text and not state.episodes and not state.unreadable:
        raise NotInitialized(f"{rev} has no jobstate.yaml and no episode: nothing to report (run jobstate init)")
    bound = since or until
    if bound is not None and state.settings is not None:
        require_kind(parse_period(bound), state.settings.period, f"revision {rev}")  # like list: never "0 episodes"
    return build_report(state, since, until, _running_now(locate(path), state))


def _running_now(cwd: Path, state: StateView) -> dict[str, set[str]]:
    """The steps whose step lock is held now, per episode, when ``state`` is what the work tree has
    checked out: the same status word as ``list`` then (an orphaned CMD still runs its step)."""
    if is_bare(cwd):
        return {}
    head = git_read(cwd, "rev-parse", "--verify", "-q", "HEAD^{commit}", check=False).stdout.decode().strip()
    if head != state.commit:
        return {}
    out: dict[str, set[str]] = {}
    for eid, view in state.episodes.items():
        found = steps_running_at(cwd, eid, view.steps)  # as list asks: every step with a record
        if found:
            out[eid] = found
    return out


def _periods(state: StateView, since: str | None, until: str | None) -> list[str]:
    return sorted({v.period_id for v in state.episodes.values() if _in_range(v.period_id, since, until)})
