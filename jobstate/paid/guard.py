"""The fence: a paid step runs only on an episode directory exactly as HEAD has it.

Every paid command (run, resolve, approve, complete) calls ``guard`` before it does anything else, so
a refusal comes before any credential is read or any vendor client built. Nothing a user put in the
episode directory is ever moved or deleted: a difference is a refusal, never a clean-up.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable

from jobstate.core import advice
from jobstate.core.layout import episode_dir, episode_path, history_path
from jobstate.core.periods import parse_episode_id
from jobstate.core.records import Episode
from jobstate.errors import DirtyState, EpisodeCompleted, EpisodeUnknown, UsageError
from jobstate.git.headcheck import committed_files, matches_head, odd_entry
from jobstate.paid.running import remove_temp_files
from jobstate.store.store import Store


def guard(
    store: Store, episode_id: str, *, clean: bool = True, notify: Callable[[str], None] = lambda _line: None
) -> Episode:
    """Refuse unless the episode exists and is committed in HEAD (else EpisodeUnknown, exit 5),
    its ID is well formed (else UsageError, exit 2) and its directory is exactly as HEAD has it
    (else DirtyState, exit 2, naming the first file that differs and the git command that shows it).

    Runs before anything a paid step does. Exactly as HEAD means: no untracked, git-ignored,
    modified or deleted file, no symlink, fifo or replaced directory, anywhere in it. Nothing a
    user put there is moved or deleted: only ``.tmp-*`` files that jobstate's own killed atomic
    writes left beside the records are removed, with ``clean`` (under the lock), and ``notify`` told.
    """
    try:
        parse_episode_id(episode_id)
    except UsageError as exc:
        raise UsageError(f"{exc}; give the explicit ID of an allocated episode") from None
    store.require_initialized()
    directory = episode_dir(episode_id)
    if not store.path(episode_path(episode_id)).is_file():
        store.episode(episode_id)  # raises what is wrong: unknown, or deleted from the work tree only
    committed = committed_files(store.git, directory)
    if committed is None or episode_path(episode_id) not in committed:
        raise EpisodeUnknown(
            f"episode {episode_id} is not committed; run the same jobstate allocate again to commit it"
        )
    # cleanliness only means something under the lock: outside it, another step's write may be half done
    if clean:
        require_as_committed(store, episode_id, committed, notify)
    if store.path(history_path(episode_id)).exists():
        raise EpisodeCompleted(
            f"episode {episode_id} is completed; nothing more can be paid for it or decided", episode_id
        )
    return store.episode(episode_id)


def require_as_committed(
    store: Store,
    episode_id: str,
    committed: dict[str, tuple[str, str]] | None = None,
    notify: Callable[[str], None] = lambda _line: None,
) -> None:
    """Refuse (DirtyState, exit 2) an episode directory that is not exactly as HEAD has it; under the lock.

    The one rule for every command that acts on a committed episode (the paid commands, retire). The
    common case, exactly as committed, is answered at a cost that does not grow with the state."""
    directory = episode_dir(episode_id)
    if committed is None:
        committed = committed_files(store.git, directory)
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
