"""A small pipeline history built with the real library and a fixed, stepping clock.

legacy weeks 2026-W30/W31 (tag ``legacy``) -> ``jobstate migrate`` and ``jobstate init``
(tag ``week-start``) -> week 2026-W33: an unknown step resolved, a rejection, a rework,
a reassembly, an approval and a completion; a second episode left with an unknown step,
a third only allocated (HEAD).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

from jobstate.allocation.allocation import allocate
from jobstate.core.periods import parse_period
from jobstate.paid.approval import approve, complete
from jobstate.paid.resolution import resolve
from jobstate.paid.step import paid_step
from jobstate.review.migrate import migrate
from jobstate.store.init import init
from jobstate.store.store import Store

from .conftest import FIXED, git
from .legacy import make_legacy_repo

W33 = parse_period("2026-W33")


def stepping_clock(start: datetime = FIXED) -> Callable[[], datetime]:
    """Each call is one minute after the previous one."""
    ticks = itertools.count()
    return lambda: start + timedelta(minutes=next(ticks))


class Interrupted(Exception):
    """Stands for a process that died after the intent was committed."""


def _paid(store: Store, eid: str, step: str, ref: str, *, amount: str, artifact: str) -> None:
    with paid_step(store, eid, step) as handle:
        if handle.remote_ref is None:
            handle.accepted(ref)
        handle.cost(amount, "USD")
        (handle.output_dir / artifact).write_text(f"{step} output of {eid} by {ref}\n")
        handle.artifact(artifact)


def _left_unknown(store: Store, eid: str, step: str) -> None:
    """A paid step whose body died after its intent was committed: unknown until resolved."""
    try:
        with paid_step(store, eid, step):
            raise Interrupted
    except Interrupted:
        pass


def build_pipeline_history(repo: Path) -> Path:
    """The history described in the module docstring, in a new repository at ``repo``."""
    make_legacy_repo(repo, ["2026-W30", "2026-W31"])
    git(repo, "tag", "legacy")
    clock = stepping_clock()
    with Store(repo, now=clock, lock_timeout=5) as store:
        migrate(store)
    init(repo)[0].close()
    git(repo, "tag", "week-start")
    with Store(repo, now=clock, lock_timeout=5) as store:
        eid = allocate(store, "weekly-episode:2026-08-14", W33).episode_id
        _left_unknown(store, eid, "generate")
        resolve(store, eid, "generate", accepted="task-1", by="ops-oncall", reason="vendor ledger lists task-1")
        _paid(store, eid, "generate", "task-1", amount="12.40", artifact="final.txt")
        approve(store, eid, by="editor", reject=True, reason="intro too long")
        _paid(store, eid, "rework", "task-2", amount="3.10", artifact="rework.txt")
        _paid(store, eid, "reassemble", "task-3", amount="0.85", artifact="final-v2.txt")
        approve(store, eid, by="editor")
        complete(store, eid)
        second = allocate(store, "manual-rerun:2026-08-15", W33).episode_id
        _left_unknown(store, second, "generate")
        allocate(store, "scheduled-run:2026-08-21", parse_period("2026-W34"))
    return repo
