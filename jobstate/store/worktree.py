"""What HEAD and the work tree hold, read under the lock: the catalog refresh and the scan of state/.

The catalog is brought up to date with HEAD incrementally (``git diff-tree``)
or rebuilt; the scan finds episodes a killed allocate wrote but never
committed, and refuses anything in state/ that jobstate did not write.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterable

from jobstate.atomic import TEMP_PREFIX
from jobstate.core import advice
from jobstate.core.layout import (
    EPISODE_FILE,
    HISTORY,
    STATE,
    describes_episode,
    episode_dir,
    episode_of,
    is_retired_path,
    mode_refusal,
)
from jobstate.core.periods import parse_episode_id
from jobstate.core.records import Episode, episode_from_yaml_dict, history_from_yaml_dict
from jobstate.core.tombstones import tombstone_from_yaml_dict
from jobstate.errors import DirtyState, JobstateError, StateInvalid, UsageError
from jobstate.git.listing import diff_modes
from jobstate.git.repoconfig import converted_by_git
from jobstate.store.attributes import converted_error
from jobstate.store.catalog import Catalog, Row
from jobstate.store.config import config_from_text
from jobstate.store.history import EPISODE_FILES, TOMBSTONES, Event, branch_tips, episode_events, files_at
from jobstate.store.store import Store, walk_state
from jobstate.store.yamlio import load_file, loads

_ALL = "*"  # the catalog's ``walk`` setting when all of state/ must be walked


def fresh_catalog(store: Store) -> Catalog:
    """The catalog, brought up to date with HEAD (call under the lock)."""
    cat = store.open_catalog()
    head = store.git.head_commit()
    known = cat.meta("head") or None
    if known != head:
        _refresh(store, cat, known, head)
    data = store.config_bytes()
    blob = store.git.blob_sha(data)
    if cat.meta("config_blob") != blob:
        # the settings the lock-free retry reads without YAML; parsed from the file as it is now
        # (init writes jobstate.yaml inside its own transaction, after this store first looked)
        config = config_from_text(data)
        cat.update(head=head, add=[], remove=[], config_blob=blob, config=config.to_json())
    return cat


def _refresh(store: Store, cat: Catalog, known: str | None, head: str | None) -> None:
    if head is None:
        cat.update(head=None, add=[], remove=[], replace_all=True)
        return
    modes = diff_modes(store.git, known, head, STATE, HISTORY) if known else None
    changed = None if modes is None else [path for _mode, path in modes]
    if modes is None:
        if (store.git.common_dir / "shallow").exists():  # git's own record of a cut history
            raise UsageError(
                f"{store.root} is a shallow clone: the IDs, keys and retirements of its cut history are unknown "
                "here, so jobstate decides nothing on it; fetch the history with: git fetch --unshallow "
                "(actions/checkout: fetch-depth: 0)"
            )
        entries = store.git.ls_tree(head, STATE, HISTORY)
        _refuse_odd((mode, path) for mode, _sha, path in entries)
        replace_all = True
    else:
        _refuse_odd(modes)
        relevant = [p for _mode, p in modes if describes_episode(p)]
        if len(relevant) > 1000:  # one listing, not a command line longer than the system allows
            wanted = set(relevant)
            entries = [e for e in store.git.ls_tree(head, STATE, HISTORY) if e[2] in wanted]
        else:
            entries = store.git.ls_tree(head, *relevant) if relevant else []
        replace_all = False
    add = rows_from_blobs(store, [(sha, path) for _mode, sha, path in entries if describes_episode(path)])
    remove = [] if changed is None else [p for p in changed if describes_episode(p)]
    # an episode the new commits removed (a reset, a revert) may still have its directory: uncommitted now;
    # the periods of every episode.yaml they changed are walked once (a superset, from the same listing)
    walk = _periods_to_walk(cat, None if changed is None else [p for p in remove if p.startswith(f"{STATE}/")])
    cat.update(head=head, add=add, remove=remove, replace_all=replace_all, walk=walk)
    _remember_history(store, cat, head, None if changed is None else known)


def _refuse_odd(entries: Iterable[tuple[str, str]]) -> None:
    """Refuse (exit 7) what HEAD holds under state/ or history/ as no command writes it (a submodule, a
    symlink, an executable file): a merge may deliver one, and nothing is decided on such a state."""
    for mode, path in entries:
        refused = None if mode == "000000" else mode_refusal(path, mode)  # 000000: gone from HEAD
        if refused is not None:
            raise refused


def _periods_to_walk(cat: Catalog, removed: list[str] | None) -> str:
    """The catalog's ``walk`` setting after a refresh: the periods whose directories ``uncommitted_episodes``
    must look into, joined by commas, or ``*`` for all of state/ (a rebuild, a removed legacy name)."""
    before = cat.meta("walk") or ""
    if removed is None or before == _ALL:
        return _ALL
    periods = set(filter(None, before.split(",")))
    for path in removed:
        described = episode_of(path)
        if described is None:
            return _ALL
        try:
            periods.add(parse_episode_id(described[0])[0].id)
        except UsageError:
            return _ALL
    return ",".join(sorted(periods))


def _remember_history(store: Store, cat: Catalog, head: str, known: str | None) -> None:
    """Record every episode the new commits ever had (all of history, and the branch's reflog,
    when the catalog starts afresh), so that a removed episode keeps its ID and key.

    Only the commits since the catalog's last tip are walked: the cost per commit stays flat.
    """
    root = store.git.root
    tips = [head]
    if not known:
        with contextlib.suppress(UsageError):  # a detached HEAD has no branch, hence no reflog of one
            tips += branch_tips(root, store.git.head_ref())
    events = episode_events(root, tips, [known] if known else [], paths=EPISODE_FILES + TOMBSTONES)
    _remember_retirements(store, cat, [e for e in events if e.status == "A" and is_retired_path(e.path)])
    events = [e for e in events if not is_retired_path(e.path)]
    # every addition, not the first of each ID: two branches may have handed out one ID with two keys, and
    # whichever file a merge kept, the other key was given (and maybe paid) too
    added = {(e.commit, e.path): e for e in reversed(events) if e.status == "A"}  # the oldest first
    # a file HEAD still holds byte for byte, at any path, is in the catalog's rows already (a migration's renames,
    # the episodes of a fresh clone, their flat-layout past): read only the others, by blob (no tree lookups)
    current = cat.known_blobs(e.blob for e in added.values())
    added = {k: e for k, e in added.items() if e.blob not in current}
    if not added:
        return
    blobs = files_at(root, sorted({e.blob for e in added.values()}))
    by_commit: dict[str, list[Row]] = {}
    for event in added.values():
        eid = event.episode_id
        try:
            period, sequence = parse_episode_id(eid)
        except UsageError:
            continue  # a legacy week-only name: renamed by a migration, never handed out again
        key = ""
        data = blobs.get(event.blob)
        with contextlib.suppress(StateInvalid, UsageError):  # a file that cannot be read still used up its ID
            key = episode_from_yaml_dict(loads(data or b"", event.path), event.path, eid).allocation_key
        by_commit.setdefault(event.commit, []).append(Row(event.path, eid, period.id, sequence, key, ""))
    for commit, rows in by_commit.items():
        cat.remember(rows, commit)


def _remember_retirements(store: Store, cat: Catalog, added: list[Event]) -> None:
    """Record the tombstones the new commits added (all of history when the catalog starts afresh): a
    retirement that a later merge took away still stands for the branch whose history had it."""
    if not added:
        return
    blobs = files_at(store.git.root, sorted({e.blob for e in added}))
    for event in reversed(added):  # the oldest first
        with contextlib.suppress(StateInvalid, UsageError):  # an unreadable tombstone retires nothing here
            stone = tombstone_from_yaml_dict(
                loads(blobs.get(event.blob) or b"", event.path), event.path, event.episode_id
            )
            row = Row(event.path, stone.episode_id, stone.period_id, stone.sequence, stone.allocation_key, "")
            cat.remember_retired([row], event.commit)


def rows_from_blobs(store: Store, blobs: list[tuple[str, str]]) -> list[Row]:
    """Catalog rows for committed files (blob ID, path), read from the work tree when it matches."""
    rows: list[Row] = []
    missing: list[tuple[str, str]] = []
    datas: dict[str, bytes] = {}
    for sha, path in blobs:
        try:
            data = (store.root / path).read_bytes()
        except OSError:
            data = None
        if data is not None and store.git.blob_sha(data) == sha:
            datas[path] = data
        else:
            missing.append((sha, path))
    if missing:
        with store.git.object_reader() as read:
            for sha, path in missing:
                datas[path] = read(sha)[1]
    for sha, path in blobs:
        name = describes_episode(path)
        assert name is not None
        data = loads(datas[path], path)
        if is_retired_path(path):
            stone = tombstone_from_yaml_dict(data, path, name)
            rows.append(Row(path, stone.episode_id, stone.period_id, stone.sequence, stone.allocation_key, sha))
        elif path.startswith(HISTORY):
            rec = history_from_yaml_dict(data, path, name)
            key = rec.allocation_key or ""  # a migrated history file names only its episode
            rows.append(Row(path, rec.episode_id, rec.period_id, rec.sequence, key, sha))
        else:
            ep = episode_from_yaml_dict(data, path, name)
            rows.append(Row(path, ep.episode_id, ep.period_id, ep.sequence, ep.allocation_key, sha))
    return rows


def uncommitted_episodes(store: Store, cat: Catalog, period: str | None = None) -> list[Episode]:
    """Episodes written to state/ but never committed (a killed allocate); call under the lock.

    The whole of state/ is walked when ``Store.state_mtime`` says something may have appeared, or after
    the catalog was rebuilt; the directories of the periods whose episodes commits from outside changed or
    removed (a pull, a reset: the catalog's refresh names them) are walked once, so a commit from another host
    costs what it changed, not a walk of every episode. The directory of ``period`` (the one an
    allocation decides in, where the retry of a killed allocate of the same key looks) is walked always,
    so an episode directory the mtimes missed (a coarse clock, an older jobstate, a copy by hand) is
    still found where it matters. Anything else in state/ that Git does not know is an error: jobstate
    never commits files it did not write.
    """
    walk, mtime = cat.meta("walk") or "", store.state_mtime()
    if walk != _ALL and cat.meta("state_mtime") == mtime:
        periods = set(filter(None, walk.split(","))) | ({period} if period else set())
        if not periods:
            return []
        known = set().union(*(cat.state_ids(p) for p in periods))
        found = _uncommitted(store, walk_state(store.root, periods), known)
        if found or not walk:
            return found
    else:
        found = _uncommitted(store, walk_state(store.root), cat.state_ids())
        if found:
            return found
    cat.update(head=cat.meta("head"), add=[], remove=[], state_mtime=mtime, walk="")
    return found


def _uncommitted(store: Store, entries: Iterable[tuple[str, os.DirEntry[str]]], known: set[str]) -> list[Episode]:
    """The uncommitted episodes among ``entries`` (of state/), given the committed IDs they may hold."""
    present = set()
    found: list[Episode] = []
    for rel, entry in entries:
        if entry.name.startswith(TEMP_PREFIX) and entry.is_dir(follow_symlinks=False):
            _remove_killed_build(store, rel)
            continue
        if entry.name.startswith("."):
            continue
        described = episode_of(rel)
        name = described[0] if described is not None and described[1] == "" else None
        if name is not None:
            present.add(name)
            if name in known:
                continue
        if name is None or not entry.is_dir(follow_symlinks=False):
            raise _stray(store, rel)(
                f"{rel}: state/ holds only episode directories (state/<year>/<period>/<id>/); move this away"
            )
        files = os.listdir(entry.path)
        if EPISODE_FILE not in files:
            if files and all(f.startswith(TEMP_PREFIX) for f in files):
                # only temp files of a killed atomic write of ours: the episode never existed
                shutil.rmtree(entry.path)
                continue
            what = "is an empty directory" if not files else f"has no {EPISODE_FILE}"
            raise _stray(store, rel)(
                f"{rel} {what} that jobstate did not write; state/ holds only episode directories: "
                "move it away or restore its episode.yaml (nothing was changed)"
            )
        path = f"{rel}/{EPISODE_FILE}"
        found.append(episode_from_yaml_dict(load_file(store.root / path, path), path, name))
    gone = sorted(known - present)
    if gone:
        where = episode_dir(gone[0])
        raise UsageError(
            f"{where} is committed but missing from the work tree; restore it with: {advice.restore(where, ' D')}"
        )
    return found


def _stray(store: Store, rel: str) -> type[JobstateError]:
    """What a stray entry of state/ is: committed, the state is invalid (7); untracked, the work tree
    is dirty (2), like any uncommitted file where jobstate reads committed state."""
    return StateInvalid if store.git.run("ls-files", "-z", "--", rel).stdout else DirtyState


def _remove_killed_build(store: Store, rel: str) -> None:
    """Remove a new episode directory a killed command was building (``atomic_dir``): untracked and
    unnamed, it never held an episode anyone was told about. A tracked one is Git's: left alone."""
    if store.git.run("ls-files", "-z", "--", rel).stdout:
        return
    shutil.rmtree(store.path(rel), ignore_errors=True)


def check_clean(store: Store, row: Row) -> bytes:
    """The bytes of a committed file, refusing when the work tree differs from the commit."""
    try:
        data = (store.root / row.path).read_bytes()
    except FileNotFoundError:
        raise UsageError(
            f"{row.path} is committed but missing from the work tree; restore it with: {advice.restore(row.path, ' D')}"
        ) from None
    if store.git.blob_sha(data) != row.blob:
        if converted_by_git(store.root, row.path, data, row.blob):
            raise converted_error(store, row.path) or DirtyState(advice.converted(row.path))
        raise UsageError(f"{row.path} has uncommitted changes: {advice.commit_or_restore(row.path)}")
    return data
