"""The work tree's side of a change: files written only after an undo record says how to put them back,
put back when the change does not land, and brought to a commit that landed (``Pending``, the marker a
kill leaves). ``store.transaction`` orders these steps; a kill between any two is repaired from here.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from jobstate.atomic import Producer, atomic_dir, atomic_write, is_temp_name
from jobstate.core.layout import HISTORY, PRIVATE, STATE, describes_episode, episode_dir, episode_of, year_dir
from jobstate.errors import DirtyState, StateInvalid
from jobstate.git.loose import Content, StoredBlob
from jobstate.store.private import checked_path, read_private
from jobstate.store.store import Store

_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_HOLD = 4 << 20  # a file up to this size (every record) is held as bytes; a larger one is streamed into a blob


@dataclass(frozen=True)
class Pending:
    """What a change that may have been interrupted left to finish."""

    commit: str
    paths: list[str]
    renames: list[list[str]] = field(default_factory=list)
    materialize: list[str] = field(default_factory=list)


def write_json(path: os.PathLike[str], value: object) -> None:
    target = Path(path)
    tmp = target.with_suffix(".tmp")
    tmp.write_text(json.dumps(value), encoding="utf-8")
    os.replace(tmp, target)


def refuse_symlinks(store: Store, paths: Iterable[str]) -> None:
    """Refuse (StateInvalid, exit 7, nothing written) a change whose path goes through a symlink or ends at
    one: a merged ``history -> /elsewhere`` would have the next command write outside the repository.
    Called before anything of the change is written; verify and diff flag such an entry in a revision."""
    for rel in paths:
        here = store.root
        parts = rel.split("/")
        for n, part in enumerate(parts):
            here = here / part
            try:
                info = here.lstat()
            except (FileNotFoundError, NotADirectoryError):
                break
            if stat.S_ISLNK(info.st_mode):
                link = "/".join(parts[: n + 1])
                raise StateInvalid(
                    f"{link} is a symlink, and jobstate never writes through one ({rel} would land wherever it "
                    f"points); restore it as a directory of the repository (git rm {shlex.quote(link)}, then check "
                    "out or recreate it); nothing was written (jobstate verify --rev HEAD shows it)"
                )


def current(store: Store, rel: str) -> Content | None:
    """What the work-tree file ``rel`` holds now (None: no file): its bytes, or, past a record's size
    (an artifact overwritten by a later report), the blob it was streamed into."""
    path = store.path(rel)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None
    except OSError:
        return path.read_bytes() if path.is_file() else None  # a symlink: read as before, refused elsewhere
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        if info.st_size <= _HOLD:
            with os.fdopen(os.dup(fd), "rb") as fh:
                return fh.read()
        try:
            return store.git.write_blob_from(fd, info.st_size, lambda _chunk: None)
        except ValueError as exc:
            raise DirtyState(f"{rel}: {exc}: something else writes it; nothing was written, run again") from None
    finally:
        os.close(fd)


def write_undo(store: Store, before: Mapping[str, Content | None], after: Mapping[str, Content | None]) -> None:
    """Record, before the work tree changes, how to put it back if the change does not land."""
    undo = {}
    for rel, old in before.items():
        new = after[rel]
        if old is None and rel.startswith(f"{STATE}/") and describes_episode(rel):
            continue  # a new episode file: if its commit never lands, allocate recovers it as it is
        if old is None:
            old_sha = None
        else:
            old_sha = old.sha if isinstance(old, StoredBlob) else store.git.write_object(b"blob", old)
        undo[rel] = [old_sha, None if new is None else store.git.blob_sha(new)]
    if undo:
        write_json(store.private / "undo.json", undo)


def undo_unlanded(store: Store) -> None:
    path = store.private / "undo.json"
    data = read_private(store, path)
    if data is None:
        return
    try:
        undo = json.loads(data)
    except ValueError:
        undo = {}
    undo = _checked_undo(store, undo)
    if undo and store.git.head_commit() is not None:
        kept = landed(store, {rel: new_sha for rel, (_old_sha, new_sha) in undo.items()})
        for rel, (old_sha, _new_sha) in undo.items():
            if rel not in kept:
                put(store, rel, None if old_sha is None else StoredBlob(old_sha))
        remove_temp_files(store, undo)
    path.unlink()


def _checked_undo(store: Store, undo: object) -> dict[str, list[str | None]]:
    """An undo record as jobstate writes it (path -> [old blob, new blob]); a path that is not safe to
    write, or a value that is no pair of blob IDs, is refused: the record was not jobstate's."""
    source = f"{PRIVATE}/undo.json"
    if not isinstance(undo, dict):
        undo = {}
    for rel, value in undo.items():
        checked_path(store, rel, source)
        if not (
            isinstance(value, list)
            and len(value) == 2
            and all(v is None or (isinstance(v, str) and _SHA.fullmatch(v)) for v in value)
        ):
            raise DirtyState(
                f"{source} maps {shlex.quote(rel)} to no pair of blob IDs: jobstate never writes such a record, "
                "so it was not followed; look at it, then move it away (nothing was changed)"
            )
    return undo


def remove_temp_files(store: Store, paths: Iterable[str]) -> None:
    """Remove the temp files that killed atomic writes of ``paths`` left beside them. Under the lock only the
    change being repaired wrote there, so such a file is its own, never recorded: left, it would make the tree
    dirty for good and the next init or migrate refuse it as a file jobstate did not write."""
    for directory in sorted({store.path(rel).parent for rel in paths}):
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            if is_temp_name(entry.name) and entry.is_file(follow_symlinks=False):
                os.unlink(entry.path)


def landed(store: Store, new: Mapping[str, str | None]) -> set[str]:
    """The paths whose new content (a blob ID; None: deleted) HEAD already has."""
    head = store.git.head_commit()
    if not new or head is None:
        return set()
    in_head = {p: sha for _mode, sha, p in store.git.ls_tree(head, *new)}
    return {rel for rel, sha in new.items() if in_head.get(rel) == sha}


def update_work_tree(store: Store, pending: Pending, contents: Mapping[str, Content | None]) -> None:
    """Make the work tree match a landed commit: renames first, then files as the commit has them."""
    for old, new in pending.renames:
        if store.path(old).exists() and not store.path(new).exists():
            store.path(new).parent.mkdir(parents=True, exist_ok=True)
            os.replace(store.path(old), store.path(new))
    if not pending.materialize:
        return
    missing = [p for p in pending.materialize if p not in contents]
    wanted = {rel: contents[rel] for rel in pending.materialize if rel in contents}
    if missing:
        in_commit = {path: sha for _mode, sha, path in store.git.ls_tree(pending.commit, *missing)}
        for rel in missing:
            wanted[rel] = StoredBlob(in_commit[rel]) if rel in in_commit else None
    put_all(store, {rel: wanted[rel] for rel in pending.materialize})


def put_all(store: Store, files: Mapping[str, Content | None]) -> None:
    """``put`` each file; a new episode directory appears whole or not at all (``atomic_dir``): a kill
    between its mkdir and its first file would leave an empty state/<id>/ that no command can tell from a
    directory a user made."""
    new_dirs: dict[str, dict[str, bytes | Producer]] = {}
    in_new: set[str] = set()
    for rel, data in files.items():
        directory, leaf = _new_episode_file(store, rel)
        if data is not None and directory is not None:
            new_dirs.setdefault(directory, {})[leaf] = _producer(store, data)
            in_new.add(rel)
    for directory, content in new_dirs.items():
        year = store.path(year_dir(directory.rpartition("/")[2]))
        if year.is_dir() and not year.is_symlink():
            # before the episode directory appears: Store.state_mtime watches years only; a year we may not
            # touch (another owner's) leaves the retry's own period walk (uncommitted_episodes) to find it
            with contextlib.suppress(PermissionError):
                os.utime(year)
        atomic_dir(store.path(directory), content)
    for rel, data in files.items():
        if rel not in in_new:
            put(store, rel, data)


def _new_episode_file(store: Store, rel: str) -> tuple[str | None, str]:
    """(its episode directory, its name there) when ``rel`` is a file directly in an episode directory
    that does not exist yet; (None, "") otherwise."""
    found = episode_of(rel)
    if found is None or found[1] in ("", HISTORY) or "/" in found[1]:
        return None, ""
    directory = episode_dir(found[0])
    if rel != f"{directory}/{found[1]}" or store.path(directory).exists():
        return None, ""
    return directory, found[1]


def _producer(store: Store, data: Content) -> bytes | Producer:
    # a blob is copied out of the object store a chunk at a time, never held whole
    return data if isinstance(data, bytes) else partial(store.git.stream_blob, data.sha)


def put(store: Store, rel: str, data: Content | None) -> None:
    """Make the work-tree file ``rel`` hold ``data`` (None: not exist), writing only when it differs
    (a blob is always written: comparing would read the file as much as writing it)."""
    target = store.path(rel)
    if data is None:
        if target.exists():
            target.unlink()
            _remove_empty_dirs(store, target.parent)
    elif isinstance(data, StoredBlob) or not target.is_file() or target.read_bytes() != data:
        atomic_write(target, _producer(store, data))


def _remove_empty_dirs(store: Store, directory: os.PathLike[str]) -> None:
    here = Path(directory)
    while here != store.root and here.is_dir() and not any(here.iterdir()):
        here.rmdir()
        here = here.parent


def restore(
    store: Store, before: Mapping[str, Content | None], unless_in_head: Mapping[str, Content | None] | None = None
) -> None:
    """Put files back exactly as they were before a change that did not land; with
    ``unless_in_head``, keep each file whose new content HEAD already has."""
    new = {rel: None if data is None else store.git.blob_sha(data) for rel, data in (unless_in_head or {}).items()}
    kept = landed(store, new)
    for rel, old in before.items():
        if rel not in kept:
            put(store, rel, old)
