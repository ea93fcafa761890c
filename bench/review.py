"""verify and diff on 10,000 episodes: this tree beside ``REVIEW_BASE``, measured in the same run.

Issue 19 made verify and diff check every change against the record model, commit by commit
over a range. This section shows what that costs: ``verify --rev HEAD``, ``verify --rev HEAD
--against BASE`` and ``diff BASE HEAD`` over a pull request of 3 commits on a 10,000-episode
repository, each side in its own process with its own copy of the package. ``REVIEW_BASE``
defaults to the commit before the record model (the package move). A baseline from before the
state/<year>/<period>/<id>/ layout reads the same episodes in the flat layout it knows (on one shared
seed it read no episode at all, and the ratios meant nothing).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from before_after import _export
from repos import git, make_repo

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_BASE = "0777433"  # the package in capability folders, before core/model.py
COMMANDS = {
    "verify --rev HEAD": ["verify", "--rev", "HEAD"],
    "verify --against (3 commits)": ["verify", "--rev", "HEAD", "--against", "pr-base"],
    "diff (3 commits)": ["diff", "pr-base", "HEAD"],
}


def _pull_request(repo: Path, code: Path) -> None:
    """Three commits of allocations on top of the seed, as a pull request would bring."""
    git(repo, "tag", "pr-base")
    env = {**os.environ, "PYTHONPATH": str(code)}
    for n in range(3):
        subprocess.run(
            [sys.executable, "-m", "jobstate", "allocate", "--key", f"pr:{n}", "--week", "2031-W01"],
            cwd=repo,
            env=env,
            capture_output=True,
            check=True,
        )


def _time(code: Path, repo: Path, args: list[str], rounds: int) -> float:
    env = {**os.environ, "PYTHONPATH": str(code)}
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "jobstate", *args], cwd=repo, env=env, capture_output=True, check=False
        )
        took = time.perf_counter() - start
        assert proc.returncode in (0, 1), proc.stderr
        best = min(best, took)
    return best


def _reads_nested(code: Path) -> bool:
    """Whether the package in ``code`` keeps episodes in state/<year>/<period>/<id>/."""
    layout = code / "jobstate" / "core" / "layout.py"
    return layout.exists() and "def period_dir" in layout.read_text(encoding="utf-8")


def _seed(parent: Path, code: Path, *, flat: bool) -> Path:
    """10,000 episodes, settings both versions read, and a pull request of 3 allocations by ``code``."""
    parent.mkdir()
    seed = make_repo(parent, 10000, flat=flat)
    # the baseline's strict reader refuses settings it predates (state_branch): compare on what both read
    config = seed / "jobstate.yaml"
    config.write_text("".join(line for line in config.read_text().splitlines(True) if "state_branch" not in line))
    git(seed, "commit", "-qam", "settings both versions read")
    _pull_request(seed, code)
    return seed


def bench_review() -> dict[str, float]:
    """Print the table; after/before ratios per command (empty without a baseline)."""
    base = os.environ.get("REVIEW_BASE", DEFAULT_BASE)
    rounds = int(os.environ.get("BENCH_ROUNDS", "2"))
    with tempfile.TemporaryDirectory(prefix="jobstate-bench-review-", ignore_cleanup_errors=True) as tmp:
        (Path(tmp) / "code").mkdir()
        before = _export(base, Path(tmp) / "code")
        if before is None:
            print(f"== review: no commit {base!r} to compare with (set REVIEW_BASE) ==")
            return {}
        after_seed = _seed(Path(tmp) / "after", ROOT, flat=False)
        # a baseline from before state/<year>/<period>/<id>/ reads the same episodes in the flat layout
        before_seed = after_seed if _reads_nested(before) else _seed(Path(tmp) / "before", before, flat=True)
        print(f"== verify and diff, 10,000 episodes: this tree beside {base} (best of {rounds}, whole process) ==")
        print(f"{'command':<30} {'before s':>9} {'after s':>9} {'after/before':>13}")
        ratios: dict[str, float] = {}
        for label, args in COMMANDS.items():
            old = _time(before, before_seed, args, rounds)
            new = _time(ROOT, after_seed, args, rounds)
            ratios[label] = new / old
            print(f"{label:<30} {old:>9.2f} {new:>9.2f} {'x' + format(new / old, '.2f'):>13}")
        return ratios
