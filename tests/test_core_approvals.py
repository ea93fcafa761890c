"""approval.yaml has one reader and one writer (jobstate.core.approvals)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from jobstate.core.approvals import (
    approvals_from_yaml_dict,
    approvals_to_yaml_dict,
    decision_from_yaml_dict,
    new_decision,
)
from jobstate.errors import StateInvalid

SOURCE = "state/2026/2026-W32/2026-W32-0/approval.yaml"


def test_decisions_are_typed_and_written_back_unchanged() -> None:
    first = new_decision("rejected", "editor", "2026-08-07T10:00:00Z", "too dark")
    second = new_decision("approved", "editor", "2026-08-08T10:00:00Z", None)
    data = approvals_to_yaml_dict([first, second])
    assert data == {
        "schema": 1,
        "decisions": [
            {"status": "rejected", "by": "editor", "at": "2026-08-07T10:00:00Z", "reason": "too dark"},
            {"status": "approved", "by": "editor", "at": "2026-08-08T10:00:00Z"},
        ],
    }
    assert approvals_from_yaml_dict(data, SOURCE) == [first, second]
    assert second.same_as(new_decision("approved", "editor", "later", None))
    assert not second.same_as(new_decision("approved", "someone else", "later", None))


def test_a_legacy_unquoted_timestamp_is_read_as_its_text() -> None:
    legacy = {"status": "approved", "by": "editor", "at": datetime(2026, 7, 25, 10, tzinfo=UTC)}
    assert decision_from_yaml_dict(legacy, "episode.yaml").at == "2026-07-25 10:00:00+00:00"


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ({"schema": 1, "decisions": {}}, "'decisions' must be a list"),
        ({"schema": 2, "decisions": []}, "expected a mapping with schema: 1"),
        ({"schema": 1, "decisions": ["approved"]}, "a decision must be a mapping"),
        (
            {"schema": 1, "decisions": [{"status": "ok", "by": "a", "at": "t"}]},
            "unknown decision status 'ok' (known: approved, rejected)",
        ),
        ({"schema": 1, "decisions": [{"status": "approved", "by": " ", "at": "t"}]}, "must say by whom"),
        ({"schema": 1, "decisions": [{"status": "approved", "by": "a"}]}, "must say when"),
        (
            {"schema": 1, "decisions": [{"status": "approved", "by": "a", "at": "t", "reason": 5}]},
            "reason must be text",
        ),
    ],
)
def test_a_malformed_file_is_state_invalid_naming_it(data: Any, says: str) -> None:
    with pytest.raises(StateInvalid) as caught:
        approvals_from_yaml_dict(data, SOURCE)
    assert str(caught.value).startswith(SOURCE)
    assert says in str(caught.value)
