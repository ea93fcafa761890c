"""Where a paid step's command writes: one staging directory per attempt, outside the episode.

CMD never writes into the episode directory, so the guard can refuse anything there that differs
from HEAD without guessing who wrote it. Each attempt writes into ``.jobstate/work/<id>/<step>/<n>/``
(``$JOBSTATE_OUTPUT_DIR``); an artifact it reports is read from there once and committed into the
episode directory by the transaction, so after a kill it is either recorded or still staged. The
staging directory of an attempt that ended (completed, or not submitted) is removed after that
commit landed; an interrupted attempt's stays for the operator, and ``jobstate show`` names it.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import stat
from pathlib import Path

from jobstate.core.layout import work_dir
from jobstate.errors import UsageError
from jobstate.git.loose import StoredBlob
from jobstate.git.repo import GitRepo
from jobstate.store.store import Store

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a fifo must not wait for a writer; it changes nothing for a regular file
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a fifo"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def store_artifact(git: GitRepo, base: Path, rel: str) -> tuple[StoredBlob, str, int]:
    """Artifact ``rel`` (a validated relative path) under ``base``, stored as a blob, its sha256 and size: read
    once, one chunk at a time, through one descriptor opened without following any symlink; it must be a
    regular file with one link.

    A hard link would commit a file that lives elsewhere (outside the repository, perhaps a secret);
    a symlink, fifo, socket, device or directory is no file to commit. Each is UsageError (exit 2)
    with the reason, as is a file that changes while it is read. The blob is what gets committed, so
    what was hashed is what is committed; memory stays one chunk whatever the size (issue 29).
    """
    where = f"artifact {rel!r}"
    parts = rel.split("/")
    try:
        fd = os.open(base, _DIR_FLAGS)
    except OSError:
        raise UsageError(f"{where} is not in the step's output directory {base} (nothing was written there)") from None
    try:
        for n, part in enumerate(parts):
            last = n == len(parts) - 1
            try:
                nfd = os.open(part, _FILE_FLAGS if last else _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno == errno.ENOENT:
                    raise UsageError(f"{where} is not in the step's output directory {base}") from None
                if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
                    raise UsageError(
                        f"{where} goes through a symlink or a non-directory ({part}); artifacts must be regular "
                        "files written in $JOBSTATE_OUTPUT_DIR"
                    ) from None
                raise UsageError(f"{where}: cannot open {part}: {exc.strerror}") from None
            os.close(fd)
            fd = nfd
        info = os.fstat(fd)
        for test, kind in _KINDS:
            if test(info.st_mode):
                raise UsageError(f"{where} is {kind}, not a regular file; nothing was recorded")
        if not stat.S_ISREG(info.st_mode):
            raise UsageError(f"{where} is not a regular file; nothing was recorded")
        if info.st_nlink != 1:
            raise UsageError(
                f"{where} has {info.st_nlink} hard links: it may be a file from outside the repository; "
                "write or copy it (cp, not ln) into $JOBSTATE_OUTPUT_DIR; nothing was recorded"
            )
        digest = hashlib.sha256()
        try:
            blob = git.write_blob_from(fd, info.st_size, digest.update)
        except ValueError as exc:
            raise UsageError(
                f"{where}: {exc}; is the command that wrote it still running? nothing was recorded"
            ) from None
        return blob, digest.hexdigest(), info.st_size
    finally:
        os.close(fd)


def make_output_dir(store: Store, episode_id: str, step: str, attempt: int | None, *, create: bool = True) -> Path:
    """Create (or find) an attempt's staging directory, refusing (exit 2) a symlink on the way: CMD's
    output, and what a later removal deletes, stay inside ``.jobstate/work/``. Without ``create``
    (before the intent is committed: a refusal then writes nothing), only what exists is checked."""
    rel = work_dir(episode_id, step, attempt)
    parts = rel.split("/")
    for n in range(1, len(parts) + 1):
        here = store.path("/".join(parts[:n]))
        if here.is_symlink():
            raise UsageError(
                f"{'/'.join(parts[:n])} is a symlink; jobstate's staging directories must be its own: remove it"
            )
        if create:
            here.mkdir(exist_ok=True)
        elif not here.exists():
            break
    return store.path(rel)


def remove_output_dir(store: Store, episode_id: str, step: str, attempt: int) -> None:
    """Remove an ended attempt's staging directory (after the commit that ended it landed); never
    through a symlink."""
    rel = work_dir(episode_id, step, attempt)
    parts = rel.split("/")
    if any(store.path("/".join(parts[:n])).is_symlink() for n in range(1, len(parts) + 1)):
        return
    shutil.rmtree(store.path(rel), ignore_errors=True)
