"""``make bench`` section ``processes``: the commits and git processes of each command (issue 27).

Each command runs as the CLI does, in a process of its own whose audit hook records every process it
starts (``subprocess.Popen``: git, CMD, the detached ``git gc --auto``); commits are counted with
``git rev-list --count``. Counted in a fresh state repository (loose objects) and in one that has
lived (1,000 episodes, packed, so objects are read through ``git cat-file``), where the first allocation
also builds the catalog (a one-off of each clone, not the target's case).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from repos import git, make_repo, new_repo, week_of

from jobstate.core.layout import period_dir

# the audit hook: every process the jobstate process starts, written to a file at exit
_HOOK = r"""
import json, os, sys
spawned = []
def hook(event, args):
    if event == "subprocess.Popen":
        argv = args[1] if isinstance(args[1], (list, tuple)) else [args[1]]
        spawned.append(" ".join(os.fsdecode(a) if isinstance(a, (str, bytes)) else str(a) for a in argv))
sys.addaudithook(hook)
from jobstate.main import main
try:
    code = main(sys.argv[2:])
finally:
    with open(sys.argv[1], "w", encoding="utf-8") as f:
        json.dump(spawned, f)
sys.exit(code)
"""
_STEP = """\
import os, sys
from jobstate_demo.vendor_sim import main
sys.exit(main(["step", "--url", os.environ["BENCH_VENDOR_URL"], "--kind", "generate", "--artifact", "final.txt"]))
"""
NEW_ALLOCATION, PAID_STEP = 4, 12  # git processes, at most (issue 27); 7 and 29 before it
Target = Callable[..., None]


def _count(repo: Path, log: Path, args: list[str], env: dict[str, str]) -> tuple[int, list[str], int]:
    """(commits, git processes, exit code) of one command."""
    before = int(git(repo, "rev-list", "--count", "HEAD"))
    proc = subprocess.run(
        [sys.executable, "-c", _HOOK, str(log), *args], cwd=repo, env=env, capture_output=True, check=False
    )
    spawned = json.loads(log.read_text(encoding="utf-8"))
    gits = [s for s in spawned if s.startswith(("git ", "sh -c git "))]
    return int(git(repo, "rev-list", "--count", "HEAD")) - before, gits, proc.returncode


def _commands(repo: Path, script: Path, week: str) -> list[tuple[str, list[str], int]]:
    """(name, args, expected exit) of the walk-through's commands, on a fresh week of ``repo``."""
    e0, e1 = f"{week}-0", f"{week}-1"  # "first" (the first allocation of a clone builds the catalog) is elsewhere
    run = ["--step", "generate", "--", sys.executable, str(script)]
    by = ["--by", "ops", "--reason", "seen at the vendor"]
    return [
        ("allocate (first)", ["allocate", "--key", f"first:{week}", "--week", "2031-W01"], 0),
        ("allocate (new)", ["allocate", "--key", f"bench:{week}", "--week", week], 0),
        ("allocate (retry)", ["allocate", "--key", f"bench:{week}", "--week", week], 0),
        ("run", ["run", "--episode", e0, *run], 0),
        ("run (repeat, done)", ["run", "--episode", e0, *run], 0),
        ("approve", ["approve", "--episode", e0, "--by", "editor"], 0),
        ("complete", ["complete", "--episode", e0], 0),
        ("allocate (second)", ["allocate", "--key", f"bench2:{week}", "--week", week], 0),
        ("run (vendor drops)", ["run", "--episode", e1, *run], 9),
        ("resolve --accepted", ["resolve", "--episode", e1, "--step", "generate", "--accepted", "TASK", *by], 0),
        ("run (resumed)", ["run", "--episode", e1, *run], 0),
    ]


def _table(repo: Path, label: str, target: Target) -> None:
    import os

    from jobstate_demo.vendor_sim import VendorSimulator

    script = repo.parent / "bench_step.py"
    script.write_text(_STEP, encoding="utf-8")
    log = repo.parent / "spawned.json"
    print(f"  -- {label}")
    print(f"  {'command':<20} {'commits':>7} {'git':>4}  git processes")
    with VendorSimulator(price="12.40") as vendor:
        env = {**os.environ, "BENCH_VENDOR_URL": vendor.url}
        for name, template, ok in _commands(repo, script, "2031-W05"):
            if name == "run (vendor drops)":
                vendor.arm_fault("drop_after_accept")
            args = [vendor.charges()[-1]["task_id"] if a == "TASK" else a for a in template]
            commits, gits, code = _count(repo, log, args, env)
            shown = ", ".join(g.split(" -- ")[0][:48] for g in gits)
            print(f"  {name:<20} {commits:>7} {len(gits):>4}  {shown}{'' if code == ok else f'  (exit {code}!)'}")
            count = "{:.0f}"
            if name == "allocate (new)":
                target(f"git processes, new allocation ({label})", len(gits), NEW_ALLOCATION, at_most=True, fmt=count)
                target(f"commits, new allocation ({label})", commits, 1, at_most=True, fmt=count)
            if name == "run":
                target(f"git processes, paid step ({label})", len(gits), PAID_STEP, at_most=True, fmt=count)
                target(f"commits, paid step ({label})", commits, 3, at_most=True, fmt=count)


def bench_processes(target: Target) -> None:
    print("== commits and git processes per command (CLI, counted by an audit hook; targets: issue 27) ==")
    with tempfile.TemporaryDirectory(prefix="jobstate-bench-procs-", ignore_cleanup_errors=True) as tmp:
        fresh = Path(tmp) / "fresh" / "repo"
        fresh.parent.mkdir()
        new_repo(fresh)
        _table(fresh, "fresh repository", target)
        lived = Path(tmp) / "lived"
        lived.mkdir()
        repo = make_repo(lived, 1000)
        _handmade(repo)
        _table(repo, "1,000 episodes, packed", target)


def _handmade(repo: Path) -> None:
    """What two hand-made parts of git/ save, measured here (issue 27 asks whether they earn their place)."""
    import os
    import shutil
    import time

    from jobstate.git.cache_tree import drop_cache_tree
    from jobstate.git.objects import TREE_MODE, Tree
    from jobstate.git.repo import GitRepo

    git(repo, "read-tree", "HEAD")
    git(repo, "write-tree")  # the full cache tree, as a git commit of the user's leaves it
    rel = "bench-handmade.txt"  # outside state/: the commands timed after this see an unchanged state
    (repo / rel).write_text("bench: 1\n")
    gitdir = repo / ".git"

    def update(drop: bool) -> float:
        best = float("inf")
        for _ in range(15):
            index = gitdir / "bench-index"
            shutil.copyfile(gitdir / "index", index)
            env = {**os.environ, "GIT_INDEX_FILE": str(index), "GIT_CONFIG_COUNT": "1"}
            env.update(GIT_CONFIG_KEY_0="core.splitIndex", GIT_CONFIG_VALUE_0="true")
            for timed in (False, True):  # the first as jobstate's first commit after a git commit, then the next
                start = time.perf_counter()
                subprocess.run(["git", "update-index", "--add", "--", rel], cwd=repo, env=env, check=True)
                if drop:
                    drop_cache_tree(index)
                if timed:
                    best = min(best, time.perf_counter() - start)
        (gitdir / "bench-index").unlink()
        return best

    kept, dropped = update(drop=False), update(drop=True)
    (repo / rel).unlink()
    print("  -- hand-made parts of git/, 1,000 episodes (best of 15; at 10,000 the cache tree's share grows)")
    print(f"  index update (split index): cache tree kept {kept * 1e3:.1f} ms, dropped {dropped * 1e3:.1f} ms")
    gitrepo = GitRepo(repo)
    root = Tree(gitrepo.read_object(gitrepo.commit_tree_of(str(gitrepo.head_commit())))[1], gitrepo.format.width)
    # the largest tree a new allocation rewrites: its period's (state/ holds a year per entry)
    here, raw = root, b""
    for part in period_dir(week_of(999)).split("/"):
        entry = here.get(part.encode())
        assert entry is not None
        raw = gitrepo.read_object(entry[1])[1]
        here = Tree(raw, gitrepo.format.width)
    gitrepo.close()
    tree, change = Tree(raw, gitrepo.format.width), (TREE_MODE, "ab" * gitrepo.format.width)
    start = time.perf_counter()
    tree.edited(b"2099-W01-0", change)
    splice = time.perf_counter() - start
    start = time.perf_counter()
    width, entries, pos = gitrepo.format.width, [], 0
    while pos < len(raw):  # parse, add, sort and write the whole tree, as a tree library does
        nul = raw.index(b"\0", pos)
        mode, name = raw[pos:nul].split(b" ", 1)
        entries.append((mode, name, raw[nul + 1 : nul + 1 + width]))
        pos = nul + 1 + width
    entries.append((TREE_MODE, b"2099-W01-0", bytes.fromhex(change[1])))
    entries.sort(key=lambda e: e[1] + b"/" if e[0] == TREE_MODE else e[1])
    b"".join(m + b" " + n + b"\0" + sha for m, n, sha in entries)
    whole = time.perf_counter() - start
    print(
        f"  {period_dir(week_of(999))}/ tree of {len(tree.keys):,} entries, one added: spliced {splice * 1e3:.2f} ms, "
        f"parsed and written whole {whole * 1e3:.2f} ms"
    )
