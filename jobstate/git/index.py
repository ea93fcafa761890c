"""Git's index lock, held as ``git commit`` holds it, and the index updates made under it."""

from __future__ import annotations

import os
import secrets
import shutil
import time
from collections.abc import Iterable
from pathlib import Path

from jobstate.errors import IndexBusy
from jobstate.git.cache_tree import drop_cache_tree
from jobstate.git.repo import GitRepo


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
        tmp = self.git.git_dir / "jobstate-index"
        tmp.unlink(missing_ok=True)  # ours by name: a leftover of a killed jobstate
        (self.git.git_dir / "jobstate-index.lock").unlink(missing_ok=True)
        n = int(os.environ.get("GIT_CONFIG_COUNT") or 0)  # after any the caller set
        env = {"GIT_INDEX_FILE": str(tmp), "GIT_CONFIG_COUNT": str(n + 1)}
        env.update({f"GIT_CONFIG_KEY_{n}": "core.splitIndex", f"GIT_CONFIG_VALUE_{n}": "true"})
        index = self.git.git_dir / "index"
        if index.exists():
            # copy2 keeps the index's mtime: git takes an entry as racily clean (and checks its content) by
            # comparing it with the index file's mtime, and a fresh mtime would declare a file that changed in
            # the same clock tick clean for good
            shutil.copy2(index, tmp)
        else:
            self.git.run("read-tree", "HEAD", env=env)
        # a split index rewrites only the changed entries, not the shared 10,000: the per-commit
        # cost stays flat as episodes accumulate (core.splitIndex=false set by the user still wins
        # at their next git command); the cache tree is dropped for the same reason (see cache_tree)
        listed = b"".join(path.encode("utf-8", "surrogateescape") + b"\0" for path in paths)
        self.git.run("update-index", "--add", "--remove", "-z", "--stdin", input=listed, env=env)
        drop_cache_tree(tmp, self.git.format.name)
        os.replace(tmp, index)

    def __exit__(self, *exc: object) -> None:
        try:
            if self.lock.read_text(encoding="utf-8", errors="replace") == self.nonce:
                self.lock.unlink()
        except FileNotFoundError:
            pass
        self.proof.unlink(missing_ok=True)
