"""Episode IDs handed out on two branches, found where the branches meet. Pure.

Each branch decides its allocations under its own lock, so two branches can hand out the same
ID to two keys, or the same key two IDs. Neither branch is wrong alone; the merge is where it shows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def merge_collisions(sides: Sequence[Mapping[str, str]], where: str) -> list[tuple[str, str]]:
    """Across the sides of one merge (each: episode ID -> allocation key), every ID that has two keys
    and every key that has two IDs, as (episode ID, message), in ID order. ``where`` names the merge."""
    keys_of: dict[str, set[str]] = {}
    ids_of: dict[str, set[str]] = {}
    for side in sides:
        for eid, key in side.items():
            keys_of.setdefault(eid, set()).add(key)
            ids_of.setdefault(key, set()).add(eid)
    out: list[tuple[str, str]] = []
    for eid, keys in sorted(keys_of.items()):
        if len(keys) > 1:
            listed = " and ".join(repr(k) for k in sorted(keys))
            out.append(
                (
                    eid,
                    f"ID handed out on two branches: {eid} has keys {listed} on the two sides of {where}; "
                    "one ID now names two runs, and the run whose episode.yaml was not kept lost its ID "
                    "(docs/git-setups.md#branches-and-worktrees)",
                )
            )
    for key, ids in sorted(ids_of.items()):
        if len(ids) > 1:
            first = min(ids)
            out.append(
                (
                    first,
                    f"key {key!r} was given {len(ids)} IDs on the two sides of {where}: {', '.join(sorted(ids))}; "
                    "one run now has several episodes (docs/git-setups.md#branches-and-worktrees)",
                )
            )
    return sorted(out)
