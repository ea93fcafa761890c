"""A local fake paid vendor for the demo and the tests: real HTTP on 127.0.0.1, standard library only.

The server charges once per ``Idempotency-Key`` and can be told to misbehave (``POST /faults``):
refuse before accepting, accept and charge but drop the connection before answering, or answer slowly.
Amounts are decimal strings everywhere, never floats.

Run it as a process::

    python -m jobstate_demo.vendor_sim serve [--price 12.40] [--currency USD] [--port-file PATH]
    python -m jobstate_demo.vendor_sim step --url URL --kind KIND [--artifact NAME] [--price P]

``step`` is the paid-step command of ``jobstate run``: it reads ``JOBSTATE_*`` variables, submits
(or resumes, when ``JOBSTATE_REMOTE_REF`` is set), waits, writes the artifact and one JSON result.
Exit codes of ``step``: 0 done, 2 bad input (nothing submitted), 3 the vendor refused or failed
(nothing charged when refused at submission), 75 acceptance or completion unknown (rerun to resume).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import socket
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType, TracebackType
from typing import NoReturn, Self, cast

FAULT_MODES = ("fail_before_accept", "drop_after_accept", "slow")

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_VENDOR = 3
EXIT_UNKNOWN = 75  # EX_TEMPFAIL: nobody knows whether the vendor accepted; rerun with the same key


# --------------------------------------------------------------------------- amounts


def _parse_amount(text: object) -> Decimal | None:
    """A finite, non-negative decimal from a string, or None."""
    if not isinstance(text, str):
        return None
    try:
        value = Decimal(text.strip())
    except InvalidOperation:
        return None
    if not value.is_finite() or value < 0:
        return None
    return value


def _amount_str(value: Decimal) -> str:
    """Plain notation (never ``1E+2``), keeping the scale: ``12.40`` stays ``12.40``."""
    return format(value, "f")


# --------------------------------------------------------------------------- server


@dataclass
class _Task:
    task_id: str
    idempotency_key: str
    amount: str
    currency: str
    accepted_at: float  # time.monotonic()
    output: str


@dataclass
class _Fault:
    mode: str
    remaining: int
    delay: float


class _Server(ThreadingHTTPServer):
    """Holds the simulator; ``server_close`` joins every handler thread (block_on_close)."""

    daemon_threads = True
    block_on_close = True

    def __init__(self, sim: VendorSimulator) -> None:
        self.sim = sim
        super().__init__(("127.0.0.1", 0), _Handler)

    def handle_error(self, request: object, client_address: object) -> None:
        # a client that hung up (timeout test, dropped connection) is not news; anything else is one line
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError)):
            return
        print(f"vendor_sim: handler error: {exc!r}", file=sys.stderr)


class _Handler(BaseHTTPRequestHandler):
    server_version = "VendorSim/1"
    timeout = 10  # a client that connects and never sends cannot pin a thread forever

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (name fixed by the base class)
        return

    @property
    def sim(self) -> VendorSimulator:
        return cast(_Server, self.server).sim

    # ---- plumbing

    def _send_json(self, code: int, body: object) -> None:
        data = json.dumps(body).encode("utf-8")
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)
        self.close_connection = True

    def _error(self, code: int, message: str) -> None:
        self._send_json(code, {"error": message})

    def _read_json(self) -> object:
        try:
            length = int(self.headers.get("Content-Length") or "0")
        except ValueError:
            length = 0
        raw = self.rfile.read(length) if length > 0 else b""
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return None

    def _path(self) -> str:
        return self.path.split("?", 1)[0].rstrip("/") or "/"

    # ---- verbs

    def do_GET(self) -> None:
        path = self._path()
        if path == "/ledger":
            self._send_json(200, self.sim.ledger_snapshot())
            return
        if path.startswith("/tasks/"):
            view = self.sim.task_view(path.removeprefix("/tasks/"))
            if view is None:
                self._error(404, "unknown task")
            else:
                self._send_json(200, view)
            return
        self._error(404, "not found")

    def do_POST(self) -> None:
        path = self._path()
        body = self._read_json()
        if path == "/tasks":
            self._post_task(body)
        elif path == "/faults":
            self._post_fault(body)
        else:
            self._error(404, "not found")

    def do_DELETE(self) -> None:
        if self._path() == "/faults":
            self.sim.clear_faults()
            self._send_json(200, {"fault": None})
        else:
            self._error(404, "not found")

    def _post_task(self, body: object) -> None:
        key = (self.headers.get("Idempotency-Key") or "").strip()
        if not key:
            self._error(400, "Idempotency-Key header is required")
            return
        if not isinstance(body, dict):
            self._error(400, "body must be a JSON object")
            return
        payload = cast(dict[str, object], body)
        price: str | None = None
        if "price" in payload:
            parsed = _parse_amount(payload["price"])
            if parsed is None:
                self._error(400, "price must be a non-negative decimal string")
                return
            price = _amount_str(parsed)
        mode, delay = self.sim.take_fault()
        if mode == "fail_before_accept":
            self._error(503, "vendor temporarily unavailable (injected fault)")
            return
        if mode == "slow":
            time.sleep(delay)
        view, created = self.sim.accept(key, payload, price)
        if mode == "drop_after_accept":
            # accepted and charged, but the client never hears about it: nothing written, socket closed
            self.close_connection = True
            return
        self._send_json(201 if created else 200, view)

    def _post_fault(self, body: object) -> None:
        if not isinstance(body, dict):
            self._error(400, "body must be a JSON object")
            return
        mode = body.get("mode")
        count = body.get("count", 1)
        delay = body.get("delay", 0)
        if mode not in FAULT_MODES:
            self._error(400, f"mode must be one of {', '.join(FAULT_MODES)}")
            return
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            self._error(400, "count must be a positive integer")
            return
        if not isinstance(delay, (int, float)) or isinstance(delay, bool) or delay < 0:
            self._error(400, "delay must be a non-negative number of seconds")
            return
        self.sim.arm_fault(str(mode), count, float(delay))
        self._send_json(200, {"fault": {"mode": mode, "count": count, "delay": delay}})


class VendorSimulator:
    """A fake paid vendor on ``127.0.0.1`` (a free port), served from a daemon thread."""

    def __init__(self, price: str = "12.40", currency: str = "USD", task_seconds: float = 0.0) -> None:
        parsed = _parse_amount(price)
        if parsed is None:
            raise ValueError(f"price must be a non-negative decimal string, not {price!r}")
        self.price = _amount_str(parsed)
        self.currency = currency
        self.task_seconds = task_seconds
        self._lock = threading.Lock()
        self._tasks: dict[str, _Task] = {}
        self._by_key: dict[str, str] = {}
        self._ledger: list[dict[str, str]] = []
        self._fault: _Fault | None = None
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # ---- lifecycle

    def start(self) -> None:
        """Bind a free port on 127.0.0.1 and serve in a daemon thread."""
        if self._server is not None:
            raise RuntimeError("VendorSimulator already started")
        server = _Server(self)
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        thread.name = f"vendor-sim-{server.server_address[1]}"
        self._server = server
        self._thread = thread
        thread.start()

    def stop(self) -> None:
        """Stop serving, close the socket and join every thread (idempotent)."""
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is None:
            return
        server.shutdown()
        server.server_close()  # joins in-flight handler threads
        if thread is not None:
            thread.join()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` of the running server."""
        if self._server is None:
            raise RuntimeError("VendorSimulator is not running")
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    # ---- in-process access

    def charges(self) -> list[dict[str, str]]:
        """A copy of the ledger, oldest first."""
        with self._lock:
            return [dict(c) for c in self._ledger]

    def arm_fault(self, mode: str, count: int = 1, delay: float = 0.0) -> None:
        """Apply ``mode`` to the next ``count`` POST /tasks requests (replaces any armed fault)."""
        if mode not in FAULT_MODES:
            raise ValueError(f"mode must be one of {', '.join(FAULT_MODES)}, not {mode!r}")
        if count < 1 or delay < 0:
            raise ValueError("count must be >= 1 and delay >= 0")
        with self._lock:
            self._fault = _Fault(mode, count, delay)

    def clear_faults(self) -> None:
        """Disarm any fault."""
        with self._lock:
            self._fault = None

    # ---- used by the handler

    def take_fault(self) -> tuple[str | None, float]:
        """Consume one use of the armed fault: (mode or None, delay)."""
        with self._lock:
            fault = self._fault
            if fault is None:
                return None, 0.0
            fault.remaining -= 1
            if fault.remaining <= 0:
                self._fault = None
            return fault.mode, fault.delay

    def accept(self, key: str, payload: dict[str, object], price: str | None) -> tuple[dict[str, object], bool]:
        """The task for ``key`` (created and charged once): (view, created)."""
        with self._lock:
            existing = self._by_key.get(key)
            if existing is not None:
                return self._view(self._tasks[existing]), False
            task_id = f"task-{len(self._tasks) + 1}"
            kind = payload.get("kind", "task")
            episode = payload.get("episode", "")
            task = _Task(
                task_id=task_id,
                idempotency_key=key,
                amount=price if price is not None else self.price,
                currency=self.currency,
                accepted_at=time.monotonic(),
                output=f"{kind} for episode {episode} by {task_id}",
            )
            self._tasks[task_id] = task
            self._by_key[key] = task_id
            self._ledger.append(
                {
                    "task_id": task_id,
                    "idempotency_key": key,
                    "amount": task.amount,
                    "currency": task.currency,
                    "at": datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z"),
                }
            )
            return self._view(task), True

    def task_view(self, task_id: str) -> dict[str, object] | None:
        with self._lock:
            task = self._tasks.get(task_id)
            return None if task is None else self._view(task)

    def ledger_snapshot(self) -> dict[str, object]:
        with self._lock:
            charges = [dict(c) for c in self._ledger]
        totals: dict[str, Decimal] = {}
        for c in charges:
            totals[c["currency"]] = totals.get(c["currency"], Decimal(0)) + Decimal(c["amount"])
        return {"charges": charges, "totals": {cur: _amount_str(v) for cur, v in totals.items()}}

    def _view(self, task: _Task) -> dict[str, object]:
        done = time.monotonic() - task.accepted_at >= self.task_seconds
        return {
            "task_id": task.task_id,
            "status": "done" if done else "running",
            "amount": task.amount,
            "currency": task.currency,
            "result": {"output": task.output} if done else None,
        }


# --------------------------------------------------------------------------- client


class VendorError(Exception):
    """The vendor answered with an error, or could not be reached before anything was sent.

    ``status`` is the HTTP status when there was an answer, else None.
    """

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class AcceptanceUnknown(VendorError):
    """The request was sent but no answer came (dropped, reset, timed out): it may have been accepted."""


# no proxies: an http_proxy in the environment must not reroute 127.0.0.1
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def _request(
    method: str, url: str, body: dict[str, object] | None, headers: dict[str, str], timeout: float
) -> dict[str, object]:
    """One exchange; raises HTTPError, URLError, OSError, HTTPException or ValueError untouched."""
    data = None if body is None else json.dumps(body).encode("utf-8")
    req = urllib.request.Request(url, data=data, method=method, headers=headers)  # noqa: S310 (http only)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    with cast(http.client.HTTPResponse, _OPENER.open(req, timeout=timeout)) as resp:
        raw = resp.read()
    answer = json.loads(raw)
    if not isinstance(answer, dict):
        raise ValueError(f"expected a JSON object, got {type(answer).__name__}")
    return cast(dict[str, object], answer)


def _http_error(err: urllib.error.HTTPError, what: str) -> VendorError:
    """A VendorError for an HTTP error answer; closes the error's response."""
    try:
        detail = err.read().decode("utf-8", "replace")
        try:
            parsed = json.loads(detail)
            if isinstance(parsed, dict) and "error" in parsed:
                detail = str(parsed["error"])
        except ValueError:
            pass
    except (OSError, http.client.HTTPException):
        detail = ""
    finally:
        err.close()
    return VendorError(_one_line(f"{what}: HTTP {err.code} {detail}"), status=err.code)


def submit(url: str, payload: dict[str, object], idempotency_key: str, timeout: float = 10.0) -> dict[str, object]:
    """POST /tasks once. VendorError: refused (nothing accepted); AcceptanceUnknown: sent, no answer."""
    target = url.rstrip("/") + "/tasks"
    try:
        answer = _request("POST", target, payload, {"Idempotency-Key": idempotency_key}, timeout)
    except urllib.error.HTTPError as err:
        raise _http_error(err, "vendor refused the task") from err
    except urllib.error.URLError as err:
        # raised while connecting or sending: only a refused connection or unknown host proves nothing was sent
        if isinstance(err.reason, (ConnectionRefusedError, socket.gaierror)):
            raise VendorError(_one_line(f"vendor unreachable at {url}: {err.reason}")) from err
        raise AcceptanceUnknown(_one_line(f"request to {url} failed while sending: {err.reason}")) from err
    except (OSError, http.client.HTTPException, ValueError) as err:
        # RemoteDisconnected, ConnectionResetError, TimeoutError, IncompleteRead, garbled answer
        raise AcceptanceUnknown(_one_line(f"no usable answer from {url} after sending: {err!r}")) from err
    if not isinstance(answer.get("task_id"), str):
        raise AcceptanceUnknown(_one_line(f"answer from {url} has no task_id: {answer}"))
    return answer


def _get(url: str, what: str, timeout: float) -> dict[str, object]:
    try:
        return _request("GET", url, None, {}, timeout)
    except urllib.error.HTTPError as err:
        raise _http_error(err, what) from err
    except urllib.error.URLError as err:
        raise VendorError(_one_line(f"{what}: {err.reason}")) from err
    except (OSError, http.client.HTTPException, ValueError) as err:
        raise VendorError(_one_line(f"{what}: {err!r}")) from err


def status(url: str, task_id: str, timeout: float = 10.0) -> dict[str, object]:
    """GET /tasks/<id>; VendorError (status 404) for an unknown task."""
    return _get(f"{url.rstrip('/')}/tasks/{urllib.parse.quote(task_id, safe='')}", f"status of {task_id}", timeout)


def wait(url: str, task_id: str, timeout: float = 30.0) -> dict[str, object]:
    """Poll until the task is done; VendorError (status None) if it is not done within ``timeout``."""
    deadline = time.monotonic() + timeout
    pause = 0.01
    while True:
        remaining = deadline - time.monotonic()
        answer = status(url, task_id, timeout=max(0.1, min(10.0, remaining)))
        if answer.get("status") == "done":
            return answer
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise VendorError(f"task {task_id} not done after {timeout:g} s")
        time.sleep(min(pause, remaining))
        pause = min(pause * 2, 0.25)


def ledger(url: str) -> dict[str, object]:
    """GET /ledger: {"charges": [...], "totals": {currency: amount}}."""
    return _get(url.rstrip("/") + "/ledger", "ledger", 10.0)


def arm_fault_remote(url: str, mode: str, count: int = 1, delay: float = 0.0) -> None:
    """POST /faults."""
    try:
        _request("POST", url.rstrip("/") + "/faults", {"mode": mode, "count": count, "delay": delay}, {}, 10.0)
    except urllib.error.HTTPError as err:
        raise _http_error(err, "arming fault") from err
    except (OSError, http.client.HTTPException, ValueError) as err:
        raise VendorError(_one_line(f"arming fault: {err!r}")) from err


# --------------------------------------------------------------------------- command line


class _Exit(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _Exit(EXIT_USAGE, f"{self.prog}: {message}")


def _write_atomic(path: Path, text: str) -> None:
    from jobstate.atomic import atomic_write  # noqa: PLC0415 - only the step command writes files

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
    episode_dir = Path(_env("JOBSTATE_EPISODE_DIR"))
    try:
        episode_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise _Exit(EXIT_USAGE, f"step: cannot use episode directory {episode_dir}: {err.strerror}") from err
    remote_ref = os.environ.get("JOBSTATE_REMOTE_REF", "")

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
        _write_atomic(episode_dir / artifact, text)
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


def main(argv: Sequence[str] | None = None) -> int:
    parser = _Parser(
        prog="python -m jobstate_demo.vendor_sim", description=__doc__.splitlines()[0] if __doc__ else None
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    serve = sub.add_parser("serve", help="run the fake vendor until SIGTERM/SIGINT")
    serve.add_argument("--price", default="12.40")
    serve.add_argument("--currency", default="USD")
    serve.add_argument("--task-seconds", type=float, default=0.0)
    serve.add_argument("--port-file")
    step = sub.add_parser("step", help="paid step for jobstate run (reads JOBSTATE_* variables)")
    step.add_argument("--url", required=True)
    step.add_argument("--kind", required=True)
    step.add_argument("--artifact")
    step.add_argument("--price")
    try:
        args = parser.parse_args(argv)
        if args.command == "serve":
            return _serve(args)
        return _step(args)
    except _Exit as err:
        print(_one_line(err), file=sys.stderr)
        return err.code


if __name__ == "__main__":
    raise SystemExit(main())
