"""``jobstate init``: turn a Git repository into a state repository."""

from __future__ import annotations

import contextlib
from pathlib import Path

from jobstate.core.layout import CONFIG_FILE, HISTORY, PRIVATE, STATE
from jobstate.errors import NotInitialized, UsageError
from jobstate.git.repo import find_root, init_repository
from jobstate.git.runner import run_git
from jobstate.store.config import DEFAULT_CONFIG_TEXT
from jobstate.store.store import Store
from jobstate.store.transaction import StateChange, transact


def init(path: Path, *, git_init: bool = False) -> tuple[Store, bool]:
    """Create state/, history/, jobstate.yaml and the .gitignore entry, and commit them.

    Returns the store and whether anything changed (a second run changes nothing). Nothing is
    written when git has no identity to commit with; whatever an interrupted init left
    uncommitted, the next init commits.
    """
    if not path.is_dir():
        raise UsageError(f"{path} is not a directory")
    try:
        root = find_root(path)
    except NotInitialized:  # a bare repository is refused as it is, never git-init'ed inside
        if not git_init:
            raise NotInitialized(
                f"{path} is not inside a Git repository: run git init there first, or pass --git-init"
            ) from None
        _require_identity(path)  # before git init: a refused init leaves nothing behind
        init_repository(path)
        root = path.resolve()
    store = Store(root)
    _ = store.git.format  # an object format jobstate cannot write is refused before anything else
    _require_identity(root)
    # the transaction writes the files, and puts everything back when the commit fails
    files: dict[str, bytes | None] = {}

    def ensure(rel: str, default: str) -> None:
        file = root / rel
        if not store.git.in_head(rel):  # also what an interrupted init wrote and never committed
            files[rel] = file.read_bytes() if file.is_file() else default.encode()

    ensure(f"{STATE}/.gitkeep", "")
    ensure(f"{HISTORY}/.gitkeep", "")
    ensure(CONFIG_FILE, DEFAULT_CONFIG_TEXT)
    ignore = root / ".gitignore"
    text = ignore.read_text(encoding="utf-8") if ignore.exists() else ""
    if f"{PRIVATE}/" not in text.splitlines():
        text += ("" if not text or text.endswith("\n") else "\n") + f"{PRIVATE}/\n"
        files[".gitignore"] = text.encode()
    elif not store.git.in_head(".gitignore"):
        files[".gitignore"] = text.encode()
    if not files:
        return store, False
    made = not (root / STATE).exists()
    (root / STATE).mkdir(exist_ok=True)  # the transaction requires it
    try:
        transact(store, lambda _cat: StateChange(None, dict(files), "jobstate init: state/, history/, jobstate.yaml"))
    except BaseException:
        if made:
            with contextlib.suppress(OSError):
                (root / STATE).rmdir()
        raise
    return store, True


def _require_identity(cwd: Path) -> None:
    for var in ("GIT_AUTHOR_IDENT", "GIT_COMMITTER_IDENT"):
        if run_git(cwd, "var", var, check=False).returncode != 0:
            raise UsageError(
                "git has no identity to commit with, so jobstate init wrote nothing: set it with "
                "git config --global user.name NAME and git config --global user.email EMAIL, then run it again"
            )
