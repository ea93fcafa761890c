"""Review of an episode's output: approval or rejection, and completion into history/."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jobstate.core.approvals import Decision, approvals_to_yaml_dict, new_decision
from jobstate.core.clock import format_time
from jobstate.core.costs import totals
from jobstate.core.layout import APPROVAL, HISTORY, history_path
from jobstate.core.records import AttemptState
from jobstate.errors import (
    AlreadyRecorded,
    EpisodeCompleted,
    StepAlreadyCompleted,
    StepRunning,
    SubmissionUnknown,
    UsageError,
)
from jobstate.paid.guard import guard
from jobstate.paid.running import remove_temp_files, running_holder, running_steps
from jobstate.paid.step import resolve_command
from jobstate.store.catalog import Catalog
from jobstate.store.records import approval_file, episode_records, record_change, submissions
from jobstate.store.store import Store
from jobstate.store.transaction import StateChange, transact


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
    busy = running_steps(store, episode_id, steps=steps)
    if busy:
        who = "; ".join(f"{name}: {running_holder(holder)}" for name, holder in sorted(busy.items()))
        raise StepRunning(
            f"cannot {action} {episode_id}: step {', '.join(sorted(busy))} is running now ({who}); "
            "wait for it to finish"
        )
    for step, attempts in steps.items():
        state = attempts[-1].state if attempts else None
        if state == AttemptState.INTENT:
            raise SubmissionUnknown(
                f"cannot {action} {episode_id}: step {step} is unknown; run: {resolve_command(episode_id, step)}"
            )
        if state == AttemptState.ACCEPTED:
            # a step that runs, at the vendor rather than here: busy (3), as retire says too
            raise StepRunning(
                f"cannot {action} {episode_id}: step {step} is still running at the vendor "
                f"(remote task {attempts[-1].remote_ref}); run the step again to collect it, then {action} it"
            )


def complete(store: Store, episode_id: str, *, notify: Callable[[str], None] = lambda _line: None) -> dict[str, Any]:
    """Write and commit history/<id>.yaml; refuses while a step is unknown or the episode unapproved."""

    def decide(_cat: Catalog) -> StateChange[dict[str, Any]]:
        remove_temp_files(store, HISTORY, notify)  # a killed complete's temp file would fail verify for good
        if store.path(history_path(episode_id)).exists():
            raise StepAlreadyCompleted(f"episode {episode_id} is already completed; nothing new recorded")
        episode = guard(store, episode_id, notify=notify)
        _refuse_open_steps(store, episode_id, "complete")
        # every record, a legacy episode.yaml's costs, decision and artifacts included (kept by a migration)
        found = episode_records(store, episode_id)
        decision = found.approval
        if decision is None or decision.status != "approved":
            raise UsageError(
                f"episode {episode_id} is not approved; approve it first: "
                f"jobstate approve --episode {episode_id} --by NAME"
            )
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
