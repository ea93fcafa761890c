"""Which episodes a branch's history ever had: additions and removals of ``state/<id>/episode.yaml``.

Read-only (``GIT_OPTIONAL_LOCKS=0``). Both the allocator's catalog and ``verify`` / ``diff`` ask
Git the same questions here, so an answer never depends on whether a cache is warm.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from jobstate.core.layout import EPISODE_FILE, RETIRED, STATE, describes_episode, episode_of, episode_path
from jobstate.git.objects import CatFile, MissingObject
from jobstate.git.runner import READ_ONLY_ENV, run_git

# the pathspecs of every episode.yaml: state/<year>/<period>/<id>/, and state/<id>/ of the flat layout
EPISODE_FILES = (f":(glob){STATE}/*/*/*/{EPISODE_FILE}", f":(glob){STATE}/*/{EPISODE_FILE}")
TOMBSTONES = (f":(glob){RETIRED}/*/*/*.yaml", f":(glob){RETIRED}/*.yaml")  # today's layout, and the flat one


class Event(NamedTuple):
    """An episode file added (``A``) or deleted (``D``) by a commit (against one parent, for a merge)."""

    commit: str
    status: str
    episode_id: str
    path: str
    blob: str  # the file's blob: the one added, or the one deleted


def episode_events(
    cwd: Path, tips: Iterable[str], exclude: Iterable[str] = (), paths: tuple[str, ...] = EPISODE_FILES
) -> list[Event]:
    """Every addition and removal of an episode in the commits reachable from ``tips`` and not
    from ``exclude``, newest first. Merges count against each parent (a resolution that dropped
    a directory is a removal). This is a read-only operation."""
    revs = [*tips, *(f"^{x}" for x in exclude)]
    if not revs:
        return []
    proc = run_git(
        cwd,
        "log",
        "--stdin",
        "--topo-order",
        "--no-renames",
        "-m",
        "--diff-filter=AD",
        "--raw",
        "--no-abbrev",
        "-z",
        "--format=%x01%H",
        "--",
        *paths,
        input=("\n".join(revs) + "\n").encode(),
        env=READ_ONLY_ENV,
    )
    out: list[Event] = []
    commit = ""
    fields = proc.stdout.split(b"\0")
    i = 0
    while i < len(fields):
        item = fields[i].strip(b"\n")
        i += 1
        if item.startswith(b"\x01"):
            commit = item[1:].decode()
            continue
        if item.startswith(b":") and i < len(fields):  # :old_mode new_mode old_blob new_blob status, then the path
            _old_mode, _new_mode, old_blob, new_blob, status = item[1:].decode("ascii").split()
            path = fields[i].decode("utf-8", "surrogateescape")
            i += 1
            name = describes_episode(path)
            if name is not None and status in ("A", "D"):
                out.append(Event(commit, status, name, path, new_blob if status == "A" else old_blob))
    return out


def branch_tips(cwd: Path, ref: str) -> list[str]:
    """Every commit the branch ``ref`` pointed to that its reflog remembers (a reset leaves the
    old tip there), existing objects only. This is a read-only operation."""
    proc = run_git(cwd, "reflog", "show", "--format=%H", ref, "--", env=READ_ONLY_ENV, check=False)
    if proc.returncode != 0:
        return []
    return list(dict.fromkeys(proc.stdout.decode().split()))


def removing_commit(cwd: Path, tip: str, episode_id: str) -> str | None:
    """The newest commit in ``tip``'s history that removed the episode, or None. Read-only."""
    proc = run_git(
        cwd,
        "log",
        "-1",
        "-m",
        "--no-renames",
        "--diff-filter=D",
        "--format=%H",
        tip,
        "--",
        episode_path(episode_id),
        f"{STATE}/{episode_id}/{EPISODE_FILE}",  # the flat layout's place
        env=READ_ONLY_ENV,
        check=False,
    )
    found = proc.stdout.decode().split()
    return found[0] if proc.returncode == 0 and found else None


def files_at(cwd: Path, specs: list[str]) -> dict[str, bytes]:
    """The content of ``REV:PATH`` objects that exist (others are left out). Read-only."""
    out: dict[str, bytes] = {}
    if not specs:
        return out
    with CatFile(cwd) as cat:
        for spec in specs:
            try:
                out[spec] = cat.read(spec)[1]
            except MissingObject:
                continue
    return out


def episode_names(cwd: Path, rev: str) -> set[str]:
    """The names of the episode directories ``rev`` has (either layout), listed from its trees, no file
    read. Read-only."""
    proc = run_git(
        cwd, "ls-tree", "-r", "-d", "-z", "--name-only", "--full-tree", rev, "--", STATE, env=READ_ONLY_ENV, check=False
    )
    if proc.returncode != 0:
        return set()
    out = set()
    for raw in proc.stdout.split(b"\0"):
        found = episode_of(raw.decode("utf-8", "surrogateescape")) if raw else None
        if found is not None and found[1] == "":
            out.add(found[0])
    return out
