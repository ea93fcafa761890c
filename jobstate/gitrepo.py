"""Everything that talks to Git. GitPython is imported here only, and lazily.

Hot paths (allocate, retry) avoid the index entirely: objects are written as
loose objects from Python, the branch moves with ``git update-ref NEW OLD`` (a
compare-and-swap), and the user's index is brought up to date by updating a
private copy and renaming it into place, so jobstate never leaves a stale
``.git/index.lock`` behind.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from jobstate.errors import JobstateError, UsageError

ZERO = "0" * 40
TREE_MODE = b"40000"
BLOB_MODE = b"100644"

Entry = tuple[bytes, bytes, bytes]  # mode, name, 20-byte sha
Change = tuple[bytes, str] | None  # (mode, hex sha) to set, None to delete
_Reader = Callable[[str], tuple[bytes, bytes]]


class GitError(JobstateError, RuntimeError):
    """A git command failed in a way jobstate cannot recover from by itself."""


def find_root(start: Path) -> Path:
    """The top of the Git work tree that contains ``start``."""
    here = start.resolve()
    for candidate in (here, *here.parents):
        if (candidate / ".git").exists():
            return candidate
    raise UsageError(f"{start} is not inside a Git repository: run jobstate init --git-init there, or pass --repo PATH")


def blob_sha(data: bytes) -> str:
    """The Git object ID of a blob with these bytes."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def _tree_sort_key(entry: Entry) -> bytes:
    return entry[1] + b"/" if entry[0] == TREE_MODE else entry[1]


def parse_tree(data: bytes) -> list[Entry]:
    """Entries of a raw tree object, in stored order."""
    out: list[Entry] = []
    pos, end = 0, len(data)
    while pos < end:
        sp = data.index(b" ", pos)
        nul = data.index(b"\0", sp)
        out.append((data[pos:sp], data[sp + 1 : nul], data[nul + 1 : nul + 21]))
        pos = nul + 21
    return out


def format_tree(entries: Iterable[Entry]) -> bytes:
    """A raw tree object from entries, sorted the way Git sorts them."""
    return b"".join(m + b" " + n + b"\0" + s for m, n, s in sorted(entries, key=_tree_sort_key))


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
        self._ident: tuple[bytes, bytes] | None = None

    # ----------------------------------------------------------------- commands
    def run(
        self,
        *args: str,
        input: bytes | None = None,  # noqa: A002 - mirrors subprocess
        env: Mapping[str, str] | None = None,
        check: bool = True,
    ) -> subprocess.CompletedProcess[bytes]:
        """Run ``git ARGS`` in the work tree without a shell; failures become GitError."""
        full_env = dict(os.environ)
        full_env["GIT_TERMINAL_PROMPT"] = "0"
        if env:
            full_env.update(env)
        try:
            proc = subprocess.run(
                ["git", *args], cwd=self.root, input=input, capture_output=True, env=full_env, check=False
            )
        except FileNotFoundError:
            raise UsageError("git is not installed or not on PATH") from None
        if check and proc.returncode != 0:
            err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
            raise GitError(f"git {args[0]} failed in {self.root}: {err[-1] if err else proc.returncode}")
        return proc

    # --------------------------------------------------------------------- refs
    def head_ref(self) -> str:
        """The branch HEAD points to, e.g. ``refs/heads/main``."""
        head = (self.git_dir / "HEAD").read_text(encoding="utf-8").strip()
        if not head.startswith("ref: "):
            raise UsageError(f"HEAD of {self.root} is detached: check out a branch first (git switch main)")
        return head[5:]

    def resolve_ref(self, ref: str) -> str | None:
        """The commit a ref points to, read from the files (no subprocess); None if unborn."""
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

    def update_ref(self, ref: str, new: str, old: str | None, message: str) -> bool:
        """Compare-and-swap ``ref`` from ``old`` to ``new``; False when another writer moved it first."""
        proc = self.run("update-ref", "-m", message, ref, new, old or ZERO, check=False)
        if proc.returncode == 0:
            return True
        if self.resolve_ref(ref) != old:
            return False
        err = proc.stderr.decode("utf-8", "replace").strip()
        raise GitError(f"git update-ref {ref} failed: {err}")

    # ------------------------------------------------------------------ objects
    def _loose_path(self, sha: str) -> Path:
        return self.common_dir / "objects" / sha[:2] / sha[2:]

    def read_object(self, sha: str) -> tuple[bytes, bytes]:
        """(type, content) of one object: loose objects from Python, packed ones through git."""
        try:
            raw = zlib.decompress(self._loose_path(sha).read_bytes())
        except FileNotFoundError:
            with self.object_reader() as read:
                return read(sha)
        header, _, body = raw.partition(b"\0")
        return header.split(b" ", 1)[0], body

    @contextmanager
    def object_reader(self) -> Iterator[_Reader]:
        """A ``git cat-file --batch`` reader for many objects; closed on exit."""
        proc = subprocess.Popen(
            ["git", "cat-file", "--batch"],
            cwd=self.root,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert proc.stdin is not None
        assert proc.stdout is not None
        stdin, stdout = proc.stdin, proc.stdout

        def read(sha: str) -> tuple[bytes, bytes]:
            stdin.write(sha.encode("ascii") + b"\n")
            stdin.flush()
            header = stdout.readline().split()
            if len(header) != 3:
                raise GitError(f"object {sha} is missing from {self.root}")
            body = stdout.read(int(header[2]) + 1)[:-1]
            return header[1], body

        try:
            yield read
        finally:
            stdin.close()
            proc.wait()
            stdout.close()

    def write_object(self, kind: bytes, body: bytes) -> str:
        """Store an object as a loose object (atomically); returns its ID."""
        raw = kind + b" %d\0" % len(body) + body
        sha = hashlib.sha1(raw, usedforsecurity=False).hexdigest()
        path = self._loose_path(sha)
        if path.exists():
            return sha
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.parent / f"tmp_obj_{os.getpid()}_{time.monotonic_ns()}"
        tmp.write_bytes(zlib.compress(raw, 1))
        os.replace(tmp, path)
        return sha

    def commit_tree_of(self, commit: str) -> str:
        """The root tree of a commit."""
        kind, body = self.read_object(commit)
        if kind != b"commit" or not body.startswith(b"tree "):
            raise GitError(f"{commit} is not a commit")
        return body[5:45].decode("ascii")

    def tree_entries(self, tree: str | None) -> list[Entry]:
        """Entries of a tree object (empty for None)."""
        if tree is None:
            return []
        kind, body = self.read_object(tree)
        if kind != b"tree":
            raise GitError(f"{tree} is not a tree")
        return parse_tree(body)

    def edit_tree(self, tree: str | None, changes: Mapping[str, Change]) -> str | None:
        """A new tree: ``tree`` with ``changes`` (path -> (mode, sha) or None) applied.

        Only the subtrees on the changed paths are read and rewritten. Returns
        None when the result is empty (Git stores no empty trees).
        """
        here: dict[bytes, Change] = {}
        below: dict[bytes, dict[str, Change]] = {}
        for path, change in changes.items():
            head, sep, rest = path.partition("/")
            if sep:
                below.setdefault(head.encode(), {})[rest] = change
            else:
                here[head.encode()] = change
        entries = {e[1]: e for e in self.tree_entries(tree)}
        for name, sub in below.items():
            old = entries.get(name)
            old_tree = old[2].hex() if old is not None and old[0] == TREE_MODE else None
            new_tree = self.edit_tree(old_tree, sub)
            if new_tree is None:
                entries.pop(name, None)
            else:
                entries[name] = (TREE_MODE, name, bytes.fromhex(new_tree))
        for name, change in here.items():
            if change is None:
                entries.pop(name, None)
            else:
                entries[name] = (change[0], name, bytes.fromhex(change[1]))
        if not entries:
            return None
        return self.write_object(b"tree", format_tree(entries.values()))

    def _identity(self) -> tuple[bytes, bytes]:
        if self._ident is None:
            idents = []
            for var in ("GIT_AUTHOR_IDENT", "GIT_COMMITTER_IDENT"):
                proc = self.run("var", var, check=False)
                if proc.returncode != 0:
                    raise UsageError(
                        "git has no identity to commit with: set it with "
                        "git config user.name NAME and git config user.email EMAIL"
                    )
                idents.append(proc.stdout.strip().rsplit(b" ", 2)[0])
            self._ident = (idents[0], idents[1])
        return self._ident

    def make_commit(self, tree: str, parent: str | None, message: str) -> str:
        """Write a commit object (author and committer from git's own configuration)."""
        author, committer = self._identity()
        stamp = b" %d +0000" % int(time.time())
        lines = [b"tree " + tree.encode()]
        if parent:
            lines.append(b"parent " + parent.encode())
        lines += [b"author " + author + stamp, b"committer " + committer + stamp]
        body = b"\n".join(lines) + b"\n\n" + message.rstrip("\n").encode("utf-8") + b"\n"
        return self.write_object(b"commit", body)

    def build_commit(self, parent: str | None, files: Mapping[str, bytes | None], message: str) -> str:
        """Write the commit that puts ``files`` (path -> content, None to delete) on ``parent``.

        Nothing points at it yet: ``update_ref`` makes it visible.
        """
        changes: dict[str, Change] = {
            path: None if data is None else (BLOB_MODE, self.write_object(b"blob", data))
            for path, data in files.items()
        }
        base = self.commit_tree_of(parent) if parent else None
        tree = self.edit_tree(base, changes) or self.write_object(b"tree", b"")
        return self.make_commit(tree, parent, message)

    def is_ancestor(self, commit: str, of: str) -> bool:
        """Whether ``commit`` is ``of`` or one of its ancestors. Read-only."""
        return self.run("merge-base", "--is-ancestor", commit, of, check=False).returncode == 0

    # -------------------------------------------------------------------- index
    def sync_index(self, paths: Iterable[str]) -> bool:
        """Bring the user's index up to date for ``paths`` after a commit.

        A private copy of the index is updated and renamed over ``.git/index``:
        jobstate never takes ``.git/index.lock``, so a kill here cannot wedge
        the repository. Returns False (and changes nothing) while another git
        command holds ``index.lock``: it would overwrite our update anyway.
        """
        index = self.git_dir / "index"
        if (self.git_dir / "index.lock").exists():
            return False
        tmp = self.git_dir / "jobstate-index"
        # ours by name; a leftover means a killed jobstate, and we hold the jobstate lock
        tmp.unlink(missing_ok=True)
        (self.git_dir / "jobstate-index.lock").unlink(missing_ok=True)
        env = {"GIT_INDEX_FILE": str(tmp)}
        if index.exists():
            shutil.copyfile(index, tmp)
        else:
            self.run("read-tree", "HEAD", env=env)
        self.run("update-index", "--add", "--remove", "--", *paths, env=env)
        os.replace(tmp, index)
        return True

    # ------------------------------------------------------------------ reading
    def ls_tree(self, rev: str, *paths: str) -> list[tuple[str, str, str]]:
        """(mode, sha, path) of every blob under ``paths`` at ``rev``. Read-only."""
        proc = self.run("ls-tree", "-r", "-z", "--full-tree", rev, "--", *paths)
        out = []
        for item in proc.stdout.split(b"\0"):
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

    def status(self, *paths: str) -> list[tuple[str, str]]:
        """(XY code, path) of changed and untracked files; takes no lock (GIT_OPTIONAL_LOCKS=0)."""
        proc = self.run(
            "status",
            "--porcelain=v1",
            "-z",
            "--untracked-files=all",
            "--no-renames",
            "--",
            *paths,
            env={"GIT_OPTIONAL_LOCKS": "0"},
        )
        out = []
        for item in proc.stdout.split(b"\0"):
            if item:
                out.append((item[:2].decode(), item[3:].decode("utf-8", "surrogateescape")))
        return out


def init_repository(path: Path) -> None:
    """``git init`` through GitPython, closing the repository handle at once."""
    import git  # noqa: PLC0415 - heavy import, only on this rare path

    repo = git.Repo.init(path)
    repo.close()
