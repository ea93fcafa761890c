"""Tombstones (``history/retired/<id>.yaml``) and the rule that an episode never vanishes. Pure.

An episode ID, once handed out, belongs to one run for ever. An episode leaves state/ only
by being completed (history/<id>.yaml), migrated to a new ID, or retired with a tombstone
that keeps its ID and key; one that is simply gone (git rm, a revert, a reset, a merge that
dropped it) has vanished. The allocator, ``verify`` and ``diff`` all ask ``vanished``.
One reader and one writer for the record; ``validate_note`` checks --by and --reason.
"""

from __future__ import annotations

import reprlib
import unicodedata
from collections.abc import Collection
from typing import Any, NamedTuple

from jobstate.core.clock import time_text
from jobstate.core.keys import validate_key
from jobstate.core.layout import episode_dir
from jobstate.core.periods import parse_episode_id
from jobstate.core.records import mapping_of
from jobstate.errors import StateInvalid, UsageError

SCHEMA = 1
MAX_BY = 200
MAX_REASON = 1000
_FIELDS = ("schema", "episode_id", "period_id", "sequence", "allocation_key", "retired_by", "reason", "retired_at")


class Tombstone(NamedTuple):
    """A retired episode: its ID and key are never handed out again."""

    episode_id: str
    period_id: str
    sequence: int
    allocation_key: str
    retired_by: str
    reason: str
    retired_at: str

    def to_yaml_dict(self) -> dict[str, Any]:
        """The mapping the tombstone file holds, in a fixed order."""
        return {"schema": SCHEMA, **self._asdict()}


def validate_note(value: object, what: str, limit: int) -> str:
    """Who retired an episode, or why: 1 to ``limit`` characters on one line, no control characters."""
    if not isinstance(value, str) or not value.strip():
        raise UsageError(f"{what} must be non-empty text")
    if len(value) > limit:
        raise UsageError(f"{what} is {len(value)} characters long; at most {limit} are allowed")
    for ch in value:
        if unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp"):
            raise UsageError(
                f"{what} {value[:40]!r} holds control or format character U+{ord(ch):04X}; give one line of text"
            )
    return value


def new_tombstone(episode_id: str, allocation_key: str, by: str, reason: str, at: str) -> Tombstone:
    """The tombstone ``jobstate retire`` writes, checked by the same rules as one read back."""
    period, sequence = parse_episode_id(episode_id)
    stone = Tombstone(
        episode_id,
        period.id,
        sequence,
        validate_key(allocation_key),
        validate_note(by, "--by", MAX_BY),
        validate_note(reason, "--reason", MAX_REASON),
        at,
    )
    return tombstone_from_yaml_dict(stone.to_yaml_dict(), "retire", episode_id)


def tombstone_from_yaml_dict(data: Any, source: str, name: str) -> Tombstone:
    """Check a tombstone strictly: every field present and right, nothing else, named after its episode."""
    data = mapping_of(data, source, "a tombstone")
    unknown = sorted(set(data) - set(_FIELDS), key=str)
    if unknown:
        raise StateInvalid(f"{source}: unknown tombstone field {reprlib.repr(unknown[0])}")
    if data.get("schema") != SCHEMA or isinstance(data.get("schema"), bool):
        raise StateInvalid(f"{source}: unknown schema {reprlib.repr(data.get('schema'))} (expected {SCHEMA})")
    episode_id = data.get("episode_id")
    try:
        period, sequence = parse_episode_id(episode_id)
        key = validate_key(data.get("allocation_key"))
        by = validate_note(data.get("retired_by"), "retired_by", MAX_BY)
        reason = validate_note(data.get("reason"), "reason", MAX_REASON)
    except UsageError as exc:
        raise StateInvalid(f"{source}: {exc}") from None
    if episode_id != name:
        raise StateInvalid(f"{source}: episode_id {episode_id!r} does not match its name {name!r}")
    if data.get("period_id") != period.id or data.get("sequence") != sequence:
        raise StateInvalid(f"{source}: period_id and sequence must match {episode_id}")
    at = data.get("retired_at")
    if not isinstance(at, str) or time_text(at) is None:
        raise StateInvalid(f"{source}: retired_at must be a time, found {reprlib.repr(at)}")
    return Tombstone(episode_id, period.id, sequence, key, by, reason, at)


def vanished(ever: Collection[str], present: Collection[str], accounted: Collection[str] = ()) -> list[str]:
    """Episode IDs that were once committed and are now neither present nor accounted for, in order.

    ``present``: IDs with a directory in state/ or a history file; ``accounted``: IDs retired
    (a tombstone) or migrated to a new ID. Only canonical IDs count: a legacy week-only name
    is renamed by a migration, never handed out again.
    """
    out = []
    for eid in ever:
        if eid in present or eid in accounted:
            continue
        try:
            parse_episode_id(eid)
        except UsageError:
            continue
        out.append(eid)
    return sorted(out)


def vanished_text(
    episode_id: str,
    key: str | None,
    removed_by: str | None,
    *,
    last_seen: str | None = None,
    staged: bool = False,
    in_ancestry: bool = False,
) -> str:
    """Why an episode counts as vanished, naming the commit that removed it (or where it was last seen).
    ``in_ancestry``: HEAD's history holds ``last_seen`` (a merge dropped it, no reset or rewrite did)."""
    owner = f" (key {key!r})" if key else ""
    if staged:
        how = "is committed in HEAD but deleted in the index or work tree"
    elif removed_by is None and in_ancestry and last_seen:
        how = f"was committed in {last_seen[:12]}, which HEAD's history holds, and a merge did not keep it"
    elif removed_by is None:
        where = f" (it is in commit {last_seen[:12]})" if last_seen else ""
        how = f"was committed on this branch but HEAD no longer contains it{where}: a reset or a rewritten history"
    else:
        how = f"was removed by commit {removed_by[:12]}"
    return (
        f"episode {episode_id}{owner} {how}; its ID is never handed out again: restore "
        f"{episode_dir(episode_id)} from Git or retire it with: jobstate retire {episode_id} --by NAME --reason TEXT"
    )
