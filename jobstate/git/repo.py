"""One repository: refs, objects, commits, remotes. GitPython is imported here only, and lazily.

Hot paths (allocate, retry) avoid the index entirely: objects are written as
loose objects from Python, the branch moves with ``git update-ref NEW OLD`` (a
compare-and-swap), and the user's index is brought up to date by updating a
private copy and renaming it into place, so jobstate never leaves a stale
``.git/index.lock`` behind.

Longer than most modules on purpose: one repository's refs, objects, commits and remotes share
its object format and ref storage, read once; split, each part would need them passed in.
"""

from __future__ import annotations

import os
import re
import time
import weakref
import zlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from jobstate.errors import GitError, GitLockHeld, NotInitialized, UsageError
from jobstate.git import loose
from jobstate.git.attributes import filtered_blobs
from jobstate.git.loose import Content, StoredBlob
from jobstate.git.objects import BLOB_MODE, TREE_MODE, CatFile, MissingObject, ObjectFormat, Tree, TreeEdit
from jobstate.git.repoconfig import object_format, read_extensions, ref_storage
from jobstate.git.runner import READ_ONLY_ENV, argv_parts, first_error_line, run_git, spawn_detached_git
from jobstate.git.settings import CommitSettings, gc_due, read_commit_settings
from jobstate.git.signing import signed_commit

if TYPE_CHECKING:
    import subprocess


_Reader = Callable[[str], tuple[bytes, bytes]]
_LOCK_HELD = re.compile(r"Unable to create '(.+?\.lock)': File exists")


def _config_key(key: str) -> str:
    """A configuration key as git compares it: section and variable in lower case, the subsection kept."""
    section, _, rest = key.partition(".")
    subsection, _, variable = rest.rpartition(".")
    return f"{section.lower()}.{subsection}.{variable.lower()}"


def find_root(start: Path) -> Path:
    """The top of the Git work tree that contains ``start``."""
    here = start.resolve()
    for candidate in (here, *here.parents):
        if (candidate / ".git").exists():
            return candidate
    if (here / "HEAD").is_file() and (here / "objects").is_dir() and (here / "refs").is_dir():
        raise UsageError(
            f"{start} is a bare Git repository: jobstate keeps its state in a work tree; "
            f"clone it (git clone {start} DIR) and use the clone"
        )
    # never advise init here: a user in the wrong directory would start a second state beside the real one
    raise NotInitialized(
        f"{start} is not inside a Git repository: run the command inside a clone of the state repository, "
        "or pass --repo PATH"
    )


class GitRepo:
    """One work tree and its Git directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        dot_git = root / ".git"
        if dot_git.is_file():
            text = dot_git.read_text(encoding="utf-8").strip()
            if not text.startswith("gitdir:"):
                raise UsageError(f"{dot_git}: not a gitdir file")
            git_dir = (root / text.split(":", 1)[1].strip()).resolve()
        else:
            git_dir = dot_git
        self.git_dir = git_dir
        common = git_dir / "commondir"
        self.common_dir = (git_dir / common.read_text().strip()).resolve() if common.exists() else git_dir
        self._trees: dict[str, Tree] = {}
        self._extensions: dict[str, str] | None = None
        self._settings: CommitSettings | None = None
        self._net: dict[str, str] | None = None
        self._cat: CatFile | None = None
        # told of every loose object this process creates (the store's journal: a failed commit takes them back)
        self.on_created: loose.Created | None = None
        # a blob made here that the commit being built will not use (a clean filter's output is committed instead)
        self.on_superseded: Callable[[str], None] | None = None

    # ------------------------------------------------------------------- format
    @property
    def extensions(self) -> dict[str, str]:
        """The repository's ``[extensions]`` (object format, ref storage), read once."""
        if self._extensions is None:
            self._extensions = read_extensions(self.common_dir / "config")
        return self._extensions

    @property
    def format(self) -> ObjectFormat:
        """The object format (SHA-1 or SHA-256) every object ID here is in."""
        return object_format(self.extensions)

    @property
    def reftable(self) -> bool:
        """Whether refs live in a reftable (not files): then only git can read them."""
        return ref_storage(self.extensions) == "reftable"

    def blob_sha(self, data: Content) -> str:
        """The ID a blob with these bytes (or this stored blob) has in this repository."""
        return data.sha if isinstance(data, StoredBlob) else self.format.object_id(b"blob", data)

    def file_blob_sha(self, path: os.PathLike[str] | str) -> str:
        """The ID a blob with this file's bytes has here, read a chunk at a time."""
        return loose.file_blob_sha(self.format, path)

    # ----------------------------------------------------------------- commands
    def run(
        self,
        *args: str,
        input: bytes | None = None,  # noqa: A002 - mirrors subprocess
        env: Mapping[str, str] | None = None,
        check: bool = True,
    ) -> subprocess.CompletedProcess[bytes]:
        """Run ``git ARGS`` in the work tree (see jobstate.git.runner); failures become GitError."""
        return run_git(self.root, *args, input=input, env=env, check=check)

    # --------------------------------------------------------------------- refs
    def head_ref(self) -> str:
        """The branch HEAD points to, e.g. ``refs/heads/main``."""
        if self.reftable:
            proc = self.run("symbolic-ref", "--quiet", "HEAD", check=False)
            head = "ref: " + proc.stdout.decode("utf-8", "replace").strip() if proc.returncode == 0 else ""
        else:
            head = (self.git_dir / "HEAD").read_text(encoding="utf-8").strip()
        if not head.startswith("ref: "):
            raise UsageError(f"HEAD of {self.root} is detached: check out a branch first (git switch main)")
        return head[5:]

    def resolve_ref(self, ref: str) -> str | None:
        """The commit a ref points to, read from the files (no subprocess); None if unborn.

        In a reftable repository refs are not files: git resolves them.
        """
        if self.reftable:
            proc = self.run("rev-parse", "--verify", "--quiet", "--end-of-options", ref, check=False)
            return proc.stdout.decode("ascii").strip() if proc.returncode == 0 else None
        try:
            value = (self.common_dir / ref).read_text(encoding="ascii").strip()
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            value = ""
        if value.startswith("ref: "):
            return self.resolve_ref(value[5:])
        if value:
            return value
        try:
            packed = (self.common_dir / "packed-refs").read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        suffix = " " + ref
        for line in packed.splitlines():
            if line.endswith(suffix) and not line.startswith(("#", "^")):
                return line.split(" ", 1)[0]
        return None

    def head_commit(self) -> str | None:
        """The commit HEAD's branch points to, or None on an unborn branch."""
        return self.resolve_ref(self.head_ref())

    def update_ref(self, ref: str, new: str, old: str | None, message: str, *, wait: float = 10.0) -> bool:
        """Compare-and-swap ``ref`` from ``old`` to ``new``; False when another writer moved it first.

        A ref lock file that another git command holds is waited for up to ``wait`` seconds; one that
        stays (a killed git leaves it for good) is GitLockHeld (exit 3) naming the file, never a lost race.
        """
        deadline = time.monotonic() + wait
        while True:
            proc = self.run("update-ref", "-m", message, ref, new, old or self.format.zero, check=False)
            if proc.returncode == 0:
                return True
            err = proc.stderr.decode("utf-8", "replace")
            held = _LOCK_HELD.search(err)
            if held is None:
                break
            if time.monotonic() >= deadline:
                raise GitLockHeld(
                    f"{held[1]} exists: another git command holds it, or a killed one left it behind; {ref} was "
                    f"not moved: if no git command is running in {self.root}, remove it (rm {held[1]}) and retry"
                )
            time.sleep(0.05)
        if self.resolve_ref(ref) != old or "cannot lock ref" in err:
            return False  # another writer moved the branch first: decide again
        raise GitError(f"git update-ref {ref} failed: {first_error_line(err)}")

    # ------------------------------------------------------------------ objects
    def _loose_path(self, sha: str) -> Path:
        return loose.loose_path(self.common_dir / "objects", sha)

    def read_object(self, sha: str) -> tuple[bytes, bytes]:
        """(type, content) of one object: loose objects from Python, packed ones through git."""
        try:
            raw = zlib.decompress(self._loose_path(sha).read_bytes())
        except FileNotFoundError:
            with self.object_reader() as read:
                return read(sha)
        header, _, body = raw.partition(b"\0")
        return header.split(b" ", 1)[0], body

    def read_path(self, commit: str, path: str, limit: int) -> bytes:
        """The bytes of ``path`` in ``commit``, walked through tree objects (loose ones from Python, packed
        ones through the command's one cat-file): FileNotFoundError when it is not there, GitError when
        it is over ``limit`` bytes or not a file."""
        tree = self.commit_tree_of(commit)
        *folders, leaf = path.split("/")
        for name in folders:
            entry = self._tree(tree).get(name.encode("utf-8", "surrogateescape"))
            if entry is None or entry[0] != b"40000":
                raise FileNotFoundError(path)
            tree = entry[1]
        entry = self._tree(tree).get(leaf.encode("utf-8", "surrogateescape"))
        if entry is None:
            raise FileNotFoundError(path)
        if entry[0] not in (b"100644", b"100755"):
            raise GitError(f"{path} in {commit[:12]} is not a regular file")
        kind, body = self.read_object(entry[1])
        if kind != b"blob" or len(body) > limit:
            raise GitError(f"{path} in {commit[:12]} is not a file of at most {limit} bytes")
        return body

    def _cat_file(self) -> CatFile:
        """The one ``git cat-file --batch`` of a command (issue 27), started at its first packed object, kept until
        this object goes; git finds objects written after it started, loose or in new packs."""
        cat = self._cat
        if cat is None or cat.closed:
            cat = self._cat = CatFile(self.root)
            weakref.finalize(self, cat.close)
        return cat

    def close(self) -> None:
        """Stop the ``git cat-file`` process, if one was started."""
        cat, self._cat = self._cat, None
        if cat is not None:
            cat.close()

    @contextmanager
    def object_reader(self) -> Iterator[_Reader]:
        """A reader for many objects (the repository's one ``git cat-file --batch``)."""
        cat = self._cat_file()

        def read(sha: str) -> tuple[bytes, bytes]:
            try:
                return cat.read(sha)
            except MissingObject:
                raise GitError(f"object {sha} is missing from {self.root}") from None

        try:
            yield read
        except BaseException:
            self.close()  # interrupted between a request and its answer: the pipe is out of step
            raise

    def write_object(self, kind: bytes, body: bytes) -> str:
        """Store an object as a loose object (atomically); returns its ID."""
        return loose.write(self.common_dir / "objects", self.format, kind, body, self.on_created)

    def write_blob_from(self, fd: int, size: int, each_chunk: Callable[[bytes], None]) -> StoredBlob:
        """Store the ``size`` bytes read from ``fd`` as a blob, streamed (see loose.write_blob_from)."""
        return loose.write_blob_from(
            self.common_dir / "objects", self.format, fd, size, each_chunk=each_chunk, on_created=self.on_created
        )

    def stream_blob(self, sha: str, sink: Callable[[bytes], None]) -> None:
        """Give the content of blob ``sha`` to ``sink`` chunk by chunk (never whole in memory)."""
        try:
            self._cat_file().stream(sha, loose.CHUNK, sink)
        except MissingObject:
            raise GitError(f"object {sha} is missing from {self.root}") from None
        except BaseException:
            self.close()  # interrupted mid-object: the pipe is out of step
            raise

    def commit_tree_of(self, commit: str) -> str:
        """The root tree of a commit."""
        kind, body = self.read_object(commit)
        if kind != b"commit" or not body.startswith(b"tree "):
            raise GitError(f"{commit} is not a commit")
        return body[5 : 5 + 2 * self.format.width].decode("ascii")

    def tree(self, sha: str) -> Tree:
        """The tree object ``sha``, read once per process. Read-only."""
        return self._tree(sha)

    def _tree(self, sha: str | None) -> Tree:
        if sha is None:
            return Tree(b"", self.format.width)
        cached = self._trees.get(sha)
        if cached is not None:
            return cached
        kind, body = self.read_object(sha)
        if kind != b"tree":
            raise GitError(f"{sha} is not a tree")
        return self._remember(sha, Tree(body, self.format.width))

    def _remember(self, sha: str, tree: Tree) -> Tree:
        # keep the few large trees we edit again and again (state/), not every small one
        if len(tree.keys) >= 64:
            if len(self._trees) >= 8:
                self._trees.pop(next(iter(self._trees)))
            self._trees[sha] = tree
        return tree

    def edit_tree(self, tree: str | None, changes: Mapping[str, TreeEdit]) -> str | None:
        """A new tree: ``tree`` with ``changes`` (path -> (mode, sha) or None) applied.

        Only the subtrees on the changed paths are read and rewritten. Returns
        None when the result is empty (Git stores no empty trees).
        """
        here: dict[bytes, TreeEdit] = {}
        below: dict[bytes, dict[str, TreeEdit]] = {}
        for path, change in changes.items():
            head, sep, rest = path.partition("/")
            if sep:
                below.setdefault(head.encode(), {})[rest] = change
            else:
                here[head.encode()] = change
        current = self._tree(tree)
        for name, sub in below.items():
            old = current.get(name)
            old_tree = old[1] if old is not None and old[0] == TREE_MODE else None
            new_tree = self.edit_tree(old_tree, sub)
            here[name] = None if new_tree is None else (TREE_MODE, new_tree)
        current = current.with_edits(here)
        if not current.keys:
            return None
        sha = self.write_object(b"tree", current.raw)
        self._remember(sha, current)
        return sha

    @property
    def settings(self) -> CommitSettings:
        """Identity, signing and gc settings, read once per command (see jobstate.git.settings)."""
        self._settings = self._settings or read_commit_settings(self.root)
        return self._settings

    def make_commit(self, tree: str, parent: str | None, message: str) -> str:
        """Write a commit object (author and committer from git's own configuration).

        Signed, as ``git commit`` would sign it, when the configuration asks for it.
        """
        if self.settings.signs:
            return signed_commit(self.root, tree, parent, message)
        author, committer = self.settings.author, self.settings.committer
        stamp = b" %d +0000" % int(time.time())
        lines = [b"tree " + tree.encode()]
        if parent:
            lines.append(b"parent " + parent.encode())
        lines += [b"author " + author + stamp, b"committer " + committer + stamp]
        body = b"\n".join(lines) + b"\n\n" + message.rstrip("\n").encode("utf-8") + b"\n"
        return self.write_object(b"commit", body)

    def build_commit(
        self,
        parent: str | None,
        files: Mapping[str, Content | None],
        message: str,
        blobs: Mapping[str, tuple[bytes, str]] | None = None,
        trees: Mapping[str, TreeEdit] | None = None,
    ) -> str:
        """Write the commit that puts ``files`` (path -> content, None to delete) on ``parent``.

        ``blobs`` adds paths that reuse existing blobs (path -> (mode, sha)), as a
        move does. ``trees`` sets whole directories (path -> (tree mode, sha), None to
        delete) in place of the file-level changes under them: a directory moved whole
        is one entry moved, not every tree under it read and rewritten. Nothing points
        at the commit yet: ``update_ref`` makes it visible.
        """
        filtered = filtered_blobs(self.root, files)  # artifacts kept in Git LFS: what git add would commit
        changes: dict[str, TreeEdit] = {
            path: None if data is None else (BLOB_MODE, filtered.get(path) or self._blob(data))
            for path, data in files.items()
        }
        used = {change[1] for change in changes.values() if change is not None}
        for path in filtered:  # a raw blob no entry of the commit uses (a filter that kept the bytes: one does)
            raw = files[path]
            if isinstance(raw, StoredBlob) and raw.sha not in used and self.on_superseded is not None:
                self.on_superseded(raw.sha)
        changes.update(blobs or {})
        if trees:
            changes = {path: change for path, change in changes.items() if not _under(path, trees)}
            changes.update(trees)
        base = self.commit_tree_of(parent) if parent else None
        tree = self.edit_tree(base, changes) or self.write_object(b"tree", b"")
        return self.make_commit(tree, parent, message)

    def _blob(self, data: Content) -> str:
        return data.sha if isinstance(data, StoredBlob) else self.write_object(b"blob", data)

    def entry(self, tree: str, path: str) -> tuple[bytes, str] | None:
        """(mode, sha) of ``path`` in the tree ``tree``, or None; large trees on the way are kept once
        read (a migration asks for every episode of one state/ tree). Read-only."""
        found: tuple[bytes, str] | None = (TREE_MODE, tree)
        for name in path.split("/"):
            if found is None or found[0] != TREE_MODE:
                return None
            found = self._tree(found[1]).get(name.encode("utf-8", "surrogateescape"))
        return found

    def is_ancestor(self, commit: str, of: str) -> bool:
        """Whether ``commit`` is ``of`` or one of its ancestors. Read-only."""
        return self.run("merge-base", "--is-ancestor", commit, of, check=False).returncode == 0

    def pack_in_background(self) -> None:
        """Start ``git gc --auto`` detached, as git's own porcelain does after a commit, when git's own estimate
        says it would pack (else it costs a process after nearly every commit for nothing). It never holds the
        jobstate lock (no inherited descriptors), its output is discarded, its failure cannot fail the command.
        """
        if not gc_due(self.common_dir / "objects", 2 * self.format.width - 2, self.settings):
            return
        spawn_detached_git(self.root, "gc", "--auto", "--quiet")

    # ------------------------------------------------------------------ remotes
    def remote_config(self, remote: str) -> tuple[str, str | None, str | None]:
        """(the remote's URL; the ssh command configured for it; ssh.variant), read once."""
        if self._net is None:
            # one git process: the remotes and the ssh settings, as git resolves the configuration
            proc = self.run("config", "-z", "--list", check=False)
            self._net = {}
            for item in proc.stdout.decode("utf-8", "surrogateescape").split("\0"):
                key, _, value = item.partition("\n")
                self._net.setdefault(key.lower() if key.count(".") < 2 else _config_key(key), value)
        url = self._net.get(f"remote.{remote}.url")
        if url is None:
            raise UsageError(f"no git remote named {remote!r} in {self.root}: add it with git remote add {remote} URL")
        return url, self._net.get("core.sshcommand"), self._net.get("ssh.variant")

    # ------------------------------------------------------------------ reading
    def ls_tree(self, rev: str, *paths: str) -> list[tuple[str, str, str]]:
        """(mode, sha, path) of every blob under ``paths`` at ``rev``. Read-only."""
        listing = b"".join(
            self.run("ls-tree", "-r", "-z", "--full-tree", rev, "--", *part).stdout for part in argv_parts(paths)
        )
        out = []
        for item in listing.split(b"\0"):
            if not item:
                continue
            meta, _, path = item.partition(b"\t")
            mode, _kind, sha = meta.split()
            out.append((mode.decode(), sha.decode(), path.decode("utf-8", "surrogateescape")))
        return out

    def diff_names(self, old: str, new: str, *paths: str) -> list[str] | None:
        """Paths changed between two commits, or None if ``old`` is gone. Read-only."""
        proc = self.run("diff-tree", "-r", "-z", "--no-renames", "--name-only", old, new, "--", *paths, check=False)
        if proc.returncode != 0:
            return None
        return [p.decode("utf-8", "surrogateescape") for p in proc.stdout.split(b"\0") if p]

    def in_head(self, path: str) -> bool:
        """Whether HEAD contains ``path``. Read-only."""
        return self.run("cat-file", "-e", f"HEAD:{path}", check=False).returncode == 0

    def status(self, *paths: str, ignored: bool = False) -> list[tuple[str, str]]:
        """(XY code, path) of changed and untracked files (and with ``ignored``, git-ignored ones as
        ``!!``); takes no lock (GIT_OPTIONAL_LOCKS=0)."""
        listing = b"".join(
            self.run(
                "status",
                "--porcelain=v1",
                "-z",
                "--untracked-files=all",
                *(["--ignored=traditional"] if ignored else []),
                "--no-renames",
                "--",
                *part,
                env=READ_ONLY_ENV,
            ).stdout
            for part in argv_parts(paths)
        )
        out = []
        for item in listing.split(b"\0"):
            if item:
                out.append((item[:2].decode(), item[3:].decode("utf-8", "surrogateescape")))
        return out


def init_repository(path: Path) -> None:
    """``git init`` through GitPython, closing the repository handle at once."""
    import git  # noqa: PLC0415 - start-up: GitPython costs 100 ms to import; only git init needs it

    repo = git.Repo.init(path)
    repo.close()


def _under(path: str, directories: Mapping[str, object]) -> bool:
    """Whether ``path`` is one of ``directories`` or inside one."""
    parts = path.split("/")
    return any("/".join(parts[:i]) in directories for i in range(1, len(parts) + 1))
