"""The probe protocol: a read-only question to the vendor that may settle a step left unknown. Pure.

A probe answers with one JSON object in ``$JOBSTATE_PROBE_RESULT``:

- ``{"found": true, "remote_ref": "...", "cost": {"amount": "12.40", "currency": "USD"}}``: the
  vendor has the task sent with this attempt's idempotency key (``cost`` optional);
- ``{"found": false, "searched_until": "<ISO 8601 time>"}``: it has none, and its answer covers
  everything accepted up to that time;
- ``{"found": null, "why": "..."}``: it cannot say.

``judge_answer`` turns that into a verdict; only ``found: false`` whose search reaches past the
attempt's intent may say "not submitted", because a lagging index sees nothing of a task accepted
after the time it covers. Everything else that is not a well-formed ``found: true`` is unknown.
The settled attempt's resolution keeps the answer as evidence (``probe_evidence``), and the strict
reader refuses a probe settlement whose evidence does not say what it decided (``evidence_problem``),
so a hand-written "settled by probe" is flagged by verify and diff alike.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from jobstate.core.money import validate_charge_amount, validate_currency
from jobstate.core.names import validate_remote_ref
from jobstate.errors import UsageError

PROBE_BY = "jobstate-probe"  # the ``by:`` of a settlement made from a probe's answer
MAX_ANSWER = 64 * 1024  # a probe answers in one small object; anything larger is not an answer
MAX_WHY = 200
ACCEPTED = "accepted"
NOT_SUBMITTED = "not-submitted"
UNKNOWN = "unknown"
_FINGERPRINT = re.compile(r"sha256:[0-9a-f]{64}")


class ProbeVerdict(NamedTuple):
    """What a probe's answer settles: ``decision`` is accepted, not-submitted or unknown."""

    decision: str
    remote_ref: str | None
    why: str  # a short sentence for people: what the vendor said, or why it settles nothing
    answer: dict[str, Any] | None  # the answer's known fields, as kept for evidence


def _unknown(why: str, answer: dict[str, Any] | None = None) -> ProbeVerdict:
    return ProbeVerdict(UNKNOWN, None, why, answer)


def parse_time(value: object) -> datetime | None:
    """An ISO 8601 time with a zone (``Z`` or an offset), in UTC; None for anything else."""
    if not isinstance(value, str) or len(value) > 64:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00") if value.endswith("Z") else value)
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None  # a time without a zone could be hours off: it proves nothing
    return moment.astimezone(UTC)


def _short(text: object) -> str:
    return " ".join(str(text).split())[:MAX_WHY]


def judge_answer(raw: bytes | None, started_at: object) -> ProbeVerdict:
    """The verdict on a probe's raw answer for an attempt whose intent was committed at ``started_at``."""
    if raw is None:
        return _unknown("the probe wrote no answer to $JOBSTATE_PROBE_RESULT")
    if len(raw) > MAX_ANSWER:
        return _unknown(f"the probe's answer is over {MAX_ANSWER} bytes")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return _unknown("the probe's answer is not one JSON object")
    if not isinstance(data, dict) or "found" not in data:
        return _unknown('the probe\'s answer is not one JSON object with "found"')
    found = data["found"]
    if found is True:
        return _found(data)
    if found is False:
        return _not_found(data, started_at)
    if found is None:
        why = data.get("why")
        text = _short(why) if isinstance(why, str) and why.strip() else "no reason given"
        return _unknown(f"the vendor cannot say: {text}", {"found": None, "why": text})
    return _unknown(f'"found" must be true, false or null, not {_short(json.dumps(found))}')


def _found(data: Mapping[str, Any]) -> ProbeVerdict:
    try:
        ref = validate_remote_ref(data.get("remote_ref"))
    except UsageError as exc:
        return _unknown(f"found: true without a usable remote_ref ({_short(exc)})")
    answer: dict[str, Any] = {"found": True, "remote_ref": ref}
    cost = data.get("cost")
    if cost is not None:
        try:
            if not isinstance(cost, dict):
                raise UsageError("cost must be an object of amount and currency")
            answer["cost"] = {
                "amount": validate_charge_amount(cost.get("amount")),
                "currency": validate_currency(cost.get("currency")),
            }
        except UsageError as exc:
            return _unknown(f"found: true with a malformed cost ({_short(exc)})")
    return ProbeVerdict(ACCEPTED, ref, f"the vendor has remote task {ref}", answer)


def _not_found(data: Mapping[str, Any], started_at: object) -> ProbeVerdict:
    until = parse_time(data.get("searched_until"))
    if until is None:
        return _unknown('found: false without "searched_until", an ISO 8601 time with a zone: it proves nothing')
    answer = {"found": False, "searched_until": _stamp(until)}
    intent = parse_time(started_at)
    if intent is None:
        return _unknown("the attempt has no readable intent time to compare the search with", answer)
    # the intent is recorded in whole seconds, so it happened before intent + 1 s: the search must reach that
    if until < intent + timedelta(seconds=1):
        return _unknown(
            f"the vendor's search covers only until {_stamp(until)}, not past this attempt's intent at "
            f"{_stamp(intent)}: a task accepted since would not show yet",
            answer,
        )
    return ProbeVerdict(NOT_SUBMITTED, None, f"the vendor has no such task up to {_stamp(until)}", answer)


def _stamp(moment: datetime) -> str:
    return f"{moment.year:04d}-{moment:%m-%dT%H:%M:%S}Z"


def probe_evidence(verdict: ProbeVerdict, command_fingerprint: str) -> dict[str, Any]:
    """What a settling resolution keeps of the probe: its command's fingerprint and its answer."""
    if verdict.decision == UNKNOWN or verdict.answer is None:
        raise ValueError("an unknown verdict settles nothing")  # a caller's bug, never input
    return {"command": command_fingerprint, "answer": dict(verdict.answer)}


def evidence_problem(resolution: Mapping[str, Any], remote_ref: object, started_at: object) -> str | None:
    """Why a resolution made by the probe (``by: jobstate-probe`` or carrying ``probe:``) does not
    prove what it decided; None when it does (or when it is no probe settlement)."""
    probe = resolution.get("probe")
    if resolution.get("by") != PROBE_BY and probe is None:
        return None
    if resolution.get("by") != PROBE_BY:
        return f"a probe's evidence in a decision by {_short(resolution.get('by'))}, not by {PROBE_BY}"
    if not isinstance(probe, dict):
        return "settled by probe without its evidence (probe: command and answer)"
    if not isinstance(probe.get("command"), str) or not _FINGERPRINT.fullmatch(probe["command"]):
        return "settled by probe without the probe command's fingerprint (probe: command: sha256:...)"
    answer = probe.get("answer")
    if not isinstance(answer, dict):
        return "settled by probe without the probe's answer"
    decision = resolution.get("decision")
    if decision == ACCEPTED:
        if answer.get("found") is not True or answer.get("remote_ref") != remote_ref:
            return f"settled by probe as accepted as {_short(remote_ref)}, but the probe's answer does not say so"
        return None
    if decision == NOT_SUBMITTED:
        verdict = judge_answer(json.dumps(answer).encode("utf-8"), started_at)
        if verdict.decision != NOT_SUBMITTED:
            return f"settled by probe as not submitted, but the probe's answer does not prove it: {verdict.why}"
        return None
    return f"a probe settles a step as accepted or not-submitted, not {_short(decision)}"
