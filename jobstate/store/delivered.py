"""What Git delivered is checked before a command acts on it (issue 29, 1), as ``fetch.fsckObjects``
checks objects: before a paid step or a decision, the episode's records as HEAD has them must be a
change the lifecycle model accepts from the records this clone last checked (a mark per episode,
kept in the Git directory where no merge can deliver one: store.marks). A merged hand edit that
reopens a paid attempt, rewrites a ledger or drops a decision is refused (exit 7) before any CMD,
credential or reservation.

The check is the model's (``core.model.episode_change``), on the net change since the mark: a hand
edit reverted before the command runs changed nothing. A clone without a mark for the episode (a
fresh clone) takes HEAD's records as its first mark, as ssh takes a host key on first use: review
(``verify --strict --against``, the Action) is what judges history no clone has seen.
"""

from __future__ import annotations

import shlex

from jobstate.core.episode_records import EpisodeRecords
from jobstate.core.layout import episode_dir
from jobstate.core.model import episode_change
from jobstate.errors import GitError, StateInvalid
from jobstate.git.listing import files_under
from jobstate.git.repo import GitRepo
from jobstate.store.marks import checked, marks, marks_path, remember
from jobstate.store.records import read_episode
from jobstate.store.snapshot import MAX_READ, Snapshot
from jobstate.store.store import Store


class _Commit(Snapshot):
    """The files of one commit, read through the command's own object reader (no git process of its own)."""

    def __init__(self, git: GitRepo, commit: str) -> None:
        self.git, self.commit, self.label = git, commit, commit[:12]

    def read(self, path: str) -> bytes:
        return self.git.read_path(self.commit, path, MAX_READ)


def require_delivered(store: Store, episode_id: str, *, first_use: bool = False) -> None:
    """Refuse (StateInvalid, exit 7) when the episode's records in HEAD are no change a jobstate command
    makes from those at this clone's mark; the mark moves with the command's next commit. Without a mark,
    HEAD's records are taken as they are, and with ``first_use`` (under the lock) remembered. No git process."""
    head = store.git.head_commit()
    if head is None:
        return
    found = marks(store)
    mark = found.get(episode_id)
    if mark == head:
        return
    if mark is not None:
        try:
            before: EpisodeRecords | None = read_episode(_Commit(store.git, mark), episode_id)
        except (GitError, StateInvalid, OSError):
            before = None  # the marked commit is gone (a gc after a reset): nothing to compare with
        if before is not None:
            try:
                after = read_episode(_Commit(store.git, head), episode_id)
                # the bytes of the episode's files too: an approved artifact swapped for a Git LFS pointer
                # changes no record (the model's rule of final artifacts reads the blobs)
                before.blobs = files_under(store.git, mark, episode_dir(episode_id))
                after.blobs = files_under(store.git, head, episode_dir(episode_id))
            except GitError as exc:  # a record HEAD holds as a symlink, a submodule or an oversized blob
                raise StateInvalid(f"{episode_dir(episode_id)}: {exc}") from None
            refused = episode_change(before, after)
            if refused:
                first = refused[0]
                raise StateInvalid(
                    f"{episode_dir(episode_id)} changed since this clone last checked it ({mark[:12]}) in a way no "
                    f"jobstate command does: {first.kind}: {first.message}; nothing "
                    f"was run. See it with: jobstate verify --against {mark[:12]}; restore the records (git revert "
                    f"the commit that changed them), or if the change was reviewed and is deliberate, accept it with: "
                    f"rm {shlex.quote(str(marks_path(store)))} (this clone then takes every episode as HEAD has it)"
                )
    checked(store, episode_id, head)
    if mark is None and first_use:
        remember(store, episode_id, head)
