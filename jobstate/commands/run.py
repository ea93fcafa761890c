"""``jobstate run``."""

from __future__ import annotations

from collections.abc import Sequence

from jobstate.commands._output import note
from jobstate.paid.run_protocol import run_step_command
from jobstate.store.store import StoreOptions


def run(
    options: StoreOptions,
    *,
    episode: str,
    step: str,
    command: Sequence[str],
    max_cost: str | None,
    request: str | None,
    probe: str | None = None,
    probe_timeout: float | None = None,
) -> int:
    """Run CMD as a paid step (see jobstate.paid.run_protocol)."""
    argv = list(command[1:]) if command[:1] == ["--"] else list(command)
    with options.open() as store:
        run_step_command(
            store,
            episode,
            step,
            argv,
            max_cost=max_cost,
            request_file=request,
            probe=probe,
            probe_timeout=probe_timeout,
            notify=note,
        )
    return 0
