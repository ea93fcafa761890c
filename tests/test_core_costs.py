"""costs.yaml has one reader and one writer (jobstate.core.costs); legacy ``costs:`` lists too."""

from __future__ import annotations

from typing import Any

import pytest

from jobstate.core.attempts import Attempt, Reservation, attempt_from_yaml_dict
from jobstate.core.costs import (
    Charge,
    CostEntry,
    cost_entry_from_yaml_dict,
    cost_list,
    costs_from_yaml_dict,
    costs_to_yaml_dict,
    legacy_cost_from_yaml_dict,
    same_task,
    still_held,
    totals,
)
from jobstate.errors import StateInvalid

SOURCE = "state/2026/2026-W32/2026-W32-0/costs.yaml"
ENTRY: dict[str, Any] = {
    "step": "generate",
    "amount": "12.40",
    "currency": "USD",
    "remote_ref": "task-1",
    "attempt": 1,
    "charge_id": "inv-1",
    "at": "2026-08-07T10:00:00Z",
    "note": "a field of a later version",
}


def test_an_entry_is_typed_and_written_back_unchanged() -> None:
    entry = cost_entry_from_yaml_dict(dict(ENTRY), SOURCE)
    assert (entry.step, entry.amount, entry.currency, entry.remote_ref) == ("generate", "12.40", "USD", "task-1")
    assert (entry.attempt, entry.charge_id, entry.at, entry.legacy) == (1, "inv-1", "2026-08-07T10:00:00Z", False)
    assert list(entry.to_yaml_dict().items()) == list(ENTRY.items())
    data = {"schema": 1, "entries": [ENTRY, {**ENTRY, "charge_id": "inv-2"}]}
    assert costs_to_yaml_dict(costs_from_yaml_dict(data, SOURCE)) == data


def test_a_charge_becomes_the_entry_the_ledger_writes() -> None:
    entry = Charge("generate", "3.00", "EUR", None, 2).entry("2026-08-07T11:00:00Z")
    assert entry.to_yaml_dict() == {
        "step": "generate",
        "amount": "3.00",
        "currency": "EUR",
        "remote_ref": None,
        "attempt": 2,
        "at": "2026-08-07T11:00:00Z",
    }
    assert totals([entry, entry, cost_entry_from_yaml_dict(ENTRY, SOURCE)]) == {"EUR": "6.00", "USD": "12.40"}


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"amount": 12.4}, "invalid amount 12.4"),
        ({"amount": "1e3"}, "invalid amount '1e3'"),
        ({"currency": "usd"}, "invalid currency 'usd'"),
        ({"currency": None}, "cost without a currency"),
        ({"step": "Bad Step"}, "invalid step"),
        ({"remote_ref": ""}, "remote"),
        ({"charge_id": "-x"}, "invalid charge_id"),
        ({"attempt": 0}, "attempt 0 must be a whole number from 1"),
        ({"attempt": True}, "attempt True must be a whole number from 1"),
        ({"at": None}, "without 'at' time"),
    ],
)
def test_a_malformed_entry_is_state_invalid_naming_the_file(change: dict[str, Any], says: str) -> None:
    with pytest.raises(StateInvalid) as caught:
        cost_entry_from_yaml_dict({**ENTRY, **change}, SOURCE)
    assert str(caught.value).startswith(f"{SOURCE}: cost entry")
    assert says in str(caught.value)


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ([], "expected a mapping with schema: 1"),
        ({"schema": 1, "entries": {}}, "'entries' must be a list"),
        ({"schema": 1, "entries": ["12.40 USD"]}, "a cost entry must be a mapping"),
    ],
)
def test_a_malformed_ledger_is_refused(data: Any, says: str) -> None:
    with pytest.raises(StateInvalid, match=says):
        costs_from_yaml_dict(data, SOURCE)


def test_legacy_costs_need_only_step_currency_and_a_decimal_string() -> None:
    legacy = legacy_cost_from_yaml_dict({"step": "gen", "amount": "4.5", "currency": "USD"}, "episode.yaml")
    assert (legacy.legacy, legacy.at, legacy.attempt) == (True, None, None)
    for bad, says in (({"step": "g", "amount": 4.5, "currency": "USD"}, "must be a decimal string"), ({}, "no step")):
        with pytest.raises(StateInvalid, match=says):
            legacy_cost_from_yaml_dict(bad, "episode.yaml")


def test_with_a_problem_list_bad_entries_are_described_and_left_out() -> None:
    problems: list[str] = []
    found = cost_list([ENTRY, {**ENTRY, "amount": 1}, "x"], SOURCE, problems)
    assert found == [cost_entry_from_yaml_dict(ENTRY, SOURCE)]
    assert len(problems) == 2
    assert not any(p.startswith(SOURCE) for p in problems)


def _attempt(number: int, state: str, key: str) -> Attempt:
    fields: dict[str, Any] = {"attempt": number, "state": state, "idempotency_key": key, "remote_ref": f"task-{number}"}
    if state == "superseded":
        fields["resolution"] = {"decision": "superseded", "by": "ops", "at": "2026-08-07T10:00:00Z", "reason": "r"}
    return attempt_from_yaml_dict({**fields, "reservation": {"amount": "10", "currency": "USD"}}, SOURCE, "gen")


def _charge(number: int, amount: str) -> CostEntry:
    data = {"step": "gen", "amount": amount, "currency": "USD", "remote_ref": f"task-{number}", "attempt": number}
    data["at"] = "2026-08-07T10:00:00Z"
    return cost_entry_from_yaml_dict(data, SOURCE)


def test_an_open_attempt_holds_only_what_its_task_has_not_been_charged() -> None:
    open_one = _attempt(1, "accepted", "k1")
    assert still_held(open_one, [], [open_one]) == Reservation("10", "USD")
    assert still_held(open_one, [_charge(1, "8.00")], [open_one]) == Reservation("2.00", "USD")
    assert still_held(open_one, [_charge(1, "12.00")], [open_one]) == Reservation("0", "USD")  # an overrun
    assert still_held(open_one, [_charge(2, "8.00")], [open_one]) == Reservation("10", "USD")  # another's
    assert still_held(_attempt(1, "completed", "k1"), [_charge(1, "8.00")]) is None  # closed: holds nothing


def test_a_replacing_attempt_counts_the_charges_of_the_task_it_replaces() -> None:
    # resolve --accepted NEW --replaces OLD: attempt 2 carries attempt 1's key and reservation
    replaced, replacing = _attempt(1, "superseded", "k1"), _attempt(2, "accepted", "k1")
    both = [replaced, replacing]
    assert same_task(replacing, both) == {1, 2}
    assert still_held(replacing, [_charge(1, "8.00")], both) == Reservation("2.00", "USD")
    assert same_task(_attempt(3, "intent", "k3"), [*both, _attempt(3, "intent", "k3")]) == {3}
