"""``make demo``: the main job, end to end, in a throwaway state repository.

Run with ``python -m jobstate_demo.demo [DIR]``; without DIR a temp dir is used and removed.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from jobstate.core.costs import totals
from jobstate.core.layout import episode_dir
from jobstate.store.records import cost_entries
from jobstate.store.store import Store
from jobstate_demo.vendor_sim import VendorSimulator, arm_fault_remote, ledger


def _run(
    cwd: Path, *args: str, check: bool = True, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "jobstate", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **env} if env else None,
    )
    shown = " ".join(a if " " not in a else repr(a) for a in args)
    setting = "".join(f"{k}={v} " for k, v in (env or {}).items())
    print(f"$ {setting}jobstate {shown}")
    if proc.stdout:
        print("  " + proc.stdout.rstrip().replace("\n", "\n  "))
    if proc.stderr:
        print("  (stderr) " + proc.stderr.rstrip().replace("\n", "\n  (stderr) "))
    if proc.returncode:
        print(f"  (exit {proc.returncode})")
    if check and proc.returncode != 0:
        raise SystemExit(f"demo: jobstate {shown} failed with exit {proc.returncode}")
    return proc


def _section(title: str) -> None:
    print(f"\n== {title} ==")


def allocation_demo(repo: Path) -> None:
    """init, allocate across two weeks, retry, conflict, concurrent allocators, git log."""
    _section("init a state repository")
    _run(repo, "init", "--git-init")

    _section("allocate: the sequence counts up within an ISO week and restarts the next week")
    _run(repo, "allocate", "--key", "scheduled-run:2026-08-03", "--date", "2026-08-03")
    _run(repo, "allocate", "--key", "scheduled-run:2026-08-05", "--date", "2026-08-05")
    _run(repo, "allocate", "--key", "manual-rerun:2026-08-06", "--date", "2026-08-06")
    _run(repo, "allocate", "--key", "scheduled-run:2026-08-10", "--date", "2026-08-10", "--json")

    _section("a retried run reuses its key and gets the same episode; nothing is written")
    _run(repo, "allocate", "--key", "scheduled-run:2026-08-05", "--date", "2026-08-05", "--json")

    _section("a key cannot move to another week (exit 4)")
    _run(repo, "allocate", "--key", "scheduled-run:2026-08-05", "--date", "2026-08-12", check=False)

    _section("keys from the scheduler: a Kubernetes CronJob's pod and its retry (a new pod) get one episode")
    job = "weekly-media-29769480"  # the CronJob controller's name: <cronjob>-<scheduled minutes since the epoch>
    _run(repo, "key", "--from", "kubernetes", env={"JOB_NAME": job})
    pod = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "JOB_NAME": job}
    first = _run(repo, "allocate", "--from", "kubernetes", env={**pod, "HOSTNAME": f"{job}-x7k2p"})
    _run(repo, "allocate", "--from", "kubernetes", env={**pod, "HOSTNAME": f"{job}-q9d4m"})
    _run(repo, "show", first.stdout.strip())
    _section("only the pod name, which changes on every retry: refused (exit 2), nothing written")
    del pod["JOB_NAME"]
    _run(repo, "allocate", "--from", "kubernetes", check=False, env={**pod, "HOSTNAME": f"{job}-q9d4m"})

    _section("eight allocators at once, four new keys each sent twice")
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "jobstate", "allocate", "--key", f"batch:{i % 4}", "--week", "2026-W34"],
            cwd=repo,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(8)
    ]
    for i, p in enumerate(procs):
        out, err = p.communicate()
        print(f"  allocator {i} key batch:{i % 4} -> {out.strip() or err.strip()}")

    _section("episodes")
    _run(repo, "list")

    _section("git log --stat")
    log = subprocess.run(
        ["git", "log", "--stat", "--format=%h %s"], cwd=repo, capture_output=True, text=True, check=True
    )
    print(log.stdout.rstrip())


def pipeline_demo(repo: Path) -> None:
    """One week of the media pipeline against the local vendor simulator, with two injected faults, each
    settled by the step's probe."""

    with VendorSimulator(price="12.40", currency="USD") as vendor:
        step = [sys.executable, "-m", "jobstate_demo.vendor_sim", "step", "--url", vendor.url]
        _section(f"weekly media pipeline against the vendor simulator at {vendor.url}")
        episode = _run(repo, "allocate", "--key", "weekly-episode:2026-08-14", "--date", "2026-08-14").stdout.strip()

        def paid(name: str, artifact: str, *extra: str, check: bool = True) -> None:
            command = [*step, "--kind", name, "--artifact", artifact, *extra]
            _run(repo, "run", "--episode", episode, "--step", name, "--", *command, check=check)

        _section("generate: the vendor accepts, then the connection drops before it answers")
        arm_fault_remote(vendor.url, "drop_after_accept")
        paid("generate", "final.txt", check=False)
        _section("a retry refuses to resubmit: nobody knows whether the vendor accepted (exit 6)")
        paid("generate", "final.txt", check=False)
        probe = shlex.join([sys.executable, "-m", "jobstate_demo.vendor_sim", "probe", "--url", vendor.url])
        _section("the scheduler's next retry, with the step's probe: the vendor's lookup settles it, no person")
        _run(repo, "run", "--episode", episode, "--step", "generate", "--probe", probe, "--",
             *step, "--kind", "generate", "--artifact", "final.txt")  # fmt: skip

        _section("review: the editor rejects, the episode is reworked and reassembled")
        _run(repo, "approve", "--episode", episode, "--by", "editor", "--reject", "--reason", "intro too long")
        _section("rework: killed before its request left; the probe finds nothing, so attempt 2 runs")
        rework = [*step, "--kind", "rework", "--artifact", "rework.txt", "--price", "3.10"]
        _run(repo, "run", "--episode", episode, "--step", "rework", "--", *rework,
             check=False, env={"VENDOR_SIM_CRASH_BEFORE_SEND": "1"})  # fmt: skip
        time.sleep(2.05 - time.time() % 1)  # the vendor's answer must cover a second past the intent
        _run(repo, "run", "--episode", episode, "--step", "rework", "--probe", probe, "--", *rework)
        paid("reassemble", "final-v2.txt", "--price", "0.85")
        _run(repo, "approve", "--episode", episode, "--by", "editor")
        _run(repo, "complete", "--episode", episode)

        _section(f"episode {episode}")
        for name in ("episode.yaml", "submissions.yaml", "artifacts.yaml", "approval.yaml"):
            print(f"--- {episode_dir(episode)}/{name}")
            print((repo / episode_dir(episode) / name).read_text().rstrip())
        _section(f"cost ledger ({episode_dir(episode)}/costs.yaml) beside the simulator's own charges")

        with Store(repo) as store:
            ours = cost_entries(store, episode)
        theirs = ledger(vendor.url)
        rows = theirs["charges"]
        assert isinstance(rows, list)
        print(f"  {'step':<11} {'jobstate ledger':<22} {'vendor charged':<22}")
        for entry in ours:
            match = [c for c in rows if c["task_id"] == entry.remote_ref]
            vendor_side = f"{match[0]['amount']} {match[0]['currency']} {match[0]['task_id']}" if match else "-"
            our_side = f"{entry.amount} {entry.currency} {entry.remote_ref}"
            print(f"  {entry.step:<11} {our_side:<22} {vendor_side:<22}")

        print(f"  total: jobstate {totals(ours)}, vendor {theirs['totals']}, vendor charges: {len(rows)}")
        if totals(ours) != theirs["totals"] or len(rows) != len(ours):
            raise SystemExit("demo: the ledger and the vendor's charges disagree")
    _section("verify: read-only, from the work tree and from Git objects")
    _run(repo, "verify", "--strict")
    _run(repo, "verify", "--rev", "HEAD", "--strict")


def budget_demo(repo: Path) -> None:
    """A weekly budget: two steps fit, a third is refused before its command runs (exit 8)."""
    _section("a budget of 25.00 USD a week: each step reserves its maximum before it runs")
    config = repo / "jobstate.yaml"
    config.write_text(config.read_text() + "budget:\n  per: week\n  limits: {USD: '25.00'}\n  warn_at: '80%'\n")
    subprocess.run(["git", "commit", "-qm", "a weekly budget", "jobstate.yaml"], cwd=repo, check=True)
    with VendorSimulator(price="12.40", currency="USD") as vendor:
        step = [sys.executable, "-m", "jobstate_demo.vendor_sim", "step", "--url", vendor.url, "--kind", "generate"]
        for n in range(3):
            episode = _run(repo, "allocate", "--key", f"budget-demo:{n}", "--week", "2026-W40").stdout.strip()
            _run(repo, "run", "--episode", episode, "--step", "generate", "--max-cost", "12.40 USD", "--", *step,
                 check=n < 2)  # fmt: skip
        charges = ledger(vendor.url)["charges"]
        assert isinstance(charges, list)
        print(f"  the vendor charged {len(charges)} times: the third step never ran")
    _run(repo, "budget", "--period", "2026-W40")


def _head(repo: Path) -> str:
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True).stdout


def review_demo(repo: Path, week_base: str) -> None:
    """What a reviewer sees: the diff of the demo's week, in words, then the report (read-only)."""
    _section("review: what the week changed (jobstate diff, from Git objects)")
    _run(repo, "diff", week_base[:12], "HEAD")
    _section("review: episodes, statuses and spend per period (jobstate report)")
    _run(repo, "report")


def _all(repo: Path) -> None:
    allocation_demo(repo)
    week_base = _head(repo).strip()
    pipeline_demo(repo)
    budget_demo(repo)
    review_demo(repo, week_base)


def main(argv: list[str] | None = None) -> int:
    """Run the demo in DIR or in a temp dir."""
    args = sys.argv[1:] if argv is None else argv
    env_defaults = {
        "GIT_AUTHOR_NAME": "jobstate demo",
        "GIT_AUTHOR_EMAIL": "demo@jobstate.invalid",
        "GIT_COMMITTER_NAME": "jobstate demo",
        "GIT_COMMITTER_EMAIL": "demo@jobstate.invalid",
    }
    for k, v in env_defaults.items():
        os.environ.setdefault(k, v)
    os.environ.pop("JOBSTATE_REPO", None)
    if args:
        repo = Path(args[0])
        repo.mkdir(parents=True, exist_ok=True)
        _all(repo)
        return 0
    with tempfile.TemporaryDirectory(prefix="jobstate-demo-") as tmp:
        repo = Path(tmp) / "state-repo"
        repo.mkdir()
        print(f"demo state repository: {repo} (removed afterwards)")
        _all(repo)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
