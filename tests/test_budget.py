"""Budgets per period, reservations committed with the intent, and request fingerprints."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from jobstate.allocation.allocation import allocate
from jobstate.core.layout import episode_dir
from jobstate.core.periods import parse_period
from jobstate.errors import BudgetExceeded, FingerprintMismatch, StepAlreadyCompleted, UsageError
from jobstate.paid.step import paid_step
from jobstate.store.store import Store

from .conftest import git, run_cli, status
from .procs import run_together
from .test_transaction_remote import make_hosts

W32 = parse_period("2026-W32")
BUDGET = "budget:\n  per: week\n  limits: {USD: '20.00'}\n  warn_at: '80%'\n"

# a paid step's command: counts that it ran, then reports a 5.00 USD charge
_CMD = """
import json, os, sys
with open(sys.argv[1], "a") as fh:
    fh.write(os.environ["JOBSTATE_EPISODE"] + "\\n")
with open(os.environ["JOBSTATE_RESULT"], "w") as fh:
    ref = "t-" + os.environ["JOBSTATE_IDEMPOTENCY_KEY"]
    json.dump({"remote_ref": ref, "cost": {"amount": sys.argv[2], "currency": "USD"}}, fh)
"""


def _with_budget(repo: Path, text: str = BUDGET) -> None:
    config = repo / "jobstate.yaml"
    config.write_text(config.read_text() + text)
    git(repo, "commit", "-qam", "a budget")


def _cmd(tmp_path: Path, charge: str = "5.00") -> list[str]:
    return ["--", sys.executable, "-c", _CMD, str(tmp_path / "ran.txt"), charge]


def _ran(tmp_path: Path) -> list[str]:
    path = tmp_path / "ran.txt"
    return path.read_text().split() if path.exists() else []


# concurrency loops of many processes and clones: make test-slow (CI) runs them
@pytest.mark.slow
def test_sixteen_processes_reserving_5_against_20_exactly_four_run(repo: Path, tmp_path: Path) -> None:
    _with_budget(repo)
    with Store(repo) as store:
        eids = [allocate(store, f"k{i}", W32).episode_id for i in range(16)]
    args = [["run", "--episode", e, "--step", "generate", "--max-cost", "5 USD", *_cmd(tmp_path)] for e in eids]
    results = run_together(repo, args, tmp_path / "gate")
    codes = sorted(code for code, _out, _err in results)
    assert codes == [0] * 4 + [8] * 12, results
    assert len(_ran(tmp_path)) == 4  # the refused twelve never started their command
    refused = next(err for code, _out, err in results if code == 8)
    assert "budget for 2026-W32 exceeded: cap 20.00 USD" in refused
    assert "asked 5" in refused
    assert status(repo) == ""
    assert run_cli("verify", "--strict", cwd=repo).returncode == 0


@pytest.mark.slow
def test_two_clones_through_a_shared_remote_never_exceed_the_budget(tmp_path: Path) -> None:
    bare, clones = make_hosts(tmp_path, 2)
    seed = tmp_path / "seed"
    _with_budget(seed)
    git(seed, "push", "-q", str(bare), "main")
    for clone in clones:
        git(clone, "pull", "-q", "--ff-only")
    eids = []
    for i in range(8):
        proc = run_cli("allocate", "--key", f"k{i}", "--week", "2026-W32", cwd=clones[i % 2])
        assert proc.returncode == 0, proc.stderr
        eids.append(proc.stdout.strip())
    for clone in clones:
        git(clone, "pull", "-q", "--ff-only")
    args = [["run", "--episode", e, "--step", "generate", "--max-cost", "5 USD", *_cmd(tmp_path)] for e in eids]
    results = run_together([clones[i % 2] for i in range(8)], args, tmp_path / "gate")
    told = "\n".join(f"{code}: {err.strip()}" for code, _o, err in results)
    assert sorted(code for code, _o, _e in results) == [0] * 4 + [8] * 4, told
    assert len(_ran(tmp_path)) == 4
    assert run_cli("verify", "--rev", "main", "--strict", cwd=bare).returncode == 0


def test_settlement_below_and_above_the_maximum(repo: Path, tmp_path: Path) -> None:
    _with_budget(repo)
    with Store(repo) as store:
        low, high = (allocate(store, k, W32).episode_id for k in ("low", "high"))
    proc = run_cli(
        "run", "--episode", low, "--step", "generate", "--max-cost", "5 USD", *_cmd(tmp_path, "3.10"), cwd=repo
    )
    assert proc.returncode == 0, proc.stderr
    proc = run_cli(
        "run", "--episode", high, "--step", "generate", "--max-cost", "5 USD", *_cmd(tmp_path, "6.00"), cwd=repo
    )
    assert proc.returncode == 0, proc.stderr
    assert "1.00 over its declared maximum 5" in proc.stderr  # recorded, never dropped
    usage = json.loads(run_cli("budget", "--period", "2026-W32", "--json", cwd=repo).stdout)
    assert usage["currencies"] == [
        {
            "period": "2026-W32",
            "currency": "USD",
            "cap": "20.00",
            "spent": "9.10",
            "reserved": "0",
            "remaining": "10.90",
        }
    ]
    subs = (repo / episode_dir(high) / "submissions.yaml").read_text()
    assert "overrun: '1.00'" in subs
    by_day = json.loads(run_cli("budget", "--period", "2026-08-05", "--json", cwd=repo).stdout)
    assert by_day["period"] == "2026-W32"  # the budget week that day falls in
    month = run_cli("budget", "--period", "2026-08", cwd=repo)
    assert (month.returncode, month.stdout) == (2, "")
    assert "2026-08 is a month, longer than the budget's week: give a week or a day in it" in month.stderr


def test_warning_when_a_step_takes_the_period_past_the_threshold(repo: Path, tmp_path: Path) -> None:
    _with_budget(repo)
    with Store(repo) as store:
        eids = [allocate(store, f"k{i}", W32).episode_id for i in range(4)]
    errs = [
        run_cli("run", "--episode", e, "--step", "generate", "--max-cost", "5 USD", *_cmd(tmp_path), cwd=repo).stderr
        for e in eids
    ]
    assert ["warning: budget 2026-W32" in err for err in errs] == [False, False, False, True]


def test_a_new_period_has_its_whole_budget_again(repo: Path, tmp_path: Path) -> None:
    _with_budget(repo, "budget:\n  limits: {USD: '5.00'}\n")
    with Store(repo) as store:
        w32 = allocate(store, "a", W32).episode_id
        w33 = allocate(store, "b", parse_period("2026-W33")).episode_id
        w32b = allocate(store, "c", W32).episode_id
    for eid, code in ((w32, 0), (w32b, 8), (w33, 0)):
        proc = run_cli("run", "--episode", eid, "--step", "generate", "--max-cost", "5 USD", *_cmd(tmp_path), cwd=repo)
        assert proc.returncode == code, proc.stderr


def test_a_budgeted_repository_refuses_a_step_without_a_maximum(store: Store, repo: Path, tmp_path: Path) -> None:
    _with_budget(repo)
    eid = allocate(store, "a", W32).episode_id
    proc = run_cli("run", "--episode", eid, "--step", "generate", *_cmd(tmp_path), cwd=repo)
    assert proc.returncode == 2
    assert "--max-cost" in proc.stderr
    with pytest.raises(UsageError, match="no cap for EUR"), paid_step(Store(repo), eid, "generate", max_cost="1 EUR"):
        pass
    assert _ran(tmp_path) == []
    assert "submissions.yaml" not in git(repo, "ls-files", "state")


def test_api_reservation_is_refused_before_the_body(store: Store, repo: Path) -> None:
    _with_budget(repo, "budget:\n  limits: {USD: '1.00'}\n")
    eid = allocate(store, "a", W32).episode_id
    body_ran = False
    with pytest.raises(BudgetExceeded) as info, paid_step(Store(repo), eid, "generate", max_cost="1.01 USD"):
        body_ran = True
    assert info.value.exit_code == 8
    assert not body_ran


_GIVE = "give an amount and a currency, e.g. '12.40 USD'"
_DECIMAL = "give a decimal string of digits and one point, such as '12.40'"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("12.4", f"invalid maximum cost '12.4': {_GIVE}"),
        ("12.40", f"invalid maximum cost '12.40': {_GIVE}"),
        ("abc USD", f"invalid amount 'abc': {_DECIMAL}"),
        ("-1 USD", "invalid maximum cost '-1 USD': it cannot be negative"),
        ("1e3 USD", f"invalid amount '1e3': {_DECIMAL}"),
        ("nan USD", f"invalid amount 'nan': {_DECIMAL}"),
        ("12.40 usd", "invalid currency 'usd': use a three-letter ISO 4217 code such as USD"),
        ("", f"invalid maximum cost '': {_GIVE}"),
    ],
)
def test_max_cost_must_be_an_amount_and_a_currency(
    store: Store, repo: Path, tmp_path: Path, value: str, message: str
) -> None:
    # a real, committed episode of a budgeted repository: only the value of --max-cost can be refused
    _with_budget(repo)
    eid = allocate(store, "a", W32).episode_id
    assert f"{episode_dir(eid)}/episode.yaml" in git(repo, "ls-files", "state")
    head = git(repo, "rev-parse", "HEAD")
    proc = run_cli("run", "--episode", eid, "--step", "generate", "--max-cost", value, *_cmd(tmp_path), cwd=repo)
    assert (proc.returncode, proc.stderr) == (2, f"jobstate: error: {message}\n")
    assert _ran(tmp_path) == []
    assert git(repo, "rev-parse", "HEAD") == head


@pytest.mark.parametrize(
    "text",
    [
        "budget: 20\n",
        "budget:\n  limits: {USD: 20.0}\n",
        "budget:\n  per: hour\n  limits: {USD: '1'}\n",
        "budget:\n  limits: {USD: '1'}\n  warn_at: 80\n",
    ],
)
def test_malformed_budget_settings_are_exit_7(repo: Path, text: str) -> None:
    _with_budget(repo, text)
    proc = run_cli("budget", cwd=repo)
    assert proc.returncode == 7, proc.stderr
    assert "jobstate.yaml: budget" in proc.stderr


def _api_step(repo: Path, eid: str, request: dict[str, object], *, accept: bool, finish: bool) -> None:
    with paid_step(Store(repo), eid, "generate", request=request) as step:
        if accept:
            step.accepted("task-1")
        if not finish:
            raise RuntimeError("killed")


@pytest.mark.parametrize("state", ["unknown", "accepted", "completed"])
def test_a_changed_request_is_refused_whatever_the_earlier_attempt(store: Store, repo: Path, state: str) -> None:
    eid = allocate(store, "a", W32).episode_id
    first = {"prompt": "a cat", "seconds": 30}
    with pytest.raises(RuntimeError):
        _api_step(repo, eid, first, accept=state != "unknown", finish=False)
    if state == "completed":
        _api_step(repo, eid, first, accept=False, finish=True)
    head = git(repo, "rev-parse", "HEAD")
    with pytest.raises(FingerprintMismatch, match="sha256:") as info:
        _api_step(repo, eid, {"prompt": "a dog", "seconds": 30}, accept=False, finish=True)
    assert info.value.exit_code == 4
    assert git(repo, "rev-parse", "HEAD") == head
    if state == "completed":  # the same request again is "already completed", not a mismatch
        with pytest.raises(StepAlreadyCompleted):
            _api_step(repo, eid, {"seconds": 30, "prompt": "a cat"}, accept=False, finish=True)


def test_supersede_opens_a_new_attempt_for_the_changed_request(store: Store, repo: Path, tmp_path: Path) -> None:
    eid = allocate(store, "a", W32).episode_id
    assert run_cli("run", "--episode", eid, "--step", "generate", *_cmd(tmp_path), cwd=repo).returncode == 0
    changed = _cmd(tmp_path, "4.00")
    proc = run_cli("run", "--episode", eid, "--step", "generate", *changed, cwd=repo)
    assert proc.returncode == 4
    assert "--supersede" in proc.stderr
    args = ["resolve", "--episode", eid, "--step", "generate", "--supersede", "--by", "ops", "--reason", "4 USD now"]
    before = git(repo, "rev-parse", "HEAD").strip()
    assert run_cli(*args, cwd=repo).returncode == 0
    assert run_cli("run", "--episode", eid, "--step", "generate", *changed, cwd=repo).returncode == 0
    assert _ran(tmp_path) == [eid, eid]
    assert "superseded" in (repo / episode_dir(eid) / "submissions.yaml").read_text()
    # a reviewer sees an operator's decision, not a rewritten submission
    diff = json.loads(run_cli("diff", before, "--format", "json", cwd=repo).stdout)
    assert diff["alarms"] == []
    assert "resolved as superseded by ops: 4 USD now" in diff["steps"][0]["events"]
    assert [(s["attempt"], s["state"]) for s in diff["steps"]] == [(1, "superseded"), (2, "completed")]


def test_verify_reports_overruns_and_a_budget_exceeded_by_hand_and_against_keeps_reservations(
    repo: Path, tmp_path: Path
) -> None:
    _with_budget(repo)
    with Store(repo) as store:
        eid = allocate(store, "a", W32).episode_id
    run = ["run", "--episode", eid, "--step", "generate", "--max-cost", "5 USD", *_cmd(tmp_path, "6.00")]
    assert run_cli(*run, cwd=repo).returncode == 0
    proc = run_cli("verify", cwd=repo)
    assert proc.returncode == 0, proc.stdout
    assert "1.00 over its reservation of 5" in proc.stdout
    config = repo / "jobstate.yaml"
    config.write_text(config.read_text().replace("'20.00'", "'5.00'"))
    git(repo, "commit", "-qam", "a lower cap")
    proc = run_cli("verify", "--rev", "HEAD", cwd=repo)
    assert proc.returncode == 1
    assert "budget 2026-W32 USD: spent and reserved 6.00, over the cap 5.00" in proc.stdout
    subs = repo / episode_dir(eid) / "submissions.yaml"
    subs.write_text(subs.read_text().replace("amount: '5'", "amount: '9'"))
    git(repo, "commit", "-qam", "a rewritten reservation")
    proc = run_cli("verify", "--rev", "HEAD", "--against", "HEAD~1", cwd=repo)
    assert proc.returncode == 1
    assert "submission rewritten" in proc.stdout
    assert "generate attempt 1 reservation" in proc.stdout


def test_report_and_diff_show_budget_use(repo: Path, tmp_path: Path) -> None:
    _with_budget(repo)
    base = git(repo, "rev-parse", "HEAD").strip()
    with Store(repo) as store:
        eids = [allocate(store, f"k{i}", W32).episode_id for i in range(2)]
    for eid in eids:
        run = ["run", "--episode", eid, "--step", "generate", "--max-cost", "5 USD", *_cmd(tmp_path)]
        assert run_cli(*run, cwd=repo).returncode == 0
    report = json.loads(run_cli("report", "--format", "json", cwd=repo).stdout)
    assert report["budgets"] == [
        {
            "period": "2026-W32",
            "currency": "USD",
            "spent": "10.00",
            "reserved": "0",
            "cap": "20.00",
            "remaining": "10.00",
            "use": "spent 10.00 + reserved 0 of 20.00 USD (50%), 10.00 left",
            "name": "2026-W32 USD",
        }
    ]
    text = run_cli("diff", base, cwd=repo).stdout
    assert "2026-W32 USD" in text
    assert "spent 10.00 + reserved 0 of 20.00 USD (50%), 10.00 left" in text


@pytest.mark.parametrize("edit", ["cap", "ledger"])
def test_the_budget_decision_refuses_uncommitted_edits_of_its_inputs(repo: Path, tmp_path: Path, edit: str) -> None:
    _with_budget(repo, "budget:\n  limits: {USD: '5.00'}\n")
    with Store(repo) as store:
        first, second = (allocate(store, k, W32).episode_id for k in ("a", "b"))
    run = ["run", "--step", "generate", "--max-cost", "5 USD", *_cmd(tmp_path)]
    assert run_cli(run[0], "--episode", first, *run[1:], cwd=repo).returncode == 0
    if edit == "cap":
        config = repo / "jobstate.yaml"
        config.write_text(config.read_text().replace("'5.00'", "'1000.00'"))
        named = "jobstate.yaml"
    else:
        costs = repo / episode_dir(first) / "costs.yaml"
        costs.write_text(costs.read_text().replace("'5.00'", "'0.00'"))
        named = f"{episode_dir(first)}/costs.yaml"
    head = git(repo, "rev-parse", "HEAD")
    proc = run_cli(run[0], "--episode", second, *run[1:], cwd=repo)
    assert proc.returncode == 2, proc.stderr
    assert f"{named} has uncommitted changes" in proc.stderr
    assert git(repo, "rev-parse", "HEAD") == head
    assert _ran(tmp_path) == [first]


def test_a_charge_is_not_counted_twice_while_its_step_is_still_open(store: Store, repo: Path) -> None:
    # between a step's charge and its completion, the ledger counts the charge as spent: its reservation
    # holds only the rest (else a second step was refused against a budget it fits in)
    _with_budget(repo, "budget:\n  per: week\n  limits: {USD: '10.00'}\n")
    first, second = (allocate(store, key, W32).episode_id for key in ("a", "b"))
    with paid_step(Store(repo), first, "generate", max_cost="6 USD") as step:
        step.accepted("t-1")
        step.cost("4.00", "USD")
        step.commit_reported()  # committed now, before the end: spent 4, and 2 of its 6 still held
        assert run_cli("budget", "--json", cwd=repo).returncode == 0
        proc = run_cli("verify", "--strict", cwd=repo)
        assert proc.returncode == 0, proc.stdout  # spent 4 + held 2 is within 10, not 10 over it
        with paid_step(Store(repo), second, "generate", max_cost="4 USD") as other:  # 4 + 2 + 4 = 10 fits
            other.accepted("t-2")
            other.cost("4.00", "USD")
        third = allocate(store, "c", W32).episode_id
        with (
            pytest.raises(BudgetExceeded, match=r"spent 8\.00, reserved 2\.00, asked 1"),
            paid_step(Store(repo), third, "generate", max_cost="1 USD"),
        ):
            pass
    assert status(repo) == ""
