"""The fence: a paid step runs only on an episode directory exactly as HEAD has it.

Every paid command (run, resolve, approve, complete) calls ``guard`` before it does anything else, so
a refusal comes before any credential is read, any vendor client built or any file moved.
"""

from __future__ import annotations

from collections.abc import Callable

from jobstate.core.clock import format_time
from jobstate.core.layout import episode_dir, episode_path, history_path
from jobstate.core.periods import parse_episode_id
from jobstate.core.records import Episode
from jobstate.errors import DirtyState, EpisodeUnknown, StepRunning, UsageError
from jobstate.git.headcheck import committed_files, matches_head
from jobstate.paid.leftovers import put_aside, running_steps
from jobstate.store.store import Store


def guard(
    store: Store, episode_id: str, *, clean: bool = True, notify: Callable[[str], None] = lambda _line: None
) -> Episode:
    """Refuse unless the episode exists and is committed in HEAD (else EpisodeUnknown, exit 5),
    its ID is well formed (else UsageError, exit 2) and its directory is clean (else DirtyState, exit 2).

    Runs before anything a paid step does. With ``clean`` (under the lock), what a killed step
    left in the episode directory is put aside first (jobstate.paid.leftovers) and ``notify`` told.
    """
    try:
        parse_episode_id(episode_id)
    except UsageError as exc:
        raise UsageError(f"{exc}; give the explicit ID of an allocated episode") from None
    store.require_initialized()
    directory = episode_dir(episode_id)
    if not store.path(episode_path(episode_id)).is_file():
        raise EpisodeUnknown(
            f"episode {episode_id} does not exist; allocate it first with: "
            "jobstate allocate --key KEY --date YYYY-MM-DD"
        )
    committed = committed_files(store.git, directory)
    if committed is None or episode_path(episode_id) not in committed:
        raise EpisodeUnknown(
            f"episode {episode_id} is not committed; run the same jobstate allocate again to commit it"
        )
    # cleanliness only means something under the lock: outside it, another step's write may be half done;
    # the common case, exactly as committed, is answered at a cost that does not grow with the state
    exact = not clean or matches_head(store.git, store.root, directory, committed)
    dirty = [] if exact else store.git.status(directory)
    if dirty and put_aside(store, episode_id, dirty, format_time(store.now()), notify):
        dirty = store.git.status(directory)
    if dirty:
        busy = running_steps(store, episode_id, other_than_us=True)
        if busy and all(code == "??" for code, _path in dirty):
            raise StepRunning(
                f"step {', '.join(sorted(busy))} of {episode_id} is running now and has written {dirty[0][1]}, "
                "not recorded yet: wait for it to finish, then run this again"
            )
        raise DirtyState(
            f"{dirty[0][1]} in episode {episode_id} differs from what is committed; commit it or restore it "
            f"(git checkout -- {dirty[0][1]}) before a paid step (git status -- {directory})"
        )
    if store.path(history_path(episode_id)).exists():
        raise EpisodeUnknown(f"episode {episode_id} is already completed; nothing more can be paid for it")
    return store.episode(episode_id)
