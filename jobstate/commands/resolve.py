"""``jobstate resolve``."""

from __future__ import annotations

from jobstate.commands._output import note
from jobstate.paid.resolution import resolve as resolve_step
from jobstate.store.store import StoreOptions


def resolve(
    options: StoreOptions,
    *,
    episode: str,
    step: str,
    accepted: str | None,
    supersede: bool,
    by: str,
    reason: str,
    replaces: str | None = None,
) -> int:
    """Record an operator's decision on a paid step and say what happens next."""
    with options.open() as store:
        outcome = resolve_step(
            store,
            episode,
            step,
            accepted=accepted,
            by=by,
            reason=reason,
            supersede=supersede,
            replaces=replaces,
            notify=note,
        )
    print(outcome)
    return 0
