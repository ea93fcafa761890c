"""The deterministic crash sweep (issue 20): every committing command, SIGKILLed at each of its file and process
operations in turn, then carried on with jobstate commands only, as an operator would.

For each command and mode a template is built once (the state just before the command, and for a paid step the
vendor's own records); each kill point gets a copy of it and a fresh vendor simulator replaying the template's
charges, so no kill point sees another's leftovers. A count run (not killed) gives K_max and the name of every
operation; then K = 1..K_max each kill the command before its K-th operation. After the operator's recovery:
one episode per key, no second vendor task for a step, the ledger equal to the vendor's charges, a clean tree,
``git fsck`` and ``verify --strict``; in remote mode the remote has exactly the local commit.

Every jobstate process a kill point starts (the killed command, the operator's retries) is forked from a server
that imported jobstate once (tests/forkserver.py): still a process and a session of its own, SIGKILLed for real;
init and allocate in local mode start fresh interpreters instead, as a scheduler does.

Kill points run one per core, 2 to 4 at a time (``JOBSTATE_TEST_SWEEP_JOBS``); every jobstate command is a process
of its own (the final check of verify --strict runs in-process: a process per kill point costs more than the check).
Each command's kill points are dealt to ``PARTS`` tests (K = part, part + PARTS, ...), so that make test-slow's xdist
workers share the longest sweeps (jobstate run's is three times the others') and finish together; every run of the
sweep still visits every kill point.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from jobstate.review.verify import verify
from jobstate.store.records import cost_entries, submissions
from jobstate.store.store import Store
from jobstate_demo.vendor_sim import VendorSimulator

from .conftest import git, git_init
from .forkserver import JOBSTATE, ForkServer
from .killpoints import SWEEP_ROW, Outcome, run_hooked, wait_for_group
from .legacy import flatten, make_legacy_repo

WEEK, EID, STEP = "2026-W32", "2026-W32-0", "generate"
JOBS = int(os.environ.get("JOBSTATE_TEST_SWEEP_JOBS", max(2, min(4, len(os.sched_getaffinity(0))))))
# Within CI's budget (about 8 minutes on 2 cores) remote mode sweeps every kill point of these commands only; for
# the others it kills just before and just after each process the command starts (git fetch, push, update-ref,
# update-index, CMD): what remote mode adds to the same code paths the local sweep covers at every operation.
FULL_REMOTE = {"allocate", "approve"}
FULL = os.environ.get("JOBSTATE_TEST_SWEEP_FULL", "") == "1"  # every kill point in both modes (about 20 minutes)
PARTS = int(os.environ.get("JOBSTATE_TEST_SWEEP_PARTS", "3"))
BY = ["--by", "ops", "--reason", "vendor ledger"]

# The one place that says what a swept paid step runs. It reads the vendor's URL from the environment so its argv
# (and with it the request fingerprint) is the same for every kill point, each of which has a vendor of its own.
_PAID_STEP = """\
import os, sys
from jobstate_demo.vendor_sim import main
sys.exit(main(["step", "--url", os.environ["SWEEP_VENDOR_URL"], "--kind", "generate", "--artifact", "final.txt"]))
"""


_PROBE = """\
import os, sys
from jobstate_demo.vendor_sim import main
sys.exit(main(["probe", "--url", os.environ["SWEEP_VENDOR_URL"]]))
"""


def probe_line(top: Path) -> str:
    """The probe of every swept probe settlement: the demo vendor's lookup by idempotency key (read-only)."""
    script = top / "probe.py"
    if not script.exists():
        script.write_text(_PROBE, encoding="utf-8")
    return f"{sys.executable} {script}"


def paid_cmd(top: Path) -> list[str]:
    """The CMD of every swept ``jobstate run``: the vendor simulator's step, with a result, a cost and an artifact."""
    script = top / "paid_step.py"
    if not script.exists():
        script.write_text(_PAID_STEP, encoding="utf-8")
    return [sys.executable, str(script)]


@dataclass
class World:
    """One repository (and in remote mode its bare remote) with the vendor it talks to."""

    top: Path  # shared by every kill point of a sweep: holds the paid step's script
    root: Path
    remote: bool
    vendor: VendorSimulator
    server: ForkServer | None = None  # every jobstate process forked from it (tests/forkserver.py)

    @property
    def repo(self) -> Path:
        return self.root / "repo"

    @property
    def bare(self) -> Path:
        return self.root / "remote.git"

    @property
    def env(self) -> dict[str, str]:
        return {"SWEEP_VENDOR_URL": self.vendor.url}

    def jobstate(self, *args: str, ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess[str]:
        if self.server is not None:
            started = self.server.start(JOBSTATE, ["jobstate", *args], self.repo, {**os.environ, **self.env})
            code = started.wait()
            wait_for_group(started.pid)
            proc = subprocess.CompletedProcess(list(args), code, *started.output())
            assert "Traceback" not in proc.stderr, proc.stderr
            assert proc.returncode in ok, f"jobstate {' '.join(args)}: exit {proc.returncode}: {proc.stderr}"
            return proc
        proc = subprocess.run(
            [sys.executable, "-m", "jobstate", *args],
            cwd=self.repo,
            env={**os.environ, **self.env},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert "Traceback" not in proc.stderr, proc.stderr
        assert proc.returncode in ok, f"jobstate {' '.join(args)}: exit {proc.returncode}: {proc.stderr}"
        return proc


# --------------------------------------------------------------------------- templates


def _plain(w: World) -> None:
    """A git repository with one commit; in remote mode a clone of a bare remote holding it."""
    seed = w.root / "seed" if w.remote else w.repo
    git_init(seed)
    (seed / "README").write_text("pipeline\n")
    git(seed, "add", "README")
    git(seed, "commit", "-qm", "first")
    if w.remote:
        _publish(w, seed)


def _publish(w: World, seed: Path) -> None:
    git_init(w.bare, bare=True)
    git(seed, "push", "-q", str(w.bare), "main")
    subprocess.run(["git", "clone", "-q", f"file://{w.bare}", str(w.repo)], check=True, capture_output=True)
    shutil.rmtree(seed)


def _initialized(w: World) -> None:
    _plain(w)
    w.jobstate("init")
    if w.remote:
        (w.repo / "jobstate.yaml").write_text("period: iso-week\nremote: origin\nlock_timeout: 60\n")
        git(w.repo, "commit", "-qam", "use the shared remote")
        git(w.repo, "push", "-q", "origin", "main")


def _allocated(w: World) -> None:
    _initialized(w)
    w.jobstate("allocate", "--key", "weekly", "--week", WEEK)


def _run_args(w: World) -> list[str]:
    return ["run", "--episode", EID, "--step", STEP, "--", *paid_cmd(w.top)]


def _generated(w: World) -> None:
    _allocated(w)
    w.jobstate(*_run_args(w))


def _unknown(w: World) -> None:
    # the vendor accepts and charges, then the connection drops: nobody knows what happened
    _allocated(w)
    w.vendor.arm_fault("drop_after_accept")
    w.jobstate(*_run_args(w), ok=(9,))
    assert len(w.vendor.charges()) == 1


def _approved(w: World) -> None:
    _generated(w)
    w.jobstate("approve", "--episode", EID, "--by", "editor")


def _flat(w: World) -> None:
    """A generated, paid episode as an older jobstate kept it: state/<id>/ (moved there by git mv)."""
    _generated(w)
    flatten(w.repo)
    if w.remote:
        git(w.repo, "push", "-q", "origin", "main")


def _overrun(w: World) -> None:
    """A week that spent 12.40, and a cap of 10.00 added after it: verify fails until someone acknowledges."""
    _generated(w)
    config = w.repo / "jobstate.yaml"
    config.write_text(config.read_text() + "budget:\n  per: week\n  limits: {USD: '10.00'}\n")
    git(w.repo, "commit", "-qam", "a budget, added after the week was spent")
    if w.remote:
        git(w.repo, "push", "-q", "origin", "main")


def _legacy(w: World) -> None:
    seed = w.root / "seed" if w.remote else w.repo
    make_legacy_repo(seed, ["2026-W30", "2026-W31"])
    if w.remote:
        _publish(w, seed)


# --------------------------------------------------------------------------- the operator


def _open_key(repo: Path) -> str:
    with Store(repo) as store:
        return str(submissions(store, EID)[STEP][-1].idempotency_key)


def operator_run(w: World, args: list[str] | None = None) -> None:
    """``jobstate run`` (or ``args``) again until it is done; an unknown step resolved from the vendor's own record
    of its key."""
    err = ""
    for _ in range(6):
        proc = w.jobstate(*(args or _run_args(w)), ok=(0, 3, 6, 10))
        if proc.returncode == 0:
            return
        err = proc.stderr
        if proc.returncode == 6:
            key = _open_key(w.repo)
            tasks = [c["task_id"] for c in w.vendor.charges() if c["idempotency_key"] == key]
            how = ["--accepted", tasks[0]] if tasks else ["--not-submitted"]
            w.jobstate("resolve", "--episode", EID, "--step", STEP, *how, *BY)
        else:
            time.sleep(0.1)
    raise AssertionError(f"jobstate run never finished: {err}")


@dataclass(frozen=True)
class Scenario:
    name: str
    prepare: Callable[[World], None]
    args: Callable[[World], list[str]]
    then: Callable[[World], None]  # what the operator does after the command went through
    tasks: int  # vendor tasks at the end (each charged once)
    weeks: tuple[str, ...] = (WEEK,)


def _nothing(w: World) -> None:
    pass


SCENARIOS = [
    Scenario("init", _plain, lambda w: ["init"], _nothing, 0, ()),
    Scenario("allocate", _allocated, lambda w: ["allocate", "--key", "victim", "--week", WEEK], _nothing, 0),
    Scenario("run", _allocated, _run_args, _nothing, 1),
    Scenario(
        "resolve",
        _unknown,
        lambda w: ["resolve", "--episode", EID, "--step", STEP, "--accepted", "task-1", *BY],
        operator_run,
        1,
    ),
    Scenario(
        "supersede",
        _generated,
        lambda w: ["resolve", "--episode", EID, "--step", STEP, "--supersede", "--by", "ops", "--reason", "new prompt"],
        operator_run,
        2,
    ),
    # a probe settlement: the vendor's lookup finds the task the dropped answer hid
    Scenario("probe", _unknown, lambda w: ["probe", "--probe", probe_line(w.top)], operator_run, 1),
    Scenario(
        "run-probe",
        _unknown,
        lambda w: ["run", "--episode", EID, "--step", STEP, "--probe", probe_line(w.top), "--", *paid_cmd(w.top)],
        operator_run,
        1,
    ),
    Scenario("approve", _generated, lambda w: ["approve", "--episode", EID, "--by", "editor"], _nothing, 1),
    Scenario("complete", _approved, lambda w: ["complete", "--episode", EID], _nothing, 1),
    Scenario(
        "retire",
        _allocated,
        lambda w: ["retire", EID, "--by", "ops", "--reason", "scheduled by mistake"],
        _nothing,
        0,
    ),
    Scenario("migrate", _legacy, lambda w: ["migrate"], _nothing, 0, ("2026-W30", "2026-W31")),
    Scenario("migrate-flat", _flat, lambda w: ["migrate"], _nothing, 1),
    Scenario(
        "budget-acknowledge",
        _overrun,
        lambda w: ["budget", "acknowledge", "--period", WEEK, "--by", "finance", "--reason", "cap added later"],
        _nothing,
        1,
    ),
]


# --------------------------------------------------------------------------- checks


def check(w: World, s: Scenario) -> None:
    """The promises after any kill and the operator's recovery."""
    assert git(w.repo, "status", "--porcelain", "--untracked-files=all") == ""
    git(w.repo, "fsck", "--no-progress")
    # in-process (a process of its own per kill point costs more than the check): what verify --strict exits 0 on
    report = verify(w.repo, workers=1)
    assert report.ok(strict=True), "verify --strict: " + "; ".join(f"{p.path}: {p.message}" for p in report.problems)
    charges = w.vendor.charges()
    ledger: Counter[tuple[str, str]] = Counter()
    with Store(w.repo) as store:
        for week in s.weeks:
            episodes = store.episodes(week)
            keys = [e.allocation_key for e in episodes]
            assert len(keys) == len(set(keys)), f"a key has two episodes: {keys}"
            assert [e.sequence for e in episodes] == list(range(len(episodes)))
            for episode in episodes:
                for entry in cost_entries(store, episode.episode_id):
                    ledger[(str(entry.remote_ref), str(entry.amount))] += 1
    assert len(charges) == s.tasks, f"the vendor has {len(charges)} tasks for the step: {charges}"
    if s.name != "migrate":  # the legacy ledger predates the simulator
        assert ledger == Counter((c["task_id"], c["amount"]) for c in charges)
    if w.remote:
        assert git(w.repo, "rev-parse", "HEAD") == git(w.bare, "rev-parse", "main"), "the remote lags"


# --------------------------------------------------------------------------- the sweep


@contextmanager
def _case(template: World, root: Path) -> Iterator[World]:
    """A copy of the template with a vendor of its own that has the template's tasks (same keys, same IDs)."""
    shutil.copytree(template.root, root, symlinks=True)
    with VendorSimulator(price="12.40") as vendor:
        for c in template.vendor.charges():
            vendor.accept(c["idempotency_key"], {"kind": "generate", "episode": EID}, c["amount"])
        w = World(template.top, root, template.remote, vendor, template.server)
        if w.remote:
            git(w.repo, "remote", "set-url", "origin", f"file://{w.bare}")
        yield w


def _args(s: Scenario, w: World) -> list[str]:
    args = s.args(w)
    return [*args, "--remote", "origin"] if w.remote and args[0] == "migrate" else args


def _kill_point(template: World, s: Scenario, root: Path, k: int) -> Outcome:
    with _case(template, root) as w:
        args = _args(s, w)
        outcome = run_hooked(args, w.repo, root / "ops.json", k, w.env, server=w.server)
        try:
            if k and not outcome.killed:
                # a run may make a few operations fewer than the counting run (which git processes a
                # command starts depends on timing): one that ends before its K-th must simply succeed
                assert len(outcome.ops) < k, f"not killed at K={k}: exit {outcome.code}: {outcome.stderr}"
                assert outcome.code == 0, f"ended before K={k} and failed: {outcome.stderr}"
            elif not k:
                assert outcome.code == 0, outcome.stderr
            # the operator runs the same command again, then goes on
            if s.name in ("run", "run-probe"):
                operator_run(w, args)  # the scheduler's retry: the same command line
            else:
                again = w.jobstate(*args, ok=(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 70))
                landed = s.name == "supersede" and again.returncode == 2 and "no attempt to supersede" in again.stderr
                if not landed:  # a supersede that landed is not decided again: the answer says to run the step
                    assert again.returncode == 0, f"the same command again: exit {again.returncode}: {again.stderr}"
                if s.name == "allocate":
                    assert again.stdout.strip() == f"{WEEK}-1", again.stdout
            s.then(w)
            check(w, s)
        except AssertionError as err:
            raise AssertionError(f"{s.name} killed at K={k} ({outcome.last}): {err}") from err
    shutil.rmtree(root)
    return outcome


MODES = ["local", "remote"]
FRESH_INTERPRETERS = {("init", "local"), ("allocate", "local")}


@pytest.fixture(scope="module")
def fork_server() -> Iterator[ForkServer | None]:
    """One per xdist worker: a jobstate process costs a fork, not an interpreter's start-up and imports
    (``JOBSTATE_TEST_SWEEP_FORK=0``: each a fresh interpreter, as a scheduler starts it)."""
    if os.environ.get("JOBSTATE_TEST_SWEEP_FORK", "1") == "0":
        yield None
        return
    server = ForkServer()
    try:
        yield server
    finally:
        server.close()


def kill_points(ops: list[str], *, full: bool) -> list[int]:
    """K = 1..K_max, or (not ``full``) the operations just before and just after each process started."""
    every = range(1, len(ops) + 1)
    if full:
        return list(every)
    return [k for k in every if ops[k - 1].startswith("popen ") or (k > 1 and ops[k - 2].startswith("popen "))]


# init never talks to a remote (it refuses --remote: the branch is pushed by hand once), so it is swept locally only
CASES = [
    pytest.param((s, mode, part), id=f"{s.name}-{mode}-{part + 1}of{PARTS}")
    for s in SCENARIOS
    for mode in MODES
    if (s.name, mode) != ("init", "remote")
    for part in range(PARTS)
]


@pytest.mark.slow
# one command's whole sweep: up to a few hundred kill points, each followed by recovery and checks
@pytest.mark.timeout(900)
@pytest.mark.parametrize("case", CASES)
def test_a_kill_at_every_operation_is_recovered_by_jobstate_alone(
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    case: tuple[Scenario, str, int],
    record_property: Callable[[str, object], None],
    fork_server: ForkServer | None,
) -> None:
    scenario, mode, part = case
    started = time.monotonic()
    top = tmp_path
    with VendorSimulator(price="12.40") as vendor:
        # these sweeps start every process as a scheduler does, a fresh interpreter with a hash seed of its own:
        # what forking from one pre-imported server could hide (an import that fails only when it runs first)
        server = None if (scenario.name, mode) in FRESH_INTERPRETERS else fork_server
        template = World(top, top / "template", mode == "remote", vendor, server)
        template.root.mkdir()
        scenario.prepare(template)
        count = _kill_point(template, scenario, top / "count", 0)
        k_max = len(count.ops)
        assert k_max > 0
        every = kill_points(count.ops, full=mode == "local" or FULL or scenario.name in FULL_REMOTE)
        points = every[part::PARTS]
        failures: list[tuple[int, str]] = []

        def one(k: int) -> None:
            try:
                _kill_point(template, scenario, top / f"k{k}", k)
            except AssertionError as err:
                failures.append((k, str(err)))

        with ThreadPoolExecutor(max_workers=JOBS) as pool:
            list(pool.map(one, points))
    seconds = time.monotonic() - started
    with (tmp_path_factory.getbasetemp() / "crash-sweep.txt").open("a", encoding="utf-8") as table:
        table.write(
            f"{scenario.name} {mode} {part + 1}/{PARTS} K_max={k_max} swept={len(points)} seconds={seconds:.1f}\n"
        )
    record_property("kill_points", len(points))
    # the table at the end of the run (conftest.py), from every xdist worker
    record_property(SWEEP_ROW, [scenario.name, f"{mode} {part + 1}/{PARTS}", k_max, len(points), round(seconds, 1)])
    assert not failures, f"{len(failures)} of {len(points)} kill points failed:\n" + "\n".join(
        m for _k, m in sorted(failures)[:20]
    )
