"""submissions.yaml has one reader and one writer (jobstate.core.attempts), used by the paid-step
commands, verify, diff and report alike."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobstate.core.attempts import (
    Reservation,
    attempt_from_yaml_dict,
    submissions_from_yaml_dict,
    submissions_to_yaml_dict,
)
from jobstate.core.records import AttemptState
from jobstate.errors import StateInvalid

SOURCE = "state/2026/2026-W32/2026-W32-0/submissions.yaml"
GOOD: dict[str, Any] = {
    "attempt": 1,
    "idempotency_key": "2026-W32-0.generate.1.abc",
    "state": "completed",
    "started_at": "2026-08-07T10:00:00Z",
    "host": "build-1",
    "fingerprint": "sha256:00",
    "reservation": {"amount": "5", "currency": "USD"},
    "remote_ref": "task-1",
    "settled": {"spent": "4.00", "reserved": "5"},
    "a_field_of_a_later_version": [1, 2],
}


def test_an_attempt_is_read_into_typed_fields_and_written_back_unchanged() -> None:
    attempt = attempt_from_yaml_dict(dict(GOOD), SOURCE, "generate")
    assert attempt.state is AttemptState.COMPLETED
    assert (attempt.number, attempt.remote_ref, attempt.fingerprint) == (1, "task-1", "sha256:00")
    assert attempt.reservation == Reservation("5", "USD")
    assert attempt.settled == {"spent": "4.00", "reserved": "5"}
    assert not attempt.open
    assert attempt.get("host") == "build-1"
    written = attempt.to_yaml_dict()
    assert written == GOOD
    assert list(written) == list(GOOD)  # the order, too: a rewrite is a minimal diff


def test_updated_merges_changes_after_the_fields_and_checks_them_again() -> None:
    intent = attempt_from_yaml_dict({"attempt": 2, "state": "intent", "idempotency_key": "k"}, SOURCE, "gen")
    assert intent.open
    accepted = intent.updated(state=AttemptState.ACCEPTED, remote_ref="t-9", accepted_at="now")
    assert accepted.state is AttemptState.ACCEPTED
    assert accepted.to_yaml_dict() == {
        "attempt": 2,
        "state": "accepted",  # a plain string: the safe YAML dumper knows no enums
        "idempotency_key": "k",
        "remote_ref": "t-9",
        "accepted_at": "now",
    }
    assert type(accepted.to_yaml_dict()["state"]) is str
    assert intent.state is AttemptState.INTENT  # the original is unchanged
    with pytest.raises(StateInvalid, match="remote_ref must be text"):
        intent.updated(remote_ref=7)


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"state": "weird"}, "unknown state 'weird'"),
        ({"state": None}, "unknown state None"),
        ({"state": ["completed"]}, "unknown state ['completed']"),
        ({"state": "superseded"}, "superseded without the operator's decision"),
        ({"state": "superseded", "resolution": {"decision": "accepted"}}, "superseded without the operator's decision"),
        ({"attempt": 0}, "attempt must be a whole number from 1"),
        ({"attempt": True}, "attempt must be a whole number from 1"),
        ({"attempt": "1"}, "attempt must be a whole number from 1"),
        ({"remote_ref": ""}, "remote_ref must be text"),
        ({"idempotency_key": 5}, "idempotency_key must be text"),
        ({"fingerprint": ["x"]}, "fingerprint must be text"),
        ({"reservation": "5 USD"}, "a reservation must be a mapping"),
        ({"reservation": {"amount": 5.0, "currency": "USD"}}, "invalid amount 5.0"),
        ({"reservation": {"amount": "5", "currency": "usd"}}, "invalid currency 'usd'"),
        ({"settled": "yes"}, "settled must be a mapping"),
        ({"resolution": ["ops"]}, "resolution must be a mapping"),
        ({"resolution": {"decision": "accepted", "by": "ops\x1b[2J", "reason": "x"}}, "resolution: invalid --by"),
        ({"resolution": {"decision": "accepted", "by": "ops", "reason": "a\0b"}}, "resolution: invalid reason"),
    ],
)
def test_a_malformed_attempt_is_state_invalid_naming_the_file_step_and_field(change: dict[str, Any], says: str) -> None:
    with pytest.raises(StateInvalid) as caught:
        attempt_from_yaml_dict({**GOOD, **change}, SOURCE, "generate")
    assert str(caught.value).startswith(f"{SOURCE}: step 'generate'")
    assert says in str(caught.value)


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (None, "expected a mapping with schema: 1"),
        ({"schema": 2, "steps": {}}, "expected a mapping with schema: 1"),
        ({"schema": 1, "steps": []}, "'steps' must map step names to lists of attempts"),
        ({"schema": 1, "steps": {"gen": {"attempt": 1}}}, "step 'gen': attempts must be a list of mappings"),
        ({"schema": 1, "steps": {"gen": ["intent"]}}, "an attempt must be a mapping"),
    ],
)
def test_a_malformed_file_is_refused_at_its_first_problem(data: Any, says: str) -> None:
    with pytest.raises(StateInvalid, match=says):
        submissions_from_yaml_dict(data, SOURCE)


def test_with_a_problem_list_each_bad_attempt_is_described_and_the_rest_are_read() -> None:
    data = {
        "schema": 1,
        "steps": {
            "gen": [{"attempt": 1, "state": "not-submitted"}, {"attempt": 2, "state": "weird"}],
            "fix": "no list",
            "cut": [{"attempt": 1, "state": "intent"}],
        },
    }
    problems: list[str] = []
    steps = submissions_from_yaml_dict(data, SOURCE, problems)
    assert [a.number for a in steps["gen"]] == [1]
    assert [a.state for a in steps["cut"]] == [AttemptState.INTENT]
    assert "fix" not in steps
    assert len(problems) == 2
    assert all(not p.startswith(SOURCE) for p in problems)
    with pytest.raises(StateInvalid):
        submissions_from_yaml_dict(data, SOURCE)


_text = st.text(st.characters(codec="utf-8"), min_size=1, max_size=20)
_attempts = st.fixed_dictionaries(
    # superseded needs an operator's resolution: the case above
    {"attempt": st.integers(1, 99), "state": st.sampled_from([s.value for s in AttemptState if s != "superseded"])},
    optional={
        "idempotency_key": _text,
        # what validate_remote_ref (the writer's rule) accepts; drawn so, not filtered (filter_too_much)
        "remote_ref": st.text(
            st.characters(codec="utf-8", exclude_categories=["Cs", "Cc", "Cf", "Co", "Cn", "Zl", "Zp", "Zs"]),
            min_size=1,
            max_size=20,
        ).filter(str.isprintable),
        "reason": _text,
        "reservation": st.builds(
            lambda a, c: {"amount": a, "currency": c}, st.sampled_from(["0", "5", "12.40"]), st.sampled_from(["USD"])
        ),
    },
)


@given(st.dictionaries(st.from_regex(r"[a-z][a-z0-9_-]{0,8}", fullmatch=True), st.lists(_attempts, max_size=3)))
def test_reading_then_writing_a_well_formed_file_gives_it_back(steps: dict[str, list[dict[str, Any]]]) -> None:
    data = {"schema": 1, "steps": steps}
    assert submissions_to_yaml_dict(submissions_from_yaml_dict(data, SOURCE)) == data
