"""The probe: a step left unknown is settled by asking the vendor, a person only when the vendor cannot say."""

from __future__ import annotations

import json
import shlex
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import jobstate
from jobstate.core.attempts import attempt_from_yaml_dict
from jobstate.core.episode_records import EpisodeRecords
from jobstate.core.layout import episode_dir
from jobstate.core.probe import ACCEPTED, NOT_SUBMITTED, UNKNOWN, evidence_problem, judge_answer
from jobstate.core.rules_decisions import decisions_made
from jobstate.store.records import submissions
from jobstate.store.store import Store
from jobstate_demo.vendor_client import lookup, submit
from jobstate_demo.vendor_sim import VendorSimulator

from .conftest import git, run_cli, stable_cmd, status, vendor_step

WEEK = "2026-W40"
INTENT = "2026-10-01T10:00:00Z"


def _answer(obj: object) -> bytes:
    return json.dumps(obj).encode("utf-8")


# --------------------------------------------------------------------------- the verdict (pure)


def test_found_true_with_a_reference_is_accepted_and_keeps_the_cost_as_evidence() -> None:
    verdict = judge_answer(
        _answer({"found": True, "remote_ref": "task-7", "cost": {"amount": "12.40", "currency": "USD"}}), INTENT
    )
    assert verdict.decision == ACCEPTED
    assert verdict.remote_ref == "task-7"
    assert verdict.answer == {"found": True, "remote_ref": "task-7", "cost": {"amount": "12.40", "currency": "USD"}}


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        ({"found": True}, "without a usable remote_ref"),
        ({"found": True, "remote_ref": ""}, "without a usable remote_ref"),
        ({"found": True, "remote_ref": "t", "cost": {"amount": 12.4, "currency": "USD"}}, "malformed cost"),
        ({"found": False}, "searched_until"),
        ({"found": False, "searched_until": "2026-10-01T11:00:00"}, "searched_until"),  # no zone: hours off
        ({"found": False, "searched_until": "yesterday"}, "searched_until"),
        ({"found": False, "searched_until": "2026-10-01T09:00:00Z"}, "not past this attempt's intent"),
        ({"found": False, "searched_until": INTENT}, "not past this attempt's intent"),  # the intent's own second
        ({"found": None, "why": "index rebuilding"}, "cannot say: index rebuilding"),
        ({"found": "yes"}, '"found" must be'),
        ({"remote_ref": "t"}, 'with "found"'),
        ([1, 2], 'with "found"'),
    ],
)
def test_anything_but_proof_leaves_the_step_unknown_with_a_reason(answer: object, why: str) -> None:
    verdict = judge_answer(_answer(answer), INTENT)
    assert verdict.decision == UNKNOWN
    assert why in verdict.why


def test_not_found_proves_not_submitted_only_past_the_intent() -> None:
    verdict = judge_answer(_answer({"found": False, "searched_until": "2026-10-01T10:00:01Z"}), INTENT)
    assert verdict.decision == NOT_SUBMITTED
    assert judge_answer(_answer({"found": False, "searched_until": "2026-10-01T12:00:01+02:00"}), INTENT).decision == (
        NOT_SUBMITTED
    )


@pytest.mark.parametrize("raw", [None, b"", b"{", b"\xff\xfe", b" " * (64 * 1024 + 1)])
def test_no_answer_a_torn_one_or_an_oversized_one_proves_nothing(raw: bytes | None) -> None:
    assert judge_answer(raw, INTENT).decision == UNKNOWN


@pytest.mark.parametrize(
    ("resolution", "problem"),
    [
        ({"decision": "accepted", "by": "jobstate-probe", "at": INTENT}, "without its evidence"),
        (
            {"decision": "accepted", "by": "jobstate-probe", "probe": {"command": "x", "answer": {}}},
            "fingerprint",
        ),
        (
            {
                "decision": "accepted",
                "by": "jobstate-probe",
                "probe": {"command": "sha256:" + "a" * 64, "answer": {"found": True, "remote_ref": "other"}},
            },
            "does not say so",
        ),
        (
            {
                "decision": "not-submitted",
                "by": "jobstate-probe",
                "probe": {"command": "sha256:" + "a" * 64, "answer": {"found": False, "searched_until": INTENT}},
            },
            "does not prove it",
        ),
        ({"decision": "accepted", "by": "ops", "probe": {}}, "not by jobstate-probe"),
    ],
)
def test_a_probe_settlement_must_carry_evidence_that_says_what_it_decided(
    resolution: dict[str, object], problem: str
) -> None:
    found = evidence_problem(resolution, "task-1", INTENT)
    assert found is not None
    assert problem in found


# --------------------------------------------------------------------------- from the command line


def _probe_line(url: str) -> str:
    return shlex.join([sys.executable, "-m", "jobstate_demo.vendor_sim", "probe", "--url", url])


def _allocate(repo: Path, key: str = "weekly") -> str:
    return run_cli("allocate", "--key", key, "--week", WEEK, cwd=repo).stdout.strip()


def _unknown_after_drop(repo: Path, vendor: VendorSimulator) -> str:
    """The vendor accepts and charges, then drops the connection: the step is unknown, the task exists."""
    eid = _allocate(repo)
    vendor.arm_fault("drop_after_accept")
    assert (
        run_cli("run", "--episode", eid, "--step", "generate", "--", *vendor_step(vendor.url), cwd=repo).returncode == 9
    )
    assert len(vendor.charges()) == 1
    return eid


def _unknown_never_sent(repo: Path) -> tuple[str, list[str]]:
    """A command killed before it sent anything (exit 75, no report): unknown, and the vendor has nothing."""
    eid = _allocate(repo)
    cmd = stable_cmd("import sys; sys.exit(75)\n")
    assert run_cli("run", "--episode", eid, "--step", "generate", "--", *cmd, cwd=repo).returncode == 9
    return eid, cmd


def _last(repo: Path, eid: str) -> dict[str, object]:
    with Store(repo) as store:
        return dict(submissions(store, eid)["generate"][-1].fields)


def _past_the_intent_second() -> None:
    # intents are recorded in whole seconds: a "not found" proves something only for a later second
    time.sleep(2.05 - (time.time() % 1))


def test_a_killed_run_the_vendor_accepted_resumes_on_the_next_retry_with_no_person(
    repo: Path, vendor: VendorSimulator
) -> None:
    eid = _unknown_after_drop(repo, vendor)
    retry = run_cli(
        "run", "--episode", eid, "--step", "generate", "--probe", _probe_line(vendor.url), "--",
        *vendor_step(vendor.url), cwd=repo,
    )  # fmt: skip
    assert retry.returncode == 0, retry.stderr
    assert "settled by probe: accepted as task-1" in retry.stderr
    assert len(vendor.charges()) == 1, "the probe or the resumed run paid again"
    last = _last(repo, eid)
    assert last["state"] == "completed"
    assert last["remote_ref"] == "task-1"
    resolution = last["resolution"]
    assert isinstance(resolution, dict)
    assert resolution["by"] == "jobstate-probe"
    assert resolution["probe"]["answer"] == {
        "found": True,
        "remote_ref": "task-1",
        "cost": {"amount": "12.40", "currency": "USD"},
    }
    settling = git(repo, "log", "--format=%H", "--grep=accepted by jobstate-probe").split()
    assert len(settling) == 1, "the settlement is one commit of its own"
    assert "answer:" in git(repo, "show", settling[0]), "the evidence is in the commit that settles the step"
    assert status(repo) == ""
    diff = run_cli("diff", f"{settling[0]}~1", settling[0], cwd=repo)
    assert "settled by probe as accepted" in diff.stdout
    assert '"remote_ref": "task-1"' in diff.stdout
    assert run_cli("diff", "--strict", f"{settling[0]}~1", "HEAD", cwd=repo).returncode == 0
    assert run_cli("verify", "--strict", cwd=repo).returncode == 0


def test_a_request_that_never_arrived_starts_attempt_two_with_the_evidence(repo: Path, vendor: VendorSimulator) -> None:
    eid, _ = _unknown_never_sent(repo)
    _past_the_intent_second()
    # the same command (the same request), which this time reaches the vendor
    cmd = stable_cmd(
        f"import sys\nfrom jobstate_demo.vendor_sim import main\nsys.exit(main({vendor_step(vendor.url)[3:]!r}))\n"
    )
    retry = run_cli(
        "run", "--episode", eid, "--step", "generate", "--probe", _probe_line(vendor.url), "--", *cmd, cwd=repo
    )
    assert retry.returncode == 0, retry.stderr
    with Store(repo) as store:
        attempts = submissions(store, eid)["generate"]
    assert [a.state.value for a in attempts] == ["not-submitted", "completed"]
    first = attempts[0].resolution
    assert first is not None
    assert first["by"] == "jobstate-probe"
    assert first["probe"]["answer"]["found"] is False
    assert attempts[0].idempotency_key != attempts[1].idempotency_key
    assert len(vendor.charges()) == 1


def test_a_lagging_index_leaves_the_step_unknown_and_writes_nothing(repo: Path, vendor: VendorSimulator) -> None:
    eid, cmd = _unknown_never_sent(repo)
    _past_the_intent_second()
    vendor.arm_fault("lagging_index", delay=600)
    head = git(repo, "rev-parse", "HEAD")
    retry = run_cli(
        "run", "--episode", eid, "--step", "generate", "--probe", _probe_line(vendor.url), "--", *cmd, cwd=repo
    )
    assert retry.returncode == 6, retry.stderr
    assert "the probe could not settle it" in retry.stderr
    assert "not past this attempt's intent" in retry.stderr
    assert git(repo, "rev-parse", "HEAD") == head
    assert _last(repo, eid)["state"] == "intent"
    assert vendor.charges() == []


def test_the_sweep_settles_every_unknown_step_and_exits_6_while_one_stays_unknown(
    repo: Path, vendor: VendorSimulator
) -> None:
    accepted = _unknown_after_drop(repo, vendor)
    lost = _allocate(repo, "other")
    cmd = stable_cmd("import sys; sys.exit(75)\n")
    assert run_cli("run", "--episode", lost, "--step", "generate", "--", *cmd, cwd=repo).returncode == 9
    vendor.arm_fault("lagging_index", delay=600)
    first = run_cli("probe", "--probe", _probe_line(vendor.url), "--json", cwd=repo, process=True)
    assert first.returncode == 6, first.stderr
    steps = {s["episode"]: s for s in json.loads(first.stdout)["steps"]}
    assert steps[accepted]["settled"] is False  # the lag hides the task too: unknown, never "not found"
    assert steps[lost]["decision"] == "unknown"
    vendor.clear_faults()
    _past_the_intent_second()
    second = run_cli("probe", "--probe", _probe_line(vendor.url), cwd=repo, process=True)
    assert second.returncode == 0, second.stderr
    assert f"{accepted} attempt 1 settled by probe: accepted as task-1" in second.stdout
    assert f"{lost} attempt 1 settled by probe: not submitted" in second.stdout
    again = run_cli("probe", "--probe", _probe_line(vendor.url), cwd=repo, process=True)
    assert again.returncode == 0
    assert again.stdout == ""
    assert "no unknown step" in again.stderr


def test_the_probe_declared_in_jobstate_yaml_is_used_by_resolve_probe(repo: Path, vendor: VendorSimulator) -> None:
    eid = _unknown_after_drop(repo, vendor)
    config = repo / "jobstate.yaml"
    probe = json.dumps([sys.executable, "-m", "jobstate_demo.vendor_sim", "probe", "--url", vendor.url])
    config.write_text(config.read_text() + f"steps:\n  generate:\n    probe: {probe}\n    probe_timeout: 30\n")
    git(repo, "commit", "-qam", "declare the probe")
    done = run_cli("resolve", "--episode", eid, "--step", "generate", "--probe", cwd=repo)
    assert done.returncode == 0, done.stderr
    assert "will resume remote task task-1" in done.stdout
    assert _last(repo, eid)["state"] == "accepted"
    again = run_cli("resolve", "--episode", eid, "--step", "generate", "--probe", cwd=repo)
    assert again.returncode == 2
    assert "is not unknown" in again.stderr


def test_a_probe_past_its_deadline_is_ended_and_settles_nothing(repo: Path, tmp_path: Path) -> None:
    eid, _ = _unknown_never_sent(repo)
    marker = tmp_path / "still-running"
    child = tmp_path / "child.py"
    child.write_text(f"import pathlib, time\ntime.sleep(3)\npathlib.Path({str(marker)!r}).touch()\n")
    script = tmp_path / "slow_probe.py"
    # a child of the probe: the deadline ends the probe's whole process group
    script.write_text(
        f"import subprocess, sys, time\nsubprocess.Popen([sys.executable, {str(child)!r}])\ntime.sleep(30)\n"
    )
    started = time.monotonic()
    done = run_cli(
        "resolve", "--episode", eid, "--step", "generate", "--probe", f"{sys.executable} {script}",
        "--probe-timeout", "0.5", cwd=repo,
    )  # fmt: skip
    assert done.returncode == 6, done.stderr
    assert "did not answer within 0.5 s" in done.stderr
    assert time.monotonic() - started < 20
    time.sleep(3.5)
    assert not marker.exists(), "the probe's own child outlived its deadline"
    assert _last(repo, eid)["state"] == "intent"


@pytest.mark.parametrize(
    ("script", "why"),
    [
        ("import sys; sys.exit(3)", "the probe exited with 3"),
        ("import os; open(os.environ['JOBSTATE_PROBE_RESULT'], 'w').write('{\"found\": tru')", "not one JSON object"),
        ("pass", "wrote no answer"),
        (
            "import os, json; open(os.environ['JOBSTATE_PROBE_RESULT'], 'w').write("
            "json.dumps({'found': None, 'why': 'index \\x1b[31mdown'}))",
            "cannot say: index \\x1b[31mdown",
        ),
    ],
)
def test_a_crashing_or_malformed_probe_leaves_the_step_unknown_with_its_reason(
    repo: Path, tmp_path: Path, script: str, why: str
) -> None:
    eid, _ = _unknown_never_sent(repo)
    path = tmp_path / "probe.py"
    path.write_text(script + "\n")
    head = git(repo, "rev-parse", "HEAD")
    done = run_cli("probe", "--probe", f"{sys.executable} {path}", cwd=repo, process=True)
    assert done.returncode == 6, done.stderr
    assert why in done.stdout, done.stdout
    assert "\x1b" not in done.stdout + done.stderr, "a probe's text reaches the terminal escaped"
    assert git(repo, "rev-parse", "HEAD") == head
    assert _last(repo, eid)["state"] == "intent"


def test_a_probe_that_says_not_found_while_the_result_file_names_a_task_is_refused(repo: Path, tmp_path: Path) -> None:
    eid, _ = _unknown_never_sent(repo)
    # what an orphaned CMD, outliving a killed jobstate, writes on its way out: the vendor accepted task-9
    result = repo / ".jobstate" / "results" / f"{eid}.generate.1.json"
    result.write_text(json.dumps({"remote_ref": "task-9"}) + "\n")
    liar = tmp_path / "liar.py"
    liar.write_text(
        "import json, os\n"
        "open(os.environ['JOBSTATE_PROBE_RESULT'], 'w').write(json.dumps("
        "{'found': False, 'searched_until': '2999-01-01T00:00:00Z'}))\n"
    )
    done = run_cli("probe", "--probe", f"{sys.executable} {liar}", cwd=repo, process=True)
    assert done.returncode == 6, done.stderr
    assert "accepted remote task task-9" in done.stdout
    assert _last(repo, eid)["state"] == "intent"


def test_run_refuses_its_own_command_as_the_probe(repo: Path, vendor: VendorSimulator) -> None:
    eid = _allocate(repo)
    cmd = vendor_step(vendor.url)
    done = run_cli("run", "--episode", eid, "--step", "generate", "--probe", shlex.join(cmd), "--", *cmd, cwd=repo)
    assert done.returncode == 2
    assert "never the step's command" in done.stderr
    assert vendor.charges() == []


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "soon", "3601"])
def test_probe_timeout_option_takes_seconds_above_0_up_to_an_hour(repo: Path, value: str) -> None:
    done = run_cli("probe", "--probe", "true", "--probe-timeout", value, cwd=repo)
    assert done.returncode == 2, done.stderr
    assert "--probe-timeout" in done.stderr


@pytest.mark.parametrize(
    "setting",
    [
        "steps: {generate: {probe_timeout: 0}}",
        "steps: {generate: {probe_timeout: -1}}",
        "steps: {generate: {probe_timeout: .nan}}",
        "steps: {generate: {probe_timeout: soon}}",
        "steps: {generate: {probe: []}}",
        "steps: {generate: {probe: 5}}",
        "steps: {generate: {probe: ./p, retries: 3}}",
        "steps: {Bad/Step: {probe: ./p}}",
        "steps: [generate]",
    ],
)
def test_a_malformed_step_setting_is_refused_and_nothing_runs(repo: Path, setting: str) -> None:
    (repo / "jobstate.yaml").write_text(setting + "\n")
    git(repo, "commit", "-qam", "settings")
    done = run_cli("probe", cwd=repo)
    assert done.returncode == 7, done.stderr
    assert "jobstate.yaml" in done.stderr


def test_resolve_probe_takes_no_person(repo: Path) -> None:
    done = run_cli(
        "resolve", "--episode", f"{WEEK}-0", "--step", "generate", "--probe", "true", "--by", "ops", cwd=repo
    )
    assert done.returncode == 2
    assert "leave out --by" in done.stderr


def test_a_hand_written_probe_settlement_without_evidence_is_flagged_by_verify_and_diff(
    repo: Path, vendor: VendorSimulator
) -> None:
    eid = _unknown_after_drop(repo, vendor)
    base = git(repo, "rev-parse", "HEAD").strip()
    path = repo / episode_dir(eid) / "submissions.yaml"
    text = path.read_text()
    text = text.replace("    state: intent\n", "    state: accepted\n    remote_ref: task-1\n")
    text += "    resolution:\n      decision: accepted\n      by: jobstate-probe\n      at: '2026-10-01T10:00:00Z'\n"
    path.write_text(text)
    git(repo, "commit", "-qam", "settled by probe (not really)")
    verify = run_cli("verify", "--strict", "--against", base, cwd=repo)
    assert verify.returncode == 1
    assert "settled by probe without its evidence" in verify.stdout + verify.stderr
    diff = run_cli("diff", "--strict", base, "HEAD", cwd=repo)
    assert diff.returncode == 1, diff.stdout
    run = run_cli("run", "--episode", eid, "--step", "generate", "--", *vendor_step(vendor.url), cwd=repo)
    assert run.returncode == 7, "a paid step refuses the unreadable record"
    assert len(vendor.charges()) == 1


def test_the_demo_vendor_lookup_is_read_only(vendor: VendorSimulator) -> None:
    assert lookup(vendor.url, "k")["tasks"] == []
    submit(vendor.url, {"kind": "generate"}, "k")
    found = lookup(vendor.url, "k")
    tasks = found["tasks"]
    assert isinstance(tasks, list)
    assert [t["task_id"] for t in tasks] == ["task-1"]
    until = datetime.fromisoformat(str(found["indexed_until"]).replace("Z", "+00:00"))
    assert abs(until - datetime.now(UTC)) < timedelta(seconds=5)
    assert len(vendor.charges()) == 1


def test_a_probe_settlement_needs_no_persons_signature_but_an_operators_resolution_does() -> None:
    intent = {"attempt": 1, "state": "intent", "idempotency_key": "k", "started_at": INTENT}
    evidence = {"command": "sha256:" + "a" * 64, "answer": {"found": True, "remote_ref": "task-1"}}
    by_probe = {"decision": "accepted", "by": "jobstate-probe", "at": INTENT, "reason": "r", "probe": evidence}
    by_ops = {"decision": "accepted", "by": "ops", "at": INTENT, "reason": "r"}
    old = EpisodeRecords("2026-W40-0", steps={"generate": [attempt_from_yaml_dict(intent, "s", "generate")]})
    for resolution, persons in ((by_probe, 0), (by_ops, 1)):
        settled = {**intent, "state": "accepted", "remote_ref": "task-1", "resolution": resolution}
        new = EpisodeRecords("2026-W40-0", steps={"generate": [attempt_from_yaml_dict(settled, "s", "generate")]})
        assert len(decisions_made(old, new)) == persons


def test_the_sweep_of_an_episode_that_does_not_exist_is_exit_5(repo: Path) -> None:
    done = run_cli("probe", "--episode", f"{WEEK}-9", "--probe", "true", cwd=repo)
    assert done.returncode == 5, done.stderr
    bad = run_cli("probe", "--step", "Bad/Step", "--probe", "true", cwd=repo)
    assert bad.returncode == 2, bad.stderr


def test_the_python_api_takes_a_callable_probe_that_settles_the_unknown_step(
    repo: Path, vendor: VendorSimulator
) -> None:
    eid = _unknown_after_drop(repo, vendor)
    asked: list[jobstate.ProbeQuestion] = []

    def lookup_by_key(question: jobstate.ProbeQuestion) -> dict[str, object]:
        asked.append(question)
        tasks = lookup(vendor.url, question.idempotency_key)["tasks"]
        assert isinstance(tasks, list)
        return {"found": True, "remote_ref": tasks[0]["task_id"]}

    store = jobstate.open(str(repo))
    with jobstate.paid_step(store, eid, "generate", probe=lookup_by_key) as step:
        assert step.remote_ref == "task-1", "the probe's task is resumed, not resubmitted"
    store.close()
    assert [(q.episode_id, q.step, q.attempt) for q in asked] == [(eid, "generate", 1)]
    assert len(vendor.charges()) == 1
    assert _last(repo, eid)["resolution"]["by"] == "jobstate-probe"  # type: ignore[index]


def test_a_callable_probe_that_raises_leaves_the_step_unknown_with_its_reason(
    repo: Path, vendor: VendorSimulator
) -> None:
    eid = _unknown_after_drop(repo, vendor)

    def broken(_question: jobstate.ProbeQuestion) -> dict[str, object]:
        raise TimeoutError("vendor search timed out")

    store = jobstate.open(str(repo))
    try:
        with (
            pytest.raises(jobstate.SubmissionUnknown, match="TimeoutError: vendor search timed out"),
            jobstate.paid_step(store, eid, "generate", probe=broken),
        ):
            raise AssertionError("the body ran on an unknown step")
    finally:
        store.close()
    assert _last(repo, eid)["state"] == "intent"
