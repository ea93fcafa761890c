"""The lifecycle model applied to revisions: every change from one state to another, and every
commit of a range, checked against ``core.rules_state`` (and through it ``core.model``). Used by
``diff`` and ``verify --against``.

This is a read-only operation (Git objects only).
"""

from __future__ import annotations

from pathlib import Path

from jobstate.core.layout import CONFIG_FILE, canonical, episode_of
from jobstate.core.model import Violation
from jobstate.core.rules_state import migrated_from, state_violations
from jobstate.review.revision import read_state
from jobstate.store.snapshot import git_read, locate

# how many commits of a range are checked one by one; a longer range is checked as a whole, and said so
MAX_COMMITS = 200


def touched(cwd: Path, base: str, rev: str) -> set[str] | None:
    """The episodes whose files differ between two revisions (None when git cannot say)."""
    found = changed_paths(cwd, base, rev)
    return None if found is None else set(found[1])


def changed_paths(cwd: Path, base: str, rev: str | None) -> tuple[frozenset[str], frozenset[str]] | None:
    """The state paths that differ between ``base`` and ``rev`` (the work tree when None), and the episodes
    they describe; None when git cannot say."""
    spec = (base,) if rev is None else (base, rev)
    proc = git_read(
        cwd,
        "diff",
        "--no-renames",
        "--raw",
        "--no-abbrev",
        "-z",
        *spec,
        "--",
        "state",
        "history",
        CONFIG_FILE,
        check=False,
    )
    if proc.returncode != 0:
        return None
    fields = proc.stdout.split(b"\0")
    gone: dict[str, tuple[str, str]] = {}  # path as listed -> (mode, blob)
    added: dict[str, tuple[str, str]] = {}
    paths: set[str] = set()
    for meta, raw in zip(fields[0::2], fields[1::2], strict=False):
        old_mode, new_mode, old_sha, new_sha, status = meta.decode().lstrip(":").split()
        path = canonical(raw.decode("utf-8", "surrogateescape"))  # paths as snapshots list them
        if status == "D":
            gone[path] = (old_mode, old_sha)
        elif status == "A":
            added[path] = (new_mode, new_sha)
        else:
            paths.add(path)
    # a file moved from the flat layout to its place today, every byte and its mode kept, is no change
    paths |= set(gone.keys() ^ added.keys()) | {p for p in gone.keys() & added.keys() if gone[p] != added[p]}
    return frozenset(paths), frozenset(name for name in map(_episode_of, paths) if name is not None)


def change_violations(path: Path, base: str, rev: str) -> tuple[list[Violation], list[str], dict[str, str]]:
    """The model's refusals from ``base`` to ``rev`` (as a whole, then commit by commit), notes, and the
    migrations found (new ID -> legacy ID). Only the episodes the change touched are read: an untouched
    one breaks no rule of change, and a key given to a touched one from an untouched one is a duplicate
    key in ``rev``, which verify flags on the revision."""
    cwd = locate(path)
    only = touched(cwd, base, rev)
    old = read_state(cwd, base, only=only, progress=False)
    new = read_state(cwd, rev, only=only, progress=False)
    found = state_violations(old, new)
    per_commit, notes = range_violations(cwd, base, rev)
    return found + [v for v in per_commit if v not in found], notes, migrated_from(old, new)


def range_violations(path: Path, base: str, rev: str) -> tuple[list[Violation], list[str]]:
    """The model's refusals for each commit from ``base`` to ``rev`` on the first-parent line, and
    notes (a range too long to walk, a base that is no ancestor). Each commit is compared with its
    parent, reading only the episodes it touched, so a change split over commits is seen."""
    cwd = locate(path)
    proc = git_read(cwd, "rev-list", "--first-parent", "--reverse", f"{base}..{rev}", "--", check=False)
    if proc.returncode != 0:
        return [], [f"cannot list the commits from {base} to {rev}"]
    commits = proc.stdout.decode().split()
    if len(commits) <= 1:
        return [], []  # one commit: the comparison of base and rev is the same
    notes: list[str] = []
    if len(commits) > MAX_COMMITS:
        notes.append(f"{len(commits)} commits: only the last {MAX_COMMITS} were checked one by one")
        commits = commits[-MAX_COMMITS:]
    found: list[Violation] = []
    for commit in commits:
        changed = git_read(
            cwd,
            "diff-tree",
            "-r",
            "-z",
            "--no-renames",
            "--name-only",
            f"{commit}^",
            commit,
            "--",
            "state",
            "history",
            "jobstate.yaml",
            check=False,
        )
        if changed.returncode != 0 or not changed.stdout:
            continue
        touched = [p.decode("utf-8", "surrogateescape") for p in changed.stdout.split(b"\0") if p]
        only = {name for name in map(_episode_of, touched) if name is not None}
        old = read_state(cwd, f"{commit}^", only=only, progress=False)
        new = read_state(cwd, commit, only=only, progress=False)
        found += [v for v in state_violations(old, new) if v not in found]
    return found, notes


def _episode_of(path: str) -> str | None:
    found = episode_of(path)
    return None if found is None else found[0]
