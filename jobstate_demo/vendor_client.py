"""A client of the fake vendor, as a paid step would use a real one: submit with an idempotency key, poll, wait."""

from __future__ import annotations

import http.client
import json
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import cast

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


def lookup(url: str, idempotency_key: str, timeout: float = 10.0) -> dict[str, object]:
    """GET /tasks?idempotency_key=K (read-only): {"tasks": [...], "indexed_until": time}."""
    query = urllib.parse.urlencode({"idempotency_key": idempotency_key})
    return _get(f"{url.rstrip('/')}/tasks?{query}", "lookup", timeout)


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
