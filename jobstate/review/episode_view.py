"""What ``show`` and ``list`` print about an episode: its status now, and its records. Read-only."""

from __future__ import annotations

from typing import Any

from jobstate.core.costs import totals
from jobstate.core.records import AttemptState, Episode
from jobstate.core.status import episode_status, step_status
from jobstate.store.private import refused_reports
from jobstate.store.records import episode_records
from jobstate.store.running import kept_outputs, running_steps
from jobstate.store.store import Store


def describe(store: Store, episode: Episode, *, records: bool) -> dict[str, Any]:
    """The episode's fields with its status now; with ``records``, its submissions, costs, artifacts,
    approval and completion too. This is a read-only operation."""
    eid = episode.episode_id
    found = episode_records(store, eid)  # a legacy episode.yaml's costs, decision and artifacts included
    steps, decision = found.steps, found.approval
    # only steps with a record: a run holds its step lock only a moment before its intent is committed
    running = running_steps(store, eid, steps=steps)
    completed = found.completed_at is not None
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
    entries = found.costs
    out["steps"] = {
        name: {
            "status": step_status(attempts, running=name in running),
            "attempts": [a.to_yaml_dict() for a in attempts],
        }
        for name, attempts in sorted(steps.items())
    }
    out["costs"] = [e.to_yaml_dict() for e in entries]
    out["cost_totals"] = totals(entries)
    out["artifacts"] = {path: a.to_yaml() for path, a in found.artifacts.items()}
    out["approval"] = None if decision is None else decision.to_yaml_dict()
    if completed:
        out["completed_at"] = found.completed_at
    return out
