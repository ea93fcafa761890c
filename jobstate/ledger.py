"""Pure checks and arithmetic for paid-step records: names, amounts, refs, artifact paths."""

from __future__ import annotations

import hashlib
import re
import reprlib
from decimal import Decimal, InvalidOperation
from pathlib import PurePosixPath
from typing import Any

from jobstate.errors import StateInvalid, UsageError

_STEP = re.compile(r"[a-z][a-z0-9_-]{0,39}")
_AMOUNT = re.compile(r"-?(0|[1-9]\d{0,14})(\.\d{1,8})?")
_CURRENCY = re.compile(r"[A-Z]{3}")
MAX_REF = 200
# files jobstate itself writes in an episode directory; never artifacts
RECORD_FILES = frozenset({"episode.yaml", "submissions.yaml", "costs.yaml", "artifacts.yaml", "approval.yaml"})


def validate_step(step: object) -> str:
    """A step name: lower-case letters, digits, ``-`` and ``_``; at most 40 characters."""
    if not isinstance(step, str) or not _STEP.fullmatch(step):
        raise UsageError(
            f"invalid step name {reprlib.repr(step)}: use lower-case letters, digits, - and _ (e.g. generate)"
        )
    return step


def validate_amount(amount: object) -> str:
    """A decimal amount as a string (``12.40``); floats are refused: they cannot hold money exactly."""
    if isinstance(amount, Decimal):
        amount = format(amount, "f")
    if not isinstance(amount, str) or not _AMOUNT.fullmatch(amount):
        raise UsageError(f"invalid amount {amount!r}: give a decimal string such as '12.40' (never a float)")
    return amount


def validate_currency(currency: object) -> str:
    """An ISO 4217 code such as USD."""
    if not isinstance(currency, str) or not _CURRENCY.fullmatch(currency):
        raise UsageError(f"invalid currency {currency!r}: use a three-letter ISO 4217 code such as USD")
    return currency


def validate_remote_ref(ref: object) -> str:
    """A vendor's task reference: 1 to 200 printable characters."""
    if not isinstance(ref, str) or not ref or len(ref) > MAX_REF or not ref.isprintable():
        raise UsageError(f"invalid remote task reference {reprlib.repr(ref)}: 1 to {MAX_REF} printable characters")
    return ref


def validate_artifact_path(path: object) -> str:
    """A relative path inside the episode directory, in POSIX form; no ``..``, no absolute path."""
    if not isinstance(path, str) or not path or "\\" in path or "\0" in path or not path.isprintable():
        raise UsageError(
            f"invalid artifact path {reprlib.repr(path)}: give a relative path inside the episode directory"
        )
    pure = PurePosixPath(path)
    if pure.is_absolute() or any(part in ("..", ".", "") for part in path.split("/")):
        raise UsageError(f"artifact path {path!r} leaves the episode directory (no absolute paths, '.' or '..')")
    if any(part.startswith(".") for part in pure.parts) or (pure.name in RECORD_FILES and len(pure.parts) == 1):
        raise UsageError(f"artifact path {path!r} names a jobstate record or a hidden file or directory (.git, ...)")
    return path


def idempotency_key(episode_id: str, allocation_key: str, step: str, attempt: int) -> str:
    """Deterministic per (episode, step, attempt); the allocation key keeps repos apart."""
    digest = hashlib.sha256(f"{episode_id}\0{allocation_key}\0{step}\0{attempt}".encode()).hexdigest()[:24]
    return f"{episode_id}.{step}.{attempt}.{digest}"


def totals(entries: list[dict[str, Any]]) -> dict[str, str]:
    """Exact totals per currency, as decimal strings."""
    sums: dict[str, Decimal] = {}
    for entry in entries:
        try:
            sums[entry["currency"]] = sums.get(entry["currency"], Decimal(0)) + Decimal(entry["amount"])
        except (KeyError, TypeError, InvalidOperation):
            raise StateInvalid(f"cost entry {reprlib.repr(entry)} is malformed") from None
    return {currency: format(total, "f") for currency, total in sorted(sums.items())}


def check_cost_entry(entry: Any, source: str) -> dict[str, Any]:
    """One ledger entry as read from costs.yaml; StateInvalid when malformed."""
    if not isinstance(entry, dict):
        raise StateInvalid(f"{source}: a cost entry must be a mapping")
    try:
        validate_step(entry.get("step"))
        validate_amount(entry.get("amount"))
        validate_currency(entry.get("currency"))
        if entry.get("remote_ref") is not None:
            validate_remote_ref(entry["remote_ref"])
    except UsageError as exc:
        raise StateInvalid(f"{source}: {exc}") from None
    if not isinstance(entry.get("at"), str):
        raise StateInvalid(f"{source}: cost entry without 'at' time")
    return entry
