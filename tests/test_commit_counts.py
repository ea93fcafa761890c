"""The commits and git processes of each command (issue 27): the README's sentence about commits, tested.

Commits are counted with ``git rev-list --count``; git processes by the audit hook of tests/killpoints.py
(every ``subprocess.Popen`` the jobstate process makes, in a run that is not killed). The process counts are
upper bounds: a count, never a time.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import pytest

import jobstate
from jobstate.core.layout import episode_dir
from jobstate_demo.vendor_sim import VendorSimulator

from .conftest import git, status, vendor_step
from .killpoints import run_hooked

EID, EID2, STEP = "2026-W32-0", "2026-W32-1", "generate"
NEW_ALLOCATION_GIT = 4  # at most (issue 27); 7 before it
PAID_STEP_GIT = 12  # at most (issue 27); 29 before it
DECISION_GIT = 5  # at most: the refusal check, the guard's listing, identity, update-ref, update-index


def _commits(repo: Path) -> int:
    return int(git(repo, "rev-list", "--count", "HEAD"))


def _counted(repo: Path, tmp_path: Path, *args: str, ok: int = 0) -> tuple[int, list[str]]:
    """Run ``jobstate ARGS`` in a process of its own: (commits it made, the git processes it started)."""
    before = _commits(repo)
    out = run_hooked(list(args), repo, tmp_path / "ops.json", 0)
    assert out.code == ok, out.stderr
    spawned = [op for op in out.ops if op.startswith(("popen git ", "popen sh -c git "))]
    return _commits(repo) - before, spawned


def _run(url: str) -> list[str]:
    return ["run", "--episode", EID, "--step", STEP, "--", *vendor_step(url, "generate", "--artifact", "final.txt")]


@pytest.mark.timeout(120)  # about 15 jobstate processes, each started with the audit hook
def test_each_command_of_the_walk_through_makes_the_commits_the_readme_says(
    repo: Path, tmp_path: Path, vendor: VendorSimulator
) -> None:
    allocate = ["allocate", "--key", "scheduled-run:2026-08-07", "--date", "2026-08-07"]
    commits, spawned = _counted(repo, tmp_path, *allocate)
    assert commits == 1
    assert len(spawned) <= NEW_ALLOCATION_GIT, spawned
    assert _counted(repo, tmp_path, *allocate) == (0, [])  # a retry: no commit, no git process

    commits, spawned = _counted(repo, tmp_path, *_run(vendor.url))
    # the intent, the acceptance, and one commit with the charge, the artifact and the completion
    assert commits == 3
    assert len(spawned) <= PAID_STEP_GIT, spawned
    messages = git(repo, "log", "-3", "--format=%s").splitlines()
    assert messages[1].startswith(f"accept {EID} {STEP}")
    assert messages[2].startswith(f"intent {EID} {STEP}")
    assert messages[0].startswith(f"done {EID} {STEP}")
    assert "12.40 USD" in messages[0]
    assert "final.txt" in messages[0]
    assert git(repo, "show", "--name-only", "--format=", "HEAD").split() == [
        f"{episode_dir(EID)}/artifacts.yaml",
        f"{episode_dir(EID)}/costs.yaml",
        f"{episode_dir(EID)}/final.txt",
        f"{episode_dir(EID)}/submissions.yaml",
    ]
    assert _counted(repo, tmp_path, *_run(vendor.url))[0] == 0  # completed: a retry pays and commits nothing
    never_allocated = ["run", "--episode", "2026-W32-7", "--step", STEP, "--", "true"]
    assert _counted(repo, tmp_path, *never_allocated, ok=5)[0] == 0
    for decision in (["approve", "--episode", EID, "--by", "editor"], ["complete", "--episode", EID]):
        commits, spawned = _counted(repo, tmp_path, *decision)
        assert commits == 1
        assert len(spawned) <= DECISION_GIT, spawned
        assert _counted(repo, tmp_path, *decision)[0] == 0  # already recorded
    for read_only in (["list"], ["show", EID, "--records"], ["verify"], ["diff", "HEAD~1"], ["report"]):
        assert _counted(repo, tmp_path, *read_only)[0] == 0
    assert status(repo) == ""


def test_an_unknown_step_resolved_and_resumed_makes_one_commit_per_decision(
    repo: Path, tmp_path: Path, vendor: VendorSimulator
) -> None:
    git(repo, "commit", "--allow-empty", "-qm", "base")
    for key in ("k0", "k1"):
        _counted(repo, tmp_path, "allocate", "--key", key, "--week", "2026-W32")
    run = ["run", "--episode", EID2, "--step", STEP, "--", *vendor_step(vendor.url, "generate")]
    vendor.arm_fault("drop_after_accept")
    assert _counted(repo, tmp_path, *run, ok=9)[0] == 1  # the intent; nobody knows what the vendor did
    task = vendor.charges()[0]["task_id"]
    resolve = ["resolve", "--episode", EID2, "--step", STEP, "--accepted", task, "--by", "ops", "--reason", "seen"]
    commits, spawned = _counted(repo, tmp_path, *resolve)
    assert commits == 1
    assert len(spawned) <= DECISION_GIT, spawned
    commits, spawned = _counted(repo, tmp_path, *run)  # resumes the accepted task: charge and end, one commit
    assert commits == 1
    assert len(spawned) <= PAID_STEP_GIT, spawned


def test_a_failing_command_still_gets_its_charge_recorded_in_the_closing_commit(
    repo: Path, tmp_path: Path, vendor: VendorSimulator
) -> None:
    _counted(repo, tmp_path, "allocate", "--key", "k0", "--week", "2026-W32")
    script = tmp_path / "fails.py"
    script.write_text(
        "import json, os, sys\n"
        "report = {'remote_ref': 'task-9', 'cost': {'amount': '3.10', 'currency': 'USD'}}\n"
        "open(os.environ['JOBSTATE_RESULT'], 'w').write(json.dumps(report))\n"
        "sys.exit(4)\n"
    )
    run = ["run", "--episode", EID, "--step", STEP, "--", sys.executable, str(script)]
    assert _counted(repo, tmp_path, *run, ok=9)[0] == 3  # intent, acceptance, the charge (no completion)
    assert "3.10" in (repo / episode_dir(EID) / "costs.yaml").read_text()
    assert "completed" not in (repo / episode_dir(EID) / "submissions.yaml").read_text()


def _python_step(repo: Path, *, fail: bool) -> int:
    """A paid step through the Python API that reports two charges and an artifact; the commits it made."""
    with jobstate.open(repo) as store:
        episode = jobstate.allocate(store, "k1", jobstate.parse_period("2026-W33")).episode_id
        before = _commits(repo)
        with contextlib.suppress(RuntimeError), jobstate.paid_step(store, episode, STEP) as step:
            step.accepted("task-1")
            step.cost("1.50", "USD")
            step.cost("0.25", "USD", charge_id="extra")
            (step.output_dir / "out.txt").write_text("made\n")
            step.artifact("out.txt")
            if fail:
                raise RuntimeError("the vendor's download failed")
        return _commits(repo) - before


def test_the_python_api_commits_charges_and_artifacts_with_the_end(repo: Path) -> None:
    assert _python_step(repo, fail=False) == 3  # intent, acceptance, the close
    episode = repo / episode_dir("2026-W33-0")
    assert git(repo, "log", "-1", "--format=%s").startswith("done 2026-W33-0 generate attempt 1")
    assert (episode / "out.txt").read_text() == "made\n"
    assert "1.50" in (episode / "costs.yaml").read_text()
    assert "0.25" in (episode / "costs.yaml").read_text()
    assert status(repo) == ""


def test_a_body_that_raises_after_reporting_a_charge_still_gets_it_committed(repo: Path) -> None:
    assert _python_step(repo, fail=True) == 3  # intent, acceptance, the charges and artifact without the end
    episode = repo / episode_dir("2026-W33-0")
    assert git(repo, "log", "-1", "--format=%s").startswith("report 2026-W33-0 generate attempt 1")
    costs = (episode / "costs.yaml").read_text()
    assert "1.50" in costs
    assert "0.25" in costs
    assert (episode / "out.txt").read_text() == "made\n"
    assert "completed" not in (episode / "submissions.yaml").read_text()
    assert status(repo) == ""
