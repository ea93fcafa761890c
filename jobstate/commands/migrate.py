"""``jobstate migrate``."""

from __future__ import annotations

import sys

from jobstate.review.migrate import dry_run_text
from jobstate.review.migrate import migrate as migrate_state
from jobstate.store.store import StoreOptions


def migrate(options: StoreOptions, *, dry_run: bool) -> int:
    """Migrate legacy week-only IDs (or print the plan with ``dry_run``)."""
    with options.open() as store:
        moves, commit = migrate_state(store, dry_run=dry_run)
    if dry_run:
        sys.stdout.write(dry_run_text(moves))
    elif commit is None:
        print("migrate: nothing to migrate (no legacy week-only IDs)")
    else:
        print(f"migrate: {len(moves)} episode(s) migrated in commit {commit[:12]}; verified against its parent")
        for move in moves:
            for line in move.describe():
                print(f"  {line}")
    return 0
