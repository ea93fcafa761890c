"""``make bench`` section ``layout``: what the state/<year>/<period>/<id>/ layout costs as the state grows (issue 31).

At each size (10 and 100,000 episodes; 10,000 and 1,000,000 too with FULL=1), in a repository built by
fast-import (50 episodes a week from 2000-W01, packed):

- the most entries of any tree a new allocation's commit rewrites (GitHub lists 1,000 of a directory);
- a new allocation (library, catalog warm) beside the plumbing floor: one ``git fast-import`` that
  writes the same blob, trees, commit and ref in one process, into the same periods, on a branch of
  its own in the same repository; each the best of 3 interleaved rounds;
- a new allocation right after a commit jobstate did not make (another host's, a pull), mean of the calls;
- ``jobstate migrate`` of the same state in the flat layout, as a whole process (to 10,000 episodes;
  every size with FULL=1; make test-slow moves 100,000 in tests/test_layout.py);
- the first command of a fresh clone (the scheduler's retry), as a whole process, and the same
  command again once the clone's catalog exists; the clone is the same repository with .jobstate/ and
  .git/jobstate/ removed, which is all jobstate keeps outside Git.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from repos import git, make_repo, per_call

from tests.bigrepo import episode_yaml, week_of

Target = Callable[..., None]
MIGRATE_UP_TO = 10000  # past it only with FULL=1: a migration is a one-off (tests/test_layout.py moves 100,000)


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _largest_rewritten_tree(repo: Path) -> int:
    """Entries of the largest tree HEAD's commit rewrote (the root included)."""
    changed = git(repo, "diff-tree", "-r", "-t", "--no-commit-id", "--name-only", "-z", "HEAD~1", "HEAD").split("\0")
    trees = [""] + [p for p in changed if p and git(repo, "cat-file", "-t", f"HEAD:{p}").strip() == "tree"]
    return max(len(git(repo, "ls-tree", "-z", f"HEAD:{p}").split("\0")) - 1 for p in trees)


def _floor(repo: Path, week: str, n: int) -> None:
    """One commit adding an episode file to ``week`` on branch ``floor``, written by git alone."""
    from jobstate.core.layout import EPISODE_FILE, episode_dir

    data = episode_yaml(n, f"floor:{n}")
    eid = f"{week}-{100 + n}"
    who = b"bench <bench@jobstate.invalid> 1767225600 +0000"
    stream = (
        b"commit refs/heads/floor\ncommitter %s\ndata 6\nfloor\nfrom refs/heads/floor^0\n"
        b"M 100644 inline %s/%s\ndata %d\n%s\n\n"
        % (who, episode_dir(eid).encode(), EPISODE_FILE.encode(), len(data), data)
    )
    subprocess.run(["git", "fast-import", "--quiet", "--force"], cwd=repo, input=stream, check=True)


def _cli(repo: Path, *args: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "jobstate", *args], cwd=repo, env=env, capture_output=True, text=True, check=False
    )
    return time.perf_counter() - start, proc


def _one_size(tmp: Path, size: int, calls: int, *, full: bool) -> dict[str, float]:
    from jobstate.allocation.allocation import allocate
    from jobstate.core.periods import parse_period
    from jobstate.store.store import Store

    out: dict[str, float] = {}
    start = time.perf_counter()
    repo = make_repo(tmp, size)
    out["build"] = time.perf_counter() - start
    git(repo, "branch", "floor", "HEAD")
    last = size - 1  # allocations land in the last, fullest periods, as a live schedule's do
    weeks = [parse_period(week_of(max(0, last - 50 * w))) for w in range(4)]
    new, floor = float("inf"), float("inf")
    with Store(repo, lock_timeout=60) as store:
        allocate(store, "warm-up", weeks[0])  # builds the catalog once
        for r in range(3):
            new = min(new, per_call(lambda i: allocate(store, f"new:{r}:{i}", weeks[i % 4]), calls))  # noqa: B023
            floor = min(floor, per_call(lambda i: _floor(repo, weeks[i % 4].id, r * calls + i), calls))  # noqa: B023
        # after a commit jobstate did not make (another host's, a pull): the allocation that follows it
        outside = 0.0
        for i in range(calls):
            git(repo, "commit", "-q", "--allow-empty", "-m", f"outside {i}")
            start = time.perf_counter()
            allocate(store, f"after-outside:{i}", weeks[i % 4])
            outside += time.perf_counter() - start
    out["new"], out["floor"], out["outside"] = new, floor, outside / calls
    out["tree"] = _largest_rewritten_tree(repo)

    # a fresh clone is this repository without .jobstate/ and .git/jobstate/ (no catalog, no mark): what
    # jobstate finds there is the same, and the clone's own checkout of every file (12 s at 100,000) is git's
    from jobstate.core.layout import PRIVATE

    shutil.rmtree(repo / PRIVATE)
    shutil.rmtree(repo / ".git" / "jobstate", ignore_errors=True)
    retry = ("allocate", "--key", "existing:3", "--week", week_of(3))
    out["fresh"], proc = _cli(repo, *retry)
    assert proc.returncode == 0, proc.stderr
    out["again"], _ = _cli(repo, *retry)

    if size <= MIGRATE_UP_TO or full:
        flat = make_repo(tmp, size, flat=True)
        out["migrate"], proc = _cli(flat, "migrate")
        assert proc.returncode == 0, proc.stderr
    return out


def bench_layout(target: Target, full: bool) -> None:
    # the 10,000 point only with FULL=1: make bench keeps its 100,000-episode point within 3 minutes
    sizes = (10, 10000, 100000, 1000000) if full else (10, 100000)
    calls = int(os.environ.get("BENCH_CALLS", "10"))
    print("== layout: state/<year>/<period>/<id>/ as the state grows (fast-import builds; best of 3 interleaved) ==")
    print(
        f"{'episodes':>9} {'build s':>8} {'max tree':>9} {'floor ms':>9} {'new ms':>8} {'new/floor':>10} "
        f"{'after outside ms':>17} {'migrate s':>10} {'fresh 1st s':>12} {'again s':>8}"
    )
    results: dict[int, dict[str, float]] = {}
    for size in sizes:
        with tempfile.TemporaryDirectory(prefix="jobstate-bench-layout-") as tmp:
            m = results[size] = _one_size(Path(tmp), size, calls, full=full)
        print(
            f"{size:>9} {m['build']:>8.1f} {m['tree']:>9.0f} {m['floor'] * 1e3:>9.1f} {m['new'] * 1e3:>8.1f} "
            f"{m['new'] / m['floor']:>10.2f} {m['outside'] * 1e3:>17.1f} {_seconds(m.get('migrate')):>10} "
            f"{m['fresh']:>12.2f} {m['again']:>8.2f}"
        )
    big, small = results[sizes[-1]], results[10]
    label = f"{sizes[-1]:,}"
    target(f"largest tree a new allocation rewrites at {label} episodes", big["tree"], 1000, at_most=True, fmt="{:.0f}")
    target(f"new allocation growth, 10 -> {label} episodes", big["new"] / small["new"], 1.5, at_most=True)
    target(
        f"allocation after an outside commit, growth 10 -> {label} episodes",
        big["outside"] / small["outside"],
        1.5,
        at_most=True,
    )
    for size in sizes:
        target(
            f"new allocation vs plumbing floor at {size:,}",
            results[size]["new"] / results[size]["floor"],
            1.3,
            at_most=True,
        )
    target(
        f"first command of a fresh clone at {label} episodes, seconds", big["fresh"], 2.0, at_most=True, fmt="{:.1f}"
    )
    print("  the fresh clone's first command still reads every episode.yaml once to build its catalog (not yet")
    print("  incremental); the flat migration is one commit of renames, verified before the branch moves")
