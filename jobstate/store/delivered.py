"""What Git delivered is checked before a command acts on it (issue 29, 1), as ``fetch.fsckObjects``
checks objects: before a paid step or a decision, the episode's records as HEAD has them must be a
change the lifecycle model accepts from the records this clone last checked (a mark per episode,
kept in the Git directory where no merge can deliver one: store.marks). A merged hand edit that
reopens a paid attempt, rewrites a ledger or drops a decision is refused (exit 7) before any CMD,
credential or reservation.

The check is the model's (``core.model.episode_change``), commit by commit on the first-parent line from
the mark, as review walks a range (a merge is judged by its whole side's change against its first parent);
the net change when the mark is no ancestor of HEAD (a rewrite). An episode whose every byte is as checked
(a hand edit reverted) has nothing delivered to act on. A clone without a mark for the episode (a
fresh clone) takes HEAD's records as its first mark, as ssh takes a host key on first use: review
(``verify --strict --against``, the Action) is what judges history no clone has seen.
"""

from __future__ import annotations

import shlex

from jobstate.core.episode_records import EpisodeRecords
from jobstate.core.layout import episode_dir, history_path
from jobstate.core.model import Violation, episode_change
from jobstate.errors import GitError, StateInvalid
from jobstate.git.listing import files_under
from jobstate.git.repo import GitRepo
from jobstate.store.marks import checked, marks, marks_path, remember
from jobstate.store.records import read_episode
from jobstate.store.snapshot import MAX_READ, Snapshot
from jobstate.store.store import Store

# how many commits since the mark are checked one by one (review's own limit); a longer range as a whole
MAX_COMMITS = 200


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
        refused_at = _refused_change(store, episode_id, mark, head)
        if refused_at is not None:
            parent, commit, first = refused_at
            raise StateInvalid(
                f"{episode_dir(episode_id)} was changed by commit {commit[:12]} (since this clone last checked it, "
                f"{mark[:12]}) in a way no jobstate command does: {first.kind}: {first.message}; nothing was run. "
                f"See it with: jobstate verify --rev {commit[:12]} --against {parent[:12]}; restore the records (git "
                "revert the commit that changed them), or if the change was reviewed and is deliberate, accept it "
                f"with: rm {shlex.quote(str(marks_path(store)))} (this clone then takes every episode as HEAD has it)"
            )
    checked(store, episode_id, head)
    if mark is None and first_use:
        remember(store, episode_id, head)


def _refused_change(store: Store, episode_id: str, mark: str, head: str) -> tuple[str, str, Violation] | None:
    """The first change of the episode from ``mark`` to ``head`` that the model refuses: (parent, commit, the
    violation). Commit by commit on the first-parent line, as review walks a range (a merge is its whole side's
    change against the first parent); the net change when the line cannot be walked (the mark is no ancestor,
    or the range is longer than review checks one by one)."""
    directory = episode_dir(episode_id)
    paths = (directory, history_path(episode_id))  # a history file removed reopens a completed episode
    try:
        if all(files_under(store.git, mark, p) == files_under(store.git, head, p) for p in paths):
            return None  # every byte as checked (a hand edit reverted): nothing delivered to act on
    except GitError:
        pass  # the marked commit is gone: judged below as far as it can be
    proc = store.git.run(
        "rev-list", "--first-parent", "--parents", "--reverse", f"{mark}..{head}", "--", *paths, check=False
    )
    lines = proc.stdout.decode("ascii", "replace").splitlines() if proc.returncode == 0 else []
    steps = [(parts[1], parts[0]) for line in lines if len(parts := line.split()) > 1]
    walk = 0 < len(steps) <= MAX_COMMITS and store.git.is_ancestor(mark, head)  # else a rewrite: judged whole
    for parent, commit in steps if walk else [(mark, head)]:
        try:
            before: EpisodeRecords | None = read_episode(_Commit(store.git, parent), episode_id)
        except (GitError, StateInvalid, OSError):
            before = None  # not there, or the marked commit is gone (a gc after a reset): nothing to compare with
        if before is None:
            continue
        try:
            after = read_episode(_Commit(store.git, commit), episode_id)
            # the bytes of the episode's files and its history file too: an approved artifact swapped for a Git
            # LFS pointer changes no record, a removed history file reopens a completed episode (the model's
            # rules of final artifacts and of completed episodes read the blobs)
            before.blobs, after.blobs = (
                {k: v for p in paths for k, v in files_under(store.git, c, p).items()} for c in (parent, commit)
            )
        except GitError as exc:  # a record a commit holds as a symlink, a submodule or an oversized blob
            raise StateInvalid(f"{directory}: {exc}") from None
        refused = episode_change(before, after)
        if refused:
            return parent, commit, refused[0]
    return None
