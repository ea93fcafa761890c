"""Episodes that a branch's history had and that are gone without a tombstone, for verify and diff.

This is a read-only operation: ``git log`` and ``git cat-file`` with ``GIT_OPTIONAL_LOCKS=0``.
The rule (what counts as vanished, and how it is said) is jobstate.core.tombstones'.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path
from typing import NamedTuple

from jobstate.core.layout import PRIVATE, describes_episode, episode_dir
from jobstate.core.records import episode_from_yaml_dict
from jobstate.core.tombstones import vanished, vanished_text
from jobstate.errors import StateInvalid, UsageError
from jobstate.git.head import tracked_in_work_tree
from jobstate.review.problem import Problem
from jobstate.review.verify_report import Report
from jobstate.store.catalog import Catalog
from jobstate.store.history import EPISODE_FILES as _EPISODES
from jobstate.store.history import Event, branch_tips, episode_events, episode_names, files_at, removing_commit
from jobstate.store.snapshot import Revision, Snapshot, git_read
from jobstate.store.yamlio import loads


class Vanished(NamedTuple):
    """One vanished episode, the commit that removed it (None: no commit did) and what to say."""

    episode_id: str
    removed_by: str | None
    message: str


def head_commit(cwd: Path) -> str | None:
    """HEAD's commit, or None on an unborn branch. Read-only."""
    proc = git_read(cwd, "rev-parse", "--verify", "--quiet", "HEAD^{commit}", check=False)
    return proc.stdout.decode().strip() or None if proc.returncode == 0 else None


def index_deletions(cwd: Path) -> set[str]:
    """Episodes HEAD has whose episode.yaml the index deletes (a staged ``git rm``). Read-only."""
    proc = git_read(
        cwd,
        "diff",
        "--cached",
        "--no-renames",
        "--name-only",
        "--diff-filter=D",
        "-z",
        "HEAD",
        "--",
        *_EPISODES,
        check=False,
    )
    if proc.returncode != 0:
        return set()
    found = (describes_episode(p.decode("utf-8", "surrogateescape")) for p in proc.stdout.split(b"\0") if p)
    return {name for name in found if name is not None}


def reflog_tips(cwd: Path) -> list[str]:
    """The commits the current branch pointed to, as its reflog remembers (a reset leaves them). Read-only."""
    proc = git_read(cwd, "symbolic-ref", "--quiet", "HEAD", check=False)
    ref = proc.stdout.decode().strip()
    return branch_tips(cwd, ref) if proc.returncode == 0 and ref else []


def find_vanished(
    cwd: Path,
    tips: list[str],
    present: Collection[str],
    retired: Collection[str],
    *,
    exclude: list[str] | None = None,
    known: Mapping[str, str | None] | None = None,
    staged_from: Collection[str] = (),
) -> list[Vanished]:
    """Episodes added in the history of ``tips`` (not of ``exclude``), or ``known`` before it (ID ->
    key), that are neither ``present`` nor ``retired``. ``staged_from``: IDs the tip commit itself
    still has (removed in the index or work tree only). This is a read-only operation."""
    events = episode_events(cwd, tips, exclude or [])
    added: dict[str, Event] = {}
    removed: dict[str, str] = {}
    for event in events:  # newest first: the first removal is the latest, the last addition the first
        if event.status == "A":
            added[event.episode_id] = event
        else:
            removed.setdefault(event.episode_id, event.commit)
    keys = dict(known or {})
    gone = vanished(set(added) | set(keys), present, retired)
    datas = files_at(cwd, [f"{added[e].commit}:{added[e].path}" for e in gone if e in added and e not in keys])
    out = []
    for eid in gone:
        first = added.get(eid)
        if eid not in keys and first is not None:
            spec = f"{first.commit}:{first.path}"
            try:
                keys[eid] = episode_from_yaml_dict(loads(datas.get(spec, b""), spec), spec, eid).allocation_key
            except (StateInvalid, UsageError):
                keys[eid] = None  # a file that cannot be read still used up its ID
        staged = eid in staged_from
        # known before the walk: its removal, if any commit made it, is older than the walk
        by = None if staged else removed.get(eid) or (removing_commit(cwd, tips[0], eid) if first is None else None)
        seen = None if first is None else first.commit
        # "no longer contains it" only when it is true: a merge that did not keep it leaves it in the history
        kept = seen is not None and by is None and not staged and _is_ancestor(cwd, seen, tips[0])
        text = vanished_text(eid, keys[eid] or None, by, last_seen=seen, staged=staged, in_ancestry=kept)
        out.append(Vanished(eid, by, text))
    return out


def _is_ancestor(cwd: Path, commit: str, tip: str) -> bool:
    return git_read(cwd, "merge-base", "--is-ancestor", commit, tip, check=False).returncode == 0


def catalog_knowledge(cwd: Path) -> tuple[str, dict[str, str | None]] | None:
    """What the derived catalog (if any) already knows the branch ever had: the commit it reflects
    and every episode ID with its key. Opened read-only: nothing is written. Read-only."""
    path = cwd / PRIVATE / "catalog.sqlite"
    if path.is_symlink() or tracked_in_work_tree(cwd, PRIVATE):
        return None  # not a catalog jobstate wrote: the whole history is walked instead
    cat = Catalog.open_readonly(path)
    if cat is None:
        return None
    try:
        found = cat.knowledge()
    finally:
        cat.close()
    if found is None:
        return None
    head, seen = found
    if not head or git_read(cwd, "cat-file", "-e", f"{head}^{{commit}}", check=False).returncode != 0:
        return None
    return head, {s.episode_id: s.allocation_key or None for s in seen}


def keys_at(cwd: Path, commit: str) -> dict[str, str | None]:
    """The episodes ``commit`` has (ID -> key unknown): listed, not read, so a base costs one ls-tree."""
    return dict.fromkeys(episode_names(cwd, commit), None)


def check_vanished(cwd: Path, snap: Snapshot, report: Report, since: tuple[str, dict[str, str | None]] | None) -> None:
    """Flag every episode the history had that is gone without a tombstone (git rm, a revert, a reset,
    a merge that dropped it). In the work tree, the branch's reflog counts too (a reset keeps the old
    tip there), and an episode HEAD has that the index or work tree lost is a staged deletion.

    ``since``: a commit and the episodes (ID -> key) known up to it, from the base of ``--against``
    or, in the work tree, the catalog (opened read-only); only the commits after it are walked."""
    present = report.present
    if isinstance(snap, Revision):
        tips, in_head = [snap.commit], set()
    else:
        head = head_commit(cwd)
        if head is None:
            return
        tips, in_head = [head, *reflog_tips(cwd)], episode_names(cwd, head)
        # the index is what the next commit holds: a `git rm --cached` leaves the files in the work tree
        present = present - index_deletions(cwd)
        since = since or catalog_knowledge(cwd)
    exclude, known = ([since[0]], since[1]) if since is not None else ([], {})
    for gone in find_vanished(cwd, tips, present, report.retired, exclude=exclude, known=known, staged_from=in_head):
        report.problems.append(Problem(episode_dir(gone.episode_id), gone.message))
