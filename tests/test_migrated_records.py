"""A migrated episode keeps what its legacy episode.yaml records (costs, decision, remote tasks, artifact
hashes) for every command: one legacy normaliser, read by complete, show, report and verify alike."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from jobstate.core.layout import history_path

from .conftest import git, run_cli, status
from .legacy import make_legacy_repo, write_legacy_week


def _legacy(tmp_path: Path) -> Path:
    repo = tmp_path / "legacy"
    make_legacy_repo(repo, ["2026-W30"])  # approved and completed
    write_legacy_week(repo, "2026-W31", 1, history=False)
    episode = repo / "state" / "2026-W31" / "episode.yaml"
    # approved, never completed
    episode.write_text("".join(line for line in episode.read_text().splitlines(True) if "completed_at" not in line))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "2026-W31: approved, not completed")
    proc = run_cli("migrate", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    return repo


@pytest.mark.parametrize("approve_again", [False, True])
def test_completing_a_migrated_approved_episode_keeps_its_costs_tasks_and_hashes(
    tmp_path: Path, approve_again: bool
) -> None:
    repo = _legacy(tmp_path)
    if approve_again:  # as the issue did; without it, the legacy approval counts
        assert run_cli("approve", "--episode", "2026-W31-0", "--by", "lead", cwd=repo).returncode == 0
    proc = run_cli("complete", "--episode", "2026-W31-0", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    assert "15.50 USD" in proc.stdout
    history = yaml.safe_load((repo / history_path("2026-W31-0")).read_text())
    assert history["cost_totals"] == {"USD": "15.50"}
    assert history["remote_tasks"] == ["vendor-task-802", "vendor-task-803"]
    assert sorted(history["artifacts"]) == ["cover.png", "final.mp4"]
    assert history["approval"]["by"] == ("lead" if approve_again else "editor")
    proc = run_cli("verify", "--strict", cwd=repo)
    assert proc.returncode == 0, proc.stdout
    assert status(repo) == ""


def test_show_records_of_a_migrated_episode_shows_what_report_counts(tmp_path: Path) -> None:
    repo = _legacy(tmp_path)
    shown = yaml.safe_load(run_cli("show", "--records", "2026-W30-0", cwd=repo).stdout)
    assert shown["approval"] == {"status": "approved", "by": "editor", "at": "2026-07-10T10:00:00Z"}
    assert [(c["step"], c["amount"]) for c in shown["costs"]] == [("generate", "12.40"), ("rework", "3.10")]
    assert shown["cost_totals"] == {"USD": "15.50"}
    assert sorted(shown["artifacts"]) == ["cover.png", "final.mp4"]
    assert shown["status"] == "completed"
    report = json.loads(run_cli("report", "--format", "json", cwd=repo).stdout)
    counted = {e["episode_id"]: e for e in report["episodes"]}["2026-W30-0"]
    assert counted["spend"] == shown["cost_totals"]


def test_a_migrated_episodes_legacy_costs_count_alike_for_budget_report_and_verify(tmp_path: Path) -> None:
    # one sum (core.budget.spent_and_held) over one reader: the step's budget decision and jobstate budget
    # counted costs.yaml only, report and verify a legacy episode.yaml's costs too
    repo = _legacy(tmp_path)
    assert run_cli("init", cwd=repo).returncode in (0, 7)
    config = repo / "jobstate.yaml"
    config.write_text((config.read_text() if config.exists() else "") + "budget: {per: week, limits: {USD: '20.00'}}\n")
    git(repo, "add", "jobstate.yaml")
    git(repo, "commit", "-qm", "a budget")
    proc = run_cli("budget", "--period", "2026-W31", "--json", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    usage = json.loads(proc.stdout)["currencies"]
    assert [(u["currency"], u["spent"]) for u in usage] == [("USD", "15.50")]
    report = json.loads(run_cli("report", "--format", "json", cwd=repo).stdout)
    assert {(b["period"], b["spent"]) for b in report["budgets"]} >= {("2026-W31", "15.50")}
