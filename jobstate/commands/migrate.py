"""``jobstate migrate``."""

from __future__ import annotations

import sys

from jobstate.commands._output import note, print_json
from jobstate.errors import OK, VERIFY_PROBLEMS
from jobstate.review import escape
from jobstate.review.migrate import dry_run_text, unread_fields
from jobstate.review.migrate import migrate as migrate_state
from jobstate.store.store import StoreOptions


def migrate(options: StoreOptions, *, dry_run: bool, check: bool = False, as_json: bool = False) -> int:
    """Migrate legacy week-only IDs and the flat layout (or print the plan with ``dry_run``, or with ``check`` list the
    legacy fields no command would read after it, exit 1 when there is one)."""
    if check:
        with options.open() as store:
            moves, unread = unread_fields(store)
        moves = [move for move in moves if move.week]  # the flat layout's moves keep every byte
        if as_json:
            print_json({"episodes": len(moves), "unread_fields": unread})
        else:
            for line in unread:
                print(escape.text(line))
        note(
            f"{len(unread)} legacy field(s) in {len(moves)} legacy episode(s) are kept as text but read by "
            "no command (docs/review-and-ci.md#the-legacy-layout)"
            if unread
            else f"every field of {len(moves)} legacy episode(s) is carried over"
        )
        return VERIFY_PROBLEMS if unread else OK
    with options.open() as store:
        moves, commit = migrate_state(store, dry_run=dry_run)
    if dry_run:
        sys.stdout.write(dry_run_text(moves))
    elif commit is None:
        print("migrate: nothing to migrate (no legacy week-only IDs, no episode in the flat layout)")
    else:
        print(f"migrate: {len(moves)} episode(s) migrated in commit {commit[:12]}; verified against its parent")
        for move in moves:
            for line in move.describe():
                print(f"  {line}")
    return 0
