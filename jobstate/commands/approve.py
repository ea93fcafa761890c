"""``jobstate approve``."""

from __future__ import annotations

from jobstate.commands._output import note
from jobstate.paid.approval import approve as approve_episode
from jobstate.store.store import StoreOptions


def approve(options: StoreOptions, *, episode: str, by: str, reject: bool, reason: str | None) -> int:
    """Record an approval or a rejection."""
    with options.open() as store:
        decision = approve_episode(store, episode, by=by, reject=reject, reason=reason or "", notify=note)
    print(f"{episode} {decision.status}")
    return 0
