"""Everything that talks to Git. GitPython is imported here only, and lazily.

Hot paths (allocate, retry) avoid the index entirely: objects are written as
loose objects from Python, the branch moves with ``git update-ref NEW OLD`` (a
compare-and-swap), and the user's index is brought up to date by updating a
private copy and renaming it into place, so jobstate never leaves a stale
``.git/index.lock`` behind.
"""

from __future__ import annotations

import bisect
import hashlib
import os
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING

from jobstate.errors import JobstateError, RemoteUnavailable, UsageError

if TYPE_CHECKING:
    import subprocess

ZERO = "0" * 40
TREE_MODE = b"40000"
BLOB_MODE = b"100644"
_STORE_TREES_OVER = 64 << 10

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


def _sort_key(mode: bytes, name: bytes) -> bytes:
    return name + b"/" if mode == TREE_MODE else name


def _scan(data: bytes) -> Iterator[tuple[int, bytes, bytes]]:
    pos, end = 0, len(data)
    while pos < end:
        sp = data.index(b" ", pos)
        nul = data.index(b"\0", sp)
        yield pos, data[sp + 1 : nul], data[nul + 1 : nul + 21]
        pos = nul + 21


class Tree:
    """A raw tree object with its entries' offsets and sort keys, edited by splicing.

    Editing one entry of a 10,000-entry tree costs a bisect and a byte splice,
    not a parse and a re-serialization of every entry.
    """

    __slots__ = ("keys", "offsets", "raw")

    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        self.offsets: list[int] = []
        self.keys: list[bytes] = []
        for start, name, _sha in _scan(raw):
            mode = raw[start : raw.index(b" ", start)]
            self.offsets.append(start)
            self.keys.append(_sort_key(mode, name))

    def _find(self, name: bytes) -> int | None:
        for key in (name + b"/", name):
            i = bisect.bisect_left(self.keys, key)
            if i < len(self.keys) and self.keys[i] == key:
                return i
        return None

    def get(self, name: bytes) -> tuple[bytes, str] | None:
        """(mode, hex sha) of entry ``name``."""
        i = self._find(name)
        if i is None:
            return None
        start = self.offsets[i]
        sp = self.raw.index(b" ", start)
        nul = self.raw.index(b"\0", sp)
        return self.raw[start:sp], self.raw[nul + 1 : nul + 21].hex()

    def edited(self, name: bytes, change: Change) -> Tree:
        """A new Tree with ``name`` set to ``change`` (or removed for None)."""
        i = self._find(name)
        raw, offsets, keys = self.raw, self.offsets, self.keys
        if i is not None and change is not None:
            start = offsets[i]
            sp = raw.index(b" ", start)
            if raw[start:sp] == change[0]:  # same name and mode, new object: swap the 20 bytes in place
                at = raw.index(b"\0", sp) + 1
                new = Tree.__new__(Tree)
                new.raw, new.offsets, new.keys = raw[:at] + bytes.fromhex(change[1]) + raw[at + 20 :], offsets, keys
                return new
        if i is not None:  # remove the old entry first
            end = offsets[i + 1] if i + 1 < len(offsets) else len(raw)
            width = end - offsets[i]
            raw = raw[: offsets[i]] + raw[end:]
            offsets = offsets[:i] + [o - width for o in offsets[i + 1 :]]
            keys = keys[:i] + keys[i + 1 :]
        if change is not None:
            entry = change[0] + b" " + name + b"\0" + bytes.fromhex(change[1])
            key = _sort_key(change[0], name)
            k = bisect.bisect_left(keys, key)
            at = offsets[k] if k < len(offsets) else len(raw)
            raw = raw[:at] + entry + raw[at:]
            offsets = [*offsets[:k], at, *(o + len(entry) for o in offsets[k:])]
            keys = [*keys[:k], key, *keys[k:]]
        new = Tree.__new__(Tree)
        new.raw, new.offsets, new.keys = raw, offsets, keys
        return new


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
        self._trees: dict[str, Tree] = {}
        self._remotes: set[str] = set()

    # ----------------------------------------------------------------- commands
    def run(
        self,
        *args: str,
        input: bytes | None = None,  # noqa: A002 - mirrors subprocess
        env: Mapping[str, str] | None = None,
        check: bool = True,
    ) -> subprocess.CompletedProcess[bytes]:
        """Run ``git ARGS`` in the work tree without a shell; failures become GitError."""
        import subprocess  # noqa: PLC0415 - the lock-free retry path runs no git at all

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
        err = proc.stderr.decode("utf-8", "replace")
        if self.resolve_ref(ref) != old or "cannot lock ref" in err:
            return False  # moved, or another git command holds the ref's lock: decide again
        raise GitError(f"git update-ref {ref} failed: {_git_error(err)}")

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
        import subprocess  # noqa: PLC0415

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
        try:
            # freshened as git does, so a concurrent git gc never prunes an object we now refer to
            os.utime(path)
            return sha
        except FileNotFoundError:
            pass
        except OSError:
            return sha  # there, but not ours to touch (a shared repository)
        objects = self.common_dir / "objects"
        # the temp file goes where git gc never removes a directory; the fan-out directory may be
        # removed by a background git gc between mkdir and rename, so both are retried as git does
        tmp = objects / f"tmp_obj_{os.getpid()}_{time.monotonic_ns()}"
        # a large tree (state/ with thousands of episodes) is half SHA-1s that do not compress:
        # storing it costs ~1 ms where compressing costs ~6 ms per commit at 10,000 episodes,
        # and the background git gc --auto packs it as a delta soon after
        tmp.write_bytes(zlib.compress(raw, 0 if kind == b"tree" and len(body) > _STORE_TREES_OVER else 1))
        for _attempt in range(20):
            with suppress(FileExistsError):
                os.mkdir(path.parent)
            try:
                os.replace(tmp, path)
                return sha
            except FileNotFoundError:
                continue  # git gc removed the directory after our mkdir: make it again
        tmp.unlink(missing_ok=True)
        raise GitError(f"cannot store object {sha} in {objects}: its directory keeps disappearing")

    def commit_tree_of(self, commit: str) -> str:
        """The root tree of a commit."""
        kind, body = self.read_object(commit)
        if kind != b"commit" or not body.startswith(b"tree "):
            raise GitError(f"{commit} is not a commit")
        return body[5:45].decode("ascii")

    def _tree(self, sha: str | None) -> Tree:
        if sha is None:
            return Tree(b"")
        cached = self._trees.get(sha)
        if cached is not None:
            return cached
        kind, body = self.read_object(sha)
        if kind != b"tree":
            raise GitError(f"{sha} is not a tree")
        return self._remember(sha, Tree(body))

    def _remember(self, sha: str, tree: Tree) -> Tree:
        # keep the few large trees we edit again and again (state/), not every small one
        if len(tree.keys) >= 64:
            if len(self._trees) >= 8:
                self._trees.pop(next(iter(self._trees)))
            self._trees[sha] = tree
        return tree

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
        current = self._tree(tree)
        for name, sub in below.items():
            old = current.get(name)
            old_tree = old[1] if old is not None and old[0] == TREE_MODE else None
            new_tree = self.edit_tree(old_tree, sub)
            here[name] = None if new_tree is None else (TREE_MODE, new_tree)
        for name, change in here.items():
            current = current.edited(name, change)
        if not current.keys:
            return None
        sha = self.write_object(b"tree", current.raw)
        self._remember(sha, current)
        return sha

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

    def build_commit(
        self,
        parent: str | None,
        files: Mapping[str, bytes | None],
        message: str,
        blobs: Mapping[str, tuple[bytes, str]] | None = None,
    ) -> str:
        """Write the commit that puts ``files`` (path -> content, None to delete) on ``parent``.

        ``blobs`` adds paths that reuse existing blobs (path -> (mode, sha)), as a
        move does. Nothing points at the commit yet: ``update_ref`` makes it visible.
        """
        changes: dict[str, Change] = {
            path: None if data is None else (BLOB_MODE, self.write_object(b"blob", data))
            for path, data in files.items()
        }
        changes.update(blobs or {})
        base = self.commit_tree_of(parent) if parent else None
        tree = self.edit_tree(base, changes) or self.write_object(b"tree", b"")
        return self.make_commit(tree, parent, message)

    def is_ancestor(self, commit: str, of: str) -> bool:
        """Whether ``commit`` is ``of`` or one of its ancestors. Read-only."""
        return self.run("merge-base", "--is-ancestor", commit, of, check=False).returncode == 0

    def pack_in_background(self) -> None:
        """Start ``git gc --auto`` detached, as git's own porcelain does after a commit.

        It never holds the jobstate lock (no inherited descriptors), its output is
        discarded, and its failure cannot fail the command. Skipped when
        ``objects/17`` is empty: git estimates the loose objects from that one
        directory, so it would find nothing to do.
        """
        try:
            with os.scandir(self.common_dir / "objects" / "17") as entries:
                if next(entries, None) is None:
                    return
        except OSError:
            return
        import subprocess  # noqa: PLC0415

        with suppress(OSError):  # housekeeping only: the commit has landed
            # through sh with &: git is nobody's child here, so nothing is left to reap or to wait for
            subprocess.run(
                ["sh", "-c", "git gc --auto --quiet </dev/null >/dev/null 2>&1 &"],
                cwd=self.root,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
                check=False,
            )

    # -------------------------------------------------------------------- index
    def index_lock(self, proof: Path, wait: float) -> IndexLock:
        """Git's ``.git/index.lock``, taken as git takes it (see IndexLock)."""
        return IndexLock(self, proof, wait)

    # ------------------------------------------------------------------ remotes
    def _remote_run(self, remote: str, *args: str) -> subprocess.CompletedProcess[bytes]:
        if remote not in self._remotes and self.run("remote", "get-url", remote, check=False).returncode != 0:
            raise UsageError(f"no git remote named {remote!r} in {self.root}: add it with git remote add {remote} URL")
        self._remotes.add(remote)  # checked once per process: each check is a git process
        return self.run(
            *args, check=False, env={"GIT_SSH_COMMAND": os.environ.get("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")}
        )

    def fetch(self, remote: str, ref: str) -> str | None:
        """Fetch ``ref`` from ``remote``; its tip, or None when the remote has no such branch."""
        branch = ref.removeprefix("refs/heads/")
        tracking = f"refs/remotes/{remote}/{branch}"
        proc = self._remote_run(remote, "fetch", "--quiet", "--no-tags", remote, f"+{ref}:{tracking}")
        if proc.returncode != 0:
            err = proc.stderr.decode("utf-8", "replace")
            if "couldn't find remote ref" in err:
                return None
            raise RemoteUnavailable(f"cannot fetch {branch} from {remote}: {_git_error(err)}; nothing was changed")
        return self.resolve_ref(tracking)

    def push(self, remote: str, commit: str, ref: str, expect: str | None = None) -> bool:
        """Push ``commit`` as ``ref`` on ``remote``; False when rejected as not a fast-forward.

        With ``expect`` (``commit``'s parent), the push is a compare-and-swap: the
        remote takes it only while its ``ref`` is exactly ``expect``, so the update
        is always a fast-forward and a remote that went backwards is noticed too.
        """
        lease = [f"--force-with-lease={ref}:{expect}"] if expect else []
        proc = self._remote_run(remote, "push", "--porcelain", "--quiet", *lease, remote, f"{commit}:{ref}")
        if proc.returncode == 0:
            return True
        out = (proc.stdout + proc.stderr).decode("utf-8", "replace")
        # another host moved the branch first: decide again on the new tip
        lost = ("[rejected]", "non-fast-forward", "fetch first", "cannot lock ref", "failed to update ref")
        if any(marker in out for marker in lost):
            return False
        raise RemoteUnavailable(f"cannot push to {remote}: {_git_error(out)}; nothing was changed")

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

    def in_head(self, path: str) -> bool:
        """Whether HEAD contains ``path``. Read-only."""
        return self.run("cat-file", "-e", f"HEAD:{path}", check=False).returncode == 0

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


class IndexLock:
    """``.git/index.lock`` held from before the branch moves until the index is written.

    That is the order ``git commit`` keeps, so no other git command can write an
    index that lacks the new commit's files. The lock file is created atomically
    with a nonce inside (written to a temp file, then hard-linked into place), and
    the nonce is recorded in ``proof`` first: a lock left by a killed jobstate
    holds the nonce its proof names and is removed by the next jobstate, which
    holds the jobstate lock, so the one that made it cannot be alive. A lock
    without our nonce is another git command's and is never removed: we wait
    for it up to ``wait`` seconds, then give up (exit 3) with nothing changed.
    """

    def __init__(self, git: GitRepo, proof: Path, wait: float) -> None:
        self.git = git
        self.proof = proof
        self.wait = wait
        self.lock = git.git_dir / "index.lock"
        self.nonce = ""

    def __enter__(self) -> IndexLock:
        import secrets  # noqa: PLC0415 - not on the retry path

        self.clear_stale()
        self.nonce = f"jobstate {os.getpid()} {secrets.token_hex(16)}"
        temp = self.git.git_dir / f"jobstate-lock-{secrets.token_hex(8)}"
        temp.write_text(self.nonce, encoding="utf-8")
        self.proof.write_text(self.nonce, encoding="utf-8")
        deadline = time.monotonic() + self.wait
        try:
            while True:
                try:
                    os.link(temp, self.lock)
                    return self
                except FileExistsError:
                    if time.monotonic() >= deadline:
                        self.proof.unlink(missing_ok=True)
                        raise IndexBusy(
                            f"{self.lock} is held by another git command; nothing was changed: retry when it is "
                            "done (if no git command is running, it is stale: remove it)"
                        ) from None
                    time.sleep(0.05)
        finally:
            temp.unlink(missing_ok=True)

    def clear_stale(self) -> None:
        """Remove a lock a killed jobstate left (its content is the nonce our proof names)."""
        try:
            nonce = self.proof.read_text(encoding="utf-8")
        except FileNotFoundError:
            return
        try:
            ours = self.lock.read_text(encoding="utf-8", errors="replace") == nonce and nonce.startswith("jobstate ")
        except FileNotFoundError:
            ours = False
        if ours:
            self.lock.unlink(missing_ok=True)
        self.proof.unlink(missing_ok=True)
        for leftover in self.git.git_dir.glob("jobstate-lock-*"):
            leftover.unlink(missing_ok=True)

    def update(self, paths: Iterable[str]) -> None:
        """Write the index with ``paths`` as the work tree has them (a private copy renamed into place)."""
        import shutil  # noqa: PLC0415

        from jobstate.gitindex import drop_cache_tree  # noqa: PLC0415

        tmp = self.git.git_dir / "jobstate-index"
        tmp.unlink(missing_ok=True)  # ours by name: a leftover of a killed jobstate
        (self.git.git_dir / "jobstate-index.lock").unlink(missing_ok=True)
        n = int(os.environ.get("GIT_CONFIG_COUNT") or 0)  # after any the caller set
        env = {"GIT_INDEX_FILE": str(tmp), "GIT_CONFIG_COUNT": str(n + 1)}
        env.update({f"GIT_CONFIG_KEY_{n}": "core.splitIndex", f"GIT_CONFIG_VALUE_{n}": "true"})
        index = self.git.git_dir / "index"
        if index.exists():
            shutil.copyfile(index, tmp)
        else:
            self.git.run("read-tree", "HEAD", env=env)
        # a split index rewrites only the changed entries, not the shared 10,000: the per-commit
        # cost stays flat as episodes accumulate (core.splitIndex=false set by the user still wins
        # at their next git command); the cache tree is dropped for the same reason (see gitindex)
        self.git.run("update-index", "--add", "--remove", "--", *paths, env=env)
        drop_cache_tree(tmp)
        os.replace(tmp, index)

    def __exit__(self, *exc: object) -> None:
        try:
            if self.lock.read_text(encoding="utf-8", errors="replace") == self.nonce:
                self.lock.unlink()
        except FileNotFoundError:
            pass
        self.proof.unlink(missing_ok=True)


class IndexBusy(JobstateError, TimeoutError):
    """Another git command holds ``.git/index.lock``."""

    exit_code = 3


def _git_error(text: str) -> str:
    """The line of git's output that says what went wrong."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    for line in lines:
        if line.startswith(("fatal:", "error:", "!")):
            return line
    return lines[-1] if lines else "no output"


def init_repository(path: Path) -> None:
    """``git init`` through GitPython, closing the repository handle at once."""
    import git  # noqa: PLC0415 - heavy import, only on this rare path

    repo = git.Repo.init(path)
    repo.close()
