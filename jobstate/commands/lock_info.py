"""``jobstate lock-info``."""

from __future__ import annotations

from jobstate.commands._output import print_json
from jobstate.store.lock import describe
from jobstate.store.store import StoreOptions


def lock_info(options: StoreOptions, *, as_json: bool) -> int:
    """Say who holds the lock. Read-only apart from opening the lock file."""
    with options.open() as store:
        holder = store.lock_holder()
        path = store.lock_path
    known = holder is not None and holder.get("pid") is not None
    if as_json:
        print_json({"locked": holder is not None, "lock": str(path), "holder": holder if known else None})
    elif holder is None:
        print(f"unlocked: nobody holds {path}")
    else:
        print(f"locked: {path} is held by {describe(holder)}")
    return 0
