"""An episode's status, derived from its records. Pure: values in, values out.

The status is never stored (``episode.yaml`` keeps the status it was allocated
with); it is read off the records so that it can never disagree with them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

STATUSES = ("allocated", "running", "unknown", "approved", "rejected", "completed")


def step_state(attempts: Sequence[Mapping[str, Any]]) -> str:
    """The state of a step: the state of its last attempt (``intent`` means unknown)."""
    if not attempts:
        return "not-started"
    state = str(attempts[-1].get("state"))
    return "unknown" if state == "intent" else state


def episode_status(
    steps: Mapping[str, Sequence[Mapping[str, Any]]],
    decisions: Sequence[Mapping[str, Any]],
    completed: bool,
) -> str:
    """One of ``STATUSES`` for an episode's submissions, approval decisions and history.

    ``steps`` maps step names to attempts (``submissions.yaml``), ``decisions`` are the
    approval decisions in order (``approval.yaml``), ``completed`` says whether a history
    record exists. In order of precedence:

    - completed: a history record exists;
    - unknown: a step's last attempt is an intent nobody settled (``jobstate resolve``);
    - running: a step is accepted by the vendor and not finished;
    - approved / rejected: the latest decision, when no step is open;
    - running: steps were started but nobody decided yet (awaiting review);
    - allocated: nothing has happened since allocation.
    """
    if completed:
        return "completed"
    states = [step_state(attempts) for attempts in steps.values()]
    if "unknown" in states:
        return "unknown"
    if "accepted" in states:
        return "running"
    if decisions:
        latest = str(decisions[-1].get("status"))
        if latest in ("approved", "rejected"):
            return latest
    if any(attempts for attempts in steps.values()):
        return "running"
    return "allocated"
