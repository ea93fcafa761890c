"""``jobstate init``: turn a Git repository into a state repository."""

from __future__ import annotations

import contextlib
from pathlib import Path

from jobstate.atomic import is_temp_name
from jobstate.core.layout import CONFIG_FILE, HISTORY, PRIVATE, STATE, is_year_dir
from jobstate.core.periods import parse_episode_id, parse_period
from jobstate.errors import NotInitialized, UsageError
from jobstate.git.loose import Content
from jobstate.git.repo import find_root, init_repository
from jobstate.git.runner import run_git
from jobstate.store.config import default_config_text
from jobstate.store.records import checked
from jobstate.store.store import Store
from jobstate.store.transaction import StateChange, locked, transact

# jobstate compares its files with the blobs it committed, byte for byte: no end-of-line conversion
# (core.autocrlf, core.eol, text/eol attributes), $Id$ expansion or re-encoding may touch them.
# Committed, so that every clone checks them out unconverted; appended last, so these lines win.
OWN_ATTRIBUTES = """\
# jobstate: its files hold exactly the bytes it committed, whatever core.autocrlf or core.eol say
/jobstate.yaml -text -ident -working-tree-encoding
/state/** -text -ident -working-tree-encoding
/history/** -text -ident -working-tree-encoding
"""


def init(path: Path, *, git_init: bool = False, force: bool = False) -> tuple[Store, bool]:
    """Create state/, history/, jobstate.yaml, the .gitignore entry and the .gitattributes lines, and commit them.

    Returns the store and whether anything changed (a second run changes nothing). Nothing is
    written when git has no identity to commit with; whatever an interrupted init left
    uncommitted, the next init commits. A second state beside one that another branch holds (a clone
    checked out on the wrong branch) would hand out the same IDs again: refused unless ``force``.
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
    files: dict[str, Content | None] = {}

    def ensure(rel: str, default: str) -> None:
        file = root / rel
        if not store.git.in_head(rel):  # also what an interrupted init wrote and never committed
            files[rel] = file.read_bytes() if file.is_file() else default.encode()

    if not force and not (root / STATE).is_dir() and not store.git.in_head(f"{STATE}/.gitkeep"):
        elsewhere = store.state_elsewhere()
        if elsewhere is not None:
            raise UsageError(
                elsewhere + "; jobstate init --force starts a second, separate state here instead; nothing was written"
            )
    ensure(f"{STATE}/.gitkeep", "")
    ensure(f"{HISTORY}/.gitkeep", "")
    for folder in (STATE, HISTORY):
        if f"{folder}/.gitkeep" in files:
            _refuse_foreign_files(root, folder)
    ensure(CONFIG_FILE, default_config_text(_branch(store)))
    attributes = root / ".gitattributes"
    text = attributes.read_text(encoding="utf-8") if attributes.exists() else ""
    if OWN_ATTRIBUTES not in text:
        files[".gitattributes"] = (text + ("" if not text or text.endswith("\n") else "\n") + OWN_ATTRIBUTES).encode()
    elif not store.git.in_head(".gitattributes"):
        files[".gitattributes"] = text.encode()
    ignore = root / ".gitignore"
    text = ignore.read_text(encoding="utf-8") if ignore.exists() else ""
    if f"{PRIVATE}/" not in text.splitlines():
        text += ("" if not text or text.endswith("\n") else "\n") + f"{PRIVATE}/\n"
        files[".gitignore"] = text.encode()
    elif not store.git.in_head(".gitignore"):
        files[".gitignore"] = text.encode()
    if not files:
        with locked(store):  # the repair: an init killed after its commit left the index behind
            pass
        return store, False
    made = not (root / STATE).exists()
    (root / STATE).mkdir(exist_ok=True)  # the transaction requires it
    try:
        change = StateChange(None, dict(files), "jobstate init: state/, history/, jobstate.yaml")
        transact(store, lambda _cat: checked(store, change))
    except BaseException:
        if made:
            with contextlib.suppress(OSError):
                (root / STATE).rmdir()
        raise
    return store, True


def _refuse_foreign_files(root: Path, folder: str) -> None:
    """A folder init is about to claim holds only what jobstate writes there: anything else would be
    read as state (or make later commands fail or succeed depending on the catalog), so init refuses."""
    directory = root / folder
    if not directory.is_dir():
        if directory.exists() or directory.is_symlink():
            raise UsageError(f"{folder} is not a directory; move it away, then run jobstate init again")
        return
    foreign = sorted(
        p.name
        for p in directory.iterdir()
        # a temp file of a killed init: the transaction's repair removes it
        if p.name != ".gitkeep" and not _is_episode(folder, p) and not (is_temp_name(p.name) and p.is_file())
    )
    if foreign:
        raise UsageError(
            f"{folder}/ already holds {folder}/{foreign[0]}"
            + (f" and {len(foreign) - 1} more" if len(foreign) > 1 else "")
            + f", which jobstate did not write: move it out of {folder}/, then run jobstate init again; "
            "nothing was written"
        )


def _is_episode(folder: str, path: Path) -> bool:
    """An episode directory (or history file) by its name, versioned or legacy (jobstate migrate's)."""
    name = path.name
    if is_year_dir(name) and path.is_dir() and not path.is_symlink():
        return True  # state/<year>/, history/<year>/: the layout's own directories
    if folder == HISTORY:
        if not (name.endswith(".yaml") and path.is_file()):
            return False
        name = name[: -len(".yaml")]
    elif not path.is_dir() or path.is_symlink():
        return False
    for parse in (parse_episode_id, parse_period):
        try:
            parse(name)
        except UsageError:
            continue
        return True
    return False


def _branch(store: Store) -> str | None:
    """The branch HEAD names (None when detached)."""
    ref = store.git.head_ref()
    return ref.removeprefix("refs/heads/") if ref.startswith("refs/heads/") else None


def _require_identity(cwd: Path) -> None:
    for var in ("GIT_AUTHOR_IDENT", "GIT_COMMITTER_IDENT"):
        if run_git(cwd, "var", var, check=False).returncode != 0:
            raise UsageError(
                "git has no identity to commit with, so jobstate init wrote nothing: set it with "
                "git config --global user.name NAME and git config --global user.email EMAIL, then run it again"
            )
