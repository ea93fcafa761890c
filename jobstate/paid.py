"""Paid steps that cannot pay twice: the guard, submission records, costs and artifacts.

``paid_step`` checks the episode before the body runs (so a refusal happens
before any credential is read or vendor client built), commits an intent
record with a deterministic idempotency key, and then lets the body submit,
record the vendor's task reference (committed at once), costs and artifacts.
A step whose intent was committed but whose acceptance was never recorded is
"unknown": it is never resubmitted until an operator resolves it.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

from jobstate.catalog import Catalog
from jobstate.core.budget import parse_max_cost
from jobstate.core.clock import format_time
from jobstate.core.keys import idempotency_key, mapping_fingerprint
from jobstate.core.layout import ARTIFACTS, COSTS, SUBMISSIONS, episode_dir, episode_path, history_path
from jobstate.core.money import validate_amount, validate_currency
from jobstate.core.names import validate_artifact_path, validate_remote_ref, validate_step
from jobstate.core.periods import parse_episode_id
from jobstate.core.records import AttemptState, Episode
from jobstate.episode_files import artifacts, cost_entries, record_change, submissions, submissions_change
from jobstate.errors import (
    EpisodeUnknown,
    JobstateError,
    StateInvalid,
    StepAlreadyCompleted,
    SubmissionUnknown,
    UsageError,
)
from jobstate.hashing import sha256_file
from jobstate.lock import FileLock
from jobstate.reservation import CLOSED, check_fingerprint, reserve, settle
from jobstate.store import Store
from jobstate.transaction import StateChange, sync, transact


def guard(store: Store, episode_id: str) -> Episode:
    """Refuse (EpisodeUnknown, exit 5) unless the episode exists, is committed in HEAD and is clean.

    Runs before anything a paid step does; reads only.
    """
    try:
        parse_episode_id(episode_id)
    except UsageError as exc:
        raise EpisodeUnknown(f"{exc}; a paid step needs an explicit, allocated episode ID") from None
    store.require_initialized()
    directory = episode_dir(episode_id)
    if not store.path(episode_path(episode_id)).is_file():
        raise EpisodeUnknown(
            f"episode {episode_id} does not exist; allocate it first with: "
            "jobstate allocate --key KEY --date YYYY-MM-DD"
        )
    if not store.git.in_head(episode_path(episode_id)):
        raise EpisodeUnknown(
            f"episode {episode_id} is not committed; run the same jobstate allocate again to commit it"
        )
    dirty = store.git.status(directory)
    if dirty:
        raise EpisodeUnknown(
            f"{dirty[0][1]} in episode {episode_id} is uncommitted or untracked; commit or remove it "
            f"before a paid step (git status -- {directory})"
        )
    if store.path(history_path(episode_id)).exists():
        raise EpisodeUnknown(f"episode {episode_id} is already completed; nothing more can be paid for it")
    return store.episode(episode_id)


def resolve_command(episode_id: str, step: str) -> str:
    """The exact command that settles an unknown submission."""
    return (
        f"jobstate resolve --episode {episode_id} --step {step} "
        "(--accepted REMOTE_REF | --not-submitted) --by NAME --reason TEXT"
    )


class PaidStep:
    """Handle given to the body of ``paid_step``."""

    def __init__(self, store: Store, episode: Episode, step: str, attempt: dict[str, Any]) -> None:
        self.store = store
        self.episode = episode
        self.step = step
        self._attempt = attempt
        self.resumed = attempt.get("remote_ref") is not None
        self.notices: list[str] = []  # warnings for the operator (budget threshold, overrun)

    @property
    def attempt(self) -> int:
        """The attempt number (1, 2, ...)."""
        return int(self._attempt["attempt"])

    @property
    def idempotency_key(self) -> str:
        """Send this to the vendor: the same attempt always sends the same key."""
        return str(self._attempt["idempotency_key"])

    @property
    def remote_ref(self) -> str | None:
        """The vendor's task reference once accepted (set on resume)."""
        ref = self._attempt.get("remote_ref")
        return None if ref is None else str(ref)

    @property
    def directory(self) -> Path:
        """The episode directory, where artifacts are written."""
        return self.store.path(self.episode.directory)

    def _update(self, message: str, change: dict[str, Any]) -> None:
        eid = self.episode.episode_id

        def decide(_cat: Catalog) -> StateChange[None]:
            steps = submissions(self.store, eid)
            attempts = steps.get(self.step, [])
            if not attempts or attempts[-1].get("attempt") != self.attempt:
                raise StateInvalid(f"{episode_dir(eid)}/{SUBMISSIONS}: attempt {self.attempt} of {self.step} vanished")
            attempts[-1].update(change)
            return submissions_change(self.store, eid, steps, message, None)

        transact(self.store, decide)
        self._attempt.update(change)

    def accepted(self, remote_ref: str) -> None:
        """Record and commit at once that the vendor accepted the submission as ``remote_ref``."""
        ref = validate_remote_ref(remote_ref)
        if self.remote_ref == ref:
            return
        if self.remote_ref is not None:
            raise UsageError(f"step {self.step} of {self.episode.episode_id} already has remote task {self.remote_ref}")
        self._update(
            f"accept {self.episode.episode_id} {self.step} attempt {self.attempt}: remote task {ref}",
            {"state": "accepted", "remote_ref": ref, "accepted_at": self._now()},
        )

    def not_submitted(self, reason: str) -> None:
        """Declare that the vendor certainly did not accept this attempt (it refused, or nothing was sent)."""
        if self.remote_ref is not None:
            raise UsageError(f"step {self.step} was accepted as {self.remote_ref}; it cannot be un-submitted")
        self._update(
            f"not submitted: {self.episode.episode_id} {self.step} attempt {self.attempt}",
            {"state": "not-submitted", "closed_at": self._now(), "reason": reason[:500]},
        )

    def cost(self, amount: str | Decimal, currency: str, remote_ref: str | None = None) -> None:
        """Append a cost entry (amount as a decimal string) to the ledger and commit it.

        The same step and remote task are charged once in the ledger, however often a
        resumed run reports it.
        """
        amount = validate_amount(amount)
        currency = validate_currency(currency)
        ref = validate_remote_ref(remote_ref) if remote_ref is not None else self.remote_ref
        eid = self.episode.episode_id

        def decide(_cat: Catalog) -> StateChange[None]:
            entries = cost_entries(self.store, eid)
            if ref is not None and any(e.get("remote_ref") == ref and e["step"] == self.step for e in entries):
                return record_change(self.store, eid, {}, "")  # already in the ledger: nothing to write
            entry = {"step": self.step, "amount": amount, "currency": currency, "remote_ref": ref, "at": self._now()}
            return record_change(
                self.store,
                eid,
                {COSTS: {"schema": 1, "entries": [*entries, entry]}},
                f"cost {eid} {self.step}: {amount} {currency} ({ref or 'no remote task'})",
            )

        transact(self.store, decide)

    def artifact(self, path: str) -> dict[str, Any]:
        """Record (sha256 and size) and commit a file the step wrote inside the episode directory."""
        rel = validate_artifact_path(path)
        # no symlink anywhere on the way: not out of the directory, not even inside it
        here = self.directory
        for part in rel.split("/"):
            here = here / part
            if here.is_symlink():
                raise UsageError(f"artifact {rel!r} goes through a symlink ({part}); artifacts must be regular files")
        target = self.directory / rel
        if not target.is_file():
            raise UsageError(f"artifact {rel!r} is not a regular file in {self.episode.directory}")
        digest, size = sha256_file(target)
        eid = self.episode.episode_id
        record = {"sha256": digest, "size": size, "step": self.step}

        def decide(_cat: Catalog) -> StateChange[None]:
            found = artifacts(self.store, eid)
            found[rel] = record
            return record_change(
                self.store,
                eid,
                {ARTIFACTS: {"schema": 1, "artifacts": dict(sorted(found.items()))}},
                f"artifact {eid}/{rel} from {self.step}: sha256 {digest[:12]}, {size} bytes",
                extra=(f"{self.episode.directory}/{rel}",),
            )

        transact(self.store, decide)
        return record

    def spent(self) -> Decimal:
        """What this attempt has cost so far, per the ledger (its remote task, or none)."""
        return sum(
            (
                Decimal(e["amount"])
                for e in cost_entries(self.store, self.episode.episode_id)
                if e["step"] == self.step and e.get("remote_ref") == self.remote_ref
            ),
            Decimal(0),
        )

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
) -> Iterator[PaidStep]:
    """Guard, then intent (or resume), then the body; completion is committed when it returns.

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
    if store.remote is not None or store.interrupted():
        sync(store)  # finish what a killed jobstate left; with a remote, the episode may be from another host
    guard(store, episode_id)  # before any credential or vendor client
    step_lock = FileLock(store.private / "steps" / f"{episode_id}.{step}.lock", timeout=0)
    try:
        step_lock.__enter__()
    except JobstateError as exc:
        holder = getattr(exc, "holder", None) or {}
        raise type(exc)(
            f"step {step} of {episode_id} is already running (pid {holder.get('pid')}); "
            "it will not be submitted twice: wait for it",
            str(step_lock.path),
            holder,
        ) from None
    try:
        handle = _begin(store, episode_id, step, max_cost, fingerprint)
        yield handle
        done: dict[str, Any] = {"state": AttemptState.COMPLETED.value, "completed_at": handle._now()}
        settled = settle(handle._attempt, handle.spent())
        if settled is not None:
            done["settled"] = settled
            if "overrun" in settled:
                handle.notices.append(
                    f"warning: step {step} of {episode_id} cost {settled['spent']}, "
                    f"{settled['overrun']} over its declared maximum {settled['reserved']} (recorded as an overrun)"
                )
        handle._update(f"done {episode_id} {step} attempt {handle.attempt}", done)
    finally:
        step_lock.__exit__(None, None, None)


def _begin(store: Store, episode_id: str, step: str, max_cost: str | None, fingerprint: str | None) -> PaidStep:
    def decide(_cat: Catalog) -> StateChange[PaidStep]:
        episode = guard(store, episode_id)  # again, under the lock
        steps = submissions(store, episode_id)
        attempts = steps.setdefault(step, [])
        last = attempts[-1] if attempts else None
        state = None if last is None else last.get("state")
        check_fingerprint(episode_id, step, last, fingerprint)  # before "completed": never silent
        if last is not None and state == "completed":
            raise StepAlreadyCompleted(
                f"step {step} of {episode_id} already completed (remote task {last.get('remote_ref')}); nothing run"
            )
        if last is not None and state == "intent":
            raise SubmissionUnknown(
                f"step {step} of {episode_id} attempt {last.get('attempt')} (idempotency key "
                f"{last.get('idempotency_key')}) was started on host {last.get('host', '?')} (pid "
                f"{last.get('pid', '?')}) at {last.get('started_at')} and its acceptance is not recorded: "
                "if that run is still going, wait for it; otherwise check with the vendor, then run: "
                f"{resolve_command(episode_id, step)}"
            )
        if last is not None and state == "accepted":
            return record_change(store, episode_id, {}, "", result=PaidStep(store, episode, step, last))
        if state is not None and state not in CLOSED:
            raise StateInvalid(f"{episode_dir(episode_id)}/{SUBMISSIONS}: unknown state {state!r} for step {step}")
        notices: list[str] = []
        reservation = reserve(store, episode, step, max_cost, notices)  # exit 8 before the intent is written
        number = 1 if last is None else int(last["attempt"]) + 1
        attempt: dict[str, Any] = {
            "attempt": number,
            "idempotency_key": idempotency_key(episode_id, episode.allocation_key, step, number),
            "state": AttemptState.INTENT.value,
            "started_at": format_time(store.now()),
            "host": socket.gethostname(),
            "pid": os.getpid(),
        }
        if fingerprint is not None:
            attempt["fingerprint"] = fingerprint
        if reservation is not None:
            attempt["reservation"] = reservation
        attempts.append(attempt)
        held = f"; reserved {reservation['amount']} {reservation['currency']}" if reservation else ""
        handle = PaidStep(store, episode, step, attempt)
        handle.notices.extend(notices)
        return submissions_change(
            store, episode_id, steps, f"intent {episode_id} {step} attempt {number}{held}", handle
        )

    return transact(store, decide)
