"""The fence's rule for a committed episode: its directory exactly as HEAD has it, or a refusal
naming what differs. Every command that acts on a committed episode asks it under the lock: the
paid commands (through ``paid.guard``) and retire."""

from __future__ import annotations

import shlex
from collections.abc import Callable

from jobstate.core import advice
from jobstate.core.layout import episode_dir, mode_refusal
from jobstate.errors import DirtyState
from jobstate.git.headcheck import committed_files, matches_head, odd_entry
from jobstate.store.running import remove_temp_files
from jobstate.store.store import Store


def require_as_committed(
    store: Store,
    episode_id: str,
    committed: dict[str, tuple[str, str]] | None = None,
    notify: Callable[[str], None] = lambda _line: None,
) -> None:
    """Refuse (DirtyState, exit 2) an episode directory that is not exactly as HEAD has it, and (StateInvalid,
    exit 7) one whose files HEAD holds as no command writes them (executable, a symlink); under the lock.

    The one rule for every command that acts on a committed episode (the paid commands, retire). The
    common case, exactly as committed, is answered at a cost that does not grow with the state."""
    directory = episode_dir(episode_id)
    if committed is None:
        committed = committed_files(store.git, directory)
    for path, (mode, _blob) in sorted((committed or {}).items()):
        refused = mode_refusal(path, mode)
        if refused is not None:
            raise refused
    if committed is not None and matches_head(store.git, store.root, directory, committed):
        return
    remove_temp_files(store, directory, notify)
    if committed is None or not matches_head(store.git, store.root, directory, committed):
        _refuse_difference(store, directory, episode_id)  # unless git, which knows filters (LFS), sees none


def _sh(*argv: str) -> str:
    return " ".join(shlex.quote(a) for a in argv)


def _refuse_difference(store: Store, directory: str, episode_id: str) -> None:
    """DirtyState naming what differs from HEAD in the episode directory (it is never moved or removed);
    returns when git sees nothing: the fast check compares raw bytes, git applies clean filters."""
    show = _sh("git", "status", "--ignored", "--", directory)
    odd = odd_entry(store.root, directory)
    if odd is not None:
        raise DirtyState(
            f"{odd} in episode {episode_id} is not a plain file or directory as committed (a symlink, a replaced "
            f"directory, a fifo...): restore the directory as committed before a paid step (ls -l "
            f"{_sh(odd)}; {show}); nothing was run"
        )
    dirty = store.git.status(directory, ignored=True)
    if not dirty:
        return  # bytes differ only as a clean filter (Git LFS) makes them: as committed
    code, path = dirty[0]
    if code in ("??", "!!"):
        what = "is not committed" if code == "??" else "is git-ignored but inside the episode directory"
        fix = "move it out of the episode directory (or commit it)"
    else:
        what = "differs from what is committed"
        fix = advice.commit_or_restore(path, code)
    raise DirtyState(
        f"{path} in episode {episode_id} {what} ({show}): jobstate acts only on an episode exactly as "
        f"committed, so nothing was run; {fix}"
    )
