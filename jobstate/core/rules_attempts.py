"""The rules of attempts as preconditions: what the writers ask before they write a paid step's
records (start an attempt, move one along ``TRANSITIONS``, record a decision on it) and the one
definition of an open step, with its one refusal, whichever command meets it. Pure: values in,
values out (or the refusal raised).

``core.model`` checks the resulting change again before it is committed, and ``verify`` and
``diff`` check every revision and change with the same rules.
"""

from __future__ import annotations

import shlex
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from jobstate.core.approvals import Decision, approved
from jobstate.core.attempts import Attempt, Steps, attempt_from_yaml_dict, open_steps_of
from jobstate.core.model import attempt_change
from jobstate.core.records import AttemptState
from jobstate.core.status import step_status
from jobstate.errors import (
    JobstateError,
    ModelRefused,
    StepAlreadyCompleted,
    StepRunning,
    SubmissionUnknown,
    UsageError,
)


def resolve_command(episode_id: str, step: str) -> str:
    """The exact command that settles an unknown submission."""
    return (
        f"jobstate resolve --episode {episode_id} --step {shlex.quote(step)} "
        "(--accepted REMOTE_REF | --not-submitted) --by NAME --reason TEXT"
    )


def moved(episode_id: str, attempt: Attempt, to: AttemptState, **fields: Any) -> Attempt:
    """``attempt`` moved to state ``to`` with ``fields`` written, as ``TRANSITIONS`` allows (with the
    decision the move needs); ModelRefused (exit 4) otherwise, before anything is written."""
    after = attempt.updated(state=to, **fields)
    refused = attempt_change(episode_id, attempt, after)
    if refused:
        raise ModelRefused(
            f"{refused[0].kind}: {refused[0].message}; jobstate does not write this, nothing was written"
        )
    return after


def open_step_refusal(
    episode_id: str, steps: Steps, running: Mapping[str, str] | Collection[str], action: str
) -> JobstateError | None:
    """Why ``action`` (approve, complete, retire) may not happen while a step of the episode is open, or
    None. Open: running now (its step lock is held), unknown (an intent nobody confirmed: exit 6, as
    ``run`` says it) or accepted at the vendor and not collected (busy: exit 3)."""
    for step in sorted(set(steps) | set(running)):
        attempts = steps.get(step, [])
        status = step_status(attempts, running=step in running)
        if status == "unknown":
            return SubmissionUnknown(
                f"cannot {action} {episode_id}: step {step} is unknown; run: {resolve_command(episode_id, step)}"
            )
        if status == "running":
            who = f" ({running[step]})" if isinstance(running, Mapping) and running.get(step) else ""
            return StepRunning(f"cannot {action} {episode_id}: step {step} is running now{who}; wait for it to finish")
        if status == "accepted":
            return StepRunning(
                f"cannot {action} {episode_id}: step {step} is accepted at the vendor (remote task "
                f"{attempts[-1].remote_ref}) and not collected yet; run the step again to collect it, then {action} it"
            )
    return None


def may_complete(
    episode_id: str, steps: Steps, decisions: Sequence[Decision], running: Mapping[str, str] | Collection[str]
) -> None:
    """The precondition of ``complete``: history is written only for an approved episode with no step
    open (``core.model.completion_problems`` is the same rule on the written history)."""
    refusal = open_step_refusal(episode_id, steps, running, "complete")
    if refusal is not None:
        raise refusal
    if not approved(decisions):
        raise UsageError(
            f"episode {episode_id} is not approved; approve it first: jobstate approve --episode {episode_id} --by NAME"
        )
    assert not open_steps_of(steps)  # the model's definition and this one are the same


def may_start_attempt(episode_id: str, step: str, last: Attempt | None, decisions: Sequence[Decision]) -> bool:
    """The precondition of a paid step: True to resume ``last`` (accepted at the vendor), False to start
    a new attempt; refused when the step is completed (exit 0), unknown (exit 6), or the episode is
    approved (its artifacts are final: ``core.model`` keeps them so)."""
    if last is not None and last.state == AttemptState.COMPLETED:
        raise StepAlreadyCompleted(
            f"step {step} of {episode_id} already completed "
            f"({f'remote task {last.remote_ref}' if last.remote_ref else 'no remote task'}); nothing run"
        )
    if last is not None and last.state == AttemptState.INTENT:
        raise SubmissionUnknown(
            f"step {step} of {episode_id} attempt {last.number} (idempotency key "
            f"{last.idempotency_key}) was started on host {last.get('host') or '?'} (pid "
            f"{last.get('pid') or '?'}) at {last.get('started_at')} and its acceptance is not recorded: "
            "if that run is still going, wait for it; otherwise check with the vendor, then run: "
            f"{resolve_command(episode_id, step)}",
            last.number,
        )
    if last is not None and last.state == AttemptState.ACCEPTED:
        return True
    if approved(decisions):
        raise UsageError(
            f"episode {episode_id} is approved, so its artifacts are final and step {step} was not run; "
            f"to rework it, reject it first: jobstate approve --episode {episode_id} --reject --by NAME "
            "--reason TEXT"
        )
    return False


def decision_on(attempt: Attempt, decision: Mapping[str, Any]) -> dict[str, Any]:
    """An operator's decision recorded on ``attempt``, keeping an earlier one under ``previous``: the only
    way the model lets a resolution change (a field once written keeps its value otherwise)."""
    if attempt.resolution is None:
        return dict(decision)
    return {**decision, "previous": dict(attempt.resolution)}


def replacement(last: Attempt, new_ref: str, *, by: str, at: str, reason: str) -> tuple[Attempt, Attempt]:
    """A resumed task the vendor reports under another reference, recorded as the operator decided:
    ``last`` (accepted as the old reference) is superseded, naming the new one, and the next attempt is
    accepted as ``new_ref`` with ``last``'s idempotency key, request and reservation, so nothing new is
    submitted and the task's reservation is held once. ``replacement_problem`` is the rule verify checks."""
    if last.state != AttemptState.ACCEPTED or last.remote_ref is None:
        raise ValueError("only an accepted attempt's task is replaced")  # the caller checked: a bug otherwise
    closed = last.updated(
        state=AttemptState.SUPERSEDED,
        closed_at=at,
        resolution=decision_on(
            last,
            {"decision": "superseded", "was": "accepted", "replaced_by": new_ref, "by": by, "at": at, "reason": reason},
        ),
    )
    fields: dict[str, Any] = {"attempt": last.number + 1}
    for name in ("idempotency_key", "fingerprint", "reservation"):
        if last.fields.get(name) is not None:
            fields[name] = last.fields[name]
    fields.update(
        state=AttemptState.ACCEPTED.value,
        remote_ref=new_ref,
        started_at=at,
        accepted_at=at,
        resolution={"decision": "accepted", "replaces": last.remote_ref, "by": by, "at": at, "reason": reason},
    )
    return closed, attempt_from_yaml_dict(fields, f"attempt {last.number + 1} of {last.step}", last.step)
