"""Allocation figures of this tree beside those of a baseline commit, measured in the same run.

Issue 22 made allocation remember every episode the branch's history ever had. This section
shows what that costs: the lock-free retry, a new allocation, and a new allocation right after
an outside commit (the catalog then walks the new commits), at 10 and 10,000 episodes, for this
tree and for ``BENCH_BASE`` (default: where this branch left main; set it to the commit before
a change once that change is merged). Each side runs in its own process with its own copy of the package.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from repos import make_repo

ROOT = Path(__file__).resolve().parent.parent

_WORKER = """
import json, sys
from pathlib import Path
sys.path.insert(1, sys.argv[3])  # bench/ helpers, after the package under test
sys.path.append(str(Path(sys.argv[3]).parent))  # their tests.bigrepo, after everything (its jobstate/ too)
import jobstate
from repos import git, per_call, week_of
from jobstate.allocation.allocation import allocate
from jobstate.core.periods import parse_period
from jobstate.store.store import Store
parent, seed, calls = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[4])
size = int(seed.name.rsplit("-", 1)[1])
repo = parent / "repo"
git(parent, "clone", "-q", str(seed), str(repo))  # the same repository for both sides, built once
git(repo, "config", "gc.auto", "0")
weeks = [parse_period(f"2030-W{w:02d}") for w in range(1, 53)]
with Store(repo, lock_timeout=60) as store:
    allocate(store, "warm-up", parse_period("2026-W32"))
    def new(i):
        allocate(store, f"new:{i}", weeks[i % len(weeks)])
    def outside(i):
        f = repo / "outside" / f"{i}.txt"
        f.parent.mkdir(exist_ok=True)
        f.write_text(f"{i}")
        git(repo, "add", "--", str(f))
        git(repo, "commit", "-q", "-m", f"outside {i}")
        allocate(store, f"after:{i}", weeks[i % len(weeks)])
    def retry(i):
        n = i * 7 % size
        allocate(store, f"existing:{n}", parse_period(week_of(n)))
    out = {
        "code": jobstate.__file__,
        "new": per_call(new, calls),
        "outside": per_call(outside, max(3, calls // 3)),
        "retry": per_call(retry, calls * 5),
    }
print(json.dumps(out))
"""


def _export(ref: str, into: Path) -> Path | None:
    """The package as ``ref`` has it, in ``into``; None when there is no such commit."""
    archive = subprocess.run(["git", "archive", ref, "jobstate"], cwd=ROOT, capture_output=True, check=False)
    if archive.returncode != 0:
        return None
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def _run(code: Path, seed: Path, calls: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="jobstate-bench-ba-", ignore_cleanup_errors=True) as tmp:
        env = {**os.environ, "PYTHONPATH": str(code)}
        proc = subprocess.run(
            [sys.executable, "-c", _WORKER, tmp, str(seed), str(ROOT / "bench"), str(calls)],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp,  # not the checkout: its jobstate/ would come first on sys.path
            check=True,
        )
    found: dict[str, float] = json.loads(proc.stdout)
    imported = str(found.pop("code"))
    assert imported.startswith(str(code)), f"the worker imported {imported}, not the copy in {code}"
    return found


def bench_before_after() -> dict[str, float]:
    """Print the table; the after/before ratios at 10,000 episodes (empty when there is no baseline)."""
    # default: where this branch left main (after a merge, set BENCH_BASE to the commit before it)
    fork = subprocess.run(["git", "merge-base", "HEAD", "main"], cwd=ROOT, capture_output=True, text=True, check=False)
    base = os.environ.get("BENCH_BASE") or fork.stdout.strip() or "main"
    calls = int(os.environ.get("BENCH_CALLS", "15"))
    with tempfile.TemporaryDirectory(prefix="jobstate-bench-base-", ignore_cleanup_errors=True) as tmp:
        (Path(tmp) / "code").mkdir()
        (Path(tmp) / "seeds").mkdir()
        before = _export(base, Path(tmp) / "code")
        if before is None:
            print(f"== before/after: no commit {base!r} to compare with (set BENCH_BASE) ==")
            return {}
        print(f"== allocation, this tree beside {base[:12]}; best of 2 interleaved rounds (1 at 10,000) ==")
        print(f"{'episodes':>9} {'':>7} {'retry ms':>9} {'new ms':>8} {'new after an outside commit ms':>31}")
        for size in (10, 10000):
            seed = make_repo(Path(tmp) / "seeds", size)
            best: dict[str, dict[str, float]] = {}
            for _round in range(2 if size < 1000 else 1):  # a 10,000-episode clone costs seconds
                for side, code in (("before", before), ("after", ROOT)):
                    got = _run(code, seed, calls)
                    best[side] = {k: min(v, best.get(side, {}).get(k, v)) for k, v in got.items()}
            for side in ("before", "after"):
                m = best[side]
                print(
                    f"{size:>9} {side:>7} {m['retry'] * 1e3:>9.3f} {m['new'] * 1e3:>8.2f} {m['outside'] * 1e3:>31.2f}"
                )
            ratio = {k: best["after"][k] / best["before"][k] for k in best["after"]}
            print(
                f"{size:>9} {'after/before':>7} x{ratio['retry']:.2f} retry, x{ratio['new']:.2f} new, "
                f"x{ratio['outside']:.2f} new after an outside commit"
            )
    return ratio
