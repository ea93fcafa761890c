"""Period and episode IDs: parsing, formatting, and the period a date falls in.

Pure functions: no clock, no filesystem.
"""

from __future__ import annotations

import re
import reprlib
from datetime import date, datetime
from typing import NamedTuple

from jobstate.errors import UsageError

KINDS = ("iso-week", "day", "month")

_WEEK = re.compile(r"(\d{4})-W(\d{2})")
_DAY = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
_MONTH = re.compile(r"(\d{4})-(\d{2})")
_EPISODE = re.compile(r"(.{7,10})-(0|[1-9]\d{0,5})")
MAX_ID_LENGTH = 20


class Period(NamedTuple):
    """One period: its kind (``iso-week``, ``day``, ``month``) and canonical ID."""

    kind: str
    id: str

    def __str__(self) -> str:
        return self.id


def _kind_of(text: str) -> str | None:
    if _WEEK.fullmatch(text):
        return "iso-week"
    if _DAY.fullmatch(text):
        return "day"
    if _MONTH.fullmatch(text):
        return "month"
    return None


def is_period(text: str) -> bool:
    """Whether ``text`` is a canonical period ID (a legacy episode was named by its period alone)."""
    try:
        parse_period(text)
    except UsageError:
        return False
    return True


_FORMATS = {
    "iso-week": ("ISO week", "YYYY-Www with a two-digit week, e.g. 2026-W05"),
    "day": ("day", "YYYY-MM-DD, e.g. 2026-08-07"),
    "month": ("month", "YYYY-MM, e.g. 2026-08"),
}


def parse_period(text: str, kind: str | None = None) -> Period:
    """Parse a canonical period ID; ``kind`` restricts it to one kind of period."""
    found = _kind_of(text) if isinstance(text, str) and text.isascii() else None
    if found is None:
        looks = "iso-week" if isinstance(text, str) and "w" in text.lower() else None
        want = kind or looks
        if want is not None:
            # one format named, the one asked for (or the one it looks like): not a list to guess from
            raise UsageError(f"invalid {_FORMATS[want][0]} {text!r}: expected {_FORMATS[want][1]}")
        raise UsageError(f"invalid period {text!r}: expected YYYY-Www (ISO week), YYYY-MM-DD (day) or YYYY-MM (month)")
    if kind is not None and found != kind:
        raise UsageError(f"period {text!r} is a {found} but this repository counts {kind} periods")
    if found == "iso-week":
        m = _WEEK.fullmatch(text)
        assert m is not None
        year, week = int(m[1]), int(m[2])
        try:
            date.fromisocalendar(year, week, 1)
        except ValueError:
            raise UsageError(
                f"invalid ISO week {text!r}: {year} has no week {week:02d} (weeks run 01..52, or 53 in long years)"
            ) from None
    elif found == "day":
        try:
            date.fromisoformat(text)
        except ValueError:
            raise UsageError(f"invalid day {text!r}: no such calendar date") from None
    else:
        m = _MONTH.fullmatch(text)
        assert m is not None
        if not 1 <= int(m[2]) <= 12 or int(m[1]) < 1:
            raise UsageError(f"invalid month {text!r}: month must be 01..12")
    if text.startswith("0000"):
        raise UsageError(f"invalid period {text!r}: year 0000 does not exist")
    return Period(found, text)


def period_of(day: date, kind: str) -> Period:
    """The period of ``kind`` that contains the calendar date ``day``."""
    if kind == "iso-week":
        year, week, _ = day.isocalendar()
        return Period(kind, f"{year:04d}-W{week:02d}")
    if kind == "day":
        return Period(kind, day.isoformat())
    if kind == "month":
        return Period(kind, f"{day.year:04d}-{day.month:02d}")
    raise UsageError(f"unknown period kind {kind!r}: use one of {', '.join(KINDS)}")


def parse_date(text: str) -> date:
    """Parse a strict ``YYYY-MM-DD`` date."""
    if not isinstance(text, str) or not _DAY.fullmatch(text):
        raise UsageError(f"invalid date {text!r}: expected YYYY-MM-DD")
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise UsageError(f"invalid date {text!r}: no such calendar date") from None


def require_kind(period: Period, kind: str, where: object) -> None:
    """Refuse a period of another kind than the repository ``where`` counts: it would select nothing."""
    if period.kind != kind:
        raise UsageError(
            f"period {period.id} is a {period.kind} but {where} counts {kind} periods (setting period in jobstate.yaml)"
        )


def format_episode_id(period: Period, sequence: int) -> str:
    """``2026-W32`` and 1 give ``2026-W32-1``."""
    return f"{period.id}-{sequence}"


def is_episode_id(text: object) -> bool:
    """Whether ``text`` is a canonical episode ID (not a legacy week-only name)."""
    try:
        parse_episode_id(text)
    except UsageError:
        return False
    return True


def parse_episode_id(text: object) -> tuple[Period, int]:
    """Split a canonical episode ID into its period and sequence, or raise UsageError."""
    if not isinstance(text, str) or len(text) > MAX_ID_LENGTH or not text.isascii():
        raise UsageError(f"invalid episode ID {reprlib.repr(text)}: expected <period>-<sequence>, e.g. 2026-W32-0")
    m = _EPISODE.fullmatch(text)
    if m is None or _kind_of(m[1]) is None:
        raise UsageError(f"invalid episode ID {text!r}: expected <period>-<sequence>, e.g. 2026-W32-0")
    try:
        period = parse_period(m[1])
    except UsageError as exc:
        raise UsageError(f"invalid episode ID {text!r}: {exc}") from None
    return period, int(m[2])


def next_sequence(existing: list[int] | set[int]) -> int:
    """0 for an empty period, otherwise one past the highest sequence in use."""
    return max(existing) + 1 if existing else 0


def period_from(
    kind: str,
    timezone: str,
    *,
    date_text: str | None = None,
    week: str | None = None,
    period: str | None = None,
    at: str | None = None,
) -> Period:
    """The period one of ``--date``, ``--week``, ``--period`` or ``--at`` names (exactly one is given)."""
    if week is not None:
        if not week.startswith(tuple("0123456789")) or "-W" not in week:
            raise UsageError(f"invalid ISO week {week!r}: expected YYYY-Www, e.g. 2026-W32")
        return parse_period(week, "iso-week")
    if period is not None:
        return parse_period(period)
    if date_text is not None:
        return period_of(parse_date(date_text), kind)
    if at is None:
        raise UsageError("give the run's period: --date, --week, --period or --at")
    return period_of(local_date(at, timezone), kind)


def parse_time(text: str) -> datetime:
    """An ISO 8601 time as given (with or without an offset); UsageError otherwise."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(f"invalid time {text!r}: expected ISO 8601, e.g. 2026-08-07T23:30:00+00:00") from None
    if not 1 < moment.year < 9999:
        # a day of timezone, or a schedule's previous tick, would fall off the calendar (datetime's years 1-9999)
        raise UsageError(
            f"time {text!r} falls outside the calendar once a timezone or schedule moves it: "
            "give a time from year 2 to 9998"
        )
    return moment


def local_date(at: str, timezone: str) -> date:
    """The calendar date of an ISO 8601 time in ``timezone`` (a time without offset is taken as local)."""
    moment = parse_time(at)
    from zoneinfo import ZoneInfo  # noqa: PLC0415 - start-up: zoneinfo costs 3 ms, and only --at needs it

    zone = ZoneInfo(timezone)
    try:
        local = moment.replace(tzinfo=zone) if moment.tzinfo is None else moment.astimezone(zone)
    except OverflowError:
        raise UsageError(f"time {at!r} falls outside the calendar in timezone {timezone}") from None
    return local.date()
