"""Allocation keys and the idempotency keys derived from them."""

from __future__ import annotations

import hashlib
import json
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from jobstate.errors import UsageError

MAX_KEY_LENGTH = 512
# the schedulers whose own identity for a run --from turns into a key (jobstate.allocation.schedulers)
SCHEDULERS = ("github-actions", "kubernetes", "airflow", "dagster", "temporal", "systemd", "cron")


def validate_key(key: object) -> str:
    """An allocation key: an opaque string of 1 to 512 characters without control characters."""
    if not isinstance(key, str) or not key:
        raise UsageError("invalid allocation key: it must be a non-empty string")
    if len(key) > MAX_KEY_LENGTH:
        raise UsageError(f"invalid allocation key: {len(key)} characters, at most {MAX_KEY_LENGTH} allowed")
    for ch in key:
        category = unicodedata.category(ch)
        if category == "Cs":
            raise UsageError("invalid allocation key: it is not valid UTF-8 text")
        if category in ("Cc", "Cf", "Zl", "Zp"):
            raise UsageError(
                f"invalid allocation key {key[:40]!r}: control or format character U+{ord(ch):04X} is not allowed"
            )
    return key


def key_form_problem(key: str) -> str | None:
    """What keeps a key from its one canonical form (NFC, no surrounding white space), or None.

    A key is compared as the exact string it is: the same text in NFD (as macOS or a templating
    tool may hand it over) or with a stray space would be another key, and so another paid episode.
    jobstate refuses such a key rather than normalising it, so the key recorded is the key given.
    """
    if key != key.strip():
        return "has white space at its start or end"
    if not unicodedata.is_normalized("NFC", key):
        return "is not in Unicode normalization form NFC"
    return None


def canonical_key(key: object) -> str:
    """A new allocation key: valid (validate_key) and canonical (key_form_problem), else UsageError."""
    text = validate_key(key)
    problem = key_form_problem(text)
    if problem is not None:
        fixed = unicodedata.normalize("NFC", text.strip())
        raise UsageError(
            f"invalid allocation key {text[:40]!r}: it {problem}; keys are compared exactly, "
            f"so give its canonical form {fixed[:40]!r} (docs/allocation.md#keys)"
        )
    return text


def confusable_form(key: str) -> str:
    """The form two keys that a person would read as one share: NFKC with case folding (Unicode's
    NFKC_Casefold, so case, full-width letters and compatibility characters fold together)."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", key).casefold())


def confusable_with(key: str, others: Iterable[str]) -> str | None:
    """Another key of ``others`` that reads as ``key`` but is not it, or None."""
    form = confusable_form(key)
    return next((other for other in sorted(others) if other != key and confusable_form(other) == form), None)


def key_problems(keys: Mapping[str, tuple[str, str]]) -> list[tuple[str, str]]:
    """Review of committed keys (episode ID -> (period, key)): a key not in canonical form, and a key
    confusable with another of its period, each as (episode ID, message), in ID order. Pure."""
    out: list[tuple[str, str]] = []
    by_period: dict[str, list[str]] = {}
    for eid, (period, key) in sorted(keys.items()):
        problem = key_form_problem(key)
        if problem is not None:
            out.append((eid, f"allocation key {key[:40]!r} {problem}: a new allocation refuses such a key"))
        by_period.setdefault(period, []).append(key)
    for eid, (period, key) in sorted(keys.items()):
        other = confusable_with(key, by_period[period])
        if other is not None:
            out.append((eid, f"allocation key {key[:40]!r} reads as {other[:40]!r}, another key of {period}"))
    return out


def idempotency_key(episode_id: str, allocation_key: str, step: str, attempt: int) -> str:
    """Deterministic per (episode, step, attempt); the allocation key keeps repos apart."""
    digest = hashlib.sha256(f"{episode_id}\0{allocation_key}\0{step}\0{attempt}".encode()).hexdigest()[:24]
    return f"{episode_id}.{step}.{attempt}.{digest}"


def request_fingerprint(parts: Sequence[bytes]) -> str:
    """``sha256:<hex>`` of a request given as byte strings (each length-prefixed, so no two lists collide)."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(b"%d:" % len(part) + part)
    return f"sha256:{digest.hexdigest()}"


def mapping_fingerprint(request: Mapping[str, Any]) -> str:
    """The fingerprint of a request mapping in canonical JSON (sorted keys, no spaces)."""
    try:
        text = json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"request must be JSON data (mappings, lists, strings, numbers): {exc}") from None
    return request_fingerprint([text.encode("utf-8")])
