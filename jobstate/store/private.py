"""The one way into ``.jobstate/``: a private file is read only if jobstate wrote it, and a path taken
from a private record is checked before it is used.

What Git delivers is data, never instructions. A pull request can force-add files under
``.jobstate/`` (an undo record mapping ``.git/config`` to a blob of its own, a command's result
naming a task nobody submitted), and Git checks them out owned by the user. So:

- ``refuse_tracked`` (every committing command, before its lock is taken): a ``.jobstate`` that is
  not a directory of the user's, or any path under it that HEAD or the index has, is refused (exit 2)
  with the ``git rm --cached`` that untracks it; the rule is ``core.rules_state.tracked_private``, which
  verify and diff apply to revisions.
- ``read_private``: a private file is read only when it is a regular file of the user's, with no
  symlink anywhere from the repository root, and Git does not track it.
- ``checked_path``: a path from an undo, pending or result record is normalised, under state/,
  history/ or jobstate.yaml (``core.layout.record_path_problem``), and has no symlink on the way.

A report jobstate refused to record is never read again: ``set_aside`` moves it to
``.jobstate/refused/`` for the operator, and ``refused_reports`` lists them for ``show``.
"""

from __future__ import annotations

import os
import shlex
import stat
from pathlib import Path

from jobstate.core.layout import PRIVATE, REFUSED, record_path_problem, refused_report_path
from jobstate.core.rules_state import tracked_private
from jobstate.errors import DirtyState
from jobstate.git.head import tracked
from jobstate.store.store import Store


def refuse_tracked(store: Store) -> None:
    """Refuse (DirtyState, exit 2) a ``.jobstate`` jobstate cannot have made, or one Git delivers into.

    Called by every committing command before it takes a lock or reads a private file."""
    try:
        info = store.private.lstat()
    except FileNotFoundError:
        info = None
    if info is not None and (not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid()):
        what = "a symlink" if stat.S_ISLNK(info.st_mode) else "not a directory of yours"
        raise DirtyState(
            f"{PRIVATE} is {what}: jobstate keeps its own files there and reads nothing it did not write; "
            f"move it away (nothing was read or written)"
        )
    violations = tracked_private(tracked(store.git, PRIVATE))
    if violations:
        first = violations[0]
        more = f" (and {len(violations) - 1} more)" if len(violations) > 1 else ""
        raise DirtyState(
            f"{first.record}{more} is tracked by Git, but jobstate reads under {PRIVATE}/ only what it wrote "
            f"itself: nothing was read or written. Untrack it with: git rm --cached -r {shlex.quote(PRIVATE)}/ "
            "and commit; then delete the file unless you know this host's jobstate wrote it"
        )


def _refuse(rel: str, why: str) -> DirtyState:
    return DirtyState(
        f"{rel} {why}: jobstate reads under {PRIVATE}/ only what it wrote itself, so it was not read; "
        "look at it, then move it away (nothing was changed)"
    )


def _no_symlink_on_the_way(store: Store, rel: str, *, private: bool) -> os.stat_result | None:
    """lstat of each part of ``rel`` from the root; the last one's, None when it does not exist."""
    here = store.root
    parts = rel.split("/")
    info = None
    for n, part in enumerate(parts):
        here = here / part
        try:
            info = here.lstat()
        except FileNotFoundError:
            return None
        if stat.S_ISLNK(info.st_mode):
            link = "/".join(parts[: n + 1])
            if private:
                raise _refuse(rel, f"goes through a symlink ({link})")
            raise DirtyState(
                f"{rel}, named by a record of jobstate's, goes through a symlink ({link}): jobstate never writes "
                "through one, so it was not followed; look at the record, then move it away (nothing was changed)"
            )
        if n < len(parts) - 1 and not stat.S_ISDIR(info.st_mode):
            return None
    return info


def read_private(store: Store, path: Path) -> bytes | None:
    """The bytes of a private file jobstate wrote; None when there is none.

    Refused (DirtyState, exit 2, nothing read): a file Git tracks, a symlink anywhere from the
    repository root, anything but a regular file, a file another user owns."""
    rel = path.relative_to(store.root).as_posix()
    if rel.split("/")[0] != PRIVATE:
        raise ValueError(f"{rel} is not a private file")  # a caller's bug, never input
    info = _no_symlink_on_the_way(store, rel, private=True)
    if info is None:
        return None
    if not stat.S_ISREG(info.st_mode):
        raise _refuse(rel, "is not a regular file")
    if info.st_uid != os.getuid():
        raise _refuse(rel, f"is owned by uid {info.st_uid}, not by you")
    if any(p == rel or p.startswith(f"{rel}/") for p in tracked(store.git, PRIVATE)):
        raise _refuse(rel, f"is tracked by Git (untrack it with: git rm --cached -r {shlex.quote(rel)})")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as fh:
        if os.fstat(fh.fileno()).st_ino != info.st_ino:
            raise _refuse(rel, "was replaced while jobstate read it")
        return fh.read()


def checked_path(store: Store, rel: object, source: str, *, tracked: bool = False) -> str:
    """``rel``, taken from the private record ``source``, once it is safe to write or read: see
    ``core.layout.record_path_problem`` (``tracked``: any tracked path, for a fast-forward) and no
    symlink on the way. Else DirtyState (exit 2) naming the record: jobstate did not write it so."""
    problem = record_path_problem(rel, tracked=tracked)
    if problem is not None:
        raise DirtyState(
            f"{source} names {shlex.quote(str(rel))}, which {problem}: jobstate never writes such a record, so "
            "it was not followed; look at it, then move it away (nothing was changed)"
        )
    path = str(rel)  # record_path_problem accepts only text
    _no_symlink_on_the_way(store, path, private=False)
    return path


def set_aside(store: Store, report: Path, *, episode_id: str, step: str, attempt: int, stamp: str) -> str:
    """Move a command's refused report out of the way, never over another: read before every run of its
    attempt, it would refuse each of them again. Returns where it is kept (repository-relative)."""
    store.ensure_private()
    stamp = "".join(c for c in stamp if c.isalnum())
    for n in range(1, 1000):
        rel = refused_report_path(episode_id, step, attempt, stamp if n == 1 else f"{stamp}-{n}")
        target = store.path(rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(report, target)  # never replaces a report kept earlier
        except FileExistsError:
            continue
        report.unlink()
        return rel
    raise DirtyState(f"{REFUSED} holds 999 refused reports of {episode_id} {step}: look at them and clear it")


def refused_reports(store: Store, episode_id: str) -> list[str]:
    """The refused reports kept for the episode (repository-relative), oldest name first. Read-only."""
    try:
        names = sorted(e.name for e in os.scandir(store.path(REFUSED)) if e.name.startswith(f"{episode_id}."))
    except OSError:
        return []
    return [f"{REFUSED}/{name}" for name in names]
