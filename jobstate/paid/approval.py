"""Review of an episode's output: approval or rejection, and completion into history/."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jobstate.core.approvals import Decision, approvals_to_yaml_dict, new_decision
from jobstate.core.clock import format_time
from jobstate.core.costs import totals
from jobstate.core.layout import APPROVAL, HISTORY, history_path
from jobstate.core.rules_attempts import may_complete, open_step_refusal
from jobstate.errors import AlreadyRecorded, EpisodeCompleted, StepAlreadyCompleted, UsageError
from jobstate.paid.guard import guard
from jobstate.store.catalog import Catalog
from jobstate.store.records import approval_file, episode_records, record_change, submissions
from jobstate.store.running import remove_temp_files, running_holder, running_steps
from jobstate.store.store import Store
from jobstate.store.transaction import StateChange, transact
from jobstate.store.yamlio import load_file


def approve(
    store: Store,
    episode_id: str,
    *,
    by: str,
    reject: bool = False,
    reason: str = "",
    notify: Callable[[str], None] = lambda _line: None,
) -> Decision:
    """Record an approval (or rejection) of the episode's output and commit it.

    AlreadyRecorded (exit 0) when the latest decision is this one (same status, person and reason).
    """
    if not by.strip():
        raise UsageError("approve needs --by NAME")
    if reject and not reason.strip():
        raise UsageError("a rejection needs --reason TEXT")

    def decide(_cat: Catalog) -> StateChange[Decision]:
        decision = new_decision("rejected" if reject else "approved", by, format_time(store.now()), reason or None)
        try:
            guard(store, episode_id, notify=notify)
        except EpisodeCompleted:
            earlier, _read = approval_file(store, episode_id)
            if not (earlier and earlier[-1].same_as(decision)):
                raise
        _refuse_open_steps(store, episode_id, "approve")
        earlier, read = approval_file(store, episode_id)
        if earlier and earlier[-1].same_as(decision):
            # the same decision re-run (e.g. after a kill that landed): record nothing new
            raise AlreadyRecorded(
                f"{episode_id} was already {decision.status} by {by} at {earlier[-1].at}; nothing new recorded"
            )
        message = f"{decision.status} {episode_id} by {by}"
        return record_change(
            store, episode_id, {APPROVAL: approvals_to_yaml_dict([*earlier, decision], read)}, message, result=decision
        )

    return transact(store, decide)


def _refuse_open_steps(store: Store, episode_id: str, action: str) -> None:
    steps = submissions(store, episode_id)
    busy = {step: running_holder(holder) for step, holder in running_steps(store, episode_id, steps=steps).items()}
    refusal = open_step_refusal(episode_id, steps, busy, action)
    if refusal is not None:
        raise refusal


def complete(store: Store, episode_id: str, *, notify: Callable[[str], None] = lambda _line: None) -> dict[str, Any]:
    """Write and commit history/<id>.yaml; refuses while a step is unknown or the episode unapproved."""

    def decide(_cat: Catalog) -> StateChange[dict[str, Any]]:
        remove_temp_files(store, HISTORY, notify)  # a killed complete's temp file would fail verify for good
        done = store.path(history_path(episode_id))
        if done.exists():
            found = load_file(done, history_path(episode_id))
            # complete's own record is its answer again; a migrated legacy one has not that shape
            answer = found if isinstance(found, dict) and isinstance(found.get("cost_totals"), dict) else None
            raise StepAlreadyCompleted(f"episode {episode_id} is already completed; nothing new recorded", answer)
        episode = guard(store, episode_id, notify=notify)
        # every record, a legacy episode.yaml's costs, decision and artifacts included (kept by a migration)
        found = episode_records(store, episode_id)
        busy = {s: running_holder(h) for s, h in running_steps(store, episode_id, steps=found.steps).items()}
        may_complete(episode_id, found.steps, found.decisions, busy)
        decision = found.approval
        assert decision is not None  # may_complete refused an unapproved episode
        refs = {a.remote_ref for s in found.steps.values() for a in s if a.remote_ref}
        record = {
            **episode.to_yaml_dict(),
            "status": "completed",
            "completed_at": format_time(store.now()),
            "approval": decision.to_yaml_dict(),
            "remote_refs": sorted(refs),
            "cost_totals": totals(found.costs),
            "artifacts": {path: a.to_yaml() for path, a in found.artifacts.items()},
        }
        path = history_path(episode_id)
        return record_change(store, episode_id, {path: record}, f"complete {episode_id}", result=record)

    return transact(store, decide)
