"""Large state repositories in seconds: episode files streamed to ``git fast-import`` in one commit.

Shared by the slow tests and ``make bench``: writing a hundred thousand files and ``git add`` takes
minutes, fast-import and one checkout take seconds.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from jobstate.core import layout

PER_WEEK = 50


def week_of(n: int) -> str:
    """The week of the n-th episode: 50 a week from 2000-W01 (52 weeks a year, all valid ISO weeks)."""
    week = n // PER_WEEK
    return f"{2000 + week // 52}-W{week % 52 + 1:02d}"


def episode_id(n: int) -> str:
    """The n-th episode's ID."""
    return f"{week_of(n)}-{n % PER_WEEK}"


def episode_yaml(n: int, key: str) -> bytes:
    """The episode.yaml jobstate writes for the n-th episode, allocated under ``key``."""
    period, seq = week_of(n), n % PER_WEEK
    return (
        f"schema: 1\nepisode_id: {period}-{seq}\nperiod_id: {period}\nweek_id: {period}\nsequence: {seq}\n"
        f"allocation_key: {key}\nallocated_at: '2026-01-01T00:00:00Z'\nstatus: allocated\n"
    ).encode()


def episode_place(n: int, *, flat: bool) -> str:
    """Where the n-th episode's directory is: state/<year>/<period>/<id>, or state/<id> in the flat layout."""
    return f"{layout.STATE}/{episode_id(n)}" if flat else layout.episode_dir(episode_id(n))


def add_episodes(repo: Path, count: int, *, flat: bool = False, checkout: bool = True) -> None:
    """Commit episodes 0..count-1 (keys ``existing:<n>``) on top of HEAD in one commit, then check
    them out (unless ``checkout`` is false: the work tree then lags HEAD, as in a bare mirror)."""
    branch = subprocess.run(
        ["git", "symbolic-ref", "HEAD"], cwd=repo, check=True, capture_output=True, text=True
    ).stdout.strip()
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, check=True, capture_output=True, text=True)
    message = f"{count} episodes\n".encode()
    with subprocess.Popen(["git", "fast-import", "--quiet", "--force"], cwd=repo, stdin=subprocess.PIPE) as proc:
        assert proc.stdin is not None
        out = proc.stdin
        who = b"bench <bench@jobstate.invalid> 1767225600 +0000"
        out.write(b"commit %s\nauthor %s\ncommitter %s\n" % (branch.encode(), who, who))
        out.write(b"data %d\n%s" % (len(message), message))
        out.write(b"from %s\n" % head.stdout.strip().encode())
        for n in range(count):
            data = episode_yaml(n, f"existing:{n}")
            path = f"{episode_place(n, flat=flat)}/{layout.EPISODE_FILE}".encode()
            out.write(b"M 100644 inline %s\ndata %d\n%s\n" % (path, len(data), data))
        out.write(b"\n")
        out.close()
        if proc.wait() != 0:
            raise RuntimeError("git fast-import failed")
    if checkout:
        subprocess.run(["git", "reset", "-q", "--hard"], cwd=repo, check=True)
