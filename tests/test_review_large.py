"""A history of 5,000 episodes: markdown stays under GitHub's comment limit, json stays complete."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from jobstate.core.layout import episode_dir
from jobstate.main import main
from jobstate.review.render import COMMENT_LIMIT
from jobstate.review.revision import Ticker

from .conftest import git

EPISODES = 5000
# 5,000 episodes written, committed and rendered: the module's fixture alone can take most of a minute
# 5,000 episodes rendered whole: each test is 6 to 10 CPU seconds by nature, near the fast suite's heaviest
# (a noisy machine put one over it), so they run in make test-slow, which CI runs too
pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]


def _write_history(repo: Path) -> None:
    """Files written directly and one commit: fast, and the same records jobstate writes."""
    for n in range(EPISODES):
        week = f"{2000 + n // 250}-W{1 + (n // 5) % 50:02d}"
        eid = f"{week}-{n % 5}"
        d = repo / episode_dir(eid)
        d.mkdir(parents=True)
        (d / "episode.yaml").write_text(
            f"schema: 1\nepisode_id: {eid}\nperiod_id: {week}\nweek_id: {week}\nsequence: {n % 5}\n"
            f"allocation_key: 'bulk:{n}'\nallocated_at: '2026-08-07T10:00:00Z'\nstatus: allocated\n"
        )
        (d / "submissions.yaml").write_text(
            "schema: 1\nsteps:\n  generate:\n  - attempt: 1\n    idempotency_key: k\n"
            f"    state: {'intent' if n % 97 == 0 else 'completed'}\n    remote_ref: task-{n}\n"
        )
        (d / "costs.yaml").write_text(
            f"schema: 1\nentries:\n- step: generate\n  amount: '1.25'\n  currency: USD\n  remote_ref: task-{n}\n"
            "  at: '2026-08-07T10:00:00Z'\n"
        )
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", f"{EPISODES} episodes")


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = tmp_path_factory.mktemp("big") / "repo"
    repo.mkdir()
    env = ["-c", "user.name=Test", "-c", "user.email=test@example.invalid"]
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
    (repo / "state").mkdir()
    (repo / "state" / ".gitkeep").write_text("")
    subprocess.run(["git", *env, "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", *env, "commit", "-qm", "empty state"], cwd=repo, check=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GIT_AUTHOR_NAME", "Test")
        mp.setenv("GIT_AUTHOR_EMAIL", "test@example.invalid")
        mp.setenv("GIT_COMMITTER_NAME", "Test")
        mp.setenv("GIT_COMMITTER_EMAIL", "test@example.invalid")
        _write_history(repo)
    return repo


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code = main(list(args))
    out, err = capsys.readouterr()
    assert code == 0, err
    assert err == "", "no progress line when stderr is not a terminal"
    return out


def test_markdown_diff_fits_a_comment_and_says_what_was_left_out(big: Path, capsys: pytest.CaptureFixture[str]) -> None:
    md = _run(capsys, "diff", "HEAD~1", "--repo", str(big), "--format", "markdown")
    assert len(md) <= COMMENT_LIMIT
    assert len(md.encode()) <= COMMENT_LIMIT
    assert "**Cut to fit 65,536 characters.** Left out: Episodes allocated (5000 rows)" in md
    assert md.rstrip().endswith("`jobstate diff 'HEAD~1' HEAD --format json`")  # shell-quoted


def test_markdown_report_fits_a_comment_and_keeps_unknown_steps(big: Path, capsys: pytest.CaptureFixture[str]) -> None:
    md = _run(capsys, "report", "--repo", str(big), "--format", "markdown")
    assert len(md.encode()) <= COMMENT_LIMIT
    assert "> **Steps left unknown (52)**" in md
    assert "Left out: Episodes (5000 rows)" in md
    big_md = _run(capsys, "report", "--repo", str(big), "--format", "markdown", "--max-chars", str(1 << 20))
    assert "Cut to fit" not in big_md
    assert len(big_md.encode()) <= 1 << 20


def test_json_is_complete(big: Path, capsys: pytest.CaptureFixture[str]) -> None:
    diff = json.loads(_run(capsys, "diff", "HEAD~1", "--repo", str(big), "--format", "json"))
    assert len(diff["allocated"]) == EPISODES
    assert len(diff["costs"]) == EPISODES
    assert diff["cost_totals"] == {"USD": "6250.00"}
    report = json.loads(_run(capsys, "report", "--repo", str(big), "--format", "json"))
    assert len(report["episodes"]) == EPISODES
    assert len(report["unknown_steps"]) == 52
    assert sum(p["episodes"] for p in report["periods"]) == EPISODES


def test_the_loud_section_is_shortened_not_dropped(capsys: pytest.CaptureFixture[str]) -> None:
    from jobstate.review.render import Section, to_markdown

    rows = [[f"episode deleted {i}", "x" * 50] for i in range(400)]
    md = to_markdown("h", [Section("Never", ["a", "b"], rows, loud=True)], max_chars=5000, full="jobstate diff")
    assert len(md.encode()) <= 5000
    assert "> **Never (400)**" in md
    assert "more rows, left out to fit" in md


def test_progress_shows_only_when_enabled(capsys: pytest.CaptureFixture[str]) -> None:
    quiet = Ticker("reading", 10, enabled=False)
    quiet.start -= 5
    quiet.add(5)
    loud = Ticker("reading HEAD:", 10, enabled=True)
    loud.start -= 5  # as if a second had passed, without waiting for one
    loud.add(5)
    loud.finish()
    err = capsys.readouterr().err
    assert err.count("reading HEAD: 5 of 10 files") == 1
