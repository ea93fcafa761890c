"""jobstate diff and report: golden text and markdown, alarms first, read-only, bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jobstate.main import main

from .conftest import git, run_cli
from .snapshots import tree_state

GOLDEN = Path(__file__).parent / "golden"


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def _golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("JOBSTATE_UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert text == path.read_text(), f"{name} differs; JOBSTATE_UPDATE_GOLDEN=1 rewrites it after review"


@pytest.mark.parametrize(("fmt", "suffix"), [("text", "txt"), ("markdown", "md")])
def test_diff_of_a_week_and_a_migration_matches_golden(
    history: Path, capsys: pytest.CaptureFixture[str], fmt: str, suffix: str
) -> None:
    code, out, err = _cli(capsys, "diff", "legacy", "HEAD", "--repo", str(history), "--format", fmt)
    assert code == 0, err
    _golden(f"diff.{suffix}", out)


@pytest.mark.parametrize(("fmt", "suffix"), [("text", "txt"), ("markdown", "md")])
def test_report_matches_golden_with_unknown_steps_first(
    history: Path, capsys: pytest.CaptureFixture[str], fmt: str, suffix: str
) -> None:
    code, out, err = _cli(capsys, "report", "--repo", str(history), "--format", fmt)
    assert code == 0, err
    _golden(f"report.{suffix}", out)
    assert out.index("Steps left unknown") < out.index("Periods")


def test_diff_json_has_every_change_and_the_migration_proof(history: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _cli(capsys, "diff", "legacy", "--repo", str(history), "--format", "json")
    assert code == 0, err
    data = json.loads(out)
    assert data["alarms"] == []
    assert [m["episode_id"] for m in data["migrations"]] == ["2026-W30-0", "2026-W31-0"]
    assert data["preserved"] is True
    assert data["cost_totals"] == {"USD": "16.35"}
    assert [d["status"] for d in data["decisions"]] == ["rejected", "approved"]
    assert data["completed"][0]["episode_id"] == "2026-W33-0"
    assert data["commit"] == git(history, "rev-parse", "HEAD").strip()


def test_report_period_range_limits_episodes_and_spend(history: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _cli(
        capsys, "report", "--repo", str(history), "--since", "2026-W31", "--until", "2026-W33", "--format", "json"
    )
    assert code == 0, err
    data = json.loads(out)
    assert [p["period_id"] for p in data["periods"]] == ["2026-W31", "2026-W33"]
    assert data["totals"] == {"USD": "31.85"}
    code, out, err = _cli(capsys, "report", "--repo", str(history), "--period", "2026-W34", "--format", "json")
    assert code == 0, err
    assert [e["status"] for e in json.loads(out)["episodes"]] == ["allocated"]


def test_changes_that_should_never_happen_come_first_and_loud(
    history: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    costs = history / "state/2026/2026-W33/2026-W33-0/costs.yaml"
    costs.write_text(costs.read_text().replace("'12.40'", "'1.40'"))
    hist = history / "history/2026/2026-W33/2026-W33-0.yaml"
    hist.write_text(hist.read_text().replace("status: completed", "status: completed\nnote: edited by hand"))
    git(history, "rm", "-rq", "state/2026/2026-W34/2026-W34-0")
    moved = history / "state/2026/2026-W33/2026-W33-1/episode.yaml"
    moved.write_text(moved.read_text().replace("manual-rerun:2026-08-15", "scheduled-run:2026-08-21"))
    git(history, "commit", "-qam", "hand edits")
    code, out, err = _cli(capsys, "diff", "HEAD~1", "--repo", str(history))
    assert code == 0, err
    assert out.splitlines()[3].split() == ["!!", "CHANGE", "EPISODE", "WHAT"]
    kinds = [line.removeprefix("  !! ").split("  ")[0] for line in out.splitlines()[4:9]]
    # the key of 2026-W33-1 changed, and it is the key the deleted 2026-W34-0 had: two rules broken
    assert out.splitlines()[2] == "!! Changes that should never happen (5):"
    assert kinds == ["episode deleted", "completed episode edited", "cost entry rewritten", "key moved", "key moved"]
    code, md, err = _cli(capsys, "diff", "HEAD~1", "--repo", str(history), "--format", "markdown", "--strict")
    assert code == 1, err
    assert md.split("\n")[2:4] == ["> [!CAUTION]", "> **Changes that should never happen (5)**"]
    assert "history/2026/2026-W33/2026-W33-0.yaml" in md
    assert "state/2026/2026-W33/2026-W33-0/costs.yaml" in md


def test_a_completed_attempt_marked_superseded_by_hand_is_loud(
    history: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # only jobstate resolve --supersede closes an attempt that way, with the operator's decision
    subs = history / "state/2026/2026-W33/2026-W33-1/submissions.yaml"
    subs.write_text(subs.read_text().replace("state: intent", "state: superseded", 1))
    git(history, "commit", "-qam", "closed by hand")
    code, out, err = _cli(capsys, "diff", "HEAD~1", "--repo", str(history), "--strict")
    assert code == 1, err
    assert "submission rewritten" in out
    assert "superseded without the operator's decision" in out
    code, _out, err = _cli(capsys, "show", "2026-W33-1", "--repo", str(history))
    assert code == 7
    assert "superseded without the operator's decision" in err


def test_diff_and_report_write_nothing(history: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = tree_state(history)
    out = tmp_path / "out"
    out.mkdir()
    for args in (
        ["diff", "legacy"],
        ["diff", "week-start", "HEAD", "--format", "markdown"],
        ["diff", "legacy", "--format", "json", "-o", str(out / "d.json")],
        ["report"],
        ["report", "--rev", "week-start", "--format", "markdown"],
        ["report", "--format", "html", "-o", str(out / "r.html")],
        ["report", "--format", "json", "--period", "2026-W33"],
    ):
        code, _out, err = _cli(capsys, *args, "--repo", str(history))
        assert code == 0, err
    assert tree_state(history) == before
    assert json.loads((out / "d.json").read_text())["base"] == "legacy"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["diff", "no-such-rev"], "unknown revision 'no-such-rev'"),
        (["diff", "legacy", "nope"], "unknown revision 'nope'"),
        (["diff", "legacy", "--format", "html"], "invalid choice"),
        (["diff", "legacy", "--format", "markdown", "--max-chars", "100"], "from 2000 to"),
        (["report", "--period", "2026-W33", "--since", "2026-W30"], "not both"),
        (["report", "--since", "2026-W34", "--until", "2026-W30"], "comes after"),
        (["report", "--since", "2026-W30", "--until", "2026-08"], "different kinds"),
        (["report", "--period", "2026-W99"], "2026-W99"),
        (["report", "--rev", "nope"], "unknown revision 'nope'"),
        (["report", "-o", "/nonexistent-dir/x.txt"], "cannot write /nonexistent-dir/x.txt"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(
    history: Path, capsys: pytest.CaptureFixture[str], args: list[str], says: str
) -> None:
    before = tree_state(history)
    code, out, err = _cli(capsys, *args, "--repo", str(history))
    assert code == 2, err
    assert says in err
    assert len(err.strip().splitlines()) == 1
    assert out == ""
    assert tree_state(history) == before


# the whole demo in a subprocess (its own 300 s limit): a minute or more on a loaded machine, and about
# 12 CPU seconds, more than any other fast test does (make test-slow runs it)
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_demo_ends_with_the_diff_of_its_week_and_a_report(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "jobstate_demo.demo", str(tmp_path / "demo")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # issue 32: both injected faults are settled by the probe on the scheduler's retry, no person resolves
    assert "settled by probe: accepted as task-1" in proc.stdout
    assert "step rework of 2026-W33-1 attempt 1 settled by probe: not submitted" in proc.stdout
    assert "$ jobstate resolve" not in proc.stdout
    tail = proc.stdout[proc.stdout.index("== review: what the week changed") :]
    allocated = tail[tail.index("Episodes allocated (4):\n") :].splitlines()
    assert allocated[1].split() == ["EPISODE", "PERIOD", "KEY"]
    assert allocated[2].split() == ["2026-W33-1", "2026-W33", "weekly-episode:2026-08-14"]
    assert "Approvals and rejections (2):" in tail
    assert "jobstate report HEAD: 13 episodes, spend 41.15 USD" in tail


def test_verify_of_the_work_tree_flags_uncommitted_settings_as_it_flags_uncommitted_state(repo: Path) -> None:
    """A cap raised in jobstate.yaml and not committed must not make an over-budget state pass verify."""
    with (repo / "jobstate.yaml").open("a") as fh:
        fh.write("# edited, not committed\n")
    proc = run_cli("verify", cwd=repo)
    assert proc.returncode == 1, proc.stdout
    assert "jobstate.yaml: error: uncommitted change (M): commit it or remove it" in proc.stdout
    assert run_cli("verify", "--uncommitted-ok", cwd=repo).returncode == 0
