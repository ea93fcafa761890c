"""``make bench``: performance figures from one run on one machine, each ratio beside its target.

Every figure stands beside a baseline measured in the same run (interleaved
rounds, the best round kept: the machine is shared); nothing here asserts a
time. ``make bench`` takes under 3 minutes; ``make bench FULL=1`` adds the
10,000-episode, multi-gigabyte verify, 10,000 allocations from scratch and a
scaling table up to 100,000 episodes and the layout figures at 1,000,000 episodes.
Sections: see SECTIONS (with --full also verify, scaling); pass names to run a subset.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from before_after import bench_before_after  # noqa: E402
from layout import bench_layout  # noqa: E402
from memory import HUGE, LARGE, bench_memory  # noqa: E402
from probe import bench_probe  # noqa: E402
from processes import bench_processes  # noqa: E402
from repos import (  # noqa: E402
    GIT_ENV,
    episode_id,
    git,
    git_size,
    make_repo,
    make_verify_repo,
    mib,
    new_repo,
    objects,
    per_call,
    wait_for_gc,
    week_of,
)
from review import bench_review  # noqa: E402

MODE = {"full": False}
# (what, value, target text, met)
TARGETS: list[tuple[str, str, str, bool]] = []


def target(what: str, value: float, limit: float, *, at_most: bool, fmt: str = "x{:.2f}") -> None:
    met = value <= limit if at_most else value >= limit
    text = f"{'<=' if at_most else '>='} {fmt.format(limit)}"
    TARGETS.append((what, fmt.format(value), text, met))
    print(f"  -> {what}: {fmt.format(value)} (target {text}) {'met' if met else 'MISSED'}")


def _tmp(prefix: str) -> tempfile.TemporaryDirectory[str]:
    return tempfile.TemporaryDirectory(prefix=prefix, ignore_cleanup_errors=True)


# ------------------------------------------------------------------ allocate
def _measure(repo: Path, size: int, calls: int, paid: bool) -> dict[str, float]:
    """Per-call seconds at one size: bare git add+commit, a new allocation, a retry, a paid-step record."""
    from jobstate.allocation.allocation import allocate
    from jobstate.core.periods import parse_period
    from jobstate.paid.step import paid_step
    from jobstate.store.store import Store

    weeks = [parse_period(f"2030-W{w:02d}") for w in range(1, 53)]
    out = {"base": float("inf"), "new": float("inf"), "retry": float("inf"), "record": float("inf")}
    with Store(repo, lock_timeout=60) as store:
        allocate(store, "warm-up", parse_period("2026-W32"))  # builds the catalog once

        def baseline(i: int) -> None:
            f = repo / "baseline" / f"{i}.txt"
            f.parent.mkdir(exist_ok=True)
            f.write_text(f"{i}\n")
            git(repo, "add", "--", str(f))
            git(repo, "commit", "-q", "-m", f"baseline {i}")

        def new(i: int) -> None:
            # a few episodes per week, as schedules have: spread over a year of weeks
            allocate(store, f"new:{size}:{i}", weeks[i % len(weeks)])

        def retry(i: int) -> None:
            n = i * 7 % size
            allocate(store, f"existing:{n}", parse_period(week_of(n)))

        def record(i: int) -> None:
            # one paid step = 5 commits: intent, accepted, cost, artifact, completion
            with paid_step(store, episode_id(i % size), f"s{i}") as step:
                step.accepted(f"task-{i}")
                step.cost("1.25", "USD")
                (step.output_dir / f"a{i}.txt").write_text(f"artifact {i}\n")
                step.artifact(f"a{i}.txt")

        for r in range(3):  # interleaved rounds, so every side sees the same machine
            offset = r * calls
            out["base"] = min(out["base"], per_call(lambda i: baseline(offset + i), calls))  # noqa: B023
            out["new"] = min(out["new"], per_call(lambda i: new(offset + i), calls))  # noqa: B023
            out["retry"] = min(out["retry"], per_call(retry, calls * 5))
            if paid:
                steps = max(3, calls // 5)
                out["record"] = min(out["record"], per_call(lambda i: record(offset + i), steps) / 5)  # noqa: B023
    return out


def bench_allocate() -> None:
    calls = int(os.environ.get("BENCH_CALLS", "15"))
    print("== allocate and paid-step records (library API; baseline: one file, git add + git commit,")
    print("   same repo; each figure the best of 3 interleaved rounds; a record = one of a step's 5 commits) ==")
    print(
        f"{'episodes':>9} {'git ms':>8} {'new ms':>8} {'new/git':>8} {'retry ms':>9} {'record ms':>10} "
        f"{'record/git':>11}"
    )
    results: dict[int, dict[str, float]] = {}
    with _tmp("jobstate-bench-") as tmp:
        for size in (10, 10000):
            repo = make_repo(Path(tmp), size)
            m = results[size] = _measure(repo, size, calls, paid=True)
            rec = f"{m['record'] * 1e3:>10.2f} {m['record'] / m['base']:>11.2f}"
            print(
                f"{size:>9} {m['base'] * 1e3:>8.2f} {m['new'] * 1e3:>8.2f} {m['new'] / m['base']:>8.2f} "
                f"{m['retry'] * 1e3:>9.3f} {rec}"
            )
        small, big = results[10], results[10000]
        print(f"  git add + commit itself grows x{big['base'] / small['base']:.2f} from 10 to 10,000 episodes")
        target("new allocation growth, 10 -> 10,000 episodes", big["new"] / small["new"], 1.5, at_most=True)
        target("paid-step record growth, 10 -> 10,000 episodes", big["record"] / small["record"], 1.5, at_most=True)
        growth = big["retry"] / small["retry"]
        print(f"  lock-free retry (library) grows x{growth:.2f}: a tenth of a millisecond either way")
        cli_retry(Path(tmp) / "repo-10000")


def cli_retry(repo: Path) -> None:
    """Whole-process time of ``jobstate allocate`` on the retry path, beside ``python -c pass``."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # as users run it: cached bytecode
    py = [sys.executable]
    cmd = [*py, "-m", "jobstate", "allocate", "--key", "existing:3", "--week", "2000-W01"]
    subprocess.run(cmd, cwd=repo, check=True, capture_output=True, env=env)  # writes the bytecode cache
    bare_t, cli_t = float("inf"), float("inf")
    for _ in range(5):
        bare_t = min(bare_t, per_call(lambda _i: subprocess.run([*py, "-c", "pass"], check=True, env=env), 6))
        cli_t = min(
            cli_t, per_call(lambda _i: subprocess.run(cmd, cwd=repo, check=True, capture_output=True, env=env), 6)
        )
    print(f"CLI retry, whole process (10,000 episodes): {cli_t * 1e3:.1f} ms; python -c pass: {bare_t * 1e3:.1f} ms")
    target("CLI retry, jobstate's own share", (cli_t - bare_t) * 1e3, 40, at_most=True, fmt="{:.1f} ms")


# -------------------------------------------------------------------- remote
_REMOTE_WORKER = """
import sys
from pathlib import Path
from jobstate.allocation.allocation import allocate
from jobstate.core.periods import parse_period
from jobstate.store.store import Store
repo, tag, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
week = parse_period("2026-W32")
with Store(repo, lock_timeout=600, remote=sys.argv[4] or None) as store:
    allocate(store, f"{tag}:warm-up", week)
    sys.stdout.write("ready\\n"); sys.stdout.flush(); sys.stdin.readline()
    for i in range(count):
        allocate(store, f"{tag}:{i}", week)
"""


def _run_workers(hosts: list[Path], remote: str, tag: str, calls: int) -> float:
    """Seconds for every host to make ``calls`` allocations, timed from a common start (after imports)."""
    env = {**os.environ, "JOBSTATE_ATTEMPTS": "200"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _REMOTE_WORKER, str(h), f"{tag}{n}", str(calls), remote],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for n, h in enumerate(hosts)
    ]
    for p in procs:
        assert p.stdout is not None
        p.stdout.readline()
    start = time.perf_counter()
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.close()
    for p in procs:
        if p.wait() != 0:
            raise SystemExit(f"bench: a remote worker failed with {p.returncode}")
    return time.perf_counter() - start


def _bare_push_seconds(bare: Path, probe: Path) -> float:
    """What git alone takes to push one new commit as jobstate does (a lease on the old tip): the floor
    under any allocation through a remote, whatever jobstate does before it."""
    subprocess.run(["git", "clone", "-q", f"file://{bare}", str(probe)], check=True, capture_output=True)
    git(probe, "config", "gc.auto", "0")

    chain = [git(probe, "rev-parse", "HEAD").strip()]
    for i in range(10):  # the commits first: only the pushes are timed
        chain.append(git(probe, "commit-tree", "-p", chain[-1], "-m", f"probe {i}", f"{chain[-1]}^{{tree}}").strip())
    start = time.perf_counter()
    for old, new in itertools.pairwise(chain):
        git(probe, "push", "-q", f"--force-with-lease=refs/heads/main:{old}", "origin", f"{new}:refs/heads/main")
    return (time.perf_counter() - start) / (len(chain) - 1)


def _http_rate(root: Path, bare: Path, calls: int) -> float:
    """Allocations per second of one clone whose remote is smart HTTP (the test suite's server)."""
    from tests.httpgit import HttpGit

    server = HttpGit(root)
    server.start()
    try:
        clone = root / "http-host"
        subprocess.run(["git", "clone", "-q", f"file://{bare}", str(clone)], check=True, capture_output=True)
        git(clone, "config", "gc.auto", "0")
        git(clone, "remote", "set-url", "origin", f"{server.url}/{bare.name}")
        git(clone, "config", "http.extraHeader", server.auth_header())
        return calls / _run_workers([clone], "origin", "http-", calls)
    finally:
        server.kill()


def bench_remote() -> None:
    calls = int(os.environ.get("BENCH_REMOTE_CALLS", "20"))
    print(
        f"== allocate through a shared remote (file://, then smart HTTP; each clone one process making {calls} "
        "new allocations) =="
    )
    with _tmp("jobstate-bench-remote-") as tmp:
        root = Path(tmp)
        bare = root / "remote.git"
        subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
        seed = root / "seed"
        new_repo(seed)
        git(seed, "push", "-q", str(bare), "HEAD:main")
        clones = []
        for i in range(8):
            clone = root / f"host{i}"
            subprocess.run(["git", "clone", "-q", f"file://{bare}", str(clone)], check=True, capture_output=True)
            git(clone, "config", "gc.auto", "0")
            clones.append(clone)
        local = _run_workers([seed], "", "local", calls)
        local_rate = calls / local
        print(f"{'clones':>7} {'allocations/s':>14} {'ms per allocation':>18} {'x local':>8}")
        print(f"{'local':>7} {local_rate:>14.1f} {local / calls * 1e3:>18.1f} {1:>8.2f}   (no remote: baseline)")
        rates = {}
        for n in (1, 8):
            took = _run_workers(clones[:n], "origin", f"r{n}-", calls)
            rates[n] = n * calls / took
            print(f"{n:>7} {rates[n]:>14.1f} {took / (n * calls) * 1e3:>18.1f} {rates[n] / local_rate:>8.2f}")
        http_rate = _http_rate(root, bare, calls)
        print(
            f"{'1 http':>7} {http_rate:>14.1f} {1e3 / http_rate:>18.1f} {http_rate / local_rate:>8.2f}   "
            f"(git http-backend behind basic auth on 127.0.0.1: x{rates[1] / http_rate:.2f} the time of file://)"
        )
        push = _bare_push_seconds(bare, root / "probe")
        floor = local / calls + push
        print(
            f"a bare git push of one commit alone (no jobstate): {push * 1e3:.1f} ms; so a remote allocation "
            f"takes at least {floor * 1e3:.1f} ms here: x{local / calls / floor:.2f} of local at best"
        )
        merges = git(bare, "rev-list", "--merges", "--count", "main").strip()
        print(f"remote history: {git(bare, 'rev-list', '--count', 'main').strip()} commits, {merges} merges")
        target("1 clone through the remote vs local rate", rates[1] / local_rate, 0.5, at_most=False)
        target("8 contending clones together vs local rate", rates[8] / local_rate, 0.5, at_most=False)


# ---------------------------------------------------------------------- size
def bench_size() -> None:
    from jobstate.allocation.allocation import allocate
    from jobstate.core.periods import parse_period
    from jobstate.store.store import Store

    counts = (1000, 10000) if MODE["full"] else (1000,)
    print("== repository size after N allocations from scratch (git's default gc.auto; background git gc --auto) ==")
    print(
        f"{'allocations':>12} {'.git':>11} {'loose objects':>14} {'loose, disk':>11} {'packs':>6} {'after git gc':>13}"
    )
    weeks = [parse_period(f"2030-W{w:02d}") for w in range(1, 53)]
    for count in counts:
        with _tmp("jobstate-bench-size-") as tmp:
            repo = Path(tmp) / "repo"
            new_repo(repo, gc=True)
            git(repo, "config", "gc.autoDetach", "false")  # so waiting for gc.pid waits for the whole gc
            with Store(repo, lock_timeout=60) as store:
                for i in range(count):
                    allocate(store, f"k:{i}", weeks[i % len(weeks)])
            wait_for_gc(repo)
            size, obj = git_size(repo), objects(repo)
            git(repo, "gc", "-q")
            print(
                f"{count:>12} {mib(size):>11} {obj.get('count', 0):>14} {mib(obj.get('size', 0) * 1024):>11} "
                f"{obj.get('packs', 0):>6} {mib(git_size(repo)):>13}"
            )
    print("  gc.auto (default 6700 loose objects) bounds the loose count; each allocation writes about 5 objects")


# ----------------------------------------------------------- full: scaling
def bench_scaling() -> None:
    sizes = (10, 1000, 10000, 30000, 100000)
    print("== scaling (best of 3 rounds; .git loose = as built and used, packed = after git gc) ==")
    print(f"{'episodes':>9} {'git ms':>8} {'alloc ms':>9} {'retry ms':>9} {'.git loose':>11} {'.git packed':>12}")
    calls = int(os.environ.get("BENCH_CALLS", "20"))
    for size in sizes:
        with _tmp("jobstate-bench-scale-") as tmp:
            repo = make_repo(Path(tmp), size)
            m = _measure(repo, size, calls if size <= 10000 else max(5, calls // 3), paid=False)
            loose = git_size(repo)
            git(repo, "gc", "-q")
            print(
                f"{size:>9} {m['base'] * 1e3:>8.2f} {m['new'] * 1e3:>9.2f} {m['retry'] * 1e3:>9.3f} "
                f"{mib(loose):>11} {mib(git_size(repo)):>12}"
            )


# ------------------------------------------------------------- full: verify
def bench_verify() -> None:
    from jobstate.hashing import hash_files
    from jobstate.review.verify import collect, verify
    from jobstate.store.snapshot import WorkTree

    episodes = int(os.environ.get("BENCH_VERIFY_EPISODES", "10000"))
    big = int(os.environ.get("BENCH_VERIFY_BIG", "100"))
    big_mb = int(os.environ.get("BENCH_VERIFY_BIG_MB", "20"))
    print(f"== verify ({episodes:,} episodes, {big} artifacts of {big_mb} MB + {episodes - big:,} small) ==")
    with _tmp("jobstate-bench-verify-") as tmp:
        start = time.perf_counter()
        repo, arts = make_verify_repo(Path(tmp), episodes, big, big_mb << 20)
        total = sum(a.stat().st_size for a in arts)
        print(f"setup (write and commit the tree): {time.perf_counter() - start:.1f} s; artifacts {total / 1e9:.2f} GB")
        large = arts[:big] or arts
        large_bytes = sum(a.stat().st_size for a in large)
        subprocess.run(["cat", *map(str, large)], stdout=subprocess.DEVNULL, check=True)  # same cache for all

        def timed(fn: Callable[[], object]) -> float:
            t = time.perf_counter()
            fn()
            return time.perf_counter() - t

        sums = timed(lambda: subprocess.run(["sha256sum", *map(str, large)], stdout=subprocess.DEVNULL, check=True))
        one = timed(lambda: hash_files(large, workers=1))
        two = timed(lambda: hash_files(large, workers=2))
        mbps = large_bytes / 1e6
        print(f"hashing {large_bytes / 1e9:.2f} GB: sha256sum {mbps / sums:.0f} MB/s")
        target("jobstate hashing, 1 thread vs sha256sum", sums / one, 0.9, at_most=False)
        target("jobstate hashing, 2 threads vs sha256sum", sums / two, 1.0, at_most=False)
        snap = WorkTree(repo)
        checks = timed(lambda: collect(snap, hash_artifacts=False))
        print(f"YAML and structure checks: {checks:.2f} s = {checks / episodes * 1e6:.0f} us per episode (3 files)")
        full = timed(lambda: verify(repo))
        rev = timed(lambda: verify(repo, rev="HEAD"))
        print(f"whole verify, work tree: {full:.1f} s; --rev HEAD from Git objects: {rev:.1f} s")


def bench_history() -> None:
    """This tree's allocation figures beside BENCH_BASE's (issue 22: allocation remembers all of history)."""
    ratios = bench_before_after()
    if ratios:
        target("lock-free retry at 10,000 episodes, after/before", ratios["retry"], 1.5, at_most=True)
        target("new allocation at 10,000 episodes, after/before", ratios["new"], 1.5, at_most=True)
        target("new allocation after an outside commit, after/before", ratios["outside"], 1.5, at_most=True)


def bench_review_cost() -> None:
    """verify and diff on 10,000 episodes beside the commit before the record model (issue 19)."""
    for label, ratio in bench_review().items():
        target(f"{label} at 10,000 episodes, after/before", ratio, 1.5, at_most=True)


def bench_probe_cost() -> None:
    """A paid step in a repository that declares a probe, beside one that does not (issue 32)."""
    print("== probe: a paid step that never needs its probe (best of 3 interleaved rounds) ==")
    ratio, ran = bench_probe()
    print(f"  the probe was started: {'yes' if ran else 'never'}")
    target("paid step with a declared probe / without", ratio, 1.10, at_most=True)


def bench_memory_use() -> None:
    """Peak RSS reading an artifact of 1 KB and of 512 MB, or 5 GB with FULL=1 (issue 29: memory stays flat)."""
    size, name = (HUGE, "5 GB") if MODE["full"] else (LARGE, "512 MB")
    print(f"== memory: peak RSS reading an artifact, 1 KB vs {name} ==")
    for label, (small, large) in bench_memory(size).items():
        print(f"  {label}: {small:.1f} MiB at 1 KB, {large:.1f} MiB at {name}")
        target(f"peak RSS of {label}, {name}/1 KB", large / small, 1.2, at_most=True)


SECTIONS: dict[str, Callable[[], None]] = {
    "processes": lambda: bench_processes(target),
    "memory": bench_memory_use,
    "allocate": bench_allocate,
    "history": bench_history,
    "review": bench_review_cost,
    "remote": bench_remote,
    "size": bench_size,
    "layout": lambda: bench_layout(target, MODE["full"]),
    "probe": bench_probe_cost,
    "verify": bench_verify,
    "scaling": bench_scaling,
}
FULL_ONLY = ("verify", "scaling")


def main(argv: list[str]) -> int:
    os.environ.update(GIT_ENV)
    full = MODE["full"] = "--full" in argv or os.environ.get("FULL", "") not in ("", "0")
    names = [a for a in argv if a != "--full"] or [n for n in SECTIONS if full or n not in FULL_ONLY]
    for name in names:
        if name not in SECTIONS:
            print(f"bench: unknown section {name!r}; known: {', '.join(SECTIONS)}", file=sys.stderr)
            return 2
    start = time.perf_counter()
    took: list[str] = []
    for name in names:
        began = time.perf_counter()
        SECTIONS[name]()
        took.append(f"{name} {time.perf_counter() - began:.0f}")
        print()
    print(f"== targets ({time.perf_counter() - start:.0f} s in all: {', '.join(took)}) ==")
    for what, value, text, met in TARGETS:
        print(f"{'met   ' if met else 'MISSED'} {what}: {value} (target {text})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
