"""``jobstate init``: turn a Git repository into a state repository."""

from __future__ import annotations

import contextlib
from pathlib import Path

from jobstate.config import DEFAULT_CONFIG_TEXT
from jobstate.core.layout import CONFIG_FILE, HISTORY, PRIVATE, STATE
from jobstate.errors import UsageError
from jobstate.git.repo import find_root, init_repository
from jobstate.store import Store
from jobstate.transaction import StateChange, transact


def init(path: Path, *, git_init: bool = False) -> tuple[Store, bool]:
    """Create state/, history/, jobstate.yaml and the .gitignore entry, and commit them.

    Returns the store and whether anything changed (a second run changes nothing).
    """
    if not path.is_dir():
        raise UsageError(f"{path} is not a directory")
    try:
        root = find_root(path)
    except UsageError:
        if not git_init:
            raise UsageError(
                f"{path} is not inside a Git repository: run git init there first, or pass --git-init"
            ) from None
        init_repository(path)
        root = path.resolve()
    # the files are written by the transaction, which puts everything back when the commit fails
    files: dict[str, bytes | None] = {}
    for directory in (STATE, HISTORY):
        if not (root / directory / ".gitkeep").exists():
            files[f"{directory}/.gitkeep"] = b""
    if not (root / CONFIG_FILE).exists():
        files[CONFIG_FILE] = DEFAULT_CONFIG_TEXT.encode()
    ignore = root / ".gitignore"
    text = ignore.read_text(encoding="utf-8") if ignore.exists() else ""
    if f"{PRIVATE}/" not in text.splitlines():
        text += ("" if not text or text.endswith("\n") else "\n") + f"{PRIVATE}/\n"
        files[".gitignore"] = text.encode()
    store = Store(root)
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
