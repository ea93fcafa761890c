"""``jobstate run``'s protocol: a paid step whose body is an external command.

The command runs without a shell, after the guard, with the ``JOBSTATE_*``
environment; it reports through one JSON object in ``$JOBSTATE_RESULT``,
which it may write early (as soon as the vendor accepted) and again at the end.
It writes its outputs into ``$JOBSTATE_OUTPUT_DIR``, never into the episode directory.

How the command runs (its own session, the step lock inherited, signals passed on) is
``paid.command``'s; what it reports afterwards is recorded here.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path

from jobstate.core import advice, layout
from jobstate.core.clock import format_time
from jobstate.core.costs import Charge, costs_to_yaml_dict, recorded_charge
from jobstate.core.keys import request_fingerprint
from jobstate.core.layout import COSTS, episode_dir
from jobstate.core.money import validate_charge_amount, validate_charge_id, validate_currency
from jobstate.core.names import validate_remote_ref
from jobstate.core.records import AttemptState
from jobstate.core.result import COST_FIELDS, REPORT_FIELDS, check_report
from jobstate.core.rules_attempts import resolve_command
from jobstate.errors import ChargeConflict, CommandFailed, DirtyState, JobstateError, SubmissionUnknown, UsageError
from jobstate.paid.command import run_command
from jobstate.paid.probe import probe_for, settle
from jobstate.paid.resolution import resolve
from jobstate.paid.step import PaidStep, paid_step
from jobstate.store.catalog import Catalog
from jobstate.store.config import probe_argv
from jobstate.store.private import read_private, set_aside
from jobstate.store.records import artifacts, cost_entries, record_change
from jobstate.store.store import Store
from jobstate.store.transaction import StateChange, transact


def _read_report(store: Store, path: Path) -> dict[str, object] | None:
    data = read_private(store, path)  # a result file Git delivered, or a symlink, is never read
    if data is None:
        return None
    try:
        report = json.loads(data.decode("utf-8"))
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
        JOBSTATE_OUTPUT_DIR=str(step.output_dir),
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
    probe: str | None = None,
    probe_timeout: float | None = None,
    notify: Callable[[str], None] = lambda _line: None,
) -> None:
    """Run ``command`` as the body of paid step ``step_name`` and record what it reports.

    The request's fingerprint is the command's argv plus the bytes of ``request_file``.
    Raises CommandFailed (with the command's exit code) when it fails, after
    recording whatever it reported; ``notify`` receives progress lines and warnings.
    An earlier attempt left unknown is first settled from its result file, then by the step's
    probe (``probe`` or jobstate.yaml's), and only then refused (SubmissionUnknown, exit 6).
    """
    if not command:
        raise UsageError("jobstate run needs a command after --, e.g. jobstate run --episode E --step S -- ./generate")
    if probe is not None and probe_argv(probe) == list(command):
        raise UsageError("--probe must be a read-only lookup at the vendor, never the step's command itself")
    fingerprint = request_fingerprint(
        [arg.encode("utf-8", "surrogateescape") for arg in command] + _request(request_file)
    )

    def step_of() -> AbstractContextManager[PaidStep]:
        return paid_step(store, episode_id, step_name, max_cost=max_cost, fingerprint=fingerprint, notify=notify)

    entered = False
    try:
        with step_of() as step:
            entered = True
            _run(step, command, notify)
    except SubmissionUnknown as exc:
        if entered:
            raise
        recorded = [] if exc.attempt is None else _record_orphan_charges(store, episode_id, step_name, exc)
        if not _accept_early_report(store, episode_id, step_name, exc, notify):
            if recorded:
                exc.args = (f"{exc} (recorded first: {'; '.join(recorded)})",)
            _settle_by_probe(store, episode_id, step_name, exc, command=probe, timeout=probe_timeout, notify=notify)
        for line in recorded:
            notify(f"recorded {line}")
        with step_of() as step:
            _run(step, command, notify)
    _refuse_unreported_changes(store, episode_id, step_name)


def result_path(store: Store, episode_id: str, step_name: str, attempt: int) -> Path:
    """The ``$JOBSTATE_RESULT`` file of one attempt (git-ignored, under .jobstate/)."""
    return store.path(layout.result_path(episode_id, step_name, attempt))


def _accept_early_report(
    store: Store, episode_id: str, step_name: str, unknown: SubmissionUnknown, notify: Callable[[str], None]
) -> bool:
    """An unknown attempt whose CMD wrote a remote reference before it was killed was accepted:
    record that (as a resolution by jobstate, naming the file) instead of asking a person."""
    if unknown.attempt is None:
        return False
    path = result_path(store, episode_id, step_name, unknown.attempt)
    try:
        report = _read_report(store, path)
    except DirtyState:
        raise  # not a file jobstate's CMD wrote: refused, never taken as proof
    except UsageError:
        return False  # half written by a killed CMD: it proves nothing
    ref = None if report is None else report.get("remote_ref")
    if report is not None and ref is None and report.get("submitted") is False and report.get("cost") is None:
        # an orphaned or interrupted CMD that said the vendor has nothing (and charged nothing: a charge
        # is never dropped, so such a report is left to the operator): a new attempt may start
        error = str(report.get("error", "no reason given"))[:200]
        reason = f"the command's result file {path.name}, written before it ended, says nothing was submitted: {error}"
        try:
            resolve(store, episode_id, step_name, accepted=None, by="jobstate", reason=reason, notify=notify)
        except JobstateError:
            return False
        notify(f"step {step_name} attempt {unknown.attempt}: {reason}; recorded as not submitted")
        return True
    if not isinstance(ref, str):
        return False
    try:
        check_report(report or {}, str(path))
    except UsageError:
        return False  # a report that contradicts itself proves nothing either
    reason = f"the command's result file {path.name}, written before it was interrupted, names remote task {ref}"
    try:
        resolve(store, episode_id, step_name, accepted=ref, by="jobstate", reason=reason, notify=notify)
    except JobstateError:
        return False  # settled meanwhile, or not a valid reference: the original refusal stands
    notify(f"step {step_name} attempt {unknown.attempt}: {reason}; recorded as accepted, resuming it")
    return True


def _settle_by_probe(
    store: Store,
    episode_id: str,
    step_name: str,
    unknown: SubmissionUnknown,
    *,
    command: str | None,
    timeout: float | None,
    notify: Callable[[str], None],
) -> None:
    """Ask the step's probe about the unknown attempt; return when it settled it (the caller enters the
    step again, which resumes the task or starts the next attempt), else refuse with its reason."""
    probe = probe_for(store, step_name, command, timeout)
    if probe is None:
        raise unknown
    outcome = settle(store, probe, episode_id, step_name, notify=notify)
    if outcome is None:
        return  # settled or started meanwhile: entering again says which
    if not outcome.settled:
        raise SubmissionUnknown(f"{unknown}; the probe could not settle it: {outcome.verdict.why}", unknown.attempt)
    notify(outcome.message)


def _record_orphan_charges(store: Store, episode_id: str, step_name: str, unknown: SubmissionUnknown) -> list[str]:
    """The charges an unknown attempt's result file reports (its CMD outlived a killed jobstate) are
    recorded first, before anything is decided on the step: whatever is decided next, money is never
    dropped. The ledger recognises a charge recorded already, and a contradiction refuses (exit 4).
    Returns what was recorded, for the caller to say (a warning is added to ``unknown``'s message)."""
    assert unknown.attempt is not None
    attempt = unknown.attempt
    path = result_path(store, episode_id, step_name, attempt)
    try:
        report = _read_report(store, path)
    except DirtyState:
        raise
    except UsageError:
        return []  # half written by a killed command: it proves nothing
    if not report or report.get("cost") is None:
        return []
    try:
        check_report(report, str(path))
        charges = reported_charges(report.get("cost"), path)
    except UsageError as exc:
        unknown.args = (f"{unknown} (its result file's charges were not recorded: {exc})",)
        return []
    ref = report.get("remote_ref")
    recorded = []
    ordinals: dict[str | None, int] = {}
    for amount, currency, charge_id in charges:
        charge = Charge(step_name, amount, currency, ref if isinstance(ref, str) else None, attempt, charge_id)
        ordinal = 0
        if charge_id is None:
            ordinal = ordinals[charge.remote_ref] = ordinals.get(charge.remote_ref, 0) + 1

        def decide(_cat: Catalog, charge: Charge = charge, ordinal: int = ordinal) -> StateChange[bool]:
            entries = cost_entries(store, episode_id)
            if recorded_charge(entries, charge, ordinal) is not None:
                return record_change(store, episode_id, {}, "", result=False)
            entry = charge.entry(format_time(store.now()))
            message = f"cost {episode_id} {step_name}: {charge.describe()} (reported by attempt {attempt})"
            ledger = {COSTS: costs_to_yaml_dict([*entries, entry])}
            return record_change(store, episode_id, ledger, message, result=True)

        if transact(store, decide):
            recorded.append(
                f"{amount} {currency} that an interrupted run of step {step_name} reported in {path.name} "
                f"(attempt {attempt})"
            )
    return recorded


def _run(step: PaidStep, command: Sequence[str], notify: Callable[[str], None]) -> None:
    store, episode_id, step_name = step.store, step.episode.episode_id, step.step
    result = result_path(store, episode_id, step_name, step.attempt)
    result.parent.mkdir(parents=True, exist_ok=True)
    _record_earlier_charges(step, result, notify)
    result.unlink(missing_ok=True)
    env = _environment(store, episode_id, step_name, step, result)
    if step.remote_ref:
        notify(f"resuming remote task {step.remote_ref} of {step_name}")
    try:
        returncode = run_command(step, command, env)
    except OSError as exc:
        step.not_submitted(f"command could not start: {exc.strerror}")
        # a shell's codes for the same: 127 not found, 126 found but not runnable
        own = 127 if isinstance(exc, FileNotFoundError) else 126
        raise CommandFailed(
            f"cannot run {command[0]!r}: {exc.strerror} (as a shell says, {own}); step {step_name} was not submitted",
            own,
        ) from None
    code = returncode if returncode >= 0 else 128 - returncode  # killed by a signal: 128+N
    try:
        report = _read_report(store, result)
    except DirtyState:
        raise
    except UsageError as exc:
        if code == 0:
            raise
        # CMD's failure comes first (exit 9), with what its half-written report left unknown
        raise CommandFailed(
            f"{command[0]} exited with {code}; its report was not readable ({exc}); step {step_name} is unknown: "
            f"check with the vendor, then run: {resolve_command(episode_id, step_name)}",
            code,
        ) from None
    if report is None:
        report = {}
        if code == 0:
            notify(
                f"warning: {command[0]} exited 0 without writing $JOBSTATE_RESULT; "
                f"step {step_name} is recorded as completed with no remote task, cost or artifact"
            )
    _warn_unknown_fields(report, result, notify)
    try:
        try:
            check_report(report, str(result))
        except UsageError as exc:
            state = f"accepted as {step.remote_ref}" if step.remote_ref else "unknown: check with the vendor, then run:"
            hint = "" if step.remote_ref else f" {resolve_command(episode_id, step_name)}"
            raise UsageError(f"{exc}; nothing of it was recorded and step {step_name} is {state}{hint}") from None
        _record(step, episode_id, step_name, report, result=result, notify=notify)
    except JobstateError as exc:
        if isinstance(exc, (ChargeConflict, UsageError)):
            _keep_refused(step, result, exc)
        if code == 0:
            raise
        # CMD's failure comes first (exit 9); the refusal of its report is said too
        raise CommandFailed(f"{command[0]} exited with {code}; its report was refused as well: {exc}", code) from None
    not_submitted = step.state == AttemptState.NOT_SUBMITTED
    if code == 0 and not_submitted:
        notify(
            f"step {step_name} of {episode_id} attempt {step.attempt} was not submitted "
            f"({report.get('error', 'no reason given')}); the next run starts attempt {step.attempt + 1}"
        )
    if code != 0:
        state = "unknown: the next run refuses until it is resolved"
        if step.remote_ref:
            state = "accepted, the next run resumes it"
        elif not_submitted:
            state = "not accepted"
        raise CommandFailed(f"{command[0]} exited with {code}; step {step_name} is {state}", code)


def _refuse_unreported_changes(store: Store, episode_id: str, step_name: str) -> None:
    """A CMD that changed or removed a committed file without reporting it left the episode dirty:
    every later paid step would be refused, so this run does not end as a success either."""
    changed = [(code, path) for code, path in store.git.status(episode_dir(episode_id)) if code != "??"]
    if changed:
        code, path = changed[0]
        more = f" and {len(changed) - 1} more" if len(changed) > 1 else ""
        raise DirtyState(
            f"step {step_name} of {episode_id} is recorded, but its command changed {path}{more}, committed "
            f"earlier and not reported as an artifact, so the next paid step would be refused: restore it with: "
            f"{advice.restore(path, code)} (a command that rewrites an artifact reports it)"
        )


def _record_earlier_charges(step: PaidStep, result: Path, notify: Callable[[str], None]) -> None:
    """Charges a killed run of this attempt reported but never recorded: money is never dropped.

    The file is this attempt's own; the ledger recognises a charge recorded already."""
    try:
        report = _read_report(step.store, result)
    except DirtyState:
        raise  # not a file jobstate's CMD wrote: refused, never taken as proof
    except UsageError:
        return  # half written by a killed command: it proves nothing
    if not report or report.get("cost") is None or step.remote_ref is None:
        return
    if report.get("remote_ref") not in (None, step.remote_ref):
        return  # another task's charges cannot be this attempt's
    try:
        charges = reported_charges(report.get("cost"), result)
    except UsageError as exc:
        notify(f"warning: the earlier run's result file is not usable ({exc}); its charges were not recorded")
        return
    try:
        for amount, currency, charge_id in charges:
            if step.cost(amount, currency, charge_id=charge_id):
                notify(
                    f"recorded {amount} {currency} that an interrupted run of step {step.step} reported in "
                    f"{result.name}"
                )
        step.commit_reported()  # before the caller removes the file that proves them
    except ChargeConflict as exc:
        _keep_refused(step, result, exc)
        raise
    step.restart_charge_count()  # this run's own report counts its charges from the first again


def _keep_refused(step: PaidStep, result: Path, exc: JobstateError) -> None:
    """A report jobstate refused is kept for the operator, out of the way: read again before every
    later run of the attempt, it would refuse each of them and wedge the step."""
    if isinstance(exc, DirtyState) or not os.path.lexists(result):
        return  # the state refused, not the report (or there is none)
    kept = set_aside(
        step.store,
        result,
        episode_id=step.episode.episode_id,
        step=step.step,
        attempt=step.attempt,
        stamp=format_time(step.store.now()),
    )
    exc.args = (f"{exc}; the refused report is kept at {kept} and not read again",)


def _warn_unknown_fields(report: dict[str, object], result: Path, notify: Callable[[str], None]) -> None:
    unknown = sorted(k for k in report if k not in REPORT_FIELDS)
    costs = report.get("cost")
    for cost in costs if isinstance(costs, list) else [costs]:
        if isinstance(cost, dict):
            unknown += sorted(f"cost.{k}" for k in cost if k not in COST_FIELDS)
    if unknown:
        notify(
            f"warning: {result}: jobstate does not know the field(s) {', '.join(unknown)}; ignored "
            f"(known: {', '.join(REPORT_FIELDS)}; cost: {', '.join(COST_FIELDS)})"
        )


def _reference_advice(step: PaidStep, ref: str) -> str:
    """The command that records a reference the vendor reported and jobstate could not record, or ""."""
    try:
        validate_remote_ref(ref)
    except UsageError:
        return ""  # no command records it
    where = f"--episode {shlex.quote(step.episode.episode_id)} --step {shlex.quote(step.step)}"
    if step.remote_ref is None:
        return (
            f"; the vendor accepted remote task {ref}, record it with: jobstate resolve {where} "
            f"--accepted {shlex.quote(ref)} --by NAME --reason TEXT"
        )
    # a resumed task reported under another reference: the operator knows whether it is the same task
    old = shlex.quote(step.remote_ref)
    return (
        f"; if the vendor now calls remote task {step.remote_ref} {ref}, record it with: jobstate resolve {where} "
        f"--accepted {shlex.quote(ref)} --replaces {old} --by NAME --reason TEXT; if not, nothing is recorded "
        f"and the next run resumes {step.remote_ref}"
    )


def reported_charges(cost: object, source: Path) -> list[tuple[str, str, str | None]]:
    """(amount, currency, charge_id) of each charge in a result file's ``cost`` (one object or a list).

    All are checked before any is recorded; UsageError (exit 2) names the file and the entry.
    """
    if cost is None:
        return []
    items = cost if isinstance(cost, list) else [cost]
    out = []
    for n, item in enumerate(items, 1):
        where = f"{source}: cost" + (f" entry {n}" if isinstance(cost, list) else "")
        if not isinstance(item, dict):
            raise UsageError(f'{where} must be an object {{"amount": "12.40", "currency": "USD"}}')
        try:
            amount = validate_charge_amount(item.get("amount"))
            currency = validate_currency(item.get("currency"))
            charge_id = item.get("charge_id")
            out.append((amount, currency, None if charge_id is None else validate_charge_id(charge_id)))
        except UsageError as exc:
            raise UsageError(f"{where}: {exc}") from None
    return out


def _record(
    step: PaidStep,
    episode_id: str,
    step_name: str,
    report: dict[str, object],
    *,
    result: Path,
    notify: Callable[[str], None],
) -> None:
    ref = report.get("remote_ref")
    if ref is not None:
        try:
            step.accepted(str(ref))
        except JobstateError as exc:
            # the vendor accepted: whoever resolves this must learn the task reference from us
            exc.args = (f"{exc}{_reference_advice(step, str(ref))}",)
            raise
    elif report.get("submitted") is False and step.remote_ref is None:
        step.not_submitted(str(report.get("error", "the command reported that nothing was submitted")))
    reported = report.get("artifacts") or []
    assert isinstance(reported, list)  # check_report
    earlier = artifacts(step.store, episode_id)
    for amount, currency, charge_id in reported_charges(report.get("cost"), result):
        if not step.cost(amount, currency, charge_id=charge_id):
            notify(f"cost {amount} {currency} of step {step_name} is already in the ledger; not added again")
    for path in reported:
        record = earlier.get(str(path))
        if record is not None and record.step not in (None, step_name):
            notify(
                f"warning: step {step_name} reports artifact {path}, which step {record.step} recorded earlier: "
                f"the record now says step {step_name} wrote it (the earlier one stays in Git history)"
            )
        step.artifact(str(path))
