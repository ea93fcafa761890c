from __future__ import annotations

from datetime import date, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobstate.core.periods import (
    Period,
    format_episode_id,
    next_sequence,
    parse_date,
    parse_episode_id,
    parse_period,
    period_of,
)
from jobstate.errors import UsageError


@pytest.mark.parametrize("week", ["2026-W53", "2020-W53", "2026-W01", "2027-W01", "2015-W53"])
def test_valid_iso_weeks_are_accepted(week: str) -> None:
    assert parse_period(week) == Period("iso-week", week)


@pytest.mark.parametrize(
    "week",
    [
        "2025-W53",
        "2026-W00",
        "2026-W54",
        "2026-w1",
        "2026-W1",
        "2026W01",
        "2026-W001",
        " 2026-W01",
        "2026-W01\n",
        "",
        "0000-W01",
        "２０２６-W01",
    ],
)
def test_malformed_or_impossible_weeks_are_rejected(week: str) -> None:
    with pytest.raises(UsageError):
        parse_period(week)


def test_year_boundary_follows_iso_8601() -> None:
    assert period_of(date(2026, 12, 31), "iso-week").id == "2026-W53"
    assert period_of(date(2027, 1, 3), "iso-week").id == "2026-W53"
    assert period_of(date(2027, 1, 4), "iso-week").id == "2027-W01"
    assert period_of(date(2024, 12, 30), "iso-week").id == "2025-W01"


def test_day_and_month_periods() -> None:
    assert period_of(date(2026, 8, 7), "day").id == "2026-08-07"
    assert period_of(date(2026, 8, 7), "month").id == "2026-08"
    assert format_episode_id(Period("day", "2026-08-07"), 0) == "2026-08-07-0"
    assert format_episode_id(Period("month", "2026-08"), 0) == "2026-08-0"
    for bad in ("2026-13", "2026-00", "2026-02-30", "2026-2-01"):
        with pytest.raises(UsageError):
            parse_period(bad)


@pytest.mark.parametrize(
    "bad",
    ["2026-W32", "2026-W32-01", "2026-W32--1", "../2026-W32-0", "2026-W32-0/..", "2026-W32-x", "2026-W53-1000000", 5],
)
def test_bad_episode_ids_are_rejected(bad: object) -> None:
    with pytest.raises(UsageError):
        parse_episode_id(bad)


def test_parse_date_is_strict() -> None:
    assert parse_date("2026-08-07") == date(2026, 8, 7)
    for bad in ("2026-8-7", "2026-02-30", "20260807", "2026-08-07T00:00"):
        with pytest.raises(UsageError):
            parse_date(bad)


def test_next_sequence_starts_at_zero() -> None:
    assert next_sequence(set()) == 0
    assert next_sequence({0, 1, 2}) == 3
    assert next_sequence({0, 5}) == 6


@given(
    st.dates(min_value=date(1, 1, 8), max_value=date(9999, 12, 24)),
    st.sampled_from(["iso-week", "day", "month"]),
    st.integers(0, 99999),
)
def test_episode_ids_round_trip(day: date, kind: str, seq: int) -> None:
    period = period_of(day, kind)
    assert parse_period(period.id) == period
    assert parse_episode_id(format_episode_id(period, seq)) == (period, seq)


@given(st.dates(min_value=date(1, 1, 8), max_value=date(9999, 12, 24)))
def test_consecutive_days_stay_in_or_advance_one_week(day: date) -> None:
    a, b = period_of(day, "iso-week"), period_of(day + timedelta(days=1), "iso-week")
    if day.isoweekday() == 7:
        assert a != b
        assert parse_period(b.id).id == b.id
    else:
        assert a == b
