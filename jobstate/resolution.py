"""Settling a submission nobody can confirm: an operator's (or jobstate's) recorded decision.

A step whose intent was committed but whose acceptance was never recorded is
"unknown"; ``resolve`` records who decided what and why, and says what the next
run does. Run again with the same decision, it records nothing new (AlreadyRecorded, exit 0).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jobstate.catalog import Catalog
from jobstate.core.clock import format_time
from jobstate.core.layout import SUBMISSIONS
from jobstate.core.names import validate_remote_ref, validate_step
from jobstate.episode_files import record_change, submissions
from jobstate.errors import AlreadyRecorded, UsageError
from jobstate.paid import guard
from jobstate.store import Store
from jobstate.transaction import StateChange, transact


def _refuse_settled(episode_id: str, step: str, last: dict[str, Any], ref: str | None) -> None:
    state = last.get("state")
    resolution = last.get("resolution")
    if isinstance(resolution, dict):
        asked = "accepted" if ref else "not-submitted"
        same = resolution.get("decision") == asked and (ref is None or last.get("remote_ref") == ref)
        what = f"accepted as {last.get('remote_ref')}" if resolution.get("decision") == "accepted" else asked
        if same:
            # the same decision re-run (e.g. after a kill that landed): record nothing new
            raise AlreadyRecorded(
                f"step {step} of {episode_id} attempt {last.get('attempt')} was already resolved as {what} "
                f"by {resolution.get('by')} at {resolution.get('at')}; nothing new recorded"
            )
        raise UsageError(
            f"step {step} of {episode_id} attempt {last.get('attempt')} was already resolved as {what} by "
            f"{resolution.get('by')} at {resolution.get('at')} (it is now {state}); nothing to resolve"
        )
    raise UsageError(f"step {step} of {episode_id} is not unknown (it is {state}); nothing to resolve")


def resolve(
    store: Store,
    episode_id: str,
    step: str,
    *,
    accepted: str | None,
    by: str,
    reason: str,
    notify: Callable[[str], None] = lambda _line: None,
) -> str:
    """Record an operator's decision on an unknown submission; returns what happens next.

    AlreadyRecorded (exit 0) when the same decision was recorded already (a re-run after a kill).
    """
    validate_step(step)
    if not by.strip() or not reason.strip():
        raise UsageError("resolve needs --by NAME and --reason TEXT: the decision is recorded for review")
    ref = validate_remote_ref(accepted) if accepted is not None else None

    def decide(_cat: Catalog) -> StateChange[str]:
        guard(store, episode_id, notify=notify)
        steps = submissions(store, episode_id)
        attempts = steps.get(step) or []
        if attempts and attempts[-1].get("state") != "intent":
            _refuse_settled(episode_id, step, attempts[-1], ref)
        if not attempts:
            raise UsageError(f"step {step} of {episode_id} was never started; nothing to resolve")
        last = attempts[-1]
        now = format_time(store.now())
        decision = {"decision": "accepted" if ref else "not-submitted", "by": by, "at": now, "reason": reason}
        if ref:
            last.update(state="accepted", remote_ref=ref, accepted_at=now, resolution=decision)
            outcome = f"step {step} will resume remote task {ref}"
        else:
            last.update(state="not-submitted", closed_at=now, resolution=decision)
            outcome = f"step {step} will start attempt {int(last['attempt']) + 1} with a new idempotency key"
        return record_change(
            store,
            episode_id,
            {SUBMISSIONS: {"schema": 1, "steps": steps}},
            f"resolve {episode_id} {step} attempt {last['attempt']}: {decision['decision']} by {by}\n\n{reason}",
            result=outcome,
        )

    return transact(store, decide)
