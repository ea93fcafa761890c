"""Read-only views of state/ and history/: the work tree, or one Git revision.

Nothing here writes: no lock, no cache, no index refresh. Git runs with
``GIT_OPTIONAL_LOCKS=0`` so that not even ``git status`` takes ``index.lock``.
"""

from __future__ import annotations

import contextlib
import os
import stat
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from jobstate.core.layout import (
    CONFIG_FILE,
    FILE_MODE,
    HISTORY,
    MAX_RECORD_BYTES,
    STATE,
    canonical,
    episode_of,
    mode_problem,
    record_size_problem,
)
from jobstate.errors import StateInvalid, UsageError
from jobstate.git.blobs import BlobHasher
from jobstate.git.head import tracked_in_work_tree
from jobstate.git.objects import CatFile, MissingObject, ObjectTooLarge
from jobstate.git.repoconfig import config_value
from jobstate.git.runner import READ_ONLY_ENV, run_git
from jobstate.hashing import Digest, Progress, hash_files
from jobstate.store.attributes import snapshot_problems

ROOTS = (STATE, HISTORY)
# no record is read when its object header says it is larger (core.layout's one size rule)
MAX_READ = MAX_RECORD_BYTES
# what a revision reads ahead of its readers, at most: a pull request of many records near the limit is read
# in batches of this size, so review holds one batch and one record whatever the number of files
PREFETCH_BYTES = 16 * 1024 * 1024
# one episode's file at its place in the flat layout and at today's: one of the two is not what commands read
TWICE = "is in the flat layout and its episode in today's layout too (state/<year>/<period>/<id>/); remove one"


# a revision from before the state/<year>/<period>/<id>/ layout: readable, and what jobstate migrate moves
FLAT = (
    "holds episodes in the flat layout (state/<id>/), which commands refuse: jobstate migrate moves them to "
    "state/<year>/<period>/<id>/ in one commit"
)


def _too_large(path: str, size: int) -> StateInvalid:
    return StateInvalid(f"{path}: {record_size_problem(size)}")


@dataclass(frozen=True)
class FileEntry:
    """One file of a snapshot."""

    path: str
    size: int
    mode: str = FILE_MODE  # as Git would record it (layout.mode_problem says what is wrong with another)
    blob: str | None = None

    @property
    def symlink(self) -> bool:
        return self.mode == "120000"


def git_read(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[bytes]:
    """Run a read-only git command (it takes no optional lock)."""
    return run_git(cwd, *args, env=READ_ONLY_ENV, check=check)


def _names(out: bytes) -> list[str]:
    return [p.decode("utf-8", "surrogateescape") for p in out.split(b"\0") if p]


class Snapshot:
    """Base: a set of files under state/ and history/, listed by their paths in today's layout
    (``layout.canonical``): a flat layout's ``state/<id>/`` reads as ``state/<year>/<period>/<id>/``, so
    old revisions stay readable and a migration compares as no change."""

    label = ""

    def __init__(self) -> None:
        self.real: dict[str, str] = {}  # a listed path -> where the file is, when they differ
        self.twice: list[str] = []  # real paths whose episode the other layout holds too (one was not read)
        # (path, mode) of what files() met that jobstate never writes: layout.mode_problem says why
        self.odd: list[tuple[str, str]] = []

    def flat_episodes(self) -> list[str]:
        """The episodes listed from places of the flat layout (after ``files``)."""
        found = (episode_of(path) for path in self.real)
        return sorted({f[0] for f in found if f is not None})

    def _list(self, out: dict[str, FileEntry], path: str, entry: FileEntry) -> None:
        listed = canonical(path)
        if listed != path:
            if listed in out:
                self.twice.append(path)
                return
            self.real[listed] = path
            entry = FileEntry(listed, entry.size, entry.mode, entry.blob)
        elif listed in self.real:
            self.twice.append(self.real.pop(listed))
        out[listed] = entry

    def tracked(self, path: str) -> list[str]:
        """Every path Git has at or under ``path`` in this snapshot, whatever its kind. Read-only."""
        raise NotImplementedError

    def files(self) -> dict[str, FileEntry]:
        """Every file under state/ and history/, by repository-relative path."""
        raise NotImplementedError

    def read(self, path: str) -> bytes:
        """The bytes of one file."""
        raise NotImplementedError

    def hash(
        self, entries: list[FileEntry], workers: int | None, progress: Progress | None
    ) -> dict[str, Digest | OSError]:
        """sha256 and size of many files, in parallel."""
        raise NotImplementedError

    def attribute_problems(self, paths: Iterable[str]) -> list[tuple[str, str]]:
        """(path, why) for the files (of ``paths``, as ``files`` listed them) whose bytes git's attributes
        would change (store.attributes). Read-only."""
        return []

    def close(self) -> None:
        """Release helper processes."""


def _work_tree_mode(st: os.stat_result) -> str:
    """The mode Git would record for a file of the work tree (core.fileMode: the owner's execute bit)."""
    if stat.S_ISLNK(st.st_mode):
        return "120000"
    return "100755" if st.st_mode & stat.S_IXUSR else FILE_MODE


def _file_modes_count(root: Path) -> bool:
    """Whether Git records the work tree's execute bits (core.fileMode; false where the file system
    cannot keep them, and every file then looks executable)."""
    return config_value(root, "core.fileMode", kind="bool") != "false"


class WorkTree(Snapshot):
    """The files as they are in the work tree."""

    def __init__(self, root: Path) -> None:
        super().__init__()
        self.root = root
        self.label = "work tree"

    def tracked(self, path: str) -> list[str]:
        return tracked_in_work_tree(self.root, path)

    def files(self) -> dict[str, FileEntry]:
        out: dict[str, FileEntry] = {}
        self.real, self.twice, self.odd = {}, [], []
        with contextlib.suppress(OSError):
            self.odd = [(CONFIG_FILE, _work_tree_mode(os.lstat(self.root / CONFIG_FILE)))]
        for top in ROOTS:
            base = self.root / top
            if not base.is_dir():
                continue
            for dirpath, dirnames, filenames in os.walk(base):
                rel_dir = Path(dirpath).relative_to(self.root).as_posix()
                for name in dirnames:
                    if os.path.islink(os.path.join(dirpath, name)):
                        self._list(out, f"{rel_dir}/{name}", FileEntry(f"{rel_dir}/{name}", 0, "120000"))
                for name in filenames:
                    full = os.path.join(dirpath, name)
                    st = os.lstat(full)
                    rel = f"{rel_dir}/{name}"
                    self._list(out, rel, FileEntry(rel, st.st_size, _work_tree_mode(st)))
        self.odd += [(e.path, e.mode) for e in out.values()]
        self.odd = [(path, mode) for path, mode in self.odd if mode_problem(mode)]
        if any(mode == "100755" for _path, mode in self.odd) and not _file_modes_count(self.root):
            self.odd = [(path, mode) for path, mode in self.odd if mode != "100755"]
        return out

    def read(self, path: str) -> bytes:
        return (self.root / self.real.get(path, path)).read_bytes()

    def attribute_problems(self, paths: Iterable[str]) -> list[tuple[str, str]]:
        def read(rel: str) -> bytes:
            try:
                return (self.root / rel).read_bytes()
            except OSError:
                return b""

        return snapshot_problems(self.root, paths, None, read)

    def hash(
        self, entries: list[FileEntry], workers: int | None, progress: Progress | None
    ) -> dict[str, Digest | OSError]:
        where = {e.path: self.root / self.real.get(e.path, e.path) for e in entries}
        found = hash_files(list(where.values()), workers, progress)
        return {path: found[file] for path, file in where.items()}


class Revision(Snapshot):
    """The files of one commit, read from Git objects (works in bare repositories)."""

    def __init__(self, cwd: Path, rev: str) -> None:
        super().__init__()
        self.cwd = cwd
        # rev-parse, not the snapshot's cat-file: REV^{commit} prefers a commit among objects sharing a short
        # ID, and --quiet keeps git's own error lines for a tree or a blob off the user's stderr
        proc = git_read(cwd, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", check=False)
        if proc.returncode != 0:
            raise UsageError(f"unknown revision {rev!r} in {cwd}: give a commit, branch or tag (git log shows them)")
        self.commit = proc.stdout.decode().strip()
        self.label = f"{rev} ({self.commit[:12]})"
        self._reader: CatFile | None = None
        self._cache: dict[str, bytes] = {}  # read ahead, given up on its first read
        self._ahead: list[str] = []  # what the readers will ask for, in their order
        self._place: dict[str, int] = {}  # path -> its index in _ahead
        self._next = 0  # the first of _ahead not read ahead yet
        self.files_cache: dict[str, FileEntry] = {}

    def tracked(self, path: str) -> list[str]:
        proc = git_read(self.cwd, "ls-tree", "-r", "-z", "--name-only", "--full-tree", self.commit, "--", path)
        return _names(proc.stdout)

    def files(self, paths: tuple[str, ...] = ROOTS) -> dict[str, FileEntry]:
        """The files under ``paths`` (state/ and history/ by default)."""
        proc = git_read(self.cwd, "ls-tree", "-r", "-z", "-l", "--full-tree", self.commit, "--", *paths, CONFIG_FILE)
        out: dict[str, FileEntry] = {}
        self.real, self.twice, self.odd = {}, [], []
        for item in proc.stdout.split(b"\0"):
            if not item:
                continue
            meta, _, raw_path = item.partition(b"\t")
            mode, kind, sha, size = meta.split()
            path = raw_path.decode("utf-8", "surrogateescape")
            if mode_problem(mode.decode()):
                self.odd.append((path, mode.decode()))
            if kind != b"blob" or path == CONFIG_FILE:
                continue
            self._list(out, path, FileEntry(path, int(size), mode.decode(), blob=sha.decode()))
        self.files_cache = out
        return out

    def prefetch(self, paths: list[str]) -> None:
        """Say which files the readers will ask for, in their order: they are read ahead in pipelined batches
        of up to PREFETCH_BYTES through the snapshot's one ``git cat-file --batch``, the next batch when the
        readers reach it, so memory holds one batch and one record whatever the number of files."""
        self._ahead = list(paths)
        self._place = {p: n for n, p in enumerate(self._ahead)}
        self._next = 0
        self._fill(0)

    def _fill(self, start: int) -> None:
        """Read ahead from ``_ahead[start]``, in place of what was read ahead before (passed by the readers)."""
        self._cache.clear()
        files, size = self.files_cache, 0
        wanted: dict[str, list[str]] = {}  # identical files share one blob
        end = start
        while end < len(self._ahead):
            entry = files.get(self._ahead[end])
            if entry is not None and entry.blob and entry.size <= MAX_READ:
                if size + entry.size > PREFETCH_BYTES and wanted:
                    break
                size += entry.size
                wanted.setdefault(entry.blob, []).append(self._ahead[end])
            end += 1
        self._next = end
        if not wanted:
            return
        try:
            for blob, _kind, body in self._object_reader().read_many(list(wanted)):
                for p in wanted[blob]:
                    self._cache[p] = body
        except MissingObject:
            raise StateInvalid(f"an object under state/ or history/ is missing from {self.cwd}") from None

    def _object_reader(self) -> CatFile:
        if self._reader is None:
            self._reader = CatFile(self.cwd)
        return self._reader

    def read(self, path: str) -> bytes:
        if path not in self._cache and self._place.get(path, -1) >= self._next:
            self._fill(self._place[path])  # the readers reached the next batch
        if path in self._cache:
            return self._cache.pop(path)
        entry = self.files_cache.get(path)
        # by blob when listed: a path looked up through a tree of 100,000 entries costs a scan of it
        spec = entry.blob if entry is not None and entry.blob else f"{self.commit}:{self.real.get(path, path)}"
        try:
            return self._object_reader().read(spec, limit=MAX_READ)[1]
        except ObjectTooLarge as exc:
            raise _too_large(path, exc.size) from None
        except MissingObject:
            raise FileNotFoundError(path) from None

    def attribute_problems(self, paths: Iterable[str]) -> list[tuple[str, str]]:
        def read(rel: str) -> bytes:
            try:
                return self.read(rel)
            except FileNotFoundError:
                return b""
            except StateInvalid:
                return b"[attr]"  # too large to read here: git check-attr judges it

        return snapshot_problems(self.cwd, paths, self.commit, read)

    def hash(
        self, entries: list[FileEntry], workers: int | None, progress: Progress | None
    ) -> dict[str, Digest | OSError]:
        hasher = BlobHasher(self.cwd, progress)
        try:
            found = hasher.hash_many([e.blob for e in entries if e.blob], workers)
        finally:
            hasher.close()
        return {e.path: found[e.blob] if e.blob else FileNotFoundError(e.path) for e in entries}

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None


def locate(path: Path) -> Path:
    """The directory to run read-only git commands in: a work tree top or a bare repository."""
    # one process: rev-parse answers each option in turn and stops at --show-toplevel in a bare repository
    out = git_read(path, "rev-parse", "--is-bare-repository", "--show-toplevel", check=False).stdout
    bare, _, top = out.partition(b"\n")
    if bare not in (b"true", b"false"):
        raise UsageError(f"{path} is not inside a Git repository: pass --repo PATH")
    if bare == b"true":
        return path.resolve()
    if not top:  # inside a .git directory
        raise UsageError(f"{path} is not inside a Git work tree: pass --repo PATH")
    return Path(top.removesuffix(b"\n").decode("utf-8", "surrogateescape"))  # a path may hold a line break


def is_bare(cwd: Path) -> bool:
    """Whether ``cwd`` is a bare repository (no work tree to check)."""
    return git_read(cwd, "rev-parse", "--is-bare-repository").stdout.strip() == b"true"
