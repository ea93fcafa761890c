"""The merges a review looks at, and the episodes each side of them had. Read-only.

The rule (what a collision at a merge is) is jobstate.core.merges'; this module reads Git.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from jobstate.core.layout import EPISODE_FILE, STATE, episode_of
from jobstate.core.merges import merge_collisions
from jobstate.errors import StateInvalid
from jobstate.store.history import files_at
from jobstate.store.snapshot import git_read
from jobstate.store.yamlio import loads

_HEX = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
MAX_MERGES = 200  # a long range is checked at its newest merges


def _episode_blobs(cwd: Path, rev: str) -> dict[str, tuple[str, str]]:
    """Episode ID -> the blob of its episode.yaml at ``rev`` and its path there (either layout)."""
    proc = git_read(cwd, "ls-tree", "-r", "-z", "--full-tree", rev, "--", STATE, check=False)
    out: dict[str, tuple[str, str]] = {}
    for entry in proc.stdout.split(b"\0"):
        meta, _, name = entry.decode("utf-8", "surrogateescape").partition("\t")
        found = episode_of(name) if meta else None
        if found is not None and found[1] == EPISODE_FILE:
            out[found[0]] = (meta.split()[2], name)
    return out


def _keys(cwd: Path, rev: str, side: dict[str, tuple[str, str]], names: list[str]) -> dict[str, str]:
    specs = {name: f"{rev}:{side[name][1]}" for name in names}
    datas = files_at(cwd, list(specs.values()))
    out: dict[str, str] = {}
    for name, spec in specs.items():
        try:
            data = loads(datas.get(spec, b""), spec)
        except StateInvalid:  # an unreadable file is verify's finding, not this check's
            continue
        key = data.get("allocation_key") if isinstance(data, dict) else None
        if isinstance(key, str):
            out[name] = key
    return out


def collisions_at(cwd: Path, parents: list[str], where: str) -> list[tuple[str, str]]:
    """IDs with two keys and keys with two IDs across ``parents``, reading only the episodes the sides
    do not share unchanged (a run allocated on one side only is the only way to collide)."""
    blobs = [_episode_blobs(cwd, p) for p in parents]
    names = sorted({n for side in blobs for n in side if len({(s.get(n) or ("",))[0] for s in blobs}) > 1})
    if not names:
        return []
    sides = [_keys(cwd, p, side, [n for n in names if n in side]) for p, side in zip(parents, blobs, strict=True)]
    return merge_collisions(sides, where)


def merge_parents(cwd: Path, base: str | None, rev: str) -> list[tuple[str, list[str]]]:
    """The merge commits in ``base..rev`` (or ``rev`` alone when it is one, without a base), newest
    first, each with its parents."""
    args = ["rev-list", "--merges", "--parents", f"--max-count={MAX_MERGES}"]
    args += [rev, f"^{base}"] if base else ["--max-count=1", "--no-walk", rev]
    proc = git_read(cwd, *args, "--", check=False)
    out = []
    for line in proc.stdout.decode().splitlines():
        commit, *parents = line.split()
        out.append((commit, parents))
    return out


def pending_merge(cwd: Path) -> list[str] | None:
    """HEAD and the commits being merged into it, while a merge is under way; else None.

    A merge stopped for its conflicts leaves MERGE_HEAD; the pre-merge-commit hook of a merge that
    commits by itself runs before MERGE_HEAD is written, with a ``GITHEAD_<commit>`` variable per
    merged commit in its environment (git merge sets them for its strategies)."""
    head = git_read(cwd, "rev-parse", "-q", "--verify", "HEAD^{commit}", check=False)
    if head.returncode != 0:
        return None
    merging = git_read(cwd, "rev-parse", "-q", "--verify", "MERGE_HEAD", check=False)
    theirs = merging.stdout.decode().split() if merging.returncode == 0 else []
    if not theirs:
        named = [name.removeprefix("GITHEAD_") for name in os.environ if name.startswith("GITHEAD_")]
        theirs = [c for c in named if _HEX.fullmatch(c) and _is_commit(cwd, c)]
    return [head.stdout.decode().strip(), *theirs] if theirs else None


def _is_commit(cwd: Path, name: str) -> bool:
    return git_read(cwd, "cat-file", "-e", f"{name}^{{commit}}", check=False).returncode == 0


def merge_findings(cwd: Path, base: str | None, rev: str, *, work_tree: bool) -> list[tuple[str, str]]:
    """Collisions at every merge of ``base..rev`` (at ``rev`` without a base) and, in the work tree,
    at the merge being committed. This is a read-only operation."""
    found: list[tuple[str, str]] = []
    if work_tree and (parents := pending_merge(cwd)) is not None:
        found += collisions_at(cwd, parents, "the merge being committed")
    for commit, parents in merge_parents(cwd, base, rev):
        found += [f for f in collisions_at(cwd, parents, f"merge {commit[:12]}") if f not in found]
    return found
