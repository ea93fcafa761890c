"""Who signed each decision: every commit of a range that introduces an operator's decision (merge
commits included), found by the lifecycle rules on the records, not by reading patch text, and
judged by ``core.rules_decisions.signer_problem``. Used by ``verify --approvers`` and ``diff``.

This is a read-only operation (Git objects only).
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from jobstate.core.rules_decisions import Decided, decisions_made, introduced, signer_problem
from jobstate.errors import UsageError
from jobstate.git.signing import signatures
from jobstate.review.changes import touched
from jobstate.review.revision import StateView, read_state
from jobstate.store.snapshot import ROOTS


class SignedDecision(NamedTuple):
    """A decision, the commit that introduced it, that commit's signature and what is wrong with it."""

    decided: Decided
    commit: str
    status: str
    signer: str
    problem: str | None


def require_signers_file(given: Path | None) -> None:
    """Refuse (UsageError, exit 2) an allowed-signers or approvers file that cannot be read, before anything
    is judged by it: verify and diff alike, whether or not the range holds a decision."""
    if given is not None and not given.is_file():
        raise UsageError(f"cannot read the allowed-signers file {given}: give an existing file")


def signed_decisions(cwd: Path, tip: str, base: str | None, *, approvers: Path | None = None) -> list[SignedDecision]:
    """Every decision introduced by a commit from ``base`` (or the root) to ``tip``, oldest first, with
    its commit's signature checked against ``approvers`` (else the repository's trust). Read-only."""
    out: list[SignedDecision] = []
    for commit in signatures(cwd, tip, base, ROOTS, allowed_signers=approvers):
        parents = commit.parents or ("",)
        per_parent = []
        for parent in parents:
            only = touched(cwd, parent, commit.sha) if parent else None
            old = read_state(cwd, parent, only=only, progress=False) if parent else StateView("", "")
            new = read_state(cwd, commit.sha, only=only, progress=False)
            per_parent.append(
                [d for eid, view in sorted(new.episodes.items()) for d in decisions_made(old.episodes.get(eid), view)]
            )
        for decided in introduced(per_parent):
            problem = signer_problem(
                decided, commit.status, commit.signer, approvers=None if approvers is None else str(approvers)
            )
            out.append(SignedDecision(decided, commit.sha, commit.status, commit.signer, problem))
    return out
