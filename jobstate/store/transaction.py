"""Every state change: lock, repair, sync, decide, write, commit (or push), undo. The one path.

A change is a function of the current state (``transact``): under the lock
it runs on the freshest state, its files are written, and one commit is made
with a compare-and-swap on the branch, or, with a remote, a push of that
commit, whose ref update on the remote is the compare-and-swap between hosts.
When the swap loses, the work tree is put back exactly and the change is
decided again on the new state, a bounded number of times with jittered
backoff. A marker written before the branch moves lets the next command finish
the work tree and the index after a kill.

The work tree's writes, their undo record and the pending marker's repair are ``store.undo``'s; the
order of the steps, which makes a kill at any point repairable, is here.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import shlex
import shutil
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Generic, TypeVar

from jobstate.core import advice
from jobstate.core.inputs import env_number
from jobstate.core.layout import (
    CONFIG_FILE,
    PRIVATE,
    describes_episode,
    episode_of,
    mode_refusal,
)
from jobstate.core.rules_state import tracked_private
from jobstate.errors import (
    ConcurrentUpdate,
    DirtyState,
    JobstateError,
    RemoteOutcomeUnknown,
    RemoteUnavailable,
    UsageError,
)
from jobstate.git.head import blob_at, carry_tracked, index_key
from jobstate.git.index import IndexLock
from jobstate.git.loose import Content
from jobstate.git.network import fetch, push
from jobstate.git.objects import TreeEdit
from jobstate.git.repoconfig import converted_by_git
from jobstate.store.attributes import converted_error, refuse_converting
from jobstate.store.catalog import Catalog
from jobstate.store.journal import sweep
from jobstate.store.lock import FileLock
from jobstate.store.marks import advance
from jobstate.store.private import checked_path, read_private, refuse_tracked
from jobstate.store.remote_tip import check_remote_tip, record_remote_tip
from jobstate.store.store import REMOTE_UNSURE, Store
from jobstate.store.undo import (
    Pending,
    current,
    put_all,
    refuse_symlinks,
    remove_temp_files,
    restore,
    undo_unlanded,
    update_work_tree,
    write_json,
    write_undo,
)
from jobstate.store.worktree import fresh_catalog, rows_from_blobs, uncommitted_episodes

T = TypeVar("T")
ATTEMPTS = 30
_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


@dataclass
class StateChange(Generic[T]):
    """What a decision wants committed (path -> content, None to delete), and its answer."""

    result: T
    files: dict[str, Content | None] = field(default_factory=dict)
    message: str = ""


@contextmanager
def locked(store: Store, *, flat_ok: bool = False) -> Iterator[None]:
    """Hold the lock, after finishing whatever an interrupted change left undone (``flat_ok``: in a
    state of the flat layout too, for the migration that moves it)."""
    store.require_initialized(flat_ok=flat_ok)
    refuse_tracked(store)  # before the lock file is opened or any private record read
    store.ensure_private()
    with FileLock(store.lock_path, store.lock_timeout):
        finish_pending(store)
        yield


@contextmanager
def _mutation(store: Store, *, trust_remote_tip: bool = False) -> Iterator[Catalog]:
    """Hold the lock for a whole read-decide-write-commit; yields the catalog, fresh from HEAD.

    ``trust_remote_tip``: see sync_remote.
    """
    with locked(store):
        sync_remote(store, trust_remote_tip=trust_remote_tip)
        yield fresh_catalog(store)


def sync(store: Store) -> None:
    """Under the lock: finish an interrupted change and, with a remote, come to the remote's tip."""
    with locked(store):
        sync_remote(store)


def _index_lock(store: Store) -> IndexLock:
    return IndexLock(store.git, store.private / "index-lock.json", wait=store.lock_timeout)


def finish_pending(store: Store) -> None:
    """Finish what a killed jobstate left, under the lock: the work tree and index of a commit
    that landed, and the work-tree files of a change that did not (put back as they were)."""
    marker = store.private / "pending.json"
    data = read_private(store, marker)
    try:
        record = None if data is None else Pending(**json.loads(data))
    except (ValueError, TypeError):
        record = None
        marker.unlink()
    pending = None if record is None else _checked_pending(store, record)
    if pending is not None:
        _remove_killed_ref_locks(store, marker.stat().st_mtime)
        head = store.git.head_commit()
        if head is not None and store.git.is_ancestor(pending.commit, head):
            with _index_lock(store) as index:
                update_work_tree(store, pending, {})
                _update_index(index, pending.paths)
            remove_temp_files(store, pending.paths)
        # else the commit never landed here; the undo record below puts the files back
        marker.unlink()
    undo_unlanded(store)
    sweep(store.git, store.journal.directory)  # after the undo record, which may read a blob listed there


def _checked_pending(store: Store, pending: Pending) -> Pending:
    """A pending record as jobstate writes it; anything in it that is not safe to follow is refused."""
    source = f"{PRIVATE}/pending.json"
    lists = (pending.paths, pending.renames, pending.materialize)
    if (
        not isinstance(pending.commit, str)
        or not _SHA.fullmatch(pending.commit)
        or not all(isinstance(v, list) for v in lists)
        or not all(isinstance(pair, list) and len(pair) == 2 for pair in pending.renames)
    ):
        raise DirtyState(
            f"{source} is not a record jobstate writes (a commit ID, lists of paths), so it was not followed; "
            "look at it, then move it away (nothing was changed)"
        )
    for rel in [*pending.paths, *pending.materialize]:
        checked_path(store, rel, source, tracked=True)  # a fast-forward's files come from the commit
    for pair in pending.renames:
        for rel in pair:
            checked_path(store, rel, source)
    return pending


def _remove_killed_ref_locks(store: Store, since: float) -> None:
    """Remove the ref lock a git child killed with jobstate left for good (the branch did not move).

    The proof: a killed change's marker, written before the branch moves, is older than the lock,
    and the lock stays unchanged for two seconds (git holds a ref lock for milliseconds). Any other
    lock is left alone and update_ref names it (exit 3).
    """
    if store.git.reftable:
        return
    for lock in (store.git.common_dir / f"{store.git.head_ref()}.lock", store.git.git_dir / "HEAD.lock"):
        try:
            seen = lock.stat()
        except FileNotFoundError:
            continue
        if seen.st_mtime < since - 1:
            continue  # older than the killed change: not its child's
        time.sleep(max(0.0, min(2.0, seen.st_mtime + 2 - time.time())))
        try:
            now = lock.stat()
        except FileNotFoundError:
            continue  # a live git finished with it
        if (now.st_ino, now.st_mtime_ns) == (seen.st_ino, seen.st_mtime_ns):
            lock.unlink(missing_ok=True)
            print(f"jobstate: removed {lock}, left by a git command killed with jobstate", file=sys.stderr)


def _update_index(index: IndexLock, paths: list[str]) -> None:
    """Write the index for a commit that landed; a path git cannot index is reported, never wedging."""
    try:
        index.update(paths)
    except JobstateError as exc:
        print(
            f"jobstate: warning: the commit is complete but the index was not updated ({exc}); "
            "run git reset -q to refresh it",
            file=sys.stderr,
        )


def commit(
    store: Store,
    cat: Catalog | None,
    files: Mapping[str, Content | None],
    message: str,
    *,
    blobs: Mapping[str, tuple[bytes, str]] | None = None,
    renames: list[tuple[str, str]] | None = None,
    trees: Mapping[str, TreeEdit] | None = None,
    prove: Callable[[str], None] | None = None,
) -> str | None:
    """Commit ``files`` on HEAD's branch (and push it first when a remote is set).

    ``prove`` is called with the new commit before anything points at it (a migration's
    proof): when it raises, nothing was changed.

    Normally the work tree already holds ``files``. With ``renames`` (a
    migration) the commit is built from objects first (``blobs`` reuses
    existing blobs, path -> (mode, sha); ``trees`` moves whole directories,
    see GitRepo.build_commit) and the work tree changes only after
    the branch moved. Returns None when the branch (or the remote) moved:
    the caller decides again. Call under the lock; ``cat`` None leaves the
    catalog to its next refresh.
    """
    git = store.git
    ref = git.head_ref()
    parent = (cat.meta("head") or None) if cat is not None else git.head_commit()
    made = store.journal.mark()
    try:
        new = git.build_commit(parent, files, message, blobs or {}, trees)
        if prove is not None:
            prove(new)
    except BaseException:
        store.journal.discard(made)  # nothing refers to what was written: take it back (a disk that filled up)
        raise
    pending = Pending(
        new,
        sorted(set(files) | set(blobs or {})),
        [list(r) for r in renames or []],
        sorted(files) if renames else [],
    )
    marker = store.private / "pending.json"
    remote = store.remote
    # index.lock from before the branch moves until the index has the new files, as git commit does
    with _index_lock(store) as index:
        index_before = (parent, index_key(git))  # under index.lock: no other git writes the index now
        # written before any branch moves: a kill after that is finished by the next command
        write_json(marker, asdict(pending))
        store.journal.landing(new)
        pushed = False
        try:
            pushed = remote is None or push(git, remote, new, ref, expect=parent, timeout=store.remote_timeout)
            moved = pushed and git.update_ref(
                ref, new, parent, "jobstate: " + message.splitlines()[0], wait=store.lock_timeout
            )
        except BaseException as exc:
            marker.unlink()
            if remote is None and git.resolve_ref(ref) != new:
                # it landed nowhere (with a remote a push may have landed, answer lost: its objects stay)
                store.journal.discard(made)
            if isinstance(exc, RemoteOutcomeUnknown):
                # the next command must fetch before it trusts what this clone last saw of the remote
                (store.private / REMOTE_UNSURE).touch()
            if remote is not None and pushed and isinstance(exc, JobstateError):
                # the change landed where it counts: saying "nothing changed" would invite a second one
                exc.args = (
                    f"{new[:12]} is on {remote} but the local branch could not follow: {exc}; the next jobstate "
                    "command brings it up to the remote",
                )
            raise
        if pushed and remote is not None:
            record_remote_tip(store, remote, ref, new)
        if not moved:
            marker.unlink()
            if remote is None:
                store.journal.discard(made)
            if pushed and remote is not None:
                raise UsageError(
                    f"{ref} moved locally while jobstate pushed {new[:12]} to {remote}: the change is on "
                    f"{remote}; reconcile the local branch (git status), then run the command again"
                )
            return None
        store.journal.keep()
        update_work_tree(store, pending, files)
        if cat is not None:
            add, remove = [], []
            for path, data in files.items():
                if describes_episode(path) is None:
                    continue
                if data is None:
                    remove.append(path)
                else:
                    add.extend(rows_from_blobs(store, [(store.git.blob_sha(data), path)]))
            cat.update(head=new, add=add, remove=remove, state_mtime=store.state_mtime())
        _update_index(index, pending.paths)
        carry_tracked(git, index_before, new, pending.paths)
    marker.unlink()
    advance(store, parent, new, {found[0] for found in map(episode_of, files) if found is not None})
    git.pack_in_background()
    return new


def transact(store: Store, decide: Callable[[Catalog], StateChange[T]]) -> T:
    """Decide on the freshest state under the lock, write, commit; on a lost race, undo and decide again.

    With a remote, the first decision is taken on the branch as last fetched or
    pushed, without fetching: the push's compare-and-swap catches a stale
    decision to write, and a refusal or a no-op decided there is decided again
    after fetching, so neither is ever answered from a stale tip.
    """
    attempts = int(env_number(os.environ, "JOBSTATE_ATTEMPTS") or ATTEMPTS)
    trust = store.remote is not None
    attempt = 0
    while attempt < attempts:
        with _mutation(store, trust_remote_tip=trust) as cat:
            try:
                change: StateChange[T] | None = decide(cat)
            except JobstateError:
                if not trust:
                    raise
                change = None
            if change is None or not change.files:
                if change is not None and not trust:
                    return change.result
                trust = False  # fetch, then decide again
                continue
            if CONFIG_FILE not in change.files:
                _refuse_uncommitted_settings(store)
            refuse_symlinks(store, change.files)
            before = {rel: current(store, rel) for rel in change.files}
            write_undo(store, before, change.files)  # a kill from here on is undone by the next command
            try:
                put_all(store, change.files)
                refuse_converting(store, [rel for rel, data in change.files.items() if data is not None])
                landed = commit(store, cat, change.files, change.message) is not None
            except BaseException:
                # refused, unreachable or interrupted: finish what landed, put back what did not
                with contextlib.suppress(Exception):
                    finish_pending(store)
                with contextlib.suppress(Exception):
                    restore(store, before, unless_in_head=change.files)
                raise
            if landed:
                (store.private / "undo.json").unlink(missing_ok=True)
                return change.result
            restore(store, before)  # lost the compare-and-swap: decide again on the new state
            (store.private / "undo.json").unlink(missing_ok=True)
        if trust:
            trust = False  # the remote moved since we last saw it: fetch at once, no backoff yet
            continue
        time.sleep(random.uniform(0, min(2.0, 0.02 * 2**attempt)))  # noqa: S311 - jitter, not secrecy
        attempt += 1
    where = f"the remote {store.remote}" if store.remote else f"the branch of {store.root}"
    raise ConcurrentUpdate(f"{where} kept moving: gave up after {attempts} attempts; nothing was changed, retry later")


def _refuse_uncommitted_settings(store: Store) -> None:
    """Decisions rest on committed settings: an edit of jobstate.yaml nobody committed is refused
    (exit 2), never committed beside a change it decided (init, which writes the file, is exempt)."""
    commit = store.git.head_commit()
    entry = store.git.entry(store.git.commit_tree_of(commit), CONFIG_FILE) if commit else None
    refused = None if entry is None else mode_refusal(CONFIG_FILE, entry[0].decode("ascii", "replace"))
    if refused is not None:
        raise refused
    head = (blob_at(store.git, commit, CONFIG_FILE) if commit else None) or ""
    data = store.config_bytes()
    if (store.git.blob_sha(data) if data or head else "") != head:
        if data and head and converted_by_git(store.root, CONFIG_FILE, data, head):
            raise converted_error(store, CONFIG_FILE) or DirtyState(
                f"{advice.converted(CONFIG_FILE)}; nothing was written"
            )
        raise DirtyState(
            f"{CONFIG_FILE} differs from HEAD and decisions read it: {advice.commit_or_restore(CONFIG_FILE)}; "
            "nothing was written"
        )


def sync_remote(store: Store, *, drop_uncommitted: bool = True, trust_remote_tip: bool = False) -> None:
    """With a remote: fetch it and bring the branch, work tree and index to its tip; call under the lock.

    Uncommitted episodes left by a killed allocate never reached the remote, so
    they never existed for other hosts: they are dropped before deciding again.
    With ``trust_remote_tip``, a branch equal to the remote's tip as last fetched
    or pushed is not fetched: the caller's push, a compare-and-swap on that tip,
    is rejected if the remote moved since.
    """
    remote = store.remote
    if remote is None:
        return
    git = store.git
    ref = git.head_ref()
    head = git.head_commit()
    if trust_remote_tip and head is not None and store.matches_remote_tip():
        tip: str | None = head
        check_remote_tip(store, remote, ref, head)  # a force-push made here by hand moved the tip too
    else:
        tip = fetch(git, remote, ref, timeout=store.remote_timeout)
        (store.private / REMOTE_UNSURE).unlink(missing_ok=True)  # the fetch settled a lost answer
        if tip is not None:
            check_remote_tip(store, remote, ref, tip)  # a rewritten remote is refused, never followed
            record_remote_tip(store, remote, ref, tip)
    if tip is None:
        if head is None:
            return
        raise RemoteUnavailable(
            f"{remote} has no branch {ref.removeprefix('refs/heads/')} yet: push it once with "
            f"git push {remote} HEAD, then retry"
        )
    if drop_uncommitted:
        for episode in uncommitted_episodes(store, fresh_catalog(store)):
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
    dirty = [entry for entry in dirty if not _same_as_tip(store, tip, entry[1])]
    if dirty:
        raise UsageError(
            f"{dirty[0][1]} has local changes that the {remote} tip also changes; commit or discard them first"
        )
    delivered = tracked_private(changed)
    if delivered:
        raise DirtyState(
            f"the {remote} tip {tip[:12]} tracks {delivered[0].record}: jobstate reads under {PRIVATE}/ only what "
            f"it wrote itself, so it will not bring this clone to that tip (nothing was changed); remove it there "
            f"with: git rm --cached -r {shlex.quote(PRIVATE)}/ and push"
        )
    pending = Pending(tip, sorted(changed), [], sorted(changed))
    marker = store.private / "pending.json"
    with _index_lock(store) as index:
        write_json(marker, asdict(pending))
        if not git.update_ref(ref, tip, head, f"jobstate: fast-forward to {remote}", wait=store.lock_timeout):
            marker.unlink()
            raise ConcurrentUpdate(f"{ref} moved locally while jobstate fast-forwarded it to {remote}; retry")
        update_work_tree(store, pending, {})
        _update_index(index, pending.paths)
    marker.unlink()


def _same_as_tip(store: Store, tip: str, rel: str) -> bool:
    """Whether the work-tree file ``rel`` holds exactly the tip's bytes: then it is no local change the tip
    overwrites. An artifact CMD wrote is left so by a ``run`` killed after its push and before its branch moved;
    refusing it would wedge every later command on a file that already is what the remote has."""
    file = store.path(rel)
    if file.is_symlink() or not file.is_file():
        return False
    in_tip = {path: sha for _mode, sha, path in store.git.ls_tree(tip, rel)}
    return in_tip.get(rel) == store.git.file_blob_sha(file)


def _drop_uncommitted(store: Store, directory: str) -> None:
    shutil.rmtree(store.path(directory))
