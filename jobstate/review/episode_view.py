"""What ``show`` and ``list`` print about an episode: its status now, and its records. Read-only."""

from __future__ import annotations

from typing import Any

from jobstate.core.costs import totals
from jobstate.core.layout import history_path
from jobstate.core.records import AttemptState, Episode
from jobstate.core.status import episode_status, step_status
from jobstate.store.episode_files import approval, artifacts, cost_entries, submissions
from jobstate.store.leftovers import kept_outputs, running_steps
from jobstate.store.private import refused_reports
from jobstate.store.store import Store
from jobstate.store.yamlio import load_file


def describe(store: Store, episode: Episode, *, records: bool) -> dict[str, Any]:
    """The episode's fields with its status now; with ``records``, its submissions, costs, artifacts,
    approval and completion too. This is a read-only operation."""
    eid = episode.episode_id
    steps = submissions(store, eid)
    decision = approval(store, eid)
    # only steps with a record: a run holds its step lock only a moment before its intent is committed
    running = running_steps(store, eid, steps=steps)
    completed = store.path(history_path(eid)).is_file()
    out = episode.to_yaml_dict()
    out["status"] = episode_status(steps=steps, approval=decision, completed=completed, running=set(running))
    done = {name: {a.number for a in attempts if a.state == AttemptState.COMPLETED} for name, attempts in steps.items()}
    kept = kept_outputs(store, eid, done)
    if kept:
        # an interrupted attempt's output, never recorded: the operator decides what to do with it
        out["unrecorded_output"] = kept
    refused = refused_reports(store, eid)
    if refused:
        # what a step's command reported and jobstate refused: moved aside for the operator, never read again
        out["refused_reports"] = refused
    if not records:
        return out
    entries = cost_entries(store, eid)
    out["steps"] = {
        name: {
            "status": step_status(attempts, running=name in running),
            "attempts": [a.to_yaml_dict() for a in attempts],
        }
        for name, attempts in sorted(steps.items())
    }
    out["costs"] = [e.to_yaml_dict() for e in entries]
    out["cost_totals"] = totals(entries)
    out["artifacts"] = {path: a.to_yaml() for path, a in artifacts(store, eid).items()}
    out["approval"] = None if decision is None else decision.to_yaml_dict()
    if completed:
        history = load_file(store.path(history_path(eid)), history_path(eid))
        out["completed_at"] = history.get("completed_at") if isinstance(history, dict) else None
    return out
