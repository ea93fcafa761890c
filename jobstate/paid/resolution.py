"""Operators' (or jobstate's) recorded decisions on a paid step: settle a submission nobody can
confirm, or supersede an attempt whose request changed.

A step whose intent was committed but whose acceptance was never recorded is
"unknown"; ``resolve`` records who decided what and why, and says what the next
run does. Run again with the same decision, it records nothing new (AlreadyRecorded, exit 0).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from contextlib import suppress
from typing import Any, NoReturn

from jobstate.core.attempts import CLOSED, Attempt
from jobstate.core.clock import format_time
from jobstate.core.layout import result_path
from jobstate.core.names import validate_person, validate_reason, validate_remote_ref, validate_step
from jobstate.core.records import AttemptState
from jobstate.core.rules_attempts import decision_on, moved, replacement, resolve_command
from jobstate.errors import AlreadyRecorded, EpisodeCompleted, StepRunning, SubmissionUnknown, UsageError
from jobstate.paid.guard import guard
from jobstate.store.catalog import Catalog
from jobstate.store.records import submissions, submissions_change
from jobstate.store.running import attempt_reports, running_holder, running_steps
from jobstate.store.store import Store
from jobstate.store.transaction import StateChange, transact


def _refuse_settled(episode_id: str, step: str, last: Attempt, ref: str | None) -> None:
    state = last.state
    resolution = last.resolution
    if resolution is not None:
        asked = "accepted" if ref else "not-submitted"
        recorded = str(resolution.get("decision"))
        same = recorded == asked and (ref is None or last.remote_ref == ref)
        # the decision on record, never the one asked for now
        what = f"accepted as {last.remote_ref}" if recorded == "accepted" else recorded
        if same:
            # the same decision re-run (e.g. after a kill that landed): record nothing new
            raise AlreadyRecorded(
                f"step {step} of {episode_id} attempt {last.number} was already resolved as {what} "
                f"by {resolution.get('by')} at {resolution.get('at')}; nothing new recorded"
            )
        raise UsageError(
            f"step {step} of {episode_id} attempt {last.number} was already resolved as {what} by "
            f"{resolution.get('by')} at {resolution.get('at')} (it is now {state}); nothing to resolve "
            f"as {asked}"
        )
    raise UsageError(f"step {step} of {episode_id} is not unknown (it is {state}); nothing to resolve")


def _refuse_superseded(episode_id: str, step: str, last: Attempt) -> None:
    """The same supersede run again (e.g. after a kill that landed): nothing new, exit 0."""
    resolution = last.resolution or {}
    if last.state == AttemptState.SUPERSEDED:
        raise AlreadyRecorded(
            f"step {step} of {episode_id} attempt {last.number} was already superseded by {resolution.get('by')} "
            f"at {resolution.get('at')}; nothing new recorded (the next run starts attempt {last.number + 1})"
        )


def _repeat_on_completed(
    done: EpisodeCompleted, repeat: Callable[[Attempt], None], store: Store, step: str
) -> NoReturn:
    """On a completed episode, only a repeat of a decision that landed is answered (exit 0, by
    ``repeat`` raising AlreadyRecorded); anything else is the completed episode's refusal."""
    attempts = submissions(store, str(done.episode_id)).get(step) or []
    if attempts:
        with suppress(UsageError):  # not a repeat: the completed episode's refusal below says why
            repeat(attempts[-1])
    raise done


def _refuse_contradicted(store: Store, episode_id: str, step: str, attempt: int) -> None:
    """--not-submitted while a report of the attempt (its result file, or one kept aside) names a vendor
    task or a charge (an orphaned CMD that ended after jobstate was killed, say) would start a second,
    paid task: refused, with the command that records the task instead. A file half written or
    contradicting itself proves nothing and refuses nothing."""
    own = result_path(episode_id, step, attempt)

    def kept(rel: str) -> str:
        return "" if rel == own else f" (kept at {rel})"

    for rel, report in attempt_reports(store, episode_id, step, attempt):
        ref = report.get("remote_ref")
        if isinstance(ref, str) and ref:
            raise UsageError(
                f"step {step} of {episode_id} attempt {attempt}: its command's result file{kept(rel)} says the vendor "
                f"accepted remote task {ref}, so it was submitted; record that with: jobstate resolve --episode "
                f"{episode_id} --step {shlex.quote(step)} --accepted {shlex.quote(ref)} --by NAME --reason TEXT "
                "(or just run the step again: it reads the file and resumes the task)"
            )
        if report.get("cost") is not None:
            raise UsageError(
                f"step {step} of {episode_id} attempt {attempt}: its command's result file{kept(rel)} names a charge, "
                "so the vendor did work for it and a new attempt could pay again; record the task with: "
                "jobstate resolve "
                f"--episode {episode_id} --step {shlex.quote(step)} --accepted REF --by NAME --reason TEXT, or, once "
                f"the vendor confirms it holds no task, move {rel} out of {store.root} and resolve again"
            )


def _refuse_running(store: Store, episode_id: str, step: str) -> None:
    running = running_steps(store, episode_id, steps=[step])
    if running:
        raise StepRunning(
            f"step {step} of {episode_id} is running now ({running_holder(running[step])}): nothing to decide "
            "while it runs; wait for it to finish"
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
    replaces: str | None = None,
    evidence: Mapping[str, Any] | None = None,
    notify: Callable[[str], None] = lambda _line: None,
) -> str:
    """Record an operator's decision on an unknown submission (or, with ``supersede``, open a new attempt
    for a changed request; with ``replaces``, record that the vendor now reports the accepted task
    ``replaces`` as ``accepted``); returns what happens next.

    AlreadyRecorded (exit 0) when the same decision was recorded already (a re-run after a kill).
    ``evidence`` is a probe's (jobstate.paid.probe): kept in the decision as ``probe:``.
    """
    validate_step(step)
    if not by.strip() or not reason.strip():
        raise UsageError("resolve needs --by NAME and --reason TEXT: the decision is recorded for review")
    validate_person(by)
    validate_reason(reason)
    ref = validate_remote_ref(accepted) if accepted is not None else None
    if supersede:
        return _supersede(store, episode_id, step, by=by, reason=reason, notify=notify)
    if replaces is not None:
        if ref is None:
            raise UsageError("--replaces OLD_REF needs --accepted NEW_REF: the reference the vendor now reports")
        old = validate_remote_ref(replaces)
        return _replace(store, episode_id, step, ref, old, by=by, reason=reason, notify=notify)

    def decide(_cat: Catalog) -> StateChange[str]:
        try:
            guard(store, episode_id, notify=notify)
        except EpisodeCompleted as done:
            _repeat_on_completed(done, lambda last: _refuse_settled(episode_id, step, last, ref), store, step)
        _refuse_running(store, episode_id, step)
        steps = submissions(store, episode_id)
        attempts = steps.get(step) or []
        if not attempts:
            raise UsageError(f"step {step} of {episode_id} was never started; nothing to resolve")
        last = attempts[-1]
        if last.state != AttemptState.INTENT:
            _refuse_settled(episode_id, step, last, ref)
        if ref is None:
            _refuse_contradicted(store, episode_id, step, last.number)
        now = format_time(store.now())
        decision: dict[str, Any] = {
            "decision": "accepted" if ref else "not-submitted",
            "by": by,
            "at": now,
            "reason": reason,
        }
        if evidence is not None:
            decision["probe"] = dict(evidence)
        if ref:
            attempts[-1] = moved(
                episode_id, last, AttemptState.ACCEPTED, remote_ref=ref, accepted_at=now, resolution=decision
            )
            outcome = f"step {step} will resume remote task {ref}"
        else:
            attempts[-1] = moved(episode_id, last, AttemptState.NOT_SUBMITTED, closed_at=now, resolution=decision)
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
        try:
            guard(store, episode_id, notify=notify)
        except EpisodeCompleted as done:
            _repeat_on_completed(done, lambda last: _refuse_superseded(episode_id, step, last), store, step)
        _refuse_running(store, episode_id, step)
        steps = submissions(store, episode_id)
        attempts = steps.get(step) or []
        last = attempts[-1] if attempts else None
        if last is not None:
            _refuse_superseded(episode_id, step, last)
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
        attempts[-1] = moved(
            episode_id, last, AttemptState.SUPERSEDED, closed_at=now, resolution=decision_on(last, decision)
        )
        return submissions_change(
            store,
            episode_id,
            steps,
            f"supersede {episode_id} {step} attempt {last.number} ({last.state.value}) by {by}\n\n{reason}",
            f"step {step} will start attempt {last.number + 1} for the changed request",
        )

    return transact(store, decide)


def _replace(
    store: Store,
    episode_id: str,
    step: str,
    new_ref: str,
    old_ref: str,
    *,
    by: str,
    reason: str,
    notify: Callable[[str], None],
) -> str:
    def decide(_cat: Catalog) -> StateChange[str]:
        guard(store, episode_id, notify=notify)
        _refuse_running(store, episode_id, step)
        steps = submissions(store, episode_id)
        attempts = steps.get(step) or []
        last = attempts[-1] if attempts else None
        if last is not None and last.remote_ref == new_ref and (last.resolution or {}).get("replaces") == old_ref:
            raise AlreadyRecorded(
                f"step {step} of {episode_id} attempt {last.number} already resumes remote task {new_ref} in place "
                f"of {old_ref} (by {last.resolution.get('by') if last.resolution else '?'}); nothing new recorded"
            )
        if last is None or last.state != AttemptState.ACCEPTED or last.remote_ref != old_ref:
            now_is = (
                "never started"
                if last is None
                else f"{last.state}" + (f" as {last.remote_ref}" if last.remote_ref else "")
            )
            raise UsageError(
                f"step {step} of {episode_id} is not accepted as remote task {old_ref} (it is {now_is}); "
                "--replaces names the task its last attempt resumes"
            )
        now = format_time(store.now())
        closed, replacing = replacement(last, new_ref, by=by, at=now, reason=reason)
        attempts[-1:] = [closed, replacing]
        return submissions_change(
            store,
            episode_id,
            steps,
            f"resolve {episode_id} {step} attempt {last.number}: remote task {old_ref} is now {new_ref}, by {by}"
            f"\n\n{reason}",
            f"step {step} will resume remote task {new_ref} (attempt {replacing.number}, in place of {old_ref}; "
            "same idempotency key)",
        )

    return transact(store, decide)
