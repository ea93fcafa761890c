"""Paid steps that cannot pay twice: the guard, submission records, costs and artifacts.

``paid_step`` checks the episode before the body runs (so a refusal happens
before any credential is read or vendor client built), commits an intent
record with a deterministic idempotency key, and then lets the body submit,
record the vendor's task reference (committed at once), costs and artifacts.
A step whose intent was committed but whose acceptance was never recorded is
"unknown": it is never resubmitted until an operator resolves it.

At most three commits per step (issue 27): the intent, the acceptance, and one closing commit with
the charges, the artifacts and the completion. What the body reports with ``cost`` and ``artifact``
is kept in memory (an artifact's bytes as read when reported) and committed with the end; when the
body raises, or says nothing was submitted, the closing commit still records every charge and
artifact reported (without the completion): money is never dropped.

Longer than most modules on purpose: the guard, the intent and the records of one attempt are
one protocol; the run of a command (step_command.py) and the decisions (resolution.py,
review.py) live elsewhere.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

from jobstate.core.artifacts import Artifact, artifacts_to_yaml_dict, new_artifact
from jobstate.core.attempts import Attempt, attempt_from_yaml_dict, submissions_to_yaml_dict
from jobstate.core.budget import parse_max_cost
from jobstate.core.clock import format_time
from jobstate.core.costs import Charge, CostEntry, charged_to, costs_to_yaml_dict, recorded_charge, same_task
from jobstate.core.keys import idempotency_key, mapping_fingerprint
from jobstate.core.layout import (
    ARTIFACTS,
    COSTS,
    SUBMISSIONS,
    episode_dir,
    step_lock_path,
    work_dir,
)
from jobstate.core.money import validate_charge_amount, validate_charge_id, validate_currency
from jobstate.core.names import validate_artifact_path, validate_remote_ref, validate_step
from jobstate.core.records import AttemptState, Episode
from jobstate.core.rules_attempts import may_start_attempt, moved
from jobstate.errors import (
    EpisodeCompleted,
    JobstateError,
    StateInvalid,
    StepAlreadyCompleted,
    UsageError,
)
from jobstate.git.loose import StoredBlob
from jobstate.paid.guard import guard
from jobstate.paid.probe import CallableProbe, ProbeQuestion, settle_before_entering
from jobstate.paid.reservation import check_fingerprint, reserve, settle
from jobstate.paid.staging import make_output_dir, remove_output_dir, store_artifact
from jobstate.store.catalog import Catalog
from jobstate.store.lock import FileLock
from jobstate.store.private import refuse_tracked
from jobstate.store.records import (
    approval_file,
    artifacts,
    cost_entries,
    record_change,
    submissions,
    submissions_change,
)
from jobstate.store.running import running_holder
from jobstate.store.store import Store
from jobstate.store.transaction import StateChange, sync, transact


def _changed(episode_id: str, attempt: Attempt, change: Mapping[str, Any]) -> Attempt:
    """``attempt`` with ``change`` written: a move of its state goes along ``TRANSITIONS`` (the model)."""
    fields = dict(change)
    to = fields.pop("state", None)
    return attempt.updated(**fields) if to is None else moved(episode_id, attempt, AttemptState(to), **fields)


class PaidStep:
    """Handle given to the body of ``paid_step``."""

    def __init__(self, store: Store, episode: Episode, step: str, attempt: Attempt) -> None:
        self.store = store
        self.episode = episode
        self.step = step
        self._attempt = attempt
        self.resumed = attempt.remote_ref is not None
        self.lock: FileLock | None = None  # the step lock, held by CMD too (run_protocol)
        self._ordinals: dict[str | None, int] = {}  # charges without a charge_id reported so far, per remote task
        # reported and not committed yet: committed together by the closing commit (see the module docstring)
        self._charges: list[tuple[Charge, CostEntry]] = []
        self._artifacts: dict[str, tuple[Artifact, StoredBlob]] = {}

    @property
    def attempt(self) -> int:
        """The attempt number (1, 2, ...)."""
        return self._attempt.number

    @property
    def idempotency_key(self) -> str:
        """Send this to the vendor: the same attempt always sends the same key."""
        key = self._attempt.idempotency_key
        if key is None:
            raise StateInvalid(
                f"{episode_dir(self.episode.episode_id)}/{SUBMISSIONS}: step {self.step} attempt {self.attempt} "
                "has no idempotency_key"
            )
        return key

    @property
    def state(self) -> AttemptState:
        """Where this attempt stands as recorded (intent until accepted or declared not submitted)."""
        return self._attempt.state

    @property
    def remote_ref(self) -> str | None:
        """The vendor's task reference once accepted (set on resume)."""
        return self._attempt.remote_ref

    @property
    def directory(self) -> Path:
        """The episode directory as committed: read committed files here, never write into it."""
        return self.store.path(self.episode.directory)

    @property
    def output_dir(self) -> Path:
        """This attempt's staging directory (``.jobstate/work/<id>/<step>/<attempt>``): write outputs here;
        an artifact reported by name moves from here into the episode directory in the commit that
        records it. A resumed attempt finds what its earlier run left."""
        return self.store.path(work_dir(self.episode.episode_id, self.step, self.attempt))

    def _update(self, message: str, change: dict[str, Any]) -> None:
        eid = self.episode.episode_id

        def decide(_cat: Catalog) -> StateChange[None]:
            steps = submissions(self.store, eid)
            attempts = steps.get(self.step, [])
            if not attempts or attempts[-1].number != self.attempt:
                raise StateInvalid(f"{episode_dir(eid)}/{SUBMISSIONS}: attempt {self.attempt} of {self.step} vanished")
            attempts[-1] = _changed(eid, attempts[-1], change)
            return submissions_change(self.store, eid, steps, message, None)

        transact(self.store, decide)
        self._attempt = _changed(eid, self._attempt, change)

    def accepted(self, remote_ref: str) -> None:
        """Record and commit at once that the vendor accepted the submission as ``remote_ref``."""
        ref = validate_remote_ref(remote_ref)
        if self.remote_ref == ref:
            return
        if self.remote_ref is not None:
            raise UsageError(f"step {self.step} of {self.episode.episode_id} already has remote task {self.remote_ref}")
        self._update(
            f"accept {self.episode.episode_id} {self.step} attempt {self.attempt}: remote task {ref}",
            {"state": AttemptState.ACCEPTED, "remote_ref": ref, "accepted_at": self._now()},
        )

    def not_submitted(self, reason: str) -> None:
        """Declare that the vendor certainly did not accept this attempt (it refused, or nothing was sent)."""
        if self.remote_ref is not None:
            raise UsageError(f"step {self.step} was accepted as {self.remote_ref}; it cannot be un-submitted")
        self._update(
            f"not submitted: {self.episode.episode_id} {self.step} attempt {self.attempt}",
            {"state": AttemptState.NOT_SUBMITTED, "closed_at": self._now(), "reason": reason[:500]},
        )

    def cost(
        self, amount: str | Decimal, currency: str, remote_ref: str | None = None, *, charge_id: str | None = None
    ) -> bool:
        """Record one charge (amount as a decimal string) in the ledger; True if it was new.

        It is committed with the step's closing commit, whether the body returns or raises
        (``commit_reported`` commits it at once).

        A charge is identified by step, remote task (this step's by default) and ``charge_id``;
        without a charge_id, the n-th charge reported for a task in this run is the n-th one
        recorded for it. A replay of a recorded charge is not added again (False); one that
        contradicts it (another amount or currency) raises ChargeConflict naming both.
        """
        ref = validate_remote_ref(remote_ref) if remote_ref is not None else self.remote_ref
        charge = Charge(
            step=self.step,
            amount=validate_charge_amount(amount),
            currency=validate_currency(currency),
            remote_ref=ref,
            attempt=self.attempt,
            charge_id=None if charge_id is None else validate_charge_id(charge_id),
        )
        ordinal = 0
        if charge_id is None:
            ordinal = self._ordinals[ref] = self._ordinals.get(ref, 0) + 1
        entries = [*cost_entries(self.store, self.episode.episode_id), *(e for _c, e in self._charges)]
        if recorded_charge(entries, charge, ordinal) is not None:
            return False  # a replay: nothing to write
        self._charges.append((charge, charge.entry(self._now())))
        return True

    def artifact(self, path: str) -> Artifact:
        """Record (sha256 and size) a file the step wrote in its output directory; the closing commit moves it
        into the episode directory under the same relative path, and the staged file is removed once that landed.

        The file must be a regular file with one link, reached without a symlink: it is opened once
        (O_NOFOLLOW) when reported, under the step lock, and streamed into a blob: what is hashed is exactly
        what is committed (UsageError, exit 2, with the reason otherwise; nothing is recorded).
        """
        rel = validate_artifact_path(path)
        eid = self.episode.episode_id
        target = f"{self.episode.directory}/{rel}"
        source = self.output_dir / rel
        if not os.path.lexists(source) and os.path.lexists(self.directory / rel):
            earlier = artifacts(self.store, eid).get(rel)
            if earlier is not None and earlier.step == self.step and self.store.git.in_head(target):
                return earlier  # moved and committed by an interrupted run of this step, which guard found intact
            raise UsageError(
                f"artifact {rel!r} was written into the episode directory {self.episode.directory}, which a step "
                f"only reads: write it into $JOBSTATE_OUTPUT_DIR ({work_dir(eid, self.step, self.attempt)}) and "
                f"jobstate moves it into the episode when it records it; move {target} there, then run this again"
            )
        blob, digest, size = store_artifact(self.store.git, self.output_dir, rel)
        record = new_artifact(digest, size, self.step)
        self._artifacts[rel] = (record, blob)
        return record

    def commit_reported(self) -> None:
        """Commit the charges and artifacts reported so far, now, in one commit (none when there are none)."""
        self._close(None, "")

    def _close(self, done: dict[str, Any] | None, message: str) -> None:
        """One commit: the reported charges and artifacts, and with ``done`` the attempt's closing fields."""
        eid = self.episode.episode_id
        charges, staged = list(self._charges), dict(self._artifacts)
        if done is None and not charges and not staged:
            return
        parts = [c.describe() for c, _e in charges] + [f"{eid}/{rel}" for rel in staged]
        if done is None:
            message = f"report {eid} {self.step} attempt {self.attempt}"
        if parts:  # the subject line names a few; the records hold them all
            message += ": " + "; ".join(parts[:4]) + (f" and {len(parts) - 4} more" if len(parts) > 4 else "")

        def decide(_cat: Catalog) -> StateChange[None]:
            records: dict[str, Any] = {}
            if done is not None:
                steps = submissions(self.store, eid)
                attempts = steps.get(self.step, [])
                if not attempts or attempts[-1].number != self.attempt:
                    raise StateInvalid(
                        f"{episode_dir(eid)}/{SUBMISSIONS}: attempt {self.attempt} of {self.step} vanished"
                    )
                attempts[-1] = attempts[-1].updated(**done)
                records[SUBMISSIONS] = submissions_to_yaml_dict(steps)
            if charges:
                records[COSTS] = costs_to_yaml_dict([*cost_entries(self.store, eid), *(e for _c, e in charges)])
            if staged:
                found = artifacts(self.store, eid)
                found.update({rel: record for rel, (record, _data) in staged.items()})
                records[ARTIFACTS] = artifacts_to_yaml_dict(found)
            change: StateChange[None] = record_change(self.store, eid, records, message)
            for rel, (_record, blob) in staged.items():
                change.files[f"{self.episode.directory}/{rel}"] = blob
            return change

        transact(self.store, decide)
        if done is not None:
            self._attempt = self._attempt.updated(**done)
        self._charges.clear()
        self._artifacts.clear()
        for rel in staged:
            (self.output_dir / rel).unlink(missing_ok=True)  # moved: the episode directory has it, committed

    def restart_charge_count(self) -> None:
        """Count charges without a charge_id from the first again (a run's report after an earlier one's)."""
        self._ordinals.clear()

    def spent(self) -> dict[str, Decimal]:
        """What this attempt has cost so far per currency, per the ledger and the charges reported since."""
        eid = self.episode.episode_id
        numbers = same_task(self._attempt, submissions(self.store, eid).get(self.step) or [])
        entries = [*cost_entries(self.store, eid), *(e for _c, e in self._charges)]
        return charged_to(entries, self.step, numbers, self.remote_ref)

    def _now(self) -> str:
        return format_time(self.store.now())


@contextmanager
def paid_step(
    store: Store,
    episode_id: str,
    step: str,
    *,
    max_cost: str | None = None,
    request: Mapping[str, Any] | None = None,
    fingerprint: str | None = None,
    probe: Callable[[ProbeQuestion], Mapping[str, Any]] | None = None,
    notify: Callable[[str], None] = lambda _line: None,
) -> Iterator[PaidStep]:
    """Guard, then intent (or resume), then the body; completion is committed when it returns.

    ``probe``, a read-only lookup at the vendor, settles an earlier attempt left unknown before the
    step is refused (jobstate.paid.probe: it gets a ProbeQuestion and returns the probe's answer).

    ``max_cost`` ("12.40 USD") is reserved against the period's budget with the intent;
    ``request`` (or a ready ``fingerprint``) identifies what is asked of the vendor.
    Raises EpisodeUnknown (exit 5) before the body when the episode is missing,
    malformed, uncommitted or dirty; SubmissionUnknown (exit 6) when an earlier
    attempt may have been accepted; FingerprintMismatch (exit 4) for a changed
    request; BudgetExceeded (exit 8) when the reservation does not fit;
    StepAlreadyCompleted (exit 0) when done.
    """
    validate_step(step)
    if max_cost is not None:
        parse_max_cost(max_cost)  # refuse bad input before anything else
    if request is not None:
        fingerprint = mapping_fingerprint(request)
    refuse_tracked(store)  # before the step lock's file is opened under .jobstate/
    if store.remote is not None or store.interrupted():
        sync(store)  # finish what a killed jobstate left; with a remote, the episode may be from another host
    try:
        guard(store, episode_id, clean=False)  # before any credential or vendor client; clean under the lock in _begin
    except EpisodeCompleted:
        _refuse_completed_repeat(store, episode_id, step, fingerprint)
        raise
    if probe is not None:
        settle_before_entering(store, CallableProbe(probe), episode_id, step, notify)
    step_lock = FileLock(store.path(step_lock_path(episode_id, step)), timeout=0)
    try:
        step_lock.__enter__()
    except JobstateError as exc:
        holder = getattr(exc, "holder", None) or {}
        raise type(exc)(
            f"step {step} of {episode_id} is already running ({running_holder(holder)}); "
            "it will not be submitted twice: wait for it",
            str(step_lock.path),
            holder,
        ) from None
    try:
        make_output_dir(store, episode_id, step, None, create=False)  # a refusal comes before the intent
        handle = _begin(store, episode_id, step, max_cost=max_cost, fingerprint=fingerprint, notify=notify)
        handle.lock = step_lock
        make_output_dir(store, episode_id, step, handle.attempt)
        try:
            yield handle
        except BaseException:
            handle.commit_reported()  # the body failed: what it reported is still recorded (money is never dropped)
            raise
        if handle.state == AttemptState.NOT_SUBMITTED:
            handle.commit_reported()
            remove_output_dir(store, episode_id, step, handle.attempt)
            return  # the body said the vendor has nothing: not a completion; a new attempt may follow
        done: dict[str, Any] = {"state": AttemptState.COMPLETED, "completed_at": handle._now()}
        settled = settle(handle._attempt, handle.spent())
        if settled is not None:
            done["settled"] = settled
            if "overrun" in settled:
                notify(
                    f"warning: step {step} of {episode_id} cost {settled['spent']}, "
                    f"{settled['overrun']} over its declared maximum {settled['reserved']} (recorded as an overrun)"
                )
            if "unreserved" in settled:
                notify(
                    f"warning: step {step} of {episode_id} was also charged {settled['unreserved']}, in a currency "
                    "it did not reserve (recorded; verify checks the period's budget)"
                )
        handle._close(done, f"done {episode_id} {step} attempt {handle.attempt}")
        remove_output_dir(store, episode_id, step, handle.attempt)  # recorded: what was not reported is not kept
    finally:
        step_lock.__exit__(None, None, None)


def _refuse_completed_repeat(store: Store, episode_id: str, step: str, fingerprint: str | None) -> None:
    """On a completed episode, the same step run again with its recorded request is a repeat: exit 0."""
    attempts = submissions(store, episode_id).get(step) or []
    last = attempts[-1] if attempts else None
    same = last is not None and (fingerprint is None or last.fingerprint in (None, fingerprint))
    if last is not None and same and last.state == AttemptState.COMPLETED:
        raise StepAlreadyCompleted(
            f"step {step} of {episode_id} already completed and the episode is completed; nothing run"
        )


def _begin(
    store: Store,
    episode_id: str,
    step: str,
    *,
    max_cost: str | None,
    fingerprint: str | None,
    notify: Callable[[str], None],
) -> PaidStep:
    def decide(_cat: Catalog) -> StateChange[PaidStep]:
        episode = guard(store, episode_id, notify=notify)  # again, under the lock
        steps = submissions(store, episode_id)
        attempts = steps.setdefault(step, [])
        last = attempts[-1] if attempts else None
        check_fingerprint(episode_id, step, last, fingerprint)  # before "completed": never silent
        if may_start_attempt(episode_id, step, last, approval_file(store, episode_id)[0]):
            assert last is not None  # resumed: the vendor accepted it, nothing new is submitted
            return record_change(store, episode_id, {}, "", result=PaidStep(store, episode, step, last))
        notices: list[str] = []
        reservation = reserve(store, episode, step, max_cost, notices)  # exit 8 before the intent is written
        number = 1 if last is None else last.number + 1
        make_output_dir(store, episode_id, step, number, create=False)  # a symlink there: refused before the intent
        fields: dict[str, Any] = {
            "attempt": number,
            "idempotency_key": idempotency_key(episode_id, episode.allocation_key, step, number),
            "state": AttemptState.INTENT.value,
            "started_at": format_time(store.now()),
            "host": socket.gethostname(),
            "pid": os.getpid(),
        }
        if fingerprint is not None:
            fields["fingerprint"] = fingerprint
        if reservation is not None:
            fields["reservation"] = reservation
        attempt = attempt_from_yaml_dict(fields, f"{episode_dir(episode_id)}/{SUBMISSIONS}", step)
        attempts.append(attempt)
        held = f"; reserved {reservation['amount']} {reservation['currency']}" if reservation else ""
        handle = PaidStep(store, episode, step, attempt)
        for line in notices:
            notify(line)
        return submissions_change(
            store, episode_id, steps, f"intent {episode_id} {step} attempt {number}{held}", handle
        )

    return transact(store, decide)
