"""Operators' decisions on a paid step: settle an unknown submission, or supersede an attempt."""

from __future__ import annotations

from jobstate.catalog import Catalog
from jobstate.core.clock import format_time
from jobstate.core.names import validate_remote_ref, validate_step
from jobstate.core.records import AttemptState
from jobstate.episode_files import submissions, submissions_change
from jobstate.errors import SubmissionUnknown, UsageError
from jobstate.paid import guard, resolve_command
from jobstate.reservation import CLOSED
from jobstate.store import Store
from jobstate.transaction import StateChange, transact


def resolve(
    store: Store,
    episode_id: str,
    step: str,
    *,
    accepted: str | None,
    by: str,
    reason: str,
    supersede: bool = False,
) -> str:
    """Record an operator's decision on an unknown submission (or, with ``supersede``, open a new attempt
    for a changed request); returns what happens next."""
    validate_step(step)
    if not by.strip() or not reason.strip():
        raise UsageError("resolve needs --by NAME and --reason TEXT: the decision is recorded for review")
    ref = validate_remote_ref(accepted) if accepted is not None else None
    if supersede:
        return _supersede(store, episode_id, step, by=by, reason=reason)

    def decide(_cat: Catalog) -> StateChange[str]:
        guard(store, episode_id)
        steps = submissions(store, episode_id)
        attempts = steps.get(step) or []
        if not attempts or attempts[-1].get("state") != AttemptState.INTENT:
            state = attempts[-1].get("state") if attempts else "never started"
            raise UsageError(f"step {step} of {episode_id} is not unknown (it is {state}); nothing to resolve")
        last = attempts[-1]
        now = format_time(store.now())
        decision = {"decision": "accepted" if ref else "not-submitted", "by": by, "at": now, "reason": reason}
        if ref:
            last.update(state="accepted", remote_ref=ref, accepted_at=now, resolution=decision)
            outcome = f"step {step} will resume remote task {ref}"
        else:
            last.update(state="not-submitted", closed_at=now, resolution=decision)
            outcome = f"step {step} will start attempt {int(last['attempt']) + 1} with a new idempotency key"
        return submissions_change(
            store,
            episode_id,
            steps,
            f"resolve {episode_id} {step} attempt {last['attempt']}: {decision['decision']} by {by}\n\n{reason}",
            outcome,
        )

    return transact(store, decide)


def _supersede(store: Store, episode_id: str, step: str, *, by: str, reason: str) -> str:
    def decide(_cat: Catalog) -> StateChange[str]:
        guard(store, episode_id)
        steps = submissions(store, episode_id)
        attempts = steps.get(step) or []
        last = attempts[-1] if attempts else None
        state = None if last is None else last.get("state")
        if last is None or state in CLOSED:
            raise UsageError(f"step {step} of {episode_id} has no attempt to supersede; just run it")
        if state == AttemptState.INTENT:
            raise SubmissionUnknown(
                f"step {step} of {episode_id} is unknown: settle it first ({resolve_command(episode_id, step)}), "
                "then supersede it if the request changed"
            )
        now = format_time(store.now())
        decision = {"decision": "superseded", "was": state, "by": by, "at": now, "reason": reason}
        last.update(state=AttemptState.SUPERSEDED.value, closed_at=now, resolution=decision)
        return submissions_change(
            store,
            episode_id,
            steps,
            f"supersede {episode_id} {step} attempt {last['attempt']} ({state}) by {by}\n\n{reason}",
            f"step {step} will start attempt {int(last['attempt']) + 1} for the changed request",
        )

    return transact(store, decide)
