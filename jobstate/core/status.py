"""What an episode is now, derived from its records. Pure: values in, values out.

Nothing stores a status: ``episode.yaml`` is written once, at allocation (an older jobstate
wrote ``status: allocated`` there, kept and never read); the truth is in the records that
follow it. The order below is the
order of what matters most to whoever asks:

- ``completed``: history/<id>.yaml exists;
- ``unknown``: a step's intent is recorded, its acceptance is not, and nobody runs it
  (it needs ``jobstate resolve``);
- ``running``: a step is running now (its step lock is held), or the vendor accepted a
  task that is not collected yet (the next run resumes it);
- ``approved`` / ``rejected``: the latest review decision;
- ``awaiting-review``: a step completed and nobody has decided yet;
- ``allocated``: nothing has happened since allocation.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING

from jobstate.core.records import AttemptState

if TYPE_CHECKING:
    from jobstate.core.approvals import Decision
    from jobstate.core.attempts import Attempt

# one word per state: "running" means only that something runs (here, or at the vendor)
STATUSES = ("allocated", "running", "unknown", "awaiting-review", "approved", "rejected", "completed")


def step_status(attempts: Sequence[Attempt], *, running: bool) -> str:
    """One step's state from its attempts: never-started, running, unknown, accepted, completed,
    not-submitted or superseded."""
    if not attempts:
        return "running" if running else "never-started"
    state = attempts[-1].state
    if state == AttemptState.INTENT:
        return "running" if running else "unknown"
    if state == AttemptState.ACCEPTED and running:
        return "running"
    return state.value


def episode_status(
    *,
    steps: Mapping[str, Sequence[Attempt]],
    approval: Decision | None,
    completed: bool,
    running: Collection[str] = (),
) -> str:
    """The episode's status now (one of STATUSES).

    ``steps`` maps step names to their attempts (submissions.yaml), ``approval`` is the latest
    review decision or None, ``completed`` says whether the history record exists, and
    ``running`` names the steps whose step lock is held at this moment.
    """
    if completed:
        return "completed"
    states = {step_status(attempts, running=name in running) for name, attempts in steps.items()}
    if "unknown" in states:
        return "unknown"
    if states & {"running", "accepted"} or running:
        return "running"
    if approval is not None and approval.status in ("approved", "rejected"):  # a legacy one may say anything
        return approval.status
    if "completed" in states:
        return "awaiting-review"
    return "allocated"
