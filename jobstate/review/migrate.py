"""Migration of legacy week-only IDs (``state/2026-W30/``) to versioned IDs, and of the flat layout
(``state/2026-W30-0/``) to today's (``state/2026/2026-W30/2026-W30-0/``).

Like a reviewed database migration: ``plan`` only reads, and a dry run prints
the plan and the YAML diff; ``migrate`` applies the whole plan as one commit
of renames plus small additions, then proves with ``verify --against`` that
artifact hashes, cost ledgers, remote refs, approvals and completion times
survived exactly. It never reads credentials nor touches a vendor.
"""

from __future__ import annotations

import contextlib
import difflib
import os
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

from jobstate.core.artifacts import artifact_map
from jobstate.core.clock import format_time
from jobstate.core.episode_records import legacy_fields_not_read
from jobstate.core.layout import (
    EPISODE_FILE,
    HISTORY,
    RETIRED,
    STATE,
    canonical,
    describes_episode,
    episode_dir,
    episode_path,
    history_path,
    is_flat,
    is_flat_name,
    mode_refusal,
)
from jobstate.core.names import validate_artifact_path
from jobstate.core.periods import parse_period, parse_time
from jobstate.core.records import episode_from_yaml_dict, history_from_yaml_dict
from jobstate.errors import AllocationConflict, ConcurrentUpdate, StateInvalid, UsageError, VerifyFailed
from jobstate.git.objects import TREE_MODE, TreeEdit
from jobstate.hashing import sha256_file
from jobstate.review.verify import verify
from jobstate.store.store import Store
from jobstate.store.transaction import commit, locked, sync_remote
from jobstate.store.undo import refuse_symlinks
from jobstate.store.yamlio import dumps, load_file, loads
from jobstate.version import __version__


@dataclass
class Move:
    """One legacy episode (its state directory and/or its history file) and where it goes."""

    week: str  # "" for an episode that only moves from the flat layout
    new_id: str
    renames: list[tuple[str, str]] = field(default_factory=list)
    writes: dict[str, bytes] = field(default_factory=dict)
    old_texts: dict[str, bytes] = field(default_factory=dict)

    def describe(self) -> list[str]:
        """``old -> new`` lines for the plan and the commit message."""
        return [f"{old} -> {new}" for old, new in self.renames]

    def old_file(self, new_rel: str) -> str:
        """The legacy file a rewritten file (a key of ``writes``) was."""
        old = next(old for old, cur in self.renames if new_rel.startswith(cur))
        return f"{old}/episode.yaml" if old.startswith(f"{STATE}/") else old


def _legacy_weeks(store: Store) -> tuple[list[str], list[str]]:
    """Week-only names in state/ and history/ that have no episode_id yet."""

    def is_week(name: str) -> bool:
        try:
            return parse_period(name).kind == "iso-week"
        except UsageError:
            return False

    states, histories = [], []
    for path in sorted((store.root / STATE).iterdir()) if (store.root / STATE).is_dir() else []:
        if path.is_dir() and is_week(path.name):
            data = load_file(path / "episode.yaml", f"{STATE}/{path.name}/episode.yaml")
            if not (isinstance(data, dict) and "episode_id" in data):
                states.append(path.name)
    for path in sorted((store.root / HISTORY).glob("*.yaml")) if (store.root / HISTORY).is_dir() else []:
        if is_week(path.stem):
            data = load_file(path, f"{HISTORY}/{path.name}")
            if not (isinstance(data, dict) and "episode_id" in data):
                histories.append(path.stem)
    return states, histories


def _header(week: str, new_id: str, original: dict[str, Any], migrated_at: str, *, history: bool) -> dict[str, Any]:
    migration = {"from_id": week, "migrated_at": migrated_at, "tool": f"jobstate {__version__}"}
    if history:
        # a history file names the episode it completes and where it came from, nothing more:
        # the header stays small, so git still sees the move as a rename
        return {
            k: v for k, v in {"schema": 1, "episode_id": new_id, "migration": migration}.items() if k not in original
        }
    added: dict[str, Any] = {
        "schema": 1,
        "episode_id": new_id,
        "period_id": week,
        "week_id": week,
        "sequence": 0,
        "allocation_key": f"legacy:{week}",
        "allocated_at": _allocated_by(original, migrated_at),
        "migration": migration,
    }
    return {k: v for k, v in added.items() if k not in original}


def _allocated_by(original: dict[str, Any], migrated_at: str) -> str:
    """The legacy layout never recorded the allocation: the earliest time its record names (the approval
    or the completion), since the episode existed by then; the migration time when it names none."""
    found = [original.get("completed_at")]
    if isinstance(original.get("approval"), dict):
        found.append(original["approval"].get("at"))
    moments = []
    for value in found:
        moment: Any = value
        if isinstance(value, str):
            with contextlib.suppress(UsageError):
                moment = parse_time(value)
        if isinstance(moment, date) and not isinstance(moment, datetime):  # an unquoted YAML date
            moment = datetime(moment.year, moment.month, moment.day)
        if isinstance(moment, datetime):
            moments.append(moment if moment.tzinfo else moment.replace(tzinfo=UTC))
    earliest = min(moments, default=None)
    return format_time(earliest) if earliest is not None and earliest < parse_time(migrated_at) else migrated_at


def _rewrite(rel: str, text: bytes, week: str, new_id: str, migrated_at: str, *, history: bool) -> bytes:
    """The migrated file: new fields on top, then the original text byte for byte."""
    original = loads(text, rel)
    if not isinstance(original, dict):
        raise StateInvalid(f"{rel}: expected a mapping")
    if "week" in original and original["week"] != week:
        raise StateInvalid(f"{rel}: week {original['week']!r} does not match its name {week}")
    body = text
    if body.startswith(b"---\n"):
        body = body[4:]
    if body.lstrip().startswith((b"%", b"---")):
        raise StateInvalid(f"{rel}: YAML directives or several documents; migrate this file by hand")
    new = dumps(_header(week, new_id, original, migrated_at, history=history)) + body
    if not new.endswith(b"\n"):
        new += b"\n"
    # prove that every original field and value is kept, and the result is a valid record
    result = loads(new, rel)
    if not isinstance(result, dict) or any(result.get(k) != v for k, v in original.items()):
        raise StateInvalid(f"{rel}: migrating would change a field; migrate this file by hand")
    if history:
        history_from_yaml_dict(result, rel, new_id)
    else:
        episode_from_yaml_dict(result, rel, new_id)
    return new


def plan(store: Store, migrated_at: str) -> list[Move]:
    """What a migration would do. Read-only; refuses on clashes (exit 4) and broken artifacts (exit 7)."""
    states, histories = _legacy_weeks(store)
    moves: dict[str, Move] = {}
    for week in sorted(set(states) | set(histories)):
        new_id = f"{week}-0"
        for taken in (episode_dir(new_id), history_path(new_id), f"{STATE}/{new_id}", f"{HISTORY}/{new_id}.yaml"):
            if store.path(taken).exists():
                raise AllocationConflict(
                    f"legacy week {week} would become {new_id}, but {taken} already exists; "
                    "move one of them by hand, then migrate"
                )
        moves[week] = Move(week, new_id)
    for week in states:
        move = moves[week]
        old_rel = f"{STATE}/{week}/episode.yaml"
        text = store.path(old_rel).read_bytes()
        new_rel = episode_path(move.new_id)
        move.renames.append((f"{STATE}/{week}", episode_dir(move.new_id)))
        move.writes[new_rel] = _rewrite(old_rel, text, week, move.new_id, migrated_at, history=False)
        move.old_texts[new_rel] = text
        _check_artifacts(store, week, old_rel)
    for week in histories:
        move = moves[week]
        old_rel = f"{HISTORY}/{week}.yaml"
        new_rel = history_path(move.new_id)
        text = store.path(old_rel).read_bytes()
        move.renames.append((old_rel, new_rel))
        move.writes[new_rel] = _rewrite(old_rel, text, week, move.new_id, migrated_at, history=True)
        move.old_texts[new_rel] = text
    return list(moves.values()) + _flat_moves(store)


def _flat_moves(store: Store) -> list[Move]:
    """Every episode directory, history file and tombstone of the flat layout, and where it moves:
    renames only, every byte kept. Refused (exit 4) when today's place is taken already."""
    found: dict[str, Move] = {}

    def move(old: str) -> None:
        new = canonical(old)
        if store.path(new).exists() or store.path(new).is_symlink():
            raise AllocationConflict(f"{old} would move to {new}, which exists already; move one of them by hand")
        parts = new.split("/")
        for above in ("/".join(parts[:i]) for i in range(2, len(parts))):  # its year and period directories
            if store.path(above).is_symlink() or (store.path(above).exists() and not store.path(above).is_dir()):
                raise AllocationConflict(
                    f"{old} would move into {above}/, which is a file or a link; move it away by hand, then migrate"
                )
        eid = describes_episode(f"{old}/{EPISODE_FILE}" if old.startswith(f"{STATE}/") else old)
        assert eid is not None
        found.setdefault(eid, Move("", eid)).renames.append((old, new))

    for base in (STATE, HISTORY, RETIRED):
        for entry in sorted(os.scandir(store.path(base)), key=lambda e: e.name) if store.path(base).is_dir() else []:
            rel = f"{base}/{entry.name}"
            if (base == STATE and entry.is_dir(follow_symlinks=False) and is_flat_name(entry.name)) or (
                base != STATE and entry.is_file(follow_symlinks=False) and is_flat(rel)
            ):
                move(rel)
    return [found[eid] for eid in sorted(found)]


def unread_fields(store: Store) -> tuple[list[Move], list[str]]:
    """``migrate --check``: the plan (refused as a migration would be) and every field of the legacy
    files that the migration keeps as text but no command will read, as ``<file>: <field>``. Read-only."""
    _refuse_dirty(store)
    moves = plan(store, format_time(store.now()))
    out = []
    for move in moves:
        for new_rel, text in move.old_texts.items():  # the legacy bytes plan() read, not read again
            rel = move.old_file(new_rel)
            history = rel.startswith(f"{HISTORY}/")
            out += [f"{rel}: {name}" for name in legacy_fields_not_read(loads(text, rel), history=history)]
    return moves, out


def _check_artifacts(store: Store, week: str, rel: str) -> None:
    data = load_file(store.path(rel), rel)
    found = artifact_map(data.get("artifacts") if isinstance(data, dict) else None, rel, legacy=True)
    for name, recorded in found.items():
        try:
            validate_artifact_path(name)
        except UsageError as exc:
            raise StateInvalid(f"{rel}: {exc}") from None
        path = store.path(f"{STATE}/{week}/{name}")
        if not path.is_file() or path.is_symlink():
            raise StateInvalid(f"{STATE}/{week}/{name}: recorded artifact is missing; migration refused")
        actual, _size = sha256_file(path)
        if actual != recorded.sha256:
            raise StateInvalid(
                f"{STATE}/{week}/{name}: sha256 {actual[:16]}… no longer matches the recorded "
                f"sha256:{recorded.sha256[:16]}…; migration refused: restore the file first"
            )


def what(moves: list[Move]) -> str:
    """What a migration does, in a few words: its commit's subject and the dry run's first line."""
    legacy = sum(1 for m in moves if m.week)
    flat = len(moves) - legacy
    parts = [f"{legacy} legacy week-only ID(s) to versioned IDs"] if legacy else []
    parts += [f"{flat} episode(s) from the flat layout to state/<year>/<period>/<id>/"] if flat else []
    return "; ".join(parts)


def dry_run_text(moves: list[Move]) -> str:
    """The plan and the YAML diff a reviewer reads before anything runs."""
    if not moves:
        return "migrate: nothing to migrate (no legacy week-only IDs, no episode in the flat layout)\n"
    out = [f"migrate: {what(moves)} (dry run, nothing written)"]
    for move in moves:
        out += [f"  {line}" for line in move.describe()]
    for move in moves:
        for new_rel, new in move.writes.items():
            old_file = move.old_file(new_rel)
            out += list(
                difflib.unified_diff(
                    move.old_texts[new_rel].decode("utf-8").splitlines(),
                    new.decode("utf-8").splitlines(),
                    fromfile=f"a/{old_file}",
                    tofile=f"b/{new_rel}",
                    lineterm="",
                )
            )
    return "\n".join(out) + "\n"


def migrate(store: Store, *, dry_run: bool = False) -> tuple[list[Move], str | None]:
    """Plan, and unless ``dry_run`` apply the plan as one commit and prove nothing drifted.

    Returns the moves and the new commit (None for a dry run or nothing to do).
    """
    migrated_at = format_time(store.now())
    if not dry_run:
        return _apply(store, migrated_at)
    _refuse_dirty(store)
    return plan(store, migrated_at), None


def _refuse_dirty(store: Store) -> None:
    dirty = store.git.status(STATE, HISTORY)
    if dirty:
        raise UsageError(
            f"{dirty[0][1]} has uncommitted changes ({len(dirty)} path(s) in state/ and history/); "
            "migrate needs a clean tree: commit or stash them first"
        )


def _apply(store: Store, migrated_at: str) -> tuple[list[Move], str | None]:
    with locked(store, flat_ok=True):
        sync_remote(store, drop_uncommitted=False)
        _refuse_dirty(store)
        moves = plan(store, migrated_at)
        if not moves:
            return moves, None
        base = store.git.head_commit()
        if base is None:
            raise UsageError(f"{store.root} has no commits: commit the legacy state first")
        files: dict[str, bytes | None] = {}
        blobs: dict[str, tuple[bytes, str]] = {}
        renames = [rename for move in moves for rename in move.renames]
        moved = dict(renames)
        for mode, sha, path in store.git.ls_tree(base, STATE, HISTORY):  # one listing, however many moves
            parts = path.split("/")
            # state/<name>/..., history/<name>.yaml, history/retired/<name>.yaml
            old = next((o for o in ("/".join(parts[:2]), "/".join(parts[:3])) if o in moved), None)
            if old is not None:
                refused = mode_refusal(path, mode)
                if refused is not None:
                    raise refused
                files[path] = None
                blobs[moved[old] + path[len(old) :]] = (mode.encode(), sha)
        for move in moves:
            for rel, data in move.writes.items():
                blobs.pop(rel, None)
                files[rel] = data
        # an episode directory moved as it is: its tree moves, no tree under it is read or written again
        trees: dict[str, TreeEdit] = {}
        state = store.git.entry(store.git.commit_tree_of(base), STATE)  # read once: every lookup is in it
        state_tree = state[1] if state is not None and state[0] == TREE_MODE else None  # not a link's blob
        for move in moves:
            for old, new in [] if move.writes else move.renames:
                name = old.removeprefix(f"{STATE}/")
                found = store.git.entry(state_tree, name) if state_tree is not None and name != old else None
                if found is not None and found[0] == TREE_MODE:
                    trees[old], trees[new] = None, found
        lines = [line for move in moves if move.week for line in move.describe()]
        flat = [line for move in moves if not move.week for line in move.describe()]
        if len(flat) > 20:  # a reviewer reads the rule and a few examples; the diff has every rename
            flat = [*flat[:20], f"... and {len(flat) - 20} more, each to state/<year>/<period>/<id>"]
        message = f"jobstate migrate: {what(moves)}\n\n" + "\n".join(lines + flat)

        def prove(commit_id: str) -> None:
            # the whole proof runs on the commit about to land, before the branch moves: a migration that
            # would change anything it must keep is refused with nothing written
            report = verify(store.root, rev=commit_id, against=base)
            # what the migration wrote must be sound, and nothing it must keep may differ;
            # problems elsewhere in the tree were there before and are verify's business
            written = tuple(path for move in moves for _old, path in move.renames)
            drift = report.differences + [
                f"{p.path}: {p.message}" for p in report.errors(strict=False) if p.path.startswith(written)
            ]
            if drift:
                raise VerifyFailed(
                    f"migrating would change what it must preserve: {drift[0]}"
                    f"{f' (and {len(drift) - 1} more)' if len(drift) > 1 else ''}; nothing was written: "
                    "migrate these episodes by hand, or report the file to jobstate's maintainers"
                )

        refuse_symlinks(store, [*files, *(new for _old, new in renames)])
        landed = commit(store, None, files, message, blobs=blobs, renames=renames, trees=trees, prove=prove)
        if landed is None:
            raise ConcurrentUpdate("the branch moved during the migration; nothing was migrated: run it again")
    return moves, landed
