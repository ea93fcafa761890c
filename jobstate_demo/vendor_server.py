"""The fake vendor's HTTP server: charges once per ``Idempotency-Key``, keeps its own ledger, injects faults.

Standard library only; amounts are decimal strings, never floats. See jobstate_demo.vendor_sim for the command.

Longer than most modules on purpose: the routes, the ledger and the faults share one lock and one
state file, which is what makes "charged once per key" true under concurrent requests.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Self, cast
from urllib.parse import parse_qs

FAULT_MODES = ("fail_before_accept", "drop_after_accept", "slow", "lagging_index")
# lagging_index is no one-shot fault: until DELETE /faults, the lookup (GET /tasks?idempotency_key=K)
# sees only tasks accepted more than ``delay`` seconds ago (default an hour), as a search index that lags
DEFAULT_INDEX_LAG = 3600.0

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
    accepted_wall: datetime


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
        if path == "/tasks":
            query = parse_qs(self.path.partition("?")[2])
            keys = query.get("idempotency_key") or []
            if len(keys) != 1 or not keys[0]:
                self._error(400, "give exactly one idempotency_key")
                return
            self._send_json(200, self.sim.lookup(keys[0]))
            return
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
        if not isinstance(delay, (int, float)) or isinstance(delay, bool) or not 0 <= delay < 10**9:
            self._error(400, "delay must be a non-negative number of seconds")
            return
        if mode == "lagging_index":
            self.sim.lag_index(float(delay) or DEFAULT_INDEX_LAG)
            self._send_json(200, {"fault": {"mode": mode, "delay": float(delay) or DEFAULT_INDEX_LAG}})
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
        self._index_lag = 0.0
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
        if mode == "lagging_index":
            self.lag_index(delay or DEFAULT_INDEX_LAG)
            return
        if count < 1 or delay < 0:
            raise ValueError("count must be >= 1 and delay >= 0")
        with self._lock:
            self._fault = _Fault(mode, count, delay)

    def clear_faults(self) -> None:
        """Disarm any fault, the index's lag included."""
        with self._lock:
            self._fault = None
            self._index_lag = 0.0

    def lag_index(self, seconds: float) -> None:
        """From now on, the lookup sees only tasks accepted more than ``seconds`` ago."""
        with self._lock:
            self._index_lag = seconds

    def lookup(self, key: str) -> dict[str, object]:
        """GET /tasks?idempotency_key=K: the tasks sent with ``key`` that the index covers, and up to when
        it covers them. Read-only: it never creates or charges a task."""
        with self._lock:
            horizon = datetime.now(UTC) - timedelta(seconds=self._index_lag)
            task_id = self._by_key.get(key)
            task = None if task_id is None else self._tasks[task_id]
            seen = [self._view(task)] if task is not None and task.accepted_wall <= horizon else []
        return {"tasks": seen, "indexed_until": horizon.isoformat(timespec="seconds").replace("+00:00", "Z")}

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
                accepted_wall=datetime.now(UTC),
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
