"""How jobstate writes times: UTC, ISO 8601, whole seconds. The clock itself is passed in."""

from __future__ import annotations

from datetime import UTC, datetime


def utc_now() -> datetime:
    """The real clock (tests pass their own ``now``)."""
    return datetime.now(UTC)


def format_time(moment: datetime) -> str:
    """UTC, ISO 8601, seconds: ``2026-08-07T10:00:00Z``."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
