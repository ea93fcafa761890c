"""``jobstate resolve``."""

from __future__ import annotations

from jobstate.commands._output import note
from jobstate.errors import UsageError
from jobstate.paid.probe import settle_with_probe
from jobstate.paid.resolution import resolve as resolve_step
from jobstate.store.store import StoreOptions


def resolve(
    options: StoreOptions,
    *,
    episode: str,
    step: str,
    accepted: str | None,
    supersede: bool,
    by: str | None,
    reason: str | None,
    replaces: str | None = None,
    probe: str | None = None,
    probe_timeout: float | None = None,
) -> int:
    """Record an operator's decision on a paid step (or, with ``probe``, the vendor's answer to the
    step's probe) and say what happens next."""
    if probe is not None:
        if by is not None or reason is not None or replaces is not None:
            raise UsageError(
                "--probe records the vendor's answer as jobstate-probe's decision: leave out --by, --reason and "
                "--replaces (or settle it yourself with --accepted or --not-submitted)"
            )
        with options.open() as store:
            print(settle_with_probe(store, episode, step, probe or None, probe_timeout, notify=note))
        return 0
    if by is None or reason is None:
        raise UsageError("resolve needs --by NAME and --reason TEXT: the decision is recorded for review")
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
