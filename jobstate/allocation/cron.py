"""Cron schedules: the slot a run belongs to. The only cronsim user.

cronsim follows Debian cron across DST changes: a fixed-time job whose local time
is skipped (spring forward) fires at the first moment after the gap, and one whose
local time repeats (fall back) fires once, at the first occurrence. Pure: the
reference time is passed in.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from cronsim import CronSim, CronSimError

from jobstate.errors import UsageError


def zone(name: str) -> ZoneInfo:
    """The IANA timezone ``name``, or UsageError."""
    try:
        return ZoneInfo(name)
    except (ValueError, KeyError, OSError):
        raise UsageError(f"unknown timezone {name!r}: use an IANA name such as UTC or Europe/Berlin") from None


def latest_fire(expr: str, tz: str, reference: datetime) -> datetime:
    """The latest time at or before ``reference`` at which cron ``expr`` fires in ``tz``, in UTC.

    ``reference`` must be timezone-aware. A late start, or a retry within the slot,
    gets the same answer; the next fire time starts a new slot.
    """
    if reference.tzinfo is None:
        raise UsageError("the reference time of a cron schedule must carry a timezone offset")
    if not isinstance(expr, str) or len(expr.split()) != 5:
        raise UsageError(f"invalid cron schedule {expr!r}: expected five fields, e.g. '0 6 * * 1'")
    place = zone(tz)  # its own refusal, before the calendar's (a UsageError is a ValueError too)
    try:
        moment = reference.astimezone(UTC)
        if moment.microsecond == 0:
            # cronsim's reverse iteration starts strictly before a whole second: "at" must count
            moment += timedelta(microseconds=1)
        local = moment.astimezone(place)
        fire = next(iter(CronSim(expr, local, reverse=True)))
        return fire.astimezone(UTC)
    except CronSimError as exc:
        raise UsageError(f"invalid cron schedule {expr!r}: {exc}") from None
    except (OverflowError, ValueError):
        # the latest tick would be before year 1: a calendar edge is bad input, never a crash
        raise UsageError(
            f"cron schedule {expr!r} has no tick within the calendar at or before {reference.isoformat()}"
        ) from None
    except StopIteration:  # pragma: no cover - cronsim iterates without end for valid expressions
        raise UsageError(f"cron schedule {expr!r} never fires before {reference.isoformat()}") from None
