"""``jobstate init``: turn a Git repository into a state repository."""

from __future__ import annotations

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
    files: dict[str, bytes | None] = {}
    for directory in (STATE, HISTORY):
        keep = root / directory / ".gitkeep"
        if not keep.exists():
            keep.parent.mkdir(parents=True, exist_ok=True)
            keep.write_bytes(b"")
            files[f"{directory}/.gitkeep"] = b""
    config = root / CONFIG_FILE
    if not config.exists():
        config.write_text(DEFAULT_CONFIG_TEXT, encoding="utf-8")
        files[CONFIG_FILE] = DEFAULT_CONFIG_TEXT.encode()
    ignore = root / ".gitignore"
    text = ignore.read_text(encoding="utf-8") if ignore.exists() else ""
    if f"{PRIVATE}/" not in text.splitlines():
        text += ("" if not text or text.endswith("\n") else "\n") + f"{PRIVATE}/\n"
        ignore.write_text(text, encoding="utf-8")
        files[".gitignore"] = text.encode()
    store = Store(root)
    if not files:
        return store, False
    transact(store, lambda _cat: StateChange(None, dict(files), "jobstate init: state/, history/, jobstate.yaml"))
    return store, True
