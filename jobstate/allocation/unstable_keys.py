"""Warnings for ``--key`` values that look like an identity which changes on retry. Pure."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta


def _get(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name)
    return value.strip() if isinstance(value, str) and value.strip() else None


def unstable_key_warning(key: str, env: Mapping[str, str], now: datetime) -> str | None:
    """A warning when ``--key`` looks like an identity that changes on retry in this environment."""
    run_id, attempt = _get(env, "GITHUB_RUN_ID"), _get(env, "GITHUB_RUN_ATTEMPT")
    if run_id and attempt and re.search(rf"{re.escape(run_id)}\D{{1,12}}{re.escape(attempt)}(?!\d)", key):
        return f"key {key!r} contains GITHUB_RUN_ATTEMPT ({attempt}), which changes on every re-run"
    varying = {
        "INVOCATION_ID": "systemd's INVOCATION_ID changes on every start",
        "DAGSTER_RUN_ID": "Dagster's run_id changes on every re-execution",
        "TEMPORAL_RUN_ID": "Temporal's run ID changes on every retry",
    }
    for var, why in varying.items():
        value = _get(env, var)
        if value and len(value) >= 8 and value in key:
            return f"key {key!r} contains {var}: {why}"
    pod = _get(env, "HOSTNAME")
    if pod and _get(env, "KUBERNETES_SERVICE_HOST") and pod in key:
        return f"key {key!r} contains the pod name {pod!r}, which changes on every retry of a Job"
    moment = _bare_time(key.strip())
    if moment is not None and abs(moment - now) <= timedelta(minutes=10) and (moment.second or moment.microsecond):
        return f"key {key!r} is the current time: every retry gets a new key; use the scheduler's identity for the run"
    return None


def _bare_time(text: str) -> datetime | None:
    if text.isdigit() and len(text) in (10, 13):
        return datetime.fromtimestamp(int(text) / (1000 if len(text) == 13 else 1), UTC)
    if text.isdigit() and len(text) == 14:
        text = f"{text[:8]}T{text[8:]}"
    try:
        moment = datetime.fromisoformat(text)  # Python 3.11 reads a trailing Z itself
    except ValueError:
        return None
    if "T" not in text.upper() and " " not in text:
        return None  # a bare date is a day's key, not a start time
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
