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
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from jobstate.errors import EpisodeUnknown, JobstateError, StateInvalid, SubmissionUnknown, UsageError
from jobstate.hashing import sha256_file
from jobstate.ledger import (
    check_cost_entry,
    idempotency_key,
    totals,
    validate_amount,
    validate_artifact_path,
    validate_currency,
    validate_remote_ref,
    validate_step,
)
from jobstate.periods import parse_episode_id
from jobstate.records import Episode

if TYPE_CHECKING:
    from jobstate.catalog import Catalog
    from jobstate.commits import Change
    from jobstate.store import Store

T = TypeVar("T")

SUBMISSIONS = "submissions.yaml"
COSTS = "costs.yaml"
ARTIFACTS = "artifacts.yaml"
APPROVAL = "approval.yaml"


class StepAlreadyCompleted(JobstateError):
    """The step finished earlier; nothing is run or paid again (exit 0)."""

    exit_code = 0


def guard(store: Store, episode_id: str) -> Episode:
    """Refuse (EpisodeUnknown, exit 5) unless the episode exists, is committed in HEAD and is clean.

    Runs before anything a paid step does; reads only.
    """
    try:
        parse_episode_id(episode_id)
    except UsageError as exc:
        raise EpisodeUnknown(f"{exc}; a paid step needs an explicit, allocated episode ID") from None
    store.require_initialized()
    directory = f"state/{episode_id}"
    if not store.path(f"{directory}/episode.yaml").is_file():
        raise EpisodeUnknown(
            f"episode {episode_id} does not exist; allocate it first with: "
            "jobstate allocate --key KEY --date YYYY-MM-DD"
        )
    from jobstate.headcheck import committed_files, matches_head  # noqa: PLC0415

    committed = committed_files(store.git, directory)
    if committed is None or f"{directory}/episode.yaml" not in committed:
        raise EpisodeUnknown(
            f"episode {episode_id} is not committed; run the same jobstate allocate again to commit it"
        )
    # the common case, exactly as committed, is answered at a cost that does not grow with the state
    dirty = [] if matches_head(store.root, directory, committed) else store.git.status(directory)
    if dirty:
        raise EpisodeUnknown(
            f"{dirty[0][1]} in episode {episode_id} is uncommitted or untracked; commit or remove it "
            f"before a paid step (git status -- {directory})"
        )
    if store.path(f"history/{episode_id}.yaml").exists():
        raise EpisodeUnknown(f"episode {episode_id} is already completed; nothing more can be paid for it")
    return store.episode(episode_id)


def _load(store: Store, episode_id: str, name: str, empty: dict[str, Any]) -> dict[str, Any]:
    from jobstate.yamlio import load_file  # noqa: PLC0415

    rel = f"state/{episode_id}/{name}"
    path = store.path(rel)
    if not path.exists():
        return empty
    data = load_file(path, rel)
    if not isinstance(data, dict) or data.get("schema") != 1:
        raise StateInvalid(f"{rel}: expected a mapping with schema: 1")
    return data


def submissions(store: Store, episode_id: str) -> dict[str, list[dict[str, Any]]]:
    """Attempts per step, from submissions.yaml. Read-only."""
    data = _load(store, episode_id, SUBMISSIONS, {"schema": 1, "steps": {}})
    steps = data.get("steps")
    if not isinstance(steps, dict) or not all(isinstance(v, list) for v in steps.values()):
        raise StateInvalid(f"state/{episode_id}/{SUBMISSIONS}: 'steps' must map step names to lists of attempts")
    return steps


def cost_entries(store: Store, episode_id: str) -> list[dict[str, Any]]:
    """The cost ledger of an episode. Read-only."""
    rel = f"state/{episode_id}/{COSTS}"
    data = _load(store, episode_id, COSTS, {"schema": 1, "entries": []})
    entries = data.get("entries")
    if not isinstance(entries, list):
        raise StateInvalid(f"{rel}: 'entries' must be a list")
    return [check_cost_entry(e, rel) for e in entries]


def artifacts(store: Store, episode_id: str) -> dict[str, dict[str, Any]]:
    """Recorded artifacts: relative path -> {sha256, size, step}. Read-only."""
    data = _load(store, episode_id, ARTIFACTS, {"schema": 1, "artifacts": {}})
    found = data.get("artifacts")
    if not isinstance(found, dict):
        raise StateInvalid(f"state/{episode_id}/{ARTIFACTS}: 'artifacts' must be a mapping")
    return found


def approval(store: Store, episode_id: str) -> dict[str, Any] | None:
    """The latest approval decision, or None. Read-only."""
    data = _load(store, episode_id, APPROVAL, {"schema": 1, "decisions": []})
    decisions = data.get("decisions")
    if not isinstance(decisions, list):
        raise StateInvalid(f"state/{episode_id}/{APPROVAL}: 'decisions' must be a list")
    return decisions[-1] if decisions else None


def record_change(
    store: Store,
    episode_id: str,
    records: dict[str, Any],
    message: str,
    *,
    result: T = None,  # type: ignore[assignment]
    extra: tuple[str, ...] = (),
) -> Change[T]:
    """A change that writes YAML records (a name in the episode directory, or a repository path)
    and commits them with ``extra`` work-tree files (artifacts) as they are."""
    from jobstate.commits import Change  # noqa: PLC0415
    from jobstate.yamlio import dumps  # noqa: PLC0415

    files: dict[str, bytes | None] = {}
    for name, data in records.items():
        files[name if "/" in name else f"state/{episode_id}/{name}"] = dumps(data)
    for rel in extra:
        files[rel] = store.path(rel).read_bytes()
    return Change(result, files, message)


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

        def decide(_cat: Catalog) -> Change[None]:
            steps = submissions(self.store, eid)
            attempts = steps.get(self.step, [])
            if not attempts or attempts[-1].get("attempt") != self.attempt:
                raise StateInvalid(f"state/{eid}/{SUBMISSIONS}: attempt {self.attempt} of {self.step} vanished")
            attempts[-1].update(change)
            return record_change(self.store, eid, {SUBMISSIONS: {"schema": 1, "steps": steps}}, message)

        self.store.transact(decide)
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

        def decide(_cat: Catalog) -> Change[None]:
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

        self.store.transact(decide)

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

        def decide(_cat: Catalog) -> Change[None]:
            found = artifacts(self.store, eid)
            found[rel] = record
            return record_change(
                self.store,
                eid,
                {ARTIFACTS: {"schema": 1, "artifacts": dict(sorted(found.items()))}},
                f"artifact {eid}/{rel} from {self.step}: sha256 {digest[:12]}, {size} bytes",
                extra=(f"{self.episode.directory}/{rel}",),
            )

        self.store.transact(decide)
        return record

    def _now(self) -> str:
        from jobstate.store import format_time  # noqa: PLC0415

        return format_time(self.store.now())


@contextmanager
def paid_step(store: Store, episode_id: str, step: str) -> Iterator[PaidStep]:
    """Guard, then intent (or resume), then the body; completion is committed when it returns.

    Raises EpisodeUnknown (exit 5) before the body when the episode is missing,
    malformed, uncommitted or dirty; SubmissionUnknown (exit 6) when an earlier
    attempt may have been accepted; StepAlreadyCompleted (exit 0) when done.
    """
    validate_step(step)
    if store.remote is not None or store.interrupted():
        store.sync()  # finish what a killed jobstate left; with a remote, the episode may be from another host
    guard(store, episode_id)  # before any credential or vendor client
    from jobstate.lock import FileLock  # noqa: PLC0415

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
        handle = _begin(store, episode_id, step)
        yield handle
        handle._update(
            f"done {episode_id} {step} attempt {handle.attempt}",
            {"state": "completed", "completed_at": handle._now()},
        )
    finally:
        step_lock.__exit__(None, None, None)


def _begin(store: Store, episode_id: str, step: str) -> PaidStep:
    from jobstate.store import format_time  # noqa: PLC0415

    def decide(_cat: Catalog) -> Change[PaidStep]:
        episode = guard(store, episode_id)  # again, under the lock
        steps = submissions(store, episode_id)
        attempts = steps.setdefault(step, [])
        last = attempts[-1] if attempts else None
        state = None if last is None else last.get("state")
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
        if state not in (None, "not-submitted"):
            raise StateInvalid(f"state/{episode_id}/{SUBMISSIONS}: unknown state {state!r} for step {step}")
        number = 1 if last is None else int(last["attempt"]) + 1
        import socket  # noqa: PLC0415

        attempt = {
            "attempt": number,
            "idempotency_key": idempotency_key(episode_id, episode.allocation_key, step, number),
            "state": "intent",
            "started_at": format_time(store.now()),
            "host": socket.gethostname(),
            "pid": os.getpid(),
        }
        attempts.append(attempt)
        return record_change(
            store,
            episode_id,
            {SUBMISSIONS: {"schema": 1, "steps": steps}},
            f"intent {episode_id} {step} attempt {number}",
            result=PaidStep(store, episode, step, attempt),
        )

    return store.transact(decide)


def resolve(store: Store, episode_id: str, step: str, *, accepted: str | None, by: str, reason: str) -> str:
    """Record an operator's decision on an unknown submission; returns what happens next."""
    validate_step(step)
    if not by.strip() or not reason.strip():
        raise UsageError("resolve needs --by NAME and --reason TEXT: the decision is recorded for review")
    ref = validate_remote_ref(accepted) if accepted is not None else None
    from jobstate.store import format_time  # noqa: PLC0415

    def decide(_cat: Catalog) -> Change[str]:
        guard(store, episode_id)
        steps = submissions(store, episode_id)
        attempts = steps.get(step) or []
        if not attempts or attempts[-1].get("state") != "intent":
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
        return record_change(
            store,
            episode_id,
            {SUBMISSIONS: {"schema": 1, "steps": steps}},
            f"resolve {episode_id} {step} attempt {last['attempt']}: {decision['decision']} by {by}\n\n{reason}",
            result=outcome,
        )

    return store.transact(decide)


def approve(store: Store, episode_id: str, *, by: str, reject: bool = False, reason: str = "") -> dict[str, Any]:
    """Record an approval (or rejection) of the episode's output and commit it."""
    if not by.strip():
        raise UsageError("approve needs --by NAME")
    if reject and not reason.strip():
        raise UsageError("a rejection needs --reason TEXT")
    from jobstate.store import format_time  # noqa: PLC0415

    def decide(_cat: Catalog) -> Change[dict[str, Any]]:
        guard(store, episode_id)
        _refuse_open_steps(store, episode_id, "approve")
        data = _load(store, episode_id, APPROVAL, {"schema": 1, "decisions": []})
        decision = {"status": "rejected" if reject else "approved", "by": by, "at": format_time(store.now())}
        if reason:
            decision["reason"] = reason
        data["decisions"] = [*data.get("decisions", []), decision]
        message = f"{decision['status']} {episode_id} by {by}"
        return record_change(store, episode_id, {APPROVAL: data}, message, result=decision)

    return store.transact(decide)


def _refuse_open_steps(store: Store, episode_id: str, action: str) -> None:
    for step, attempts in submissions(store, episode_id).items():
        state = attempts[-1].get("state") if attempts else None
        if state == "intent":
            raise SubmissionUnknown(
                f"cannot {action} {episode_id}: step {step} is unknown; run: {resolve_command(episode_id, step)}"
            )
        if state == "accepted":
            raise UsageError(
                f"cannot {action} {episode_id}: step {step} is still running at the vendor "
                f"({attempts[-1].get('remote_ref')}); run the step again to collect it"
            )


def complete(store: Store, episode_id: str) -> dict[str, Any]:
    """Write and commit history/<id>.yaml; refuses while a step is unknown or the episode unapproved."""
    from jobstate.store import format_time  # noqa: PLC0415

    def decide(_cat: Catalog) -> Change[dict[str, Any]]:
        if store.path(f"history/{episode_id}.yaml").exists():
            raise StepAlreadyCompleted(f"episode {episode_id} is already completed")
        episode = guard(store, episode_id)
        _refuse_open_steps(store, episode_id, "complete")
        decision = approval(store, episode_id)
        if decision is None or decision.get("status") != "approved":
            raise UsageError(
                f"episode {episode_id} is not approved; approve it first: "
                f"jobstate approve --episode {episode_id} --by NAME"
            )
        refs = {str(a["remote_ref"]) for s in submissions(store, episode_id).values() for a in s if a.get("remote_ref")}
        record = {
            **episode.to_yaml_dict(),
            "status": "completed",
            "completed_at": format_time(store.now()),
            "approval": decision,
            "remote_refs": sorted(refs),
            "cost_totals": totals(cost_entries(store, episode_id)),
            "artifacts": artifacts(store, episode_id),
        }
        path = f"history/{episode_id}.yaml"
        return record_change(store, episode_id, {path: record}, f"complete {episode_id}", result=record)

    return store.transact(decide)
