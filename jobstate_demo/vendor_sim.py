"""A local fake paid vendor for the demo and the tests: real HTTP on 127.0.0.1, standard library only.

The server charges once per ``Idempotency-Key`` and can be told to misbehave (``POST /faults``):
refuse before accepting, accept and charge but drop the connection before answering, or answer slowly.
Amounts are decimal strings everywhere, never floats.

Run it as a process::

    python -m jobstate_demo.vendor_sim serve [--price 12.40] [--currency USD] [--port-file PATH]
    python -m jobstate_demo.vendor_sim step --url URL --kind KIND [--artifact NAME] [--price P]
    python -m jobstate_demo.vendor_sim probe --url URL

``step`` is the paid-step command of ``jobstate run``: it reads ``JOBSTATE_*`` variables, submits
(or resumes, when ``JOBSTATE_REMOTE_REF`` is set), waits, writes the artifact and one JSON result.
``probe`` is the step's probe (``jobstate run --probe``): it looks the attempt's
``JOBSTATE_IDEMPOTENCY_KEY`` up (``GET /tasks?idempotency_key=K``, read-only) and writes one answer
to ``JOBSTATE_PROBE_RESULT``: found with the task, not found up to the index's time, or null.

Faults (``POST /faults {"mode": M, "count": N, "delay": S}``, ``DELETE /faults`` clears them):
``fail_before_accept`` refuses the next N submissions (503, nothing charged); ``drop_after_accept``
accepts and charges them but closes the connection before answering; ``slow`` answers after S
seconds; ``lagging_index`` makes the lookup see only tasks accepted more than S seconds ago (default
3600) until cleared. ``VENDOR_SIM_CRASH_BEFORE_SEND=1`` in ``step``'s environment makes it exit 75
before it sends anything, as a step killed before its request left.
Exit codes of ``step``: 0 done, 2 bad input (nothing submitted), 3 the vendor refused or failed
(nothing charged when refused at submission), 75 acceptance or completion unknown (rerun to resume).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import NoReturn

from jobstate.atomic import atomic_write
from jobstate_demo.vendor_client import (
    AcceptanceUnknown,
    VendorError,
    _one_line,
    arm_fault_remote,
    ledger,
    lookup,
    status,
    submit,
    wait,
)
from jobstate_demo.vendor_server import EXIT_OK, EXIT_UNKNOWN, EXIT_USAGE, EXIT_VENDOR, VendorSimulator, _parse_amount

__all__ = [
    "AcceptanceUnknown",
    "VendorError",
    "VendorSimulator",
    "arm_fault_remote",
    "ledger",
    "lookup",
    "main",
    "status",
    "submit",
    "wait",
]

# --------------------------------------------------------------------------- command line


class _Exit(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _Exit(EXIT_USAGE, f"{self.prog}: {message}")


def _write_atomic(path: Path, text: str) -> None:
    atomic_write(path, text.encode("utf-8"))


def _serve(args: argparse.Namespace) -> int:
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if _parse_amount(args.price) is None:
        raise _Exit(EXIT_USAGE, f"serve: --price must be a non-negative decimal string, not {args.price!r}")
    with VendorSimulator(price=args.price, currency=args.currency, task_seconds=args.task_seconds) as sim:
        if args.port_file:
            _write_atomic(Path(args.port_file), sim.url + "\n")
        print(sim.url, flush=True)
        while not stop.wait(0.2):
            pass
    return EXIT_OK


def _env(name: str) -> str:
    value = os.environ.get(name, "")
    if not value:
        raise _Exit(EXIT_USAGE, f"step: {name} is not set")
    return value


def _plain_name(name: str) -> bool:
    return bool(name) and name not in {".", ".."} and not any(c in name for c in "/\\\0") and ".." not in name


def _step(args: argparse.Namespace) -> int:
    artifact: str = args.artifact if args.artifact is not None else f"{args.kind}.txt"
    if not _plain_name(artifact):
        raise _Exit(EXIT_USAGE, f"step: artifact must be a plain file name, not {artifact!r}")
    if args.price is not None and _parse_amount(args.price) is None:
        raise _Exit(EXIT_USAGE, f"step: --price must be a non-negative decimal string, not {args.price!r}")
    result_path = Path(_env("JOBSTATE_RESULT"))
    # outputs go to the attempt's staging directory; jobstate moves reported artifacts into the episode
    output_dir = Path(_env("JOBSTATE_OUTPUT_DIR"))
    try:
        output_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise _Exit(EXIT_USAGE, f"step: cannot use output directory {output_dir}: {err.strerror}") from err
    remote_ref = os.environ.get("JOBSTATE_REMOTE_REF", "")
    if not remote_ref and os.environ.get("VENDOR_SIM_CRASH_BEFORE_SEND") == "1":
        # the demo's "killed before the request left": unknown to jobstate, nothing at the vendor
        raise _Exit(EXIT_UNKNOWN, "step: crashed before sending anything (VENDOR_SIM_CRASH_BEFORE_SEND=1)")

    if remote_ref:
        task_id = remote_ref  # resume: never submit again
    else:
        payload: dict[str, object] = {
            "kind": args.kind,
            "episode": _env("JOBSTATE_EPISODE"),
            "step": _env("JOBSTATE_STEP"),
        }
        if args.price is not None:
            payload["price"] = args.price
        key = _env("JOBSTATE_IDEMPOTENCY_KEY")
        try:
            accepted = submit(args.url, payload, key)
        except AcceptanceUnknown as err:
            raise _Exit(EXIT_UNKNOWN, f"step: acceptance unknown, rerun with the same key: {err}") from err
        except VendorError as err:
            # refused before acceptance: tell jobstate nothing was submitted, so a rerun may try again
            _write_atomic(result_path, json.dumps({"submitted": False, "error": str(err)[:200]}) + "\n")
            raise _Exit(EXIT_VENDOR, f"step: {err}") from err
        task_id = str(accepted["task_id"])
        # report the accepted task at once: if waiting fails, jobstate still records it and resumes it
        _write_atomic(result_path, json.dumps({"remote_ref": task_id}) + "\n")

    try:
        done = wait(args.url, task_id)
    except VendorError as err:
        if err.status is not None and 400 <= err.status < 500:
            raise _Exit(EXIT_VENDOR, f"step: {err}") from err
        # accepted (and charged) but we could not see it finish: rerunning resumes, it never pays twice
        raise _Exit(EXIT_UNKNOWN, f"step: {task_id} accepted but not seen done: {err}") from err

    result = done.get("result")
    output = result.get("output") if isinstance(result, dict) else None
    text = f"{output if isinstance(output, str) else task_id}\n"
    amount = done.get("amount")
    currency = done.get("currency")
    if not isinstance(amount, str) or not isinstance(currency, str):
        raise _Exit(EXIT_VENDOR, f"step: vendor answer for {task_id} has no amount/currency")
    try:
        _write_atomic(output_dir / artifact, text)
        _write_atomic(
            result_path,
            json.dumps(
                {"remote_ref": task_id, "cost": {"amount": amount, "currency": currency}, "artifacts": [artifact]}
            )
            + "\n",
        )
    except OSError as err:
        raise _Exit(1, f"step: cannot write result of {task_id}: {err}") from err
    return EXIT_OK


def _probe(args: argparse.Namespace) -> int:
    answer_path = Path(_env("JOBSTATE_PROBE_RESULT"))
    key = _env("JOBSTATE_IDEMPOTENCY_KEY")
    try:
        found = lookup(args.url, key)
    except VendorError as err:
        answer: dict[str, object] = {"found": None, "why": f"lookup failed: {err}"[:200]}
    else:
        tasks = found.get("tasks")
        if isinstance(tasks, list) and tasks and isinstance(tasks[0], dict):
            task = tasks[0]
            answer = {
                "found": True,
                "remote_ref": task.get("task_id"),
                "cost": {"amount": task.get("amount"), "currency": task.get("currency")},
            }
        else:
            answer = {"found": False, "searched_until": found.get("indexed_until")}
    _write_atomic(answer_path, json.dumps(answer) + "\n")
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    parser = _Parser(
        prog="python -m jobstate_demo.vendor_sim", description=__doc__.splitlines()[0] if __doc__ else None
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    serve = sub.add_parser("serve", help="run the fake vendor until SIGTERM/SIGINT")
    serve.add_argument("--price", default="12.40", help="price of a task, a decimal string (default 12.40)")
    serve.add_argument("--currency", default="USD", help="currency of every charge (default USD)")
    serve.add_argument("--task-seconds", type=float, default=0.0, help="how long a task runs before it is done")
    serve.add_argument("--port-file", help="write the server's URL (http://127.0.0.1:PORT) to this file")
    step = sub.add_parser("step", help="paid step for jobstate run (reads JOBSTATE_* variables)")
    step.add_argument("--url", required=True, help="the simulator's URL, e.g. http://127.0.0.1:8765")
    step.add_argument("--kind", required=True, help="what the task makes, e.g. generate (also the artifact's name)")
    step.add_argument("--artifact", help="file name to write in $JOBSTATE_OUTPUT_DIR (default KIND.txt)")
    step.add_argument("--price", help="this task's price, a decimal string (default: the server's)")
    probe = sub.add_parser("probe", help="the step's probe for jobstate run --probe (read-only lookup by key)")
    probe.add_argument("--url", required=True, help="the simulator's URL, e.g. http://127.0.0.1:8765")
    try:
        args = parser.parse_args(argv)
        if args.command == "serve":
            return _serve(args)
        if args.command == "probe":
            return _probe(args)
        return _step(args)
    except _Exit as err:
        print(_one_line(err), file=sys.stderr)
        return err.code


if __name__ == "__main__":
    raise SystemExit(main())
