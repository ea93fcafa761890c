"""The rules of decisions and their signers: which change records an operator's decision, and whose
signature a decision needs. Pure: records and signature statuses in, findings out.

``verify --approvers`` and ``diff`` judge every commit that introduces a decision with these
functions, merge commits included: a decision a merge brings in that none of its parents had is
the merge's own, and its signer answers for it exactly as for a plain commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol

from jobstate.core.approvals import Decision
from jobstate.core.attempts import Steps
from jobstate.core.model import appended
from jobstate.core.probe import PROBE_BY


class Decided(NamedTuple):
    """One decision a change records: on which episode, what, by whom (None: jobstate's own) and when."""

    episode: str
    what: str  # "approved", "rejected", "<step> attempt <n> resolved as <decision>", "completed"
    by: str | None
    at: str | None


class Decisions(Protocol):
    """What the rule reads of an episode at one revision."""

    episode_id: str
    steps: Steps
    decisions: list[Decision]

    @property
    def completed_at(self) -> str | None: ...


def decisions_made(old: Decisions | None, new: Decisions) -> list[Decided]:
    """The decisions the change from ``old`` (None: no such episode) to ``new`` records: review decisions
    appended to approval.yaml, an operator's resolution written on an attempt, and the completion."""
    eid = new.episode_id
    out = [Decided(eid, d.status, d.by, d.at) for d in appended(old.decisions if old else [], new.decisions)]
    for step, attempts in sorted(new.steps.items()):
        before = {a.number: a for a in (old.steps.get(step, []) if old else [])}
        for attempt in attempts:
            resolution = attempt.resolution
            earlier = before.get(attempt.number)
            if resolution is None or (earlier is not None and earlier.resolution == resolution):
                continue
            if resolution.get("by") == PROBE_BY:
                # jobstate's own record of the vendor's answer (the strict reader checks its evidence):
                # no person decided it, so no person signs it; --require-signed still checks the commit
                continue
            by = resolution.get("by")
            out.append(
                Decided(
                    eid,
                    f"{step} attempt {attempt.number} resolved as {resolution.get('decision')}",
                    by if isinstance(by, str) else None,
                    str(resolution.get("at")) if resolution.get("at") is not None else None,
                )
            )
    if new.completed_at is not None and (old is None or old.completed_at is None):
        out.append(Decided(eid, "completed", None, new.completed_at))
    return out


def introduced(per_parent: Sequence[Sequence[Decided]]) -> list[Decided]:
    """The decisions a commit itself introduces, given those it records against each of its parents:
    a merge's own are new against every parent (one side's decisions came with their own commits)."""
    if not per_parent:
        return []
    first, *rest = per_parent
    return [d for d in first if all(d in other for other in rest)]


def signer_problem(decided: Decided, status: str, signer: str, *, approvers: str | None) -> str | None:
    """Why the commit that introduced ``decided`` is not signed as the decision needs, or None.

    ``status`` and ``signer`` are git's ``%G?`` and ``%GS``, checked against the approvers file when one
    is given (``approvers``: its name), else against the repository's trust. With an approvers file,
    the signature must be good; and a good signature must be the decider's own (its principal is ``by``)."""
    if approvers is not None and status != "G":
        who = f" (signed by {signer})" if signer else ""
        return f"records a decision but is not signed by a key of the approvers file {approvers}{who}"
    if status == "G" and decided.by is not None and signer != decided.by:
        return f"{decided.what} by {decided.by!r} but signed by {signer!r}"
    return None
