"""The loose objects a command created, so a commit that does not land takes them back (issue 29).

Git leaves a failed writer's objects for ``git gc`` to prune weeks later; an artifact can be
gigabytes, and a disk that filled up mid-commit would stay full. So every object this process
creates is listed (object ID and the mtime it was made with) in a journal of its own,
``.jobstate/journal/<pid>-<token>``, held with ``flock`` while the process lives:

- a commit that lands keeps everything listed so far (its own objects, and a reported
  artifact's blob it commits);
- a commit that does not land (refused, lost race, disk full) removes the objects it made
  itself, at once, when there is no remote (a push whose answer was lost may have landed); a
  reported artifact's blob stays for the retry;
- a journal nobody holds (its command ended or was killed) is swept by the next command under
  the lock, after the undo record it may need: each object listed after its last commit line is
  removed. Before a commit moves the branch (or is pushed) its ID is written to the journal, and
  whatever was made before that line stays: the commit may have landed, here or on a remote.

An object is removed only while its mtime is the one it was made with: git freshens an object
it would write again (so does jobstate), so one that another writer made or reused meanwhile
stays. The journal holds object IDs only (the path is derived), read as a private file.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import secrets
import stat
import weakref
from pathlib import Path

from jobstate.git.loose import loose_path
from jobstate.git.repo import GitRepo

JOURNAL = "journal"
_LINE = re.compile(r"(?:([0-9a-f]{40}|[0-9a-f]{64}) (\d+)|commit ([0-9a-f]{40}|[0-9a-f]{64}))")


def _remove(objects: Path, sha: str, made: int) -> None:
    path = loose_path(objects, sha)
    with contextlib.suppress(OSError):  # gone, packed by git gc, or not ours to remove
        if path.stat().st_mtime_ns == made:
            path.unlink()


class ObjectJournal:
    """The objects one process created (``GitRepo.on_created``), on disk while it runs."""

    def __init__(self, git: GitRepo, directory: Path) -> None:
        self.git, self.directory = git, directory
        self._objects = git.common_dir / "objects"
        self._made: list[tuple[str, int]] = []
        self._superseded: set[str] = set()
        self._fd: int | None = None
        self._name: Path | None = None
        self._release: weakref.finalize[[int], ObjectJournal] | None = None

    def _open(self) -> int:
        if self._fd is None:
            self.directory.mkdir(exist_ok=True)
            self._name = self.directory / f"{os.getpid()}-{secrets.token_hex(4)}"
            fd = os.open(self._name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)  # held while this process lives: the sweep leaves it alone
            self._fd = fd
            # a store nobody closed: its process is done with it (called once, by close or by collection)
            self._release = weakref.finalize(self, os.close, fd)
        return self._fd

    def _write(self, line: str) -> None:
        os.write(self._open(), (line + "\n").encode("ascii"))

    def add(self, path: Path, mtime_ns: int) -> None:
        """Note an object this process created (GitRepo.on_created)."""
        sha = path.parent.name + path.name
        self._made.append((sha, mtime_ns))
        self._write(f"{sha} {mtime_ns}")

    def mark(self) -> int:
        """Where a commit begins: ``discard`` takes back what was made after it."""
        return len(self._made)

    def landing(self, commit: str) -> None:
        """Say, before the branch moves, that ``commit`` may land: a sweep keeps what was made before it."""
        if self._made:
            self._write(f"commit {commit}")

    def superseded(self, sha: str) -> None:
        """``sha`` (an artifact streamed into a blob) is not what the commit being built refers to: a clean
        filter (Git LFS) wrote the committed blob from it. Once that commit lands it is taken back (it may be
        gigabytes, and Git LFS keeps the file); until then a retry needs it."""
        self._superseded.add(sha)

    def keep(self) -> None:
        """A commit landed: everything made so far is kept, but for the blobs it superseded."""
        for sha, made in self._made:
            if sha in self._superseded:
                _remove(self._objects, sha, made)
        self._made.clear()
        self._superseded.clear()
        self._rewrite()

    def discard(self, since: int) -> None:
        """A commit did not land: remove the objects made since ``since``."""
        for sha, made in self._made[since:]:
            _remove(self._objects, sha, made)
        del self._made[since:]
        self._superseded.clear()  # the commit that superseded them did not land: a retry builds it again
        self._rewrite()

    def _rewrite(self) -> None:
        if self._fd is None:
            return
        os.ftruncate(self._fd, 0)
        os.lseek(self._fd, 0, os.SEEK_SET)
        if self._made:
            os.write(self._fd, "".join(f"{sha} {made}\n" for sha, made in self._made).encode("ascii"))

    def close(self) -> None:
        """Release the journal: an empty one is removed, one still listing objects is left for the sweep."""
        if self._fd is None or self._name is None or self._release is None:
            return
        if not self._made:
            self._name.unlink(missing_ok=True)
        self._release()
        self._fd = None


def sweep(git: GitRepo, directory: Path) -> None:
    """Remove the objects of every journal nobody holds that no landed commit refers to. Under the lock."""
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return
    objects = git.common_dir / "objects"
    for name in names:
        path = directory / name
        try:
            fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        with os.fdopen(fd, "r+", encoding="ascii", errors="replace") as fh:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                continue
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # its command is still running
            pending: list[tuple[str, int]] = []
            for line in fh.read().splitlines():
                found = _LINE.fullmatch(line)
                if found is None:
                    continue  # not a line jobstate writes: nothing is removed for it
                if found[3] is not None:
                    # a commit that was about to land: it may have (here, or on a remote whose answer was lost,
                    # or since reset away), so what it was built from stays for git gc to judge
                    pending.clear()
                    continue
                pending.append((found[1], int(found[2])))
            for sha, made in pending:
                _remove(objects, sha, made)
            path.unlink(missing_ok=True)
