"""How a state change reaches Git: commit, work tree, index, and (optionally) the shared remote.

A change is a function of the current state (``transact``): under the lock
it runs on the freshest state, its files are written, and one commit is made
with a compare-and-swap on the branch, or, with a remote, a push of that
commit, whose ref update on the remote is the compare-and-swap between hosts.
When the swap loses, the work tree is put back exactly and the change is
decided again on the new state, a bounded number of times with jittered
backoff. A marker written before the branch moves lets the next command finish
the work tree and the index after a kill.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Generic, TypeVar

from jobstate.errors import ConcurrentUpdate, RemoteUnavailable, UsageError
from jobstate.gitrepo import blob_sha

if TYPE_CHECKING:
    from jobstate.catalog import Catalog
    from jobstate.store import Store

T = TypeVar("T")
ATTEMPTS = 30


@dataclass
class Change(Generic[T]):
    """What a decision wants committed (path -> content, None to delete), and its answer."""

    result: T
    files: dict[str, bytes | None] = field(default_factory=dict)
    message: str = ""


@dataclass(frozen=True)
class Pending:
    """What a change that may have been interrupted left to finish."""

    commit: str
    paths: list[str]
    renames: list[list[str]] = field(default_factory=list)
    materialize: list[str] = field(default_factory=list)


def _marker(store: Store) -> os.PathLike[str]:
    return store.private / "pending.json"


def _write_marker(store: Store, pending: Pending) -> None:
    marker = store.private / "pending.json"
    tmp = marker.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(pending)), encoding="utf-8")
    os.replace(tmp, marker)


def finish_pending(store: Store) -> None:
    """Finish the work tree and index of a commit that landed before a kill; call under the lock."""
    marker = store.private / "pending.json"
    try:
        pending = Pending(**json.loads(marker.read_text(encoding="utf-8")))
    except FileNotFoundError:
        return
    except (ValueError, TypeError):
        marker.unlink()
        return
    head = store.git.head_commit()
    if head is not None and store.git.is_ancestor(pending.commit, head):
        update_work_tree(store, pending, {})
        index_after_commit(store, pending.paths)
    # else the commit never landed here, and the work tree was not changed for it
    marker.unlink()
    if (store.private / "index-pending.json").exists():
        index_after_commit(store, [])


def index_after_commit(store: Store, paths: list[str]) -> None:
    """Update the user's index for ``paths`` (and any earlier deferred ones), or defer it.

    Deferred paths accumulate in ``.jobstate/index-pending.json`` until a later
    command can take ``index.lock``; a path git refuses to index is reported and
    dropped, so a bad path can never wedge the store.
    """
    from jobstate.errors import JobstateError  # noqa: PLC0415

    deferred = store.private / "index-pending.json"
    try:
        earlier = json.loads(deferred.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        earlier = []
    todo = sorted(set(paths) | {str(p) for p in earlier if isinstance(p, str)})
    if not todo:
        deferred.unlink(missing_ok=True)
        return
    try:
        done = store.git.sync_index(todo, store.private / "index-lock.json")
    except JobstateError as exc:
        deferred.unlink(missing_ok=True)
        print(
            f"jobstate: warning: the index was not updated ({exc}); the commit is complete: "
            "run git reset -q to refresh the index",
            file=sys.stderr,
        )
        return
    if done:
        deferred.unlink(missing_ok=True)
        return
    tmp = deferred.with_suffix(".tmp")
    tmp.write_text(json.dumps(todo), encoding="utf-8")
    os.replace(tmp, deferred)
    print(
        f"jobstate: warning: {store.git.git_dir / 'index.lock'} is held by another git command, so the "
        "index was not updated; the next jobstate command will update it",
        file=sys.stderr,
    )


def update_work_tree(store: Store, pending: Pending, contents: Mapping[str, bytes | None]) -> None:
    """Make the work tree match a landed commit: renames first, then files as the commit has them."""
    for old, new in pending.renames:
        if store.path(old).exists() and not store.path(new).exists():
            store.path(new).parent.mkdir(parents=True, exist_ok=True)
            os.replace(store.path(old), store.path(new))
    if not pending.materialize:
        return
    missing = [p for p in pending.materialize if p not in contents]
    if not missing:
        for rel in pending.materialize:
            _put(store, rel, contents[rel])
        return
    in_commit = {path: sha for _mode, sha, path in store.git.ls_tree(pending.commit, *missing)}
    with store.git.object_reader() as read:
        for rel in pending.materialize:
            _put(
                store,
                rel,
                contents[rel] if rel in contents else (read(in_commit[rel])[1] if rel in in_commit else None),
            )


def _put(store: Store, rel: str, data: bytes | None) -> None:
    """Make the work-tree file ``rel`` hold ``data`` (None: not exist), writing only when it differs."""
    from jobstate.yamlio import atomic_write  # noqa: PLC0415

    target = store.path(rel)
    if data is None:
        if target.exists():
            target.unlink()
            _remove_empty_dirs(store, target.parent)
    elif not target.is_file() or target.read_bytes() != data:
        atomic_write(target, data)


def _remove_empty_dirs(store: Store, directory: os.PathLike[str]) -> None:
    from pathlib import Path  # noqa: PLC0415

    here = Path(directory)
    while here != store.root and here.is_dir() and not any(here.iterdir()):
        here.rmdir()
        here = here.parent


def commit(
    store: Store,
    cat: Catalog | None,
    files: Mapping[str, bytes | None],
    message: str,
    *,
    blobs: Mapping[str, tuple[bytes, str]] | None = None,
    renames: list[tuple[str, str]] | None = None,
) -> str | None:
    """Commit ``files`` on HEAD's branch (and push it first when a remote is set).

    Normally the work tree already holds ``files``. With ``renames`` (a
    migration) the commit is built from objects first (``blobs`` reuses
    existing blobs, path -> (mode, sha)) and the work tree changes only after
    the branch moved. Returns None when the branch (or the remote) moved:
    the caller decides again. Call under the lock; ``cat`` None leaves the
    catalog to its next refresh.
    """
    git = store.git
    ref = git.head_ref()
    parent = (cat.meta("head") or None) if cat is not None else git.head_commit()
    new = git.build_commit(parent, files, message, blobs or {})
    pending = Pending(
        new,
        sorted(set(files) | set(blobs or {})),
        [list(r) for r in renames or []],
        sorted(files) if renames else [],
    )
    # written before any branch moves: if we are killed after that, the next
    # command finishes the work tree and the index from this
    _write_marker(store, pending)
    remote = store.remote
    try:
        pushed = remote is None or git.push(remote, new, ref)
    except BaseException:
        (store.private / "pending.json").unlink()
        raise
    if not pushed:
        (store.private / "pending.json").unlink()
        return None
    if not git.update_ref(ref, new, parent, "jobstate: " + message.splitlines()[0]):
        (store.private / "pending.json").unlink()
        if remote is not None:
            raise UsageError(f"{ref} moved locally while jobstate pushed {new[:12]} to {remote}; run git status")
        return None
    update_work_tree(store, pending, files)
    if cat is not None:
        from jobstate.store import describes_episode  # noqa: PLC0415

        add, remove = [], []
        for path, data in files.items():
            if describes_episode(path) is None:
                continue
            if data is None:
                remove.append(path)
            else:
                add.extend(store.rows_from_blobs([(blob_sha(data), path)]))
        cat.update(head=new, add=add, remove=remove, state_mtime=store.state_mtime(new))
    index_after_commit(store, pending.paths)
    (store.private / "pending.json").unlink()
    return new


def transact(store: Store, decide: Callable[[Catalog], Change[T]]) -> T:
    """Decide on the freshest state under the lock, write, commit; on a lost race, undo and decide again."""
    attempts = int(os.environ.get("JOBSTATE_ATTEMPTS", ATTEMPTS))
    for attempt in range(attempts):
        with store.mutation() as cat:
            change = decide(cat)
            if not change.files:
                return change.result
            before: dict[str, bytes | None] = {}
            try:
                for rel, data in change.files.items():
                    target = store.path(rel)
                    before[rel] = target.read_bytes() if target.is_file() else None
                    _put(store, rel, data)
                if commit(store, cat, change.files, change.message) is not None:
                    return change.result
            except BaseException:
                _restore(store, before)  # refused, unreachable or interrupted: leave nothing half-done
                raise
            _restore(store, before)  # lost the compare-and-swap: decide again on the new state
        time.sleep(random.uniform(0, min(2.0, 0.02 * 2**attempt)))  # noqa: S311 - jitter, not secrecy
    where = f"the remote {store.remote}" if store.remote else f"the branch of {store.root}"
    raise ConcurrentUpdate(f"{where} kept moving: gave up after {attempts} attempts; nothing was changed, retry later")


def _restore(store: Store, before: Mapping[str, bytes | None]) -> None:
    """Put files back exactly as they were before a change that did not land."""
    for rel, old in before.items():
        _put(store, rel, old)


def sync_remote(store: Store, *, drop_uncommitted: bool = True) -> None:
    """With a remote: fetch it and bring the branch, work tree and index to its tip; call under the lock.

    Uncommitted episodes left by a killed allocate never reached the remote, so
    they never existed for other hosts: they are dropped before deciding again.
    """
    remote = store.remote
    if remote is None:
        return
    git = store.git
    ref = git.head_ref()
    tip = git.fetch(remote, ref)
    head = git.head_commit()
    if tip is None:
        if head is None:
            return
        raise RemoteUnavailable(
            f"{remote} has no branch {ref.removeprefix('refs/heads/')} yet: push it once with "
            f"git push {remote} HEAD, then retry"
        )
    if drop_uncommitted:
        for episode in store.uncommitted_episodes(store.catalog()):
            _drop_uncommitted(store, episode.directory)
    if head == tip:
        return
    if head is not None and not git.is_ancestor(head, tip):
        raise UsageError(
            f"{ref} has commits that are not on {remote}: push or reset them before jobstate "
            f"changes state through the remote (git log {remote}/{ref.removeprefix('refs/heads/')}..HEAD)"
        )
    changed = git.diff_names(head, tip) if head else [p for _m, _s, p in git.ls_tree(tip, ".")]
    changed = changed or []
    dirty = git.status(*changed) if changed else []
    if dirty:
        raise UsageError(
            f"{dirty[0][1]} has local changes that the {remote} tip also changes; commit or discard them first"
        )
    pending = Pending(tip, sorted(changed), [], sorted(changed))
    _write_marker(store, pending)
    if not git.update_ref(ref, tip, head, f"jobstate: fast-forward to {remote}"):
        (store.private / "pending.json").unlink()
        raise ConcurrentUpdate(f"{ref} moved locally while jobstate fast-forwarded it to {remote}; retry")
    update_work_tree(store, pending, {})
    index_after_commit(store, pending.paths)
    (store.private / "pending.json").unlink()


def _drop_uncommitted(store: Store, directory: str) -> None:
    import shutil  # noqa: PLC0415

    shutil.rmtree(store.path(directory))
