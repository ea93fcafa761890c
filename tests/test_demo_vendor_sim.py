"""The fake paid vendor against a real server on 127.0.0.1: pay once per key, faults, serve and step processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jobstate_demo import vendor_sim
from jobstate_demo.vendor_sim import AcceptanceUnknown, VendorError, VendorSimulator


def totals(url: str) -> dict[str, str]:
    answer = vendor_sim.ledger(url)
    result = answer["totals"]
    assert isinstance(result, dict)
    return result


# --------------------------------------------------------------------------- in-process server


def test_same_key_same_task_one_charge(vendor: VendorSimulator) -> None:
    payload: dict[str, object] = {"kind": "generate", "episode": "2026-W32-1"}
    first = vendor_sim.submit(vendor.url, payload, "key-a")
    again = vendor_sim.submit(vendor.url, payload, "key-a")
    assert first == again
    assert first["task_id"] == "task-1"
    assert first["amount"] == "12.40"
    assert first["currency"] == "USD"
    charges = vendor.charges()
    assert len(charges) == 1
    assert charges[0]["task_id"] == "task-1"
    assert charges[0]["idempotency_key"] == "key-a"
    assert charges[0]["amount"] == "12.40"
    assert charges[0]["at"].endswith("Z")
    assert totals(vendor.url) == {"USD": "12.40"}


def test_distinct_keys_two_charges_exact_totals(vendor: VendorSimulator) -> None:
    a = vendor_sim.submit(vendor.url, {"kind": "generate"}, "key-a")
    b = vendor_sim.submit(vendor.url, {"kind": "generate"}, "key-b")
    assert (a["task_id"], b["task_id"]) == ("task-1", "task-2")
    assert totals(vendor.url) == {"USD": "24.80"}
    # 0.1 + 0.2 is 0.30000000000000004 in floats; the ledger is exact
    vendor_sim.submit(vendor.url, {"kind": "x", "price": "0.10"}, "key-c")
    vendor_sim.submit(vendor.url, {"kind": "x", "price": "0.20"}, "key-d")
    assert totals(vendor.url) == {"USD": "25.10"}
    assert [c["amount"] for c in vendor.charges()] == ["12.40", "12.40", "0.10", "0.20"]


def test_bad_requests_are_refused_without_charge(vendor: VendorSimulator) -> None:
    with pytest.raises(VendorError) as missing_key:
        vendor_sim.submit(vendor.url, {"kind": "generate"}, "")
    assert missing_key.value.status == 400
    assert not isinstance(missing_key.value, AcceptanceUnknown)
    with pytest.raises(VendorError) as bad_price:
        vendor_sim.submit(vendor.url, {"kind": "generate", "price": 1.5}, "key-a")
    assert bad_price.value.status == 400
    assert vendor.charges() == []


def test_status_running_then_done_and_unknown_task() -> None:
    with VendorSimulator(task_seconds=0.3) as sim:
        accepted = vendor_sim.submit(sim.url, {"kind": "generate", "episode": "E1"}, "key-a")
        assert accepted["status"] == "running"
        assert vendor_sim.status(sim.url, "task-1")["status"] == "running"
        done = vendor_sim.wait(sim.url, "task-1", timeout=5)
        assert done["status"] == "done"
        assert done["amount"] == "12.40"
        result = done["result"]
        assert isinstance(result, dict)
        assert "generate" in result["output"]
        with pytest.raises(VendorError) as unknown:
            vendor_sim.status(sim.url, "task-99")
        assert unknown.value.status == 404


def test_drop_after_accept_charges_once_and_retry_finds_the_task(vendor: VendorSimulator) -> None:
    vendor_sim.arm_fault_remote(vendor.url, "drop_after_accept")
    with pytest.raises(AcceptanceUnknown):
        vendor_sim.submit(vendor.url, {"kind": "generate"}, "key-a")
    assert len(vendor.charges()) == 1  # accepted and charged although the client heard nothing
    retry = vendor_sim.submit(vendor.url, {"kind": "generate"}, "key-a")
    assert retry["task_id"] == "task-1"
    assert len(vendor.charges()) == 1
    assert totals(vendor.url) == {"USD": "12.40"}


def test_fail_before_accept_charges_nothing(vendor: VendorSimulator) -> None:
    vendor.arm_fault("fail_before_accept", count=2)
    for _ in range(2):
        with pytest.raises(VendorError) as refused:
            vendor_sim.submit(vendor.url, {"kind": "generate"}, "key-a")
        assert refused.value.status == 503
        assert not isinstance(refused.value, AcceptanceUnknown)
    assert vendor.charges() == []
    with pytest.raises(VendorError):
        vendor_sim.status(vendor.url, "task-1")
    assert vendor_sim.submit(vendor.url, {"kind": "generate"}, "key-a")["task_id"] == "task-1"
    assert len(vendor.charges()) == 1


def test_slow_answer_times_out_as_unknown_and_still_charges_once() -> None:
    with VendorSimulator() as sim:
        vendor_sim.arm_fault_remote(sim.url, "slow", delay=0.4)
        with pytest.raises(AcceptanceUnknown):
            vendor_sim.submit(sim.url, {"kind": "generate"}, "key-a", timeout=0.1)
        retry = vendor_sim.submit(sim.url, {"kind": "generate"}, "key-a")
        assert retry["task_id"] == "task-1"
    # stop() joined the slow handler: it found the key and did not charge again
    assert len(sim.charges()) == 1


def test_cleared_fault_and_refused_connection() -> None:
    with VendorSimulator() as sim:
        sim.arm_fault("fail_before_accept")
        sim.clear_faults()
        assert vendor_sim.submit(sim.url, {}, "key-a")["task_id"] == "task-1"
        url = sim.url
    # nothing listens any more: nothing was sent, so this is a plain refusal, not "unknown"
    with pytest.raises(VendorError) as refused:
        vendor_sim.submit(url, {}, "key-b", timeout=2)
    assert not isinstance(refused.value, AcceptanceUnknown)


# --------------------------------------------------------------------------- processes


def vendor_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "jobstate_demo.vendor_sim", *args]


def test_serve_process_writes_port_file_and_stops_on_sigterm(tmp_path: Path) -> None:
    port_file = tmp_path / "vendor.url"
    proc = subprocess.Popen(
        vendor_cmd("serve", "--price", "1.05", "--currency", "EUR", "--port-file", str(port_file)),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 10
        while not port_file.exists():
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "no port file"
            time.sleep(0.02)
        url = port_file.read_text().strip()
        assert url.startswith("http://127.0.0.1:")
        assert vendor_sim.submit(url, {"kind": "generate"}, "key-a")["amount"] == "1.05"
        assert totals(url) == {"EUR": "1.05"}
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert out.strip() == url
    assert err == ""


def run_step(
    url: str, tmp_path: Path, *args: str, key: str = "ep1-render", remote_ref: str | None = None, result: str = "r.json"
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.update(
        {
            "JOBSTATE_EPISODE": "2026-W32-1",
            "JOBSTATE_STEP": "render",
            "JOBSTATE_IDEMPOTENCY_KEY": key,
            "JOBSTATE_RESULT": str(tmp_path / result),
            "JOBSTATE_EPISODE_DIR": str(tmp_path / "episode"),
            "JOBSTATE_OUTPUT_DIR": str(tmp_path / "episode"),
        }
    )
    env.pop("JOBSTATE_REMOTE_REF", None)
    if remote_ref is not None:
        env["JOBSTATE_REMOTE_REF"] = remote_ref
    proc = subprocess.run(
        vendor_cmd("step", "--url", url, *args),
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    if proc.returncode != 0:
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    return proc


def test_step_submits_then_resume_does_not_charge_again(vendor: VendorSimulator, tmp_path: Path) -> None:
    proc = run_step(vendor.url, tmp_path, "--kind", "render", "--price", "3.30")
    assert proc.returncode == 0, proc.stderr
    result = json.loads((tmp_path / "r.json").read_text())
    assert result == {
        "remote_ref": "task-1",
        "cost": {"amount": "3.30", "currency": "USD"},
        "artifacts": ["render.txt"],
    }
    artifact = (tmp_path / "episode" / "render.txt").read_text()
    assert "render" in artifact
    assert "2026-W32-1" in artifact

    resumed = run_step(
        vendor.url, tmp_path, "--kind", "render", "--artifact", "again.txt", key="unused", remote_ref="task-1"
    )
    assert resumed.returncode == 0, resumed.stderr
    result = json.loads((tmp_path / "r.json").read_text())
    assert result == {"remote_ref": "task-1", "cost": {"amount": "3.30", "currency": "USD"}, "artifacts": ["again.txt"]}
    assert (tmp_path / "episode" / "again.txt").read_text() == artifact  # deterministic

    rerun = run_step(vendor.url, tmp_path, "--kind", "render", "--price", "3.30")  # same key: same task
    assert rerun.returncode == 0, rerun.stderr
    assert len(vendor.charges()) == 1
    assert totals(vendor.url) == {"USD": "3.30"}


def test_step_dropped_connection_exits_75_then_rerun_pays_nothing_more(vendor: VendorSimulator, tmp_path: Path) -> None:
    vendor.arm_fault("drop_after_accept")
    dropped = run_step(vendor.url, tmp_path, "--kind", "render")
    assert dropped.returncode == 75
    assert not (tmp_path / "r.json").exists()
    assert len(vendor.charges()) == 1
    rerun = run_step(vendor.url, tmp_path, "--kind", "render")
    assert rerun.returncode == 0, rerun.stderr
    assert json.loads((tmp_path / "r.json").read_text())["remote_ref"] == "task-1"
    assert len(vendor.charges()) == 1


def test_step_refusals_and_bad_input(vendor: VendorSimulator, tmp_path: Path) -> None:
    vendor.arm_fault("fail_before_accept")
    refused = run_step(vendor.url, tmp_path, "--kind", "render")
    assert refused.returncode == 3
    # a refusal is reported: nothing was submitted, so jobstate may open a new attempt
    assert json.loads((tmp_path / "r.json").read_text())["submitted"] is False
    (tmp_path / "r.json").unlink()
    for bad in ("../escape.txt", "sub/dir.txt", ".."):
        assert run_step(vendor.url, tmp_path, "--kind", "render", "--artifact", bad).returncode == 2
    assert run_step(vendor.url, tmp_path, "--kind", "render", "--price", "1.0.0").returncode == 2
    unknown_ref = run_step(vendor.url, tmp_path, "--kind", "render", remote_ref="task-7")
    assert unknown_ref.returncode == 3
    assert not (tmp_path / "r.json").exists()
    assert vendor.charges() == []
