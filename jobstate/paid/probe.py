"""Settle a step left unknown by asking the vendor: run the step's probe, record what it proves.

A probe is a read-only lookup at the vendor (by the attempt's idempotency key, a name, metadata...),
never the step's command. It runs without a shell, with no terminal input, in its own process group,
under a deadline (``probe_timeout``), and answers with one small JSON object in
``$JOBSTATE_PROBE_RESULT`` (jobstate.core.probe). What it proves is recorded as a resolution by
``jobstate-probe`` with the answer and the command's fingerprint as evidence, through the same
``resolve`` an operator uses, so the same rules refuse what they refuse (a "not found" while the
attempt's own result file names a task, a step settled meanwhile). Anything it cannot prove leaves
the step unknown, with the probe's reason in the refusal.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from jobstate.core.attempts import Attempt
from jobstate.core.keys import request_fingerprint
from jobstate.core.layout import PRIVATE
from jobstate.core.names import validate_step
from jobstate.core.probe import PROBE_BY, UNKNOWN, ProbeVerdict, judge_answer, probe_evidence
from jobstate.core.records import AttemptState
from jobstate.core.rules_attempts import resolve_command
from jobstate.errors import AlreadyRecorded, JobstateError, StepRunning, SubmissionUnknown, UsageError
from jobstate.paid.guard import guard
from jobstate.paid.resolution import resolve
from jobstate.store.config import probe_argv
from jobstate.store.private import read_private
from jobstate.store.records import submissions
from jobstate.store.running import running_holder, running_steps
from jobstate.store.store import Store

# what a probe must not see: the step command's own protocol (a probe that writes a result or an
# artifact would be a step command in disguise)
_STEP_ONLY = ("JOBSTATE_RESULT", "JOBSTATE_OUTPUT_DIR", "JOBSTATE_REMOTE_REF", "JOBSTATE_EPISODE_DIR")


class Probe(NamedTuple):
    """A probe command (argv) and its deadline in seconds."""

    argv: list[str]
    timeout: float

    @property
    def fingerprint(self) -> str:
        """``sha256:...`` of the argv, kept with every settlement it made."""
        return request_fingerprint([word.encode("utf-8", "surrogateescape") for word in self.argv])


class ProbeQuestion(NamedTuple):
    """What a probe given as a Python callable is asked about (the command's JOBSTATE_* variables)."""

    episode_id: str
    step: str
    attempt: int
    idempotency_key: str
    intent_at: str  # the attempt's intent time, UTC, whole seconds


class CallableProbe(NamedTuple):
    """A probe given to ``paid_step(probe=...)``: called with a ProbeQuestion, it returns the answer
    object a probe command writes. It must be read-only at the vendor and bound its own time."""

    function: Callable[[ProbeQuestion], Mapping[str, Any]]

    @property
    def fingerprint(self) -> str:
        """``sha256:...`` of the function's qualified name, kept with every settlement it made."""
        name = f"python:{getattr(self.function, '__module__', '?')}.{getattr(self.function, '__qualname__', '?')}"
        return request_fingerprint([name.encode("utf-8", "surrogateescape")])


class ProbeOutcome(NamedTuple):
    """One step the probe was asked about, and what became of it."""

    episode_id: str
    step: str
    attempt: int
    verdict: ProbeVerdict
    settled: bool  # recorded as accepted or not-submitted
    message: str  # for people: what was recorded, or why the step stays unknown


def probe_for(store: Store, step: str, command: str | Sequence[str] | None, timeout: float | None) -> Probe | None:
    """The probe of ``step``: ``command`` when given (``--probe``), else the one jobstate.yaml declares."""
    declared = store.config.probe_of(step)
    if command is not None:
        argv = probe_argv(command if isinstance(command, str) else list(command))
        return Probe(argv, timeout if timeout is not None else (declared[1] if declared else 60.0))
    if declared is None:
        return None
    return Probe(declared[0], timeout if timeout is not None else declared[1])


def probe_result_path(episode_id: str, step: str, attempt: int) -> str:
    """``.jobstate/probes/<id>.<step>.<attempt>.json``: the probe's answer (host-local, git-ignored)."""
    return f"{PRIVATE}/probes/{episode_id}.{step}.{attempt}.json"


def ask(store: Store, probe: Probe, episode_id: str, attempt: Attempt) -> ProbeVerdict:
    """Run ``probe`` for one attempt and judge its answer. Never raises for what the probe does:
    a timeout, a crash, a failure or a malformed answer is an unknown verdict with its reason."""
    step, started_at = attempt.step, str(attempt.get("started_at") or "")
    path = store.path(probe_result_path(episode_id, step, attempt.number))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in _STEP_ONLY}
    env.update(
        JOBSTATE_EPISODE=episode_id,
        JOBSTATE_STEP=step,
        JOBSTATE_ATTEMPT=str(attempt.number),
        JOBSTATE_IDEMPOTENCY_KEY=attempt.idempotency_key or "",
        JOBSTATE_INTENT_AT=started_at,
        JOBSTATE_PROBE_RESULT=str(path),
        JOBSTATE_REPO=str(store.root),
    )
    try:
        proc = subprocess.Popen(
            probe.argv,
            cwd=store.root,
            env=env,
            stdin=subprocess.DEVNULL,  # no prompts: a probe that asks waits for nobody
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its whole group is ended at the deadline
        )
    except OSError as exc:
        return ProbeVerdict(UNKNOWN, None, f"the probe could not start: {exc.strerror}", None)
    try:
        _, err = proc.communicate(timeout=probe.timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        return ProbeVerdict(UNKNOWN, None, f"the probe did not answer within {probe.timeout:g} s", None)
    except BaseException:
        _kill_group(proc)
        raise
    if proc.returncode != 0:
        detail = " ".join(err.decode("utf-8", "replace").split())[:200] if err else ""
        code = proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
        return ProbeVerdict(UNKNOWN, None, f"the probe exited with {code}" + (f": {detail}" if detail else ""), None)
    try:
        raw = read_private(store, path)  # a symlink or a tracked file is refused, never read
    except JobstateError as exc:
        return ProbeVerdict(UNKNOWN, None, f"the probe's answer file is not usable: {exc}", None)
    finally:
        path.unlink(missing_ok=True)
    return judge_answer(raw, started_at)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()


def _call(probe: CallableProbe, episode_id: str, attempt: Attempt) -> ProbeVerdict:
    question = ProbeQuestion(
        episode_id, attempt.step, attempt.number, attempt.idempotency_key or "", str(attempt.get("started_at") or "")
    )
    try:
        answer = probe.function(question)
        raw = json.dumps(answer, allow_nan=False).encode("utf-8")
    except Exception as exc:
        return ProbeVerdict(UNKNOWN, None, f"the probe raised {type(exc).__name__}: {exc}"[:200], None)
    return judge_answer(raw, question.intent_at)


def settle(
    store: Store,
    probe: Probe | CallableProbe,
    episode_id: str,
    step: str,
    *,
    notify: Callable[[str], None] = lambda _line: None,
) -> ProbeOutcome | None:
    """Ask ``probe`` about ``step``'s last attempt if it is unknown, and record what the answer proves.

    None when the step is not unknown (never started, settled, or running now). The probe runs
    outside jobstate's lock (it may take up to its deadline); ``resolve`` then re-reads the step
    under the lock, so a step settled meanwhile is left as it was.
    """
    attempts = submissions(store, episode_id).get(step) or []
    last = attempts[-1] if attempts else None
    if last is None or last.state != AttemptState.INTENT or running_steps(store, episode_id, steps=[step]):
        return None
    verdict = ask(store, probe, episode_id, last) if isinstance(probe, Probe) else _call(probe, episode_id, last)
    where = f"step {step} of {episode_id} attempt {last.number}"
    if verdict.decision == UNKNOWN:
        return ProbeOutcome(episode_id, step, last.number, verdict, False, f"{where} stays unknown: {verdict.why}")
    reason = f"{verdict.why} (probe {probe.fingerprint[:19]}...)"
    try:
        resolve(
            store,
            episode_id,
            step,
            accepted=verdict.remote_ref,
            by=PROBE_BY,
            reason=reason,
            evidence=probe_evidence(verdict, probe.fingerprint),
            notify=notify,
        )
    except AlreadyRecorded:
        return ProbeOutcome(episode_id, step, last.number, verdict, True, f"{where} was already settled so")
    except UsageError as exc:
        # the rules an operator's decision meets refused it (the result file names a task, say)
        return ProbeOutcome(episode_id, step, last.number, verdict, False, f"{where} stays unknown: {exc}")
    what = f"accepted as {verdict.remote_ref}" if verdict.remote_ref else "not submitted"
    return ProbeOutcome(
        episode_id, step, last.number, verdict, True, f"{where} settled by probe: {what}: {verdict.why}"
    )


def sweep(
    store: Store,
    *,
    episode_id: str | None = None,
    step: str | None = None,
    command: str | Sequence[str] | None = None,
    timeout: float | None = None,
    notify: Callable[[str], None] = lambda _line: None,
) -> list[ProbeOutcome]:
    """Ask the probe about every unknown step (of one episode, of one step): what each answer settled.

    A step with no probe (none given, none declared for it) is reported as staying unknown.
    """
    if step is not None:
        validate_step(step)
    if episode_id is not None:
        store.episode(episode_id)  # an ID that is not there is EpisodeUnknown (exit 5), not "nothing unknown"
    ids = [episode_id] if episode_id is not None else [e.episode_id for e in store.episodes()]
    outcomes: list[ProbeOutcome] = []
    for eid in ids:
        steps = submissions(store, eid)
        for name, attempts in steps.items():
            if (step is not None and name != step) or not attempts or attempts[-1].state != AttemptState.INTENT:
                continue
            probe = probe_for(store, name, command, timeout)
            if probe is None:
                why = f"step {name} has no probe (jobstate.yaml steps: {name}: probe, or --probe)"
                verdict = ProbeVerdict(UNKNOWN, None, why, None)
                outcomes.append(
                    ProbeOutcome(
                        eid, name, attempts[-1].number, verdict, False, f"step {name} of {eid} stays unknown: {why}"
                    )
                )
                continue
            outcome = settle(store, probe, eid, name, notify=notify)
            if outcome is not None:
                outcomes.append(outcome)
    return outcomes


def settle_before_entering(
    store: Store, probe: CallableProbe, episode_id: str, step: str, notify: Callable[[str], None]
) -> None:
    """``paid_step(probe=...)``: an unknown last attempt is settled by the callable first, or refused
    (SubmissionUnknown, exit 6) with its reason; anything else is left to the paid step."""
    outcome = settle(store, probe, episode_id, step, notify=notify)
    if outcome is None:
        return
    if not outcome.settled:
        raise SubmissionUnknown(
            f"{outcome.message}; a person settles it: {resolve_command(episode_id, step)}", outcome.attempt
        )
    notify(outcome.message)


def settle_with_probe(
    store: Store,
    episode_id: str,
    step: str,
    command: str | None,
    timeout: float | None,
    *,
    notify: Callable[[str], None] = lambda _line: None,
) -> str:
    """``resolve --probe``: settle one unknown step from its probe's answer; what happens next.

    SubmissionUnknown (exit 6) when the answer proves nothing, with the probe's reason; the refusals
    of ``resolve`` otherwise (a step not unknown, running, of a completed episode).
    """
    validate_step(step)
    guard(store, episode_id, clean=False)  # the episode exists and is committed, as for resolve
    probe = probe_for(store, step, command, timeout)
    if probe is None:
        raise UsageError(
            f"step {step} has no probe: give --probe PROBE_CMD, or declare it in jobstate.yaml "
            f"(steps: {{{step}: {{probe: CMD}}}})"
        )
    running = running_steps(store, episode_id, steps=[step])
    if running:
        raise StepRunning(
            f"step {step} of {episode_id} is running now ({running_holder(running[step])}): nothing to settle "
            "while it runs; wait for it to finish"
        )
    attempts = submissions(store, episode_id).get(step) or []
    if not attempts:
        raise UsageError(f"step {step} of {episode_id} was never started; nothing to resolve")
    outcome = settle(store, probe, episode_id, step, notify=notify)
    if outcome is None:
        raise UsageError(f"step {step} of {episode_id} is not unknown (it is {attempts[-1].state}); nothing to resolve")
    if not outcome.settled:
        raise SubmissionUnknown(
            f"{outcome.message}; a person settles it: {resolve_command(episode_id, step)}", outcome.attempt
        )
    if outcome.verdict.remote_ref:
        return f"{outcome.message}; step {step} will resume remote task {outcome.verdict.remote_ref}"
    return f"{outcome.message}; step {step} will start attempt {outcome.attempt + 1} with a new idempotency key"
