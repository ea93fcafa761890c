"""A budget added later, or one old overrun, does not fail every later pull request (issue 30, case 6):
``budget.since``, ``jobstate budget acknowledge`` and ``verify --strict --against`` judging the change."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from jobstate.core.layout import episode_dir

from .conftest import git, run_cli
from .snapshots import tree_state

ACK = "history/budget/acknowledged.yaml"


def _spend(repo: Path, week: str, key: str, amount: str, *extra: str) -> str:
    episode = run_cli("allocate", "--key", key, "--week", week, cwd=repo).stdout.strip()
    report = json.dumps({"remote_ref": f"task-{key}", "cost": {"amount": amount, "currency": "USD"}})
    cmd = [
        sys.executable,
        "-c",
        f"import os, pathlib; pathlib.Path(os.environ['JOBSTATE_RESULT']).write_text({report!r})",
    ]
    proc = run_cli("run", "--episode", episode, "--step", "generate", *extra, "--", *cmd, cwd=repo)
    assert proc.returncode == 0, proc.stderr
    return episode


def _add_budget(repo: Path, text: str) -> None:
    config = repo / "jobstate.yaml"
    config.write_text(config.read_text() + text)
    git(repo, "commit", "-qam", "a budget, added after the spending")


CAP = "budget:\n  per: week\n  limits: {USD: '30.00'}\n"


def _overrun_acknowledged(repo: Path) -> None:
    """A week that spent 62.00, a cap of 30.00 added after it, and the overrun acknowledged."""
    _spend(repo, "2026-W30", "a", "62.00")
    _add_budget(repo, CAP)
    ack = run_cli("budget", "acknowledge", "--period", "2026-W30", "--by", "a", "--reason", "r", cwd=repo)
    assert ack.returncode == 0, ack.stderr


def _hand_edit(repo: Path, rel: str, old: str, new: str, message: str) -> None:
    path = repo / rel
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    git(repo, "commit", "-qam", message)


def test_an_old_overrun_fails_verify_until_a_person_acknowledges_it(repo: Path) -> None:
    _spend(repo, "2026-W30", "a", "62.00")
    _add_budget(repo, CAP)
    proc = run_cli("verify", cwd=repo)
    assert proc.returncode == 1
    assert "budget 2026-W30 USD: spent and reserved 62.00, over the cap 30.00" in proc.stdout
    assert "jobstate budget acknowledge --period 2026-W30" in proc.stdout
    ack = run_cli(
        "budget", "acknowledge", "--period", "2026-W30", "--by", "alice", "--reason", "before the cap", cwd=repo
    )
    assert ack.returncode == 0, ack.stderr
    assert git(repo, "log", "-1", "--format=%s").startswith("budget acknowledge 2026-W30 (62.00 of 30.00 USD) by alice")
    assert run_cli("verify", cwd=repo).returncode == 0
    shown = run_cli("diff", "HEAD~1", cwd=repo).stdout
    assert "Budget overruns acknowledged (1):" in shown
    assert "acknowledged by alice" in shown
    as_json = json.loads(run_cli("diff", "HEAD~1", "--format", "json", cwd=repo).stdout)
    assert as_json["acknowledged"][0]["total"] == "62.00"
    # once is enough: the same overrun again records nothing
    head = git(repo, "rev-parse", "HEAD")
    again = run_cli("budget", "acknowledge", "--period", "2026-W30", "--by", "bob", "--reason", "again", cwd=repo)
    assert again.returncode == 0
    assert "already acknowledged" in again.stderr
    assert git(repo, "rev-parse", "HEAD") == head


def test_spending_after_the_acknowledgement_is_judged_again(repo: Path) -> None:
    _overrun_acknowledged(repo)
    # a hand-added charge of the same week (a run could not reserve: the week is over its cap)
    costs = repo / episode_dir("2026-W30-0") / "costs.yaml"
    text = costs.read_text()
    costs.write_text(text + text[text.index("- ") :].replace("62.00", "1.00").replace("charge_id: ", "charge_id: x"))
    git(repo, "commit", "-qam", "one more charge")
    proc = run_cli("verify", cwd=repo)
    assert proc.returncode == 1
    assert "spent and reserved 63.00, over the cap 30.00" in proc.stdout


def test_since_leaves_the_weeks_before_the_budget_unjudged(repo: Path) -> None:
    _spend(repo, "2026-W30", "a", "62.00")
    _add_budget(repo, CAP + "  since: 2026-W40\n")
    assert run_cli("verify", cwd=repo).returncode == 0
    report = run_cli("report", cwd=repo)
    assert report.returncode == 0, report.stderr
    budget = run_cli("budget", "--period", "2026-W30", cwd=repo)
    assert "spent 62.00" in budget.stdout


def test_moving_since_later_is_an_alarm_in_review(repo: Path) -> None:
    _add_budget(repo, CAP + "  since: 2026-W30\n")
    _hand_edit(repo, "jobstate.yaml", "since: 2026-W30", "since: 2026-W45", "judge less")
    proc = run_cli("diff", "HEAD~1", "--strict", cwd=repo)
    assert proc.returncode == 1
    assert "budget.since" in proc.stdout
    assert "never moves later" in proc.stdout
    assert run_cli("verify", "--against", "HEAD~1", cwd=repo).returncode == 1


def test_since_may_be_an_unquoted_day(repo: Path) -> None:
    _spend(repo, "2026-W30", "a", "62.00")
    _add_budget(repo, CAP + "  since: 2026-08-01\n")  # YAML reads a date, not text
    assert run_cli("verify", cwd=repo).returncode == 0


def test_an_acknowledgement_with_a_field_jobstate_never_writes_is_refused(repo: Path) -> None:
    _overrun_acknowledged(repo)
    _hand_edit(repo, ACK, "  reason: r\n", "  reason: r\n  old: true\n", "a field of its own")
    proc = run_cli("verify", cwd=repo)
    assert proc.returncode == 1
    assert "unknown field 'old'" in proc.stdout
    assert "over the cap" in proc.stdout


@pytest.mark.parametrize("since", ["'nan'", "0", "-1", "2026-W54", "yesterday", "[2026-W30]"])
def test_a_malformed_since_is_refused_by_every_command(repo: Path, since: str) -> None:
    _add_budget(repo, CAP + f"  since: {since}\n")
    for argv in (("verify",), ("budget",), ("allocate", "--key", "k", "--week", "2026-W30")):
        proc = run_cli(*argv, cwd=repo)
        assert proc.returncode == 7, (argv, proc.stderr)
        assert "budget.since" in proc.stderr + proc.stdout


def test_a_rewritten_acknowledgement_is_an_alarm(repo: Path) -> None:
    _overrun_acknowledged(repo)
    _hand_edit(repo, ACK, "total: '62.00'", "total: '9999.00'", "acknowledge more than was spent")
    proc = run_cli("diff", "HEAD~1", "--strict", cwd=repo)
    assert proc.returncode == 1
    assert "budget acknowledgement rewritten" in proc.stdout
    assert run_cli("verify", "--against", "HEAD~1", cwd=repo).returncode == 1


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (("--period", "2026-W30", "--by", "a"), "needs --period P, --by NAME and --reason TEXT"),
        (("--period", "2026-W30", "--by", "", "--reason", "r"), "--by must be non-empty text"),
        (("--period", "2026-W30", "--by", "a\x1b[31m", "--reason", "r"), "control"),
        (("--period", "2026-W31", "--by", "a", "--reason", "r"), "no overrun to acknowledge"),
        (("--period", "2026-08", "--by", "a", "--reason", "r"), "longer than the budget's week"),
        (("--period", "nonsense", "--by", "a", "--reason", "r"), "invalid"),
    ],
)
def test_bad_acknowledgements_are_refused_and_write_nothing(repo: Path, argv: tuple[str, ...], says: str) -> None:
    _spend(repo, "2026-W30", "a", "62.00")
    _add_budget(repo, CAP)
    before = tree_state(repo, skip=".jobstate")  # the catalog, a cache, may be refreshed under the lock
    head = git(repo, "rev-parse", "HEAD")
    proc = run_cli("budget", "acknowledge", *argv, cwd=repo)
    assert proc.returncode == 2, proc.stderr
    assert says in proc.stderr
    assert proc.stderr.count("\n") == 1
    assert git(repo, "rev-parse", "HEAD") == head
    assert tree_state(repo, skip=".jobstate") == before


def _overrun_with_ack_file(repo: Path, entry: str) -> Path:
    """A week over its cap and an acknowledgements file written by hand with ``entry`` (not committed)."""
    _spend(repo, "2026-W30", "a", "62.00")
    _add_budget(repo, CAP)
    path = repo / ACK
    path.parent.mkdir(parents=True)
    path.write_text(f"schema: 1\nentries:\n- {entry}\n")
    return path


def test_an_uncommitted_acknowledgement_file_is_refused_never_committed(repo: Path) -> None:
    path = _overrun_with_ack_file(
        repo,
        "{period: 2026-W31, currency: USD, total: '999.00', cap: '30.00', by: m, "
        "at: '2026-01-01T00:00:00Z', reason: hand-written}",
    )
    head = git(repo, "rev-parse", "HEAD")
    proc = run_cli("budget", "acknowledge", "--period", "2026-W30", "--by", "a", "--reason", "r", cwd=repo)
    assert proc.returncode == 2, proc.stderr
    assert ACK in proc.stderr
    assert "untracked" in proc.stderr
    assert git(repo, "rev-parse", "HEAD") == head
    assert "hand-written" in path.read_text()  # the user's file, untouched


def test_without_a_budget_there_is_nothing_to_acknowledge(repo: Path) -> None:
    proc = run_cli("budget", "acknowledge", "--period", "2026-W30", "--by", "a", "--reason", "r", cwd=repo)
    assert proc.returncode == 2
    assert "no budget" in proc.stderr


def test_a_hostile_acknowledgement_file_is_flagged_and_output_stays_inert(repo: Path) -> None:
    _overrun_with_ack_file(
        repo, "{period: 2026-W30, currency: USD, total: '62.00', cap: '30.00', by: \"evil\\e[31m\", at: x, reason: r}"
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a hand-written acknowledgement")
    proc = run_cli("verify", cwd=repo)
    assert proc.returncode == 1, proc.stdout
    assert ACK in proc.stdout
    assert "\x1b" not in proc.stdout + proc.stderr
    assert "over the cap" in proc.stdout  # a malformed acknowledgement acknowledges nothing


def test_strict_review_of_a_pull_request_judges_what_it_changes(repo: Path) -> None:
    # an overrun of a step's own declared maximum, long merged, is a warning on that old episode
    old = _spend(repo, "2026-W30", "a", "12.40", "--max-cost", "10.00 USD")
    assert "over its reservation" in run_cli("verify", cwd=repo).stdout
    assert run_cli("verify", "--strict", cwd=repo).returncode == 1
    base = git(repo, "rev-parse", "HEAD").strip()
    _spend(repo, "2026-W31", "b", "5.00", "--max-cost", "10.00 USD")  # the pull request: a clean week
    proc = run_cli("verify", "--strict", "--against", base, cwd=repo)
    assert proc.returncode == 0, proc.stdout
    assert f"{episode_dir(old)}/submissions.yaml: warning" in proc.stdout
    assert "1 warning (about what the change did not touch)" in proc.stdout
    # the same overrun in the pull request itself fails it
    base = git(repo, "rev-parse", "HEAD").strip()
    _spend(repo, "2026-W32", "c", "12.40", "--max-cost", "10.00 USD")
    failing = run_cli("verify", "--strict", "--against", base, cwd=repo)
    assert failing.returncode == 1
    assert "state/2026/2026-W32/2026-W32-0/submissions.yaml: error" in failing.stdout
