"""The fence: a paid step runs only on an episode directory exactly as HEAD has it.

Every paid command (run, resolve, approve, complete) calls ``guard`` before it does anything else, so
a refusal comes before any credential is read or any vendor client built. Nothing a user put in the
episode directory is ever moved or deleted: a difference is a refusal, never a clean-up.
"""

from __future__ import annotations

from collections.abc import Callable

from jobstate.core.layout import episode_dir, episode_path, history_path
from jobstate.core.periods import parse_episode_id
from jobstate.core.records import Episode
from jobstate.core.rules_state import key_owner_problem
from jobstate.errors import EpisodeCompleted, EpisodeUnknown, StateInvalid, UsageError
from jobstate.git.headcheck import committed_files
from jobstate.store.delivered import require_delivered
from jobstate.store.fence import require_as_committed
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
    Then what Git delivered since this clone last checked the episode must be a change a jobstate
    command makes (store.delivered; StateInvalid, exit 7, otherwise).
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
    episode = store.episode(episode_id)
    retired = store.retired_in_history(episode_id=episode_id)
    if retired is not None:
        raise StateInvalid(
            f"episode {episode_id} was retired ({retired[1]}) in this branch's history and is in state/ again: a "
            f"retirement is for ever; nothing was run. See where with: git log -- {retired[1]}; restore the "
            "tombstone and remove the episode directory (git revert the commit that brought it back)"
        )
    holders = store.key_holders(episode.allocation_key)
    problem = key_owner_problem(episode.allocation_key, holders, None) if len(holders) > 1 else None
    if problem is not None:  # a copy by hand in HEAD: which of them ran is not ours to guess
        raise StateInvalid(
            f"{problem}: an episode copied by hand is the same run; nothing was run. See it with: jobstate verify"
        )
    others = store.other_first(episode.allocation_key, episode_id)
    if others is not None:
        raise StateInvalid(
            f"episode {episode_id} holds allocation key {episode.allocation_key!r}, which "
            f"{', '.join(e for e in others if e != episode_id)} held too, and {episode_id} is not provably its "
            "first: an episode copied or renamed by hand is the same run, paid already; nothing was run. See it "
            "with: jobstate verify; restore the episode under its first ID"
        )
    # what Git delivered since this clone last looked, before anything is paid; a first look is remembered
    # only under the lock, once the fence passed (a refusal before it writes nothing)
    require_delivered(store, episode_id, first_use=clean)
    return episode
