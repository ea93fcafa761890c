"""``jobstate probe``."""

from __future__ import annotations

from jobstate.commands._output import note, print_json
from jobstate.errors import SubmissionUnknown
from jobstate.paid.probe import sweep
from jobstate.store.store import StoreOptions


def probe(
    options: StoreOptions,
    *,
    episode: str | None,
    step: str | None,
    probe: str | None,
    probe_timeout: float | None,
    as_json: bool,
) -> int:
    """Settle every unknown step its probe can settle; exit 6 while one stays unknown."""
    with options.open() as store:
        outcomes = sweep(store, episode_id=episode, step=step, command=probe, timeout=probe_timeout, notify=note)
    if as_json:
        print_json(
            {
                "steps": [
                    {
                        "episode": o.episode_id,
                        "step": o.step,
                        "attempt": o.attempt,
                        "decision": o.verdict.decision,
                        "settled": o.settled,
                        "remote_ref": o.verdict.remote_ref,
                        "why": o.verdict.why,
                        "answer": o.verdict.answer,
                    }
                    for o in outcomes
                ]
            }
        )
    else:
        for o in outcomes:
            print(o.message if o.message.isprintable() else _escaped(o.message))
    open_ones = [o for o in outcomes if not o.settled]
    if open_ones:
        raise SubmissionUnknown(
            f"{len(open_ones)} step{'s' if len(open_ones) != 1 else ''} still unknown; a person settles "
            "what the vendor cannot say: jobstate resolve --episode ID --step S (--accepted REMOTE_REF | "
            "--not-submitted) --by NAME --reason TEXT",
            None,
        )
    if not outcomes:
        note("no unknown step")
    return 0


def _escaped(line: str) -> str:
    from jobstate.review import escape  # noqa: PLC0415 - start-up: only for a line that needs it

    return escape.text(line)
