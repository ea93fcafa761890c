"""Inputs are checked at the edge, by one rule for every option and environment variable
(core/inputs.py): a clear line on stderr, exit 2, nothing written (issue 18, part 3)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from jobstate import errors
from jobstate.allocation.schedulers import derive
from jobstate.core.clock import format_time
from jobstate.core.inputs import number
from jobstate.core.money import validate_charge_amount
from jobstate.errors import UsageError
from jobstate.main import main

from .conftest import git

EID = "2026-W32-0"
NOW = datetime(2026, 8, 7, 10, 0, tzinfo=UTC)


def _cli(repo: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["--repo", str(repo), *args], now=lambda: NOW)
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


@pytest.fixture
def allocated(repo: Path) -> Path:
    assert main(["--repo", str(repo), "allocate", "--key", "k", "--week", "2026-W32"]) == 0
    return repo


@pytest.mark.parametrize(
    ("job", "why"),
    [("backfill-20260807", "before 2015"), ("backfill-99999999", "more than a day after now")],
)
def test_a_kubernetes_number_that_is_no_plausible_time_is_a_manual_run_with_the_reason(job: str, why: str) -> None:
    found = derive("kubernetes", {"JOB_NAME": job}, now=NOW)
    assert found.manual
    assert found.intended is None
    assert found.period_source == "start"
    assert found.period.id == "2026-W32"
    assert len(found.warnings) == 1
    assert why in found.warnings[0]
    assert found.to_json()["warnings"] == list(found.warnings)


def test_a_kubernetes_cronjob_minutes_suffix_is_still_its_scheduled_time() -> None:
    minutes = int((datetime(2026, 8, 7, 6, 0, tzinfo=UTC) - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds()) // 60
    found = derive("kubernetes", {"JOB_NAME": f"weekly-{minutes}"}, now=NOW)
    assert found.intended == datetime(2026, 8, 7, 6, 0, tzinfo=UTC)
    assert not found.manual
    assert found.warnings == ()


def test_key_says_why_the_number_was_not_taken(
    repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JOB_NAME", "backfill-20260807")
    code, out, err = _cli(repo, capsys, "key", "--from", "kubernetes")
    assert code == 0, err
    assert "intended: none" in out
    assert "jobstate: warning: the Job name 'backfill-20260807' ends in a number" in err


@pytest.mark.parametrize("at", ["0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "0001-01-01T00:00:00+14:00"])
def test_calendar_edges_are_exit_2(repo: Path, capsys: pytest.CaptureFixture[str], at: str) -> None:
    args = ["--from", "cron", "--job-name", "j", "--schedule", "0 6 * * *", "--at", at]
    for command in ("key", "allocate"):
        code, _out, err = _cli(repo, capsys, command, *args)
        assert code == errors.USAGE, err
        assert "calendar" in err


def test_times_are_zero_padded(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert format_time(datetime(2, 1, 1, 6, 0, tzinfo=UTC)) == "0002-01-01T06:00:00Z"
    args = ["--from", "cron", "--job-name", "j", "--schedule", "0 6 * * *", "--at", "0002-01-01T07:00:00Z"]
    code, out, err = _cli(repo, capsys, "key", *args)
    assert code == 0, err
    assert "key: cron:j:0002-01-01T06:00:00Z" in out


@pytest.mark.parametrize("command", ["report", "list"])
def test_a_period_of_another_kind_is_exit_2_everywhere(
    allocated: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    code, _out, err = _cli(allocated, capsys, command, "--period", "2026-08")
    assert code == errors.USAGE, err
    assert "iso-week" in err


@pytest.mark.parametrize("bad", ["a\nb", "a\rb", "tab\there", "esc\x1b[31m", "bidi\u202eevil", "line\u2028sep"])
@pytest.mark.parametrize(
    "args",
    [
        ["approve", "--episode", EID, "--by", "{}"],
        ["approve", "--episode", EID, "--by", "ed", "--reason", "{}"],
        ["approve", "--episode", EID, "--by", "ed", "--reject", "--reason", "{}"],
        ["resolve", "--episode", EID, "--step", "g", "--not-submitted", "--by", "ed", "--reason", "{}"],
        ["retire", EID, "--by", "ed", "--reason", "{}"],
        ["allocate", "--key", "{}", "--week", "2026-W32"],
        ["key", "--from", "cron", "--job-name", "{}", "--schedule", "0 6 * * *"],
    ],
    ids=["approve-by", "approve-reason", "reject-reason", "resolve-reason", "retire-reason", "key", "job-name"],
)
def test_free_text_options_are_one_line(
    allocated: Path, capsys: pytest.CaptureFixture[str], args: list[str], bad: str
) -> None:
    head = git(allocated, "rev-parse", "HEAD")
    code, _out, err = _cli(allocated, capsys, *[bad if a == "{}" else a for a in args])
    assert code == errors.USAGE, err
    assert len(err.strip().splitlines()) == 1
    assert "on one line" in err or "control or format character" in err
    assert git(allocated, "rev-parse", "HEAD") == head


@pytest.mark.parametrize(
    ("name", "value"),
    [(n, v) for n in ("JOBSTATE_LOCK_TIMEOUT",) for v in ("-1", "nan", "inf", "text", "1e9")]
    + [("JOBSTATE_ATTEMPTS", v) for v in ("0", "-1", "x", "2.5")],
)
def test_numeric_environment_variables_are_refused_up_front(
    allocated: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    for command in (["list"], ["show", EID], ["allocate", "--key", "other", "--week", "2026-W32"]):
        code, _out, err = _cli(allocated, capsys, *command)
        assert code == errors.USAGE, err
        assert f"{name}={value!r}" in err


@pytest.mark.parametrize("value", ["0", "2.5"])
def test_a_good_lock_timeout_is_taken(
    allocated: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("JOBSTATE_LOCK_TIMEOUT", value)
    assert _cli(allocated, capsys, "allocate", "--key", "other", "--week", "2026-W32")[0] == 0


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "text"])
@pytest.mark.parametrize("option", ["--lock-timeout", "--jobs"])
def test_numeric_options_follow_the_same_rule(
    allocated: Path, capsys: pytest.CaptureFixture[str], option: str, value: str
) -> None:
    command = ["verify"] if option == "--jobs" else ["list"]
    code, _out, err = _cli(allocated, capsys, *command, option, value)
    assert code == errors.USAGE, err
    assert "is not a" in err


@pytest.mark.parametrize(
    ("amount", "why"),
    [
        ("99999999999999999999999999999999999999.99", "too large"),
        ("12.123456789", "too precise"),
        ("012.40", "leading zeros"),
        ("1e40", "digits and one point"),
        ("\u0661\u0662", "digits and one point"),
    ],
)
def test_an_amount_is_refused_for_the_right_reason(amount: str, why: str) -> None:
    with pytest.raises(errors.UsageError, match=why) as info:
        validate_charge_amount(amount)
    assert "float" not in str(info.value)


@pytest.mark.parametrize("text", [" 5", "5 ", "1_0", "\uff15", "1e3", "nan", "inf", "+5", "0x10", ".", "1.2.3", ""])
def test_a_number_is_plain_ascii_digits_or_refused(text: str) -> None:
    with pytest.raises(UsageError, match=r"is not a number of seconds$"):
        number(text, "seconds", 0, 86400)


def test_a_numbers_range_is_said_in_plain_digits() -> None:
    assert [number(t, "seconds", 0, 86400) for t in ("2.5", "5.", ".5", "0")] == [2.5, 5.0, 0.5, 0.0]
    with pytest.raises(UsageError, match=r"from 2000 to 100000000$"):
        number("10", "characters", 2000, 100_000_000, whole=True)
