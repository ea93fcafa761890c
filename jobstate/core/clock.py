"""How jobstate writes times: UTC, ISO 8601, whole seconds. The clock itself is passed in."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any


def utc_now() -> datetime:
    """The real clock (tests pass their own ``now``)."""
    return datetime.now(UTC)


def format_time(moment: datetime) -> str:
    """UTC, ISO 8601, seconds: ``2026-08-07T10:00:00Z``."""
    utc = moment.astimezone(UTC)
    return f"{utc.year:04d}-{utc:%m-%dT%H:%M:%S}Z"  # %Y is not zero-padded on every platform (year 1 gives "1")


def time_text(value: Any) -> str | None:
    """A recorded time as text: jobstate writes strings; a legacy file may hold an unquoted YAML
    timestamp, which loads as a datetime and is compared in the same text either way."""
    if isinstance(value, str):
        return value
    if isinstance(value, (datetime, date)):
        return str(value)
    return None
