"""jobstate.core.records and jobstate.core.money: typed records and exact money, pure."""

from __future__ import annotations

from decimal import Decimal

import pytest

from jobstate.core.costs import cost_entry_from_yaml_dict, totals
from jobstate.core.money import validate_amount, validate_currency
from jobstate.core.records import AttemptState, Episode, episode_from_yaml_dict
from jobstate.errors import StateInvalid, UsageError


def _episode() -> Episode:
    return Episode("2026-W32-1", "2026-W32", "iso-week", 1, "key", "2026-08-07T10:00:00Z", extra={"note": "kept"})


def test_episode_round_trips_through_its_yaml_dict_keeping_unknown_fields() -> None:
    data = _episode().to_yaml_dict()
    assert list(data)[:3] == ["schema", "episode_id", "period_id"]
    again = episode_from_yaml_dict(data, "state/2026/2026-W32/2026-W32-1/episode.yaml", "2026-W32-1")
    assert again == _episode()
    assert again.extra == {"note": "kept"}


def test_episode_under_another_name_is_refused() -> None:
    with pytest.raises(StateInvalid, match="does not match its name"):
        episode_from_yaml_dict(_episode().to_yaml_dict(), "state/2026/2026-W32/2026-W32-2/episode.yaml", "2026-W32-2")


def test_attempt_states_are_the_strings_submissions_yaml_holds() -> None:
    assert [s.value for s in AttemptState] == ["intent", "accepted", "completed", "not-submitted", "superseded"]
    assert AttemptState("not-submitted") is AttemptState.NOT_SUBMITTED


@pytest.mark.parametrize("amount", [12.4, "12,40", "1e3", "", None, "12.123456789"])
def test_amounts_are_decimal_strings_only(amount: object) -> None:
    with pytest.raises(UsageError, match="invalid amount"):
        validate_amount(amount)


def test_totals_are_exact_per_currency() -> None:
    rows = [("0.10", "USD")] * 3 + [("1", "EUR")]
    entries = [cost_entry_from_yaml_dict({"step": "s", "amount": a, "currency": c, "at": "x"}, "c") for a, c in rows]
    assert totals(entries) == {"EUR": "1", "USD": "0.30"}
    assert validate_amount(Decimal("12.40")) == "12.40"
    with pytest.raises(UsageError):
        validate_currency("usd")


def test_a_cost_entry_with_a_float_amount_is_invalid_state() -> None:
    with pytest.raises(StateInvalid, match="invalid amount"):
        cost_entry_from_yaml_dict({"step": "generate", "amount": 12.4, "currency": "USD", "at": "x"}, "costs.yaml")
