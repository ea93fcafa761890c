"""diff and verify agree by construction: every row of ``diff`` comes from the model's change list,
and each rule the issue found applied by one and not the other is now applied by both (core.model)."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jobstate.allocation.retirement import retire
from jobstate.errors import JobstateError
from jobstate.paid.approval import approve, complete
from jobstate.paid.step import paid_step
from jobstate.store.store import Store

from .conftest import FIXED, git, run_cli, stable_cmd
from .review_history import Interrupted, stepping_clock
from .test_model import A34, E34, _alarms, _append, _build, _replace


@pytest.fixture(scope="module")
def _built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    top = tmp_path_factory.mktemp("agreement")
    gitconfig = top / "gitconfig"
    gitconfig.write_text("[init]\n\tdefaultBranch = main\n[user]\n\tname = Test\n\temail = test@example.invalid\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GIT_CONFIG_GLOBAL", str(gitconfig))
        mp.setenv("GIT_CONFIG_NOSYSTEM", "1")
        return _build(top / "pipeline")


@pytest.fixture
def pipeline(_built: Path, tmp_path: Path) -> Path:
    """test_model's pipeline history: 2026-W34-0 approved, 2026-W34-1 with a step accepted at the vendor."""
    return Path(shutil.copytree(_built, tmp_path / "pipeline", symlinks=True))


def _verify_against(repo: Path, base: str) -> str:
    proof = run_cli("verify", "--rev", "HEAD", "--against", base, "--strict", cwd=repo)
    assert proof.returncode == 1, proof.stdout
    return proof.stdout


def test_a_hand_rewritten_cost_is_the_alarm_only_never_also_an_added_cost(pipeline: Path) -> None:
    _replace(pipeline, f"{E34}/costs.yaml", "'2.00'", "'1.40'")
    git(pipeline, "commit", "-qam", "a cheaper charge, by hand")
    proc = run_cli("diff", "base", "--format", "json", cwd=pipeline)
    found = json.loads(proc.stdout)
    assert [a["kind"] for a in found["alarms"]] == ["cost entry rewritten"]
    assert found["costs"] == []
    assert found["cost_totals"] == {}
    assert "Cost entries added" not in run_cli("diff", "base", cwd=pipeline).stdout
    assert "cost entry rewritten" in _verify_against(pipeline, "base")


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        ("a field added", "note"),
        ("an extra field changed", "generator"),
        ("a field removed, read as before", "content"),
    ],
)
def test_any_change_to_a_committed_episode_yaml_is_a_rewrite_for_diff_verify_and_the_writers(
    pipeline: Path, edit: str, field: str
) -> None:
    episode = pipeline / E34 / "episode.yaml"
    text = episode.read_text()
    if field == "note":
        text += 'note: "by hand"\n'
    elif field == "generator":
        text = text.rstrip("\n") + "\ngenerator: v1\n"
        episode.write_text(text)
        git(pipeline, "commit", "-qam", "the extra field, by hand")
        git(pipeline, "tag", "-f", "base")
        text = text.replace("generator: v1", "generator: v2")
    else:  # the reader derives week_id: only the bytes differ
        assert "week_id: 2026-W34\n" in text
        text = text.replace("week_id: 2026-W34\n", "")
    episode.write_text(text)
    git(pipeline, "commit", "-qam", edit)
    assert [(a["kind"], a["episode"]) for a in _alarms(pipeline)] == [("episode rewritten", "2026-W34-0")]
    assert f"episode rewritten: {E34}/episode.yaml {field}:" in _verify_against(pipeline, "base")
    proc = run_cli("complete", "--episode", "2026-W34-0", cwd=pipeline)
    assert proc.returncode == 7, proc.stderr
    assert "episode rewritten" in proc.stderr


def test_a_probe_command_a_pull_request_sets_is_shown_and_an_alarm_in_diff_and_verify(pipeline: Path) -> None:
    """The probe is a command jobstate runs where the vendor's credentials are: never changed unseen."""
    _append(pipeline / "jobstate.yaml", "steps:\n  generate: {probe: ./probe-vendor --by-key, probe_timeout: 30}\n")
    git(pipeline, "commit", "-qam", "a probe")
    found = json.loads(run_cli("diff", "base", "--format", "json", cwd=pipeline).stdout)
    assert {"setting": "steps.generate.probe", "old": None, "new": "./probe-vendor --by-key"} in found["settings"]
    assert [(a["kind"], a["episode"]) for a in found["alarms"]] == [("probe command changed", "-")]
    assert "steps.generate.probe" in run_cli("diff", "base", cwd=pipeline).stdout
    assert "probe command changed: jobstate.yaml steps.generate.probe: (none) -> './probe-vendor --by-key'" in (
        _verify_against(pipeline, "base")
    )


@pytest.mark.parametrize(
    ("rel", "rule"),
    [
        ("state/2026/2026-W34/junk/f", "state/ holds only episode directories"),
        (f"{E34}/notes.txt", "file is not a jobstate record nor a recorded artifact"),
        ("history/notes/f.yaml", "history/ holds only <year>/<period>/<episode_id>.yaml files and retired/"),
    ],
)
def test_a_file_jobstate_never_writes_is_flagged_by_diff_as_by_verify(pipeline: Path, rel: str, rule: str) -> None:
    (pipeline / rel).parent.mkdir(parents=True, exist_ok=True)
    (pipeline / rel).write_text("x\n")
    git(pipeline, "add", rel)
    git(pipeline, "commit", "-qm", "a file by hand")
    alarms = _alarms(pipeline)
    assert [a["kind"] for a in alarms] == ["unrecorded file" if rel.endswith("notes.txt") else "record refused"]
    assert alarms[0]["message"].startswith(f"{rel}: {rule}")
    if rel.endswith("notes.txt"):  # readable: an alarm once, never an unreadable file (nor in report)
        assert run_cli("diff", "base", cwd=pipeline).stdout.count(rel) == 1
        assert rel not in run_cli("report", cwd=pipeline).stdout
    assert f"{rel}: " in _verify_against(pipeline, "base")


def test_a_vendor_task_another_episode_recorded_is_one_alarm_in_diff_and_verify(pipeline: Path) -> None:
    """An attempt copied (or forged) into another episode: the next run would resume that task and record
    its charge twice."""
    assert run_cli("allocate", "--key", "copy", "--week", "2026-W34", cwd=pipeline).stdout.strip() == "2026-W34-2"
    git(pipeline, "tag", "-f", "base")
    copy = pipeline / "state/2026/2026-W34/2026-W34-2/submissions.yaml"
    copy.write_text((pipeline / A34 / "submissions.yaml").read_text())
    git(pipeline, "add", str(copy))
    git(pipeline, "commit", "-qm", "an attempt, by hand")
    alarms = _alarms(pipeline)
    assert [(a["kind"], a["episode"]) for a in alarms] == [("remote task claimed twice", "2026-W34-2")]
    assert "of 2026-W34-1" in alarms[0]["message"]
    assert f"remote task claimed twice: {alarms[0]['message']}" in _verify_against(pipeline, "base")
    assert "remote task claimed twice" in run_cli("verify", "--rev", "HEAD", cwd=pipeline).stdout


def test_diff_compares_a_new_history_files_artifacts_with_the_records(pipeline: Path) -> None:
    with Store(pipeline, now=lambda: FIXED.replace(day=22), lock_timeout=5) as store:
        complete(store, "2026-W34-0")
    history = pipeline / "history/2026/2026-W34/2026-W34-0.yaml"
    text = history.read_text()
    sha = text.split("sha256: ")[1].split("\n")[0]
    history.write_text(text.replace(sha, "0" * 64))
    git(pipeline, "commit", "-q", "--amend", "-am", "complete 2026-W34-0")
    assert [a["kind"] for a in _alarms(pipeline)] == ["history disagrees"]
    assert "must list the artifacts the records hold" in _verify_against(pipeline, "base")


def test_an_unknown_step_refuses_complete_approve_and_retire_with_one_exit_code(pipeline: Path) -> None:
    with Store(pipeline, now=stepping_clock(FIXED.replace(day=22)), lock_timeout=5) as store:
        approve(store, "2026-W34-0", by="editor", reject=True, reason="rework")
        with contextlib.suppress(Interrupted), paid_step(store, "2026-W34-0", "extra", max_cost="1.00 USD"):
            raise Interrupted  # the intent is committed, its acceptance never is: unknown
        refusals = []
        for action in (
            lambda: approve(store, "2026-W34-0", by="editor"),
            lambda: complete(store, "2026-W34-0"),
            lambda: retire(store, "2026-W34-0", by="ops", reason="gone"),
        ):
            with pytest.raises(JobstateError) as caught:
                action()
            refusals.append((caught.value.exit_code, "step extra is unknown" in str(caught.value)))
    assert refusals == [(6, True)] * 3


def test_allocate_and_verify_refuse_a_retired_key_by_the_same_rule(repo: Path) -> None:
    for key in ("k1", "k2"):
        assert run_cli("allocate", "--key", key, "--week", "2026-W32", cwd=repo).returncode == 0
    assert run_cli("retire", "2026-W32-1", "--by", "ops", "--reason", "gone", cwd=repo).returncode == 0
    rule = "allocation key 'k2' belongs to retired episode 2026-W32-1: a retired key is never handed out again"
    refused = run_cli("allocate", "--key", "k2", "--week", "2026-W32", cwd=repo)
    assert refused.returncode == 4
    assert rule in refused.stderr
    # the same key given by hand to a new episode: verify names the same rule
    text = (
        (repo / "state/2026/2026-W32/2026-W32-0/episode.yaml").read_text().replace("k1", "k2").replace("W32-0", "W32-7")
    )
    (repo / "state/2026/2026-W32/2026-W32-7").mkdir()
    (repo / "state/2026/2026-W32/2026-W32-7/episode.yaml").write_text(text.replace("sequence: 0", "sequence: 7"))
    git(repo, "tag", "retired")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "the retired key by hand")
    proc = run_cli("verify", "--rev", "HEAD", cwd=repo)
    assert proc.returncode == 1
    assert rule in proc.stdout
    # as a change, diff and verify --against name the one rule of keys (core.rules_state), as the same kind
    found = json.loads(run_cli("diff", "retired", "--format", "json", cwd=repo).stdout)
    assert [(a["kind"], a["episode"]) for a in found["alarms"]] == [("key moved", "2026-W32-7")]
    assert rule in found["alarms"][0]["message"]
    assert f"key moved: {found['alarms'][0]['message']}" in _verify_against(repo, "retired")


def test_list_and_report_give_an_orphaned_step_the_same_status(repo: Path, tmp_path: Path) -> None:
    assert run_cli("allocate", "--key", "k", "--week", "2026-W32", cwd=repo).returncode == 0
    started, go = tmp_path / "started", tmp_path / "go"
    script = (
        "import pathlib, time\n"
        f"pathlib.Path({str(started)!r}).write_text('x')\n"
        f"while not pathlib.Path({str(go)!r}).exists(): time.sleep(0.05)\n"
    )
    cmd = [sys.executable, "-m", "jobstate", "run", "--episode", "2026-W32-0", "--step", "slow", "--"]
    # no pipes: CMD inherits them and outlives jobstate
    proc = subprocess.Popen([*cmd, *stable_cmd(script)], cwd=repo, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not started.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert started.exists(), f"jobstate run did not start its command (exit {proc.poll()})"
        proc.kill()  # jobstate dies; its CMD lives on, holding the step lock: an orphaned step
        proc.wait(timeout=60)
        listed = run_cli("list", cwd=repo)
        assert listed.stdout.split("\t")[1] == "running", listed.stdout
        reported = json.loads(run_cli("report", "--format", "json", cwd=repo).stdout)
        assert [e["status"] for e in reported["episodes"]] == ["running"]
        assert reported["unknown_steps"] == []
    finally:
        go.write_text("go")
    deadline = time.monotonic() + 30
    while run_cli("list", cwd=repo).stdout.split("\t")[1] == "running" and time.monotonic() < deadline:
        time.sleep(0.1)
    # the CMD ended without jobstate: both now say unknown
    assert run_cli("list", cwd=repo).stdout.split("\t")[1] == "unknown"
    reported = json.loads(run_cli("report", "--format", "json", cwd=repo).stdout)
    assert [e["status"] for e in reported["episodes"]] == ["unknown"]


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        ("removed, the episode restored", "tombstone"),
        ("reason rewritten", "reason"),
        ("key rewritten", "allocation_key"),
    ],
)
def test_a_tombstone_removed_or_rewritten_is_one_alarm_in_diff_and_verify_against(
    repo: Path, edit: str, field: str
) -> None:
    assert run_cli("allocate", "--key", "k1", "--week", "2026-W32", cwd=repo).returncode == 0
    assert run_cli("retire", "2026-W32-0", "--by", "ops", "--reason", "gone", cwd=repo).returncode == 0
    git(repo, "tag", "retired")
    stone = repo / "history/retired/2026/2026-W32/2026-W32-0.yaml"
    if field == "tombstone":  # un-retired: the next run of k1 would be answered with it, and pay again
        git(repo, "rm", "-q", str(stone))
        git(repo, "checkout", "retired~1", "--", "state/2026/2026-W32/2026-W32-0")
    else:
        old, new = {"reason": ("gone", "typo"), "allocation_key": ("k1", "k1-old")}[field]
        stone.write_text(stone.read_text().replace(f": {old}\n", f": {new}\n"))
    git(repo, "commit", "-qam", f"the tombstone {edit}")
    proc = run_cli("diff", "retired", "--strict", "--format", "json", cwd=repo)
    assert proc.returncode == 1, proc.stderr
    alarms = [a for a in json.loads(proc.stdout)["alarms"] if a["kind"] == "tombstone rewritten"]
    assert [a["episode"] for a in alarms] == ["2026-W32-0"]
    assert f"history/retired/2026/2026-W32/2026-W32-0.yaml {field}:" in alarms[0]["message"]
    assert f"tombstone rewritten: {alarms[0]['message']}" in _verify_against(repo, "retired")
