"""``jobstate run``'s protocol: a paid step whose body is an external command.

The command runs without a shell, after the guard, with the ``JOBSTATE_*``
environment; it reports through one JSON object in ``$JOBSTATE_RESULT``,
which it may write early (as soon as the vendor accepted) and again at the end.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

from jobstate.core.keys import request_fingerprint
from jobstate.errors import CommandFailed, JobstateError, UsageError
from jobstate.paid import PaidStep, paid_step
from jobstate.store import Store


def _read_report(path: Path) -> dict[str, object]:
    if not path.exists():
        return {}
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise UsageError(f"{path}: the command's JOBSTATE_RESULT is not one JSON object") from None
    if not isinstance(report, dict):
        raise UsageError(f"{path}: the command's JOBSTATE_RESULT must be one JSON object")
    return report


def _request(path: str | None) -> list[bytes]:
    if path is None:
        return []
    try:
        return [b"--request", Path(path).read_bytes()]
    except OSError as exc:
        raise UsageError(f"--request {path}: cannot read: {exc.strerror}") from None


def _environment(store: Store, episode_id: str, step_name: str, step: PaidStep, result: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        JOBSTATE_EPISODE=episode_id,
        JOBSTATE_STEP=step_name,
        JOBSTATE_IDEMPOTENCY_KEY=step.idempotency_key,
        JOBSTATE_RESULT=str(result),
        JOBSTATE_EPISODE_DIR=str(step.directory),
        JOBSTATE_REPO=str(store.root),
    )
    env.pop("JOBSTATE_REMOTE_REF", None)
    if step.remote_ref:
        env["JOBSTATE_REMOTE_REF"] = step.remote_ref
    return env


def run_step_command(
    store: Store,
    episode_id: str,
    step_name: str,
    command: Sequence[str],
    *,
    max_cost: str | None = None,
    request_file: str | None = None,
    notify: Callable[[str], None] = lambda _line: None,
) -> None:
    """Run ``command`` as the body of paid step ``step_name`` and record what it reports.

    The request's fingerprint is the command's argv plus the bytes of ``request_file``.
    Raises CommandFailed (with the command's exit code) when it fails, after
    recording whatever it reported; ``notify`` receives progress lines and warnings.
    """
    if not command:
        raise UsageError("jobstate run needs a command after --, e.g. jobstate run --episode E --step S -- ./generate")
    fingerprint = request_fingerprint(
        [arg.encode("utf-8", "surrogateescape") for arg in command] + _request(request_file)
    )
    with paid_step(store, episode_id, step_name, max_cost=max_cost, fingerprint=fingerprint) as step:
        for line in step.notices:
            notify(line)
        shown = len(step.notices)
        result = store.private / "results" / f"{episode_id}.{step_name}.{step.attempt}.json"
        result.parent.mkdir(parents=True, exist_ok=True)
        result.unlink(missing_ok=True)
        env = _environment(store, episode_id, step_name, step, result)
        if step.remote_ref:
            notify(f"resuming remote task {step.remote_ref} of {step_name}")
        try:
            proc = subprocess.run(list(command), env=env, check=False)
        except OSError as exc:
            step.not_submitted(f"command could not start: {exc.strerror}")
            raise UsageError(f"cannot run {command[0]!r}: {exc.strerror}") from None
        report = _read_report(result)
        _record(step, episode_id, step_name, report, result)
        code = proc.returncode if proc.returncode >= 0 else 128 - proc.returncode  # killed by a signal: 128+N
        if code != 0:
            state = "accepted, the next run resumes it" if step.remote_ref else "not accepted"
            if step.remote_ref is None and report.get("submitted") is not False:
                state = "unknown: the next run refuses until it is resolved"
            raise CommandFailed(f"{command[0]} exited with {code}; step {step_name} is {state}", code)
    for line in step.notices[shown:]:  # the settlement's, e.g. an overrun
        notify(line)


def _record(step: PaidStep, episode_id: str, step_name: str, report: dict[str, object], result: Path) -> None:
    ref = report.get("remote_ref")
    if ref is not None:
        try:
            step.accepted(str(ref))
        except JobstateError as exc:
            # the vendor accepted: whoever resolves this must learn the task reference from us
            exc.args = (
                f"{exc}; the vendor accepted remote task {ref}, record it with: jobstate resolve "
                f"--episode {episode_id} --step {step_name} --accepted {ref} --by NAME --reason TEXT",
            )
            raise
    elif report.get("submitted") is False and step.remote_ref is None:
        step.not_submitted(str(report.get("error", "the command reported that nothing was submitted")))
    cost = report.get("cost")
    if isinstance(cost, dict):
        step.cost(str(cost.get("amount")), str(cost.get("currency")), step.remote_ref)
    elif cost is not None:
        raise UsageError(f"{result}: 'cost' must be an object with amount and currency")
    reported = report.get("artifacts", [])
    if not isinstance(reported, list):
        raise UsageError(f"{result}: 'artifacts' must be a list of paths")
    for path in reported:
        step.artifact(str(path))
