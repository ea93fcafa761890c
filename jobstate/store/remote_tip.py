"""The remote tip this clone last pushed or fetched (``.jobstate/remote-tip.json``), and the refusal
to follow a remote branch that no longer contains it (a reset and force-push elsewhere).

Host-local and written only by jobstate, atomically; a remote rewritten under us would otherwise be
followed silently, and every episode the rewrite dropped would have its ID handed out again.
"""

from __future__ import annotations

import json
import re

from jobstate.atomic import atomic_write
from jobstate.core.layout import REMOTE_TIP_FILE
from jobstate.errors import RemoteRewritten
from jobstate.store.private import read_private
from jobstate.store.store import Store
from jobstate.store.yamlio import json_dumps

_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def _tips(store: Store) -> dict[str, str]:
    raw = read_private(store, store.path(REMOTE_TIP_FILE))  # refused when jobstate did not write it
    try:
        data = json.loads(raw or b"{}")
    except ValueError:
        return {}  # none yet (or half written): the next fetch or push records one
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str) and _SHA.fullmatch(v)}


def record_remote_tip(store: Store, remote: str, ref: str, tip: str) -> None:
    """Remember ``tip`` as the last commit of ``remote``'s ``ref`` this clone saw (call under the lock)."""
    tips = _tips(store)
    if tips.get(f"{remote} {ref}") == tip:
        return
    tips[f"{remote} {ref}"] = tip
    store.ensure_private()
    atomic_write(store.path(REMOTE_TIP_FILE), json_dumps(tips))


def check_remote_tip(store: Store, remote: str, ref: str, tip: str) -> None:
    """Refuse (exit 3) a fetched ``tip`` that does not contain the last tip this clone pushed or fetched."""
    last = _tips(store).get(f"{remote} {ref}")
    if last is None or last == tip or store.git.is_ancestor(last, tip):
        return
    branch = ref.removeprefix("refs/heads/")
    raise RemoteRewritten(
        f"{remote}/{branch} was rewritten: it is now {tip[:12]}, which does not contain {last[:12]}, the tip this "
        f"clone last pushed or fetched; episodes committed there may be gone for every host, so jobstate will not "
        f"follow it. See what was dropped with: git log {tip[:12]}..{last[:12]} -- state/; push it back (e.g. git "
        f"push {remote} {last[:12]}:{ref} when {remote} has nothing newer), or if the rewrite was deliberate and "
        f"checked, accept it with: rm {REMOTE_TIP_FILE}"
    )
