"""Allocation keys and the idempotency keys derived from them."""

from __future__ import annotations

import hashlib
import json
import unicodedata
from collections.abc import Mapping, Sequence
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
