"""The cost ledger never drops a charge in silence (issue 10, class 1)."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from jobstate.allocation.allocation import allocate
from jobstate.core.costs import Charge, cost_entry_from_yaml_dict, recorded_charge
from jobstate.core.periods import parse_period
from jobstate.errors import ChargeConflict, UsageError
from jobstate.main import main
from jobstate.paid.step import paid_step
from jobstate.store.records import cost_entries
from jobstate.store.store import Store

from .conftest import git, stable_cmd, status

W32 = parse_period("2026-W32")


@pytest.fixture
def episode(store: Store) -> str:
    return allocate(store, "scheduled-run:2026-08-07", W32).episode_id


def _ledger(store: Store, episode: str) -> list[tuple[str, str, str | None, str | None]]:
    return [(e.amount, e.currency, e.remote_ref, e.charge_id) for e in cost_entries(store, episode)]


def test_several_charges_of_one_task_are_all_recorded(store: Store, episode: str) -> None:
    with paid_step(store, episode, "generate") as step:
        step.accepted("task-1")
        assert step.cost("12.40", "USD") is True
        assert step.cost("3.00", "USD") is True
        assert step.cost("1.00", "EUR") is True
    assert _ledger(store, episode) == [
        ("12.40", "USD", "task-1", None),
        ("3.00", "USD", "task-1", None),
        ("1.00", "EUR", "task-1", None),
    ]


def _killed_after_charging(store: Store, episode: str, upscale: str) -> None:
    """A run of generate accepted as task-1 that recorded 12.40 USD and an upscale charge, then died."""
    with pytest.raises(RuntimeError), paid_step(store, episode, "generate") as step:
        step.accepted("task-1")
        step.cost("12.40", "USD")
        step.cost(upscale, "USD", charge_id="upscale")
        raise RuntimeError("killed after the costs landed")


def test_resumed_run_replaying_its_charges_adds_nothing(store: Store, repo: Path, episode: str) -> None:
    _killed_after_charging(store, episode, "2.5")
    head = git(repo, "rev-parse", "HEAD")
    with paid_step(store, episode, "generate") as step:
        assert step.remote_ref == "task-1"
        assert step.cost("2.50", "USD", charge_id="upscale") is False  # same amount, written differently
        assert step.cost("12.40", "USD") is False
        assert git(repo, "rev-parse", "HEAD") == head
        assert step.cost("0.60", "USD") is True  # a second unnamed charge is a new one
    assert _ledger(store, episode) == [
        ("12.40", "USD", "task-1", None),
        ("2.5", "USD", "task-1", "upscale"),
        ("0.60", "USD", "task-1", None),
    ]


@pytest.mark.parametrize("case", [("13.00", "USD", None), ("12.40", "EUR", None), ("9", "USD", "upscale")])
def test_contradicting_replay_is_an_error_naming_both(
    store: Store, repo: Path, episode: str, case: tuple[str, str, str | None]
) -> None:
    amount, currency, charge_id = case
    _killed_after_charging(store, episode, "2.50")
    head = git(repo, "rev-parse", "HEAD")
    with pytest.raises(RuntimeError), paid_step(store, episode, "generate") as step:
        with pytest.raises(ChargeConflict) as info:
            step.cost(amount, currency, charge_id=charge_id)
        raise RuntimeError("stop")
    message = str(info.value)
    assert info.value.exit_code == 4
    assert f"{amount} {currency}" in message
    assert ("12.40 USD" if charge_id is None else "2.50 USD") in message
    assert "task-1" in message
    assert git(repo, "rev-parse", "HEAD") == head
    assert len(cost_entries(store, episode)) == 2


def test_charges_without_a_remote_task_are_told_apart_by_attempt(store: Store, episode: str) -> None:
    with pytest.raises(RuntimeError), paid_step(store, episode, "generate") as step:
        step.cost("0.50", "USD")
        step.not_submitted("vendor refused after charging a fee")
        raise RuntimeError("refused")
    with paid_step(store, episode, "generate") as step:
        assert step.attempt == 2
        assert step.cost("0.50", "USD") is True
    assert [(e.amount, e.attempt) for e in cost_entries(store, episode)] == [("0.50", 1), ("0.50", 2)]


@pytest.mark.parametrize(
    "case",
    [
        (12.4, "USD", "not a number"),
        (12, "USD", "not a number"),
        (True, "USD", "not a number"),
        ("-5", "USD", "cannot be negative"),
        ("-0.00", "USD", "cannot be negative"),
        (Decimal("-1.5"), "USD", "cannot be negative"),
        (None, "USD", "without an amount"),
        ("12.40", None, "without a currency"),
        ("12.40", "usd", "ISO 4217"),
        ("1e3", "USD", "decimal string"),
    ],
)
def test_amounts_are_decimal_strings_at_the_api(
    store: Store, repo: Path, episode: str, case: tuple[object, object, str]
) -> None:
    amount, currency, words = case
    with pytest.raises(RuntimeError), paid_step(store, episode, "generate") as step:
        head = git(repo, "rev-parse", "HEAD")
        with pytest.raises(UsageError, match=words):
            step.cost(amount, currency)  # type: ignore[arg-type]
        assert git(repo, "rev-parse", "HEAD") == head
        raise RuntimeError("stop")
    assert cost_entries(store, episode) == []


def test_recorded_charge_is_pure_and_matches_by_identity() -> None:
    entries = [
        cost_entry_from_yaml_dict(e, "costs.yaml")
        for e in (
            {"step": "gen", "amount": "1.00", "currency": "USD", "remote_ref": "t", "at": "x"},
            {"step": "gen", "amount": "2.00", "currency": "USD", "remote_ref": "t", "charge_id": "b", "at": "x"},
        )
    ]
    first = Charge("gen", "1.0", "USD", "t", 1)
    assert recorded_charge(entries, first, 1) is entries[0]
    assert recorded_charge(entries, first, 2) is None
    assert recorded_charge(entries, Charge("gen", "2", "USD", "t", 1, "b"), 0) is entries[1]
    assert recorded_charge(entries, Charge("other", "1.00", "USD", "t", 1), 1) is None
    assert recorded_charge(entries, Charge("gen", "1.00", "USD", "u", 1), 1) is None


# --------------------------------------------------------------- jobstate run's result file
def _writer(report: object, *, fail: bool = False) -> list[str]:
    text = report if isinstance(report, str) else json.dumps(report)
    script = f"import os; open(os.environ['JOBSTATE_RESULT'], 'w').write({text!r})"
    return stable_cmd(script + ("; raise SystemExit(1)" if fail else ""))


def _run(repo: Path, episode: str, cmd: list[str]) -> int:
    return main(["--repo", str(repo), "run", "--episode", episode, "--step", "generate", "--", *cmd])


@pytest.mark.parametrize(
    "case",
    [
        ({"amount": 12.4, "currency": "USD"}, "not a number"),
        ({"amount": "12.40"}, "without a currency"),
        ({"amount": "-5", "currency": "USD"}, "cannot be negative"),
        ({"currency": "USD"}, "without an amount"),
        ([{"amount": "1.00", "currency": "USD"}, {"amount": 2, "currency": "USD"}], "cost entry 2"),
        ("12.40 USD", "must be an object"),
        ({"amount": "1.00", "currency": "USD", "charge_id": ""}, "invalid charge_id"),
    ],
)
def test_result_file_with_a_bad_cost_is_refused_and_nothing_charged_is_recorded(
    store: Store, repo: Path, episode: str, capsys: pytest.CaptureFixture[str], case: tuple[object, str]
) -> None:
    cost, words = case
    code = _run(repo, episode, _writer({"remote_ref": "task-1", "cost": cost}))
    err = capsys.readouterr().err
    assert code == 2, err
    assert words in err
    assert "JOBSTATE_RESULT" in err or ".json" in err  # names the file
    assert cost_entries(store, episode) == []
    assert status(repo) == ""


def test_result_file_costs_may_be_a_list_and_replays_are_not_added(
    store: Store, repo: Path, episode: str, capsys: pytest.CaptureFixture[str]
) -> None:
    costs = [{"amount": "12.40", "currency": "USD"}, {"amount": "1.00", "currency": "EUR", "charge_id": "fx"}]
    cmd = _writer({"remote_ref": "task-1", "cost": costs}, fail=True)
    assert _run(repo, episode, cmd) == 9  # fails after the vendor charged
    capsys.readouterr()
    code = _run(repo, episode, _writer({"remote_ref": "task-1", "cost": costs}))
    err = capsys.readouterr().err
    assert code == 0, err
    assert "already in the ledger" in err
    assert _ledger(store, episode) == [("12.40", "USD", "task-1", None), ("1.00", "EUR", "task-1", "fx")]


def test_result_file_contradicting_the_ledger_is_exit_4_naming_both(
    store: Store, repo: Path, episode: str, capsys: pytest.CaptureFixture[str]
) -> None:
    cmd = _writer({"remote_ref": "task-1", "cost": {"amount": "12.40", "currency": "USD"}}, fail=True)
    assert _run(repo, episode, cmd) == 9
    capsys.readouterr()
    code = _run(repo, episode, _writer({"remote_ref": "task-1", "cost": {"amount": "13.00", "currency": "USD"}}))
    err = capsys.readouterr().err
    assert code == 4, err
    assert "13.00 USD" in err
    assert "12.40 USD" in err
    assert _ledger(store, episode) == [("12.40", "USD", "task-1", None)]


def test_exit_0_without_a_result_file_warns(repo: Path, episode: str, capsys: pytest.CaptureFixture[str]) -> None:
    base = git(repo, "rev-parse", "HEAD").strip()
    code = _run(repo, episode, stable_cmd("pass"))
    err = capsys.readouterr().err
    assert code == 0, err
    assert "without writing $JOBSTATE_RESULT" in err
    # no remote task is said so, never as Python's None
    assert _run(repo, episode, stable_cmd("pass")) == 0
    assert "already completed (no remote task); nothing run" in capsys.readouterr().err
    assert main(["--repo", str(repo), "diff", base]) == 0
    shown = capsys.readouterr().out
    assert "accepted (no remote task)" in shown
    assert "None" not in shown


def test_unknown_result_fields_are_warned_about(repo: Path, episode: str, capsys: pytest.CaptureFixture[str]) -> None:
    report = {"remote_ref": "task-1", "costs": [], "cost": {"amount": "1.00", "currency": "USD", "tax": "0.1"}}
    code = _run(repo, episode, _writer(report))
    err = capsys.readouterr().err
    assert code == 0, err
    assert "costs" in err
    assert "cost.tax" in err
    assert "warning" in err
