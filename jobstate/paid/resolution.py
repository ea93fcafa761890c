"""Operators' (or jobstate's) recorded decisions on a paid step: settle a submission nobody can
confirm, or supersede an attempt whose request changed.

A step whose intent was committed but whose acceptance was never recorded is
"unknown"; ``resolve`` records who decided what and why, and says what the next
run does. Run again with the same decision, it records nothing new (AlreadyRecorded, exit 0).
"""

from __future__ import annotations

from collections.abc import Callable

from jobstate.core.attempts import CLOSED, Attempt
from jobstate.core.clock import format_time
from jobstate.core.names import validate_person, validate_reason, validate_remote_ref, validate_step
from jobstate.core.records import AttemptState
from jobstate.errors import AlreadyRecorded, StepRunning, SubmissionUnknown, UsageError
from jobstate.paid.guard import guard
from jobstate.paid.leftovers import running_steps
from jobstate.paid.step import resolve_command
from jobstate.store.catalog import Catalog
from jobstate.store.episode_files import submissions, submissions_change
from jobstate.store.store import Store
from jobstate.store.transaction import StateChange, transact


def _refuse_settled(episode_id: str, step: str, last: Attempt, ref: str | None) -> None:
    state = last.state
    resolution = last.resolution
    if resolution is not None:
        asked = "accepted" if ref else "not-submitted"
        same = resolution.get("decision") == asked and (ref is None or last.remote_ref == ref)
        what = f"accepted as {last.remote_ref}" if resolution.get("decision") == "accepted" else asked
        if same:
            # the same decision re-run (e.g. after a kill that landed): record nothing new
            raise AlreadyRecorded(
                f"step {step} of {episode_id} attempt {last.number} was already resolved as {what} "
                f"by {resolution.get('by')} at {resolution.get('at')}; nothing new recorded"
            )
        raise UsageError(
            f"step {step} of {episode_id} attempt {last.number} was already resolved as {what} by "
            f"{resolution.get('by')} at {resolution.get('at')} (it is now {state}); nothing to resolve"
        )
    raise UsageError(f"step {step} of {episode_id} is not unknown (it is {state}); nothing to resolve")


def _refuse_running(store: Store, episode_id: str, step: str) -> None:
    if running_steps(store, episode_id, steps=[step]):
        raise StepRunning(
            f"step {step} of {episode_id} is running now: nothing to decide while it runs; wait for it to finish"
        )


def resolve(
    store: Store,
    episode_id: str,
    step: str,
    *,
    accepted: str | None,
    by: str,
    reason: str,
    supersede: bool = False,
    notify: Callable[[str], None] = lambda _line: None,
) -> str:
    """Record an operator's decision on an unknown submission (or, with ``supersede``, open a new attempt
    for a changed request); returns what happens next.

    AlreadyRecorded (exit 0) when the same decision was recorded already (a re-run after a kill).
    """
    validate_step(step)
    if not by.strip() or not reason.strip():
        raise UsageError("resolve needs --by NAME and --reason TEXT: the decision is recorded for review")
    validate_person(by)
    validate_reason(reason)
    ref = validate_remote_ref(accepted) if accepted is not None else None
    if supersede:
        return _supersede(store, episode_id, step, by=by, reason=reason, notify=notify)

    def decide(_cat: Catalog) -> StateChange[str]:
        guard(store, episode_id, notify=notify)
        _refuse_running(store, episode_id, step)
        steps = submissions(store, episode_id)
        attempts = steps.get(step) or []
        if not attempts:
            raise UsageError(f"step {step} of {episode_id} was never started; nothing to resolve")
        last = attempts[-1]
        if last.state != AttemptState.INTENT:
            _refuse_settled(episode_id, step, last, ref)
        now = format_time(store.now())
        decision = {"decision": "accepted" if ref else "not-submitted", "by": by, "at": now, "reason": reason}
        if ref:
            attempts[-1] = last.updated(
                state=AttemptState.ACCEPTED, remote_ref=ref, accepted_at=now, resolution=decision
            )
            outcome = f"step {step} will resume remote task {ref}"
        else:
            attempts[-1] = last.updated(state=AttemptState.NOT_SUBMITTED, closed_at=now, resolution=decision)
            outcome = f"step {step} will start attempt {last.number + 1} with a new idempotency key"
        return submissions_change(
            store,
            episode_id,
            steps,
            f"resolve {episode_id} {step} attempt {last.number}: {decision['decision']} by {by}\n\n{reason}",
            outcome,
        )

    return transact(store, decide)


def _supersede(store: Store, episode_id: str, step: str, *, by: str, reason: str, notify: Callable[[str], None]) -> str:
    def decide(_cat: Catalog) -> StateChange[str]:
        guard(store, episode_id, notify=notify)
        _refuse_running(store, episode_id, step)
        steps = submissions(store, episode_id)
        attempts = steps.get(step) or []
        last = attempts[-1] if attempts else None
        if last is None or last.state in CLOSED:
            raise UsageError(f"step {step} of {episode_id} has no attempt to supersede; just run it")
        if last.state == AttemptState.ACCEPTED:
            # its vendor task may still charge: its reservation must stay until it is collected
            raise UsageError(
                f"step {step} of {episode_id} attempt {last.number} is accepted as {last.remote_ref} "
                "and may still be charged: collect it first by running the recorded request again (it resumes the "
                "task, never resubmits), then supersede the completed attempt"
            )
        if last.state == AttemptState.INTENT:
            raise SubmissionUnknown(
                f"step {step} of {episode_id} is unknown: settle it first ({resolve_command(episode_id, step)}), "
                "then supersede it if the request changed"
            )
        now = format_time(store.now())
        decision = {"decision": "superseded", "was": last.state.value, "by": by, "at": now, "reason": reason}
        attempts[-1] = last.updated(state=AttemptState.SUPERSEDED, closed_at=now, resolution=decision)
        return submissions_change(
            store,
            episode_id,
            steps,
            f"supersede {episode_id} {step} attempt {last.number} ({last.state.value}) by {by}\n\n{reason}",
            f"step {step} will start attempt {last.number + 1} for the changed request",
        )

    return transact(store, decide)
