"""Real Git repositories under tmp_path; no test can touch a state repo outside it."""

from __future__ import annotations

import contextlib
import fcntl
import gc
import io
import os
import resource
import shutil
import signal
import subprocess
import sys
import threading
import warnings
from collections.abc import Callable, Generator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import jobstate.store.init
import jobstate.store.store
from jobstate.git.repo import find_root
from jobstate.main import main
from jobstate.store.init import init
from jobstate.store.store import Store
from jobstate_demo.vendor_sim import VendorSimulator

FIXED = datetime(2026, 8, 7, 10, 0, 0, tzinfo=UTC)
OBJECT_FORMATS = ("sha1", "sha256")
# the core scenarios run on SHA-1 and SHA-256 repositories: mark a test with this to run it on both
both_formats = pytest.mark.parametrize("object_format", OBJECT_FORMATS, indirect=True)


def isolate(monkeypatch: pytest.MonkeyPatch, tmp: Path) -> None:
    """A HOME and git configuration of the test's own, and no jobstate or git variables from outside."""
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    gitconfig = home / ".gitconfig"
    gitconfig.write_text("[init]\n\tdefaultBranch = main\n[user]\n\tname = Test\n\temail = test@example.invalid\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(gitconfig))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for var in (
        "JOBSTATE_REPO",
        "JOBSTATE_LOCK_TIMEOUT",
        "JOBSTATE_REMOTE",
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp)


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate(monkeypatch, tmp_path)

    def guarded_find_root(start: Path) -> Path:
        root = find_root(start)
        if not root.resolve().is_relative_to(tmp_path.resolve()):
            raise AssertionError(f"test tried to use a state repo outside tmp_path: {root}")
        return root

    monkeypatch.setattr(jobstate.store.store, "find_root", guarded_find_root)
    monkeypatch.setattr(jobstate.store.init, "find_root", guarded_find_root)


# --- a failed test's leftovers stop with it -------------------------------------------------
# pytest keeps a failed test's traceback (sys.last_traceback, for post-mortem debugging) until the next test's
# call begins; the processes, pipes and files its frames hold are then freed inside that test, whose
# ResourceWarnings and thread exceptions (filterwarnings = error) fail it for nothing of its own. A timeout
# (pytest-timeout raises wherever the test was) leaves the most. So a failed test's processes are killed and
# reaped, its threads joined, and its traceback dropped, in its own teardown.
_STARTED: list[list[subprocess.Popen[Any]]] = []
_popen_init = subprocess.Popen.__init__


def _recording_popen_init(self: subprocess.Popen[Any], *args: Any, **kwargs: Any) -> None:
    _popen_init(self, *args, **kwargs)
    for started in _STARTED:
        started.append(self)


subprocess.Popen.__init__ = _recording_popen_init  # type: ignore[method-assign]
_REPORTS = pytest.StashKey[dict[str, pytest.TestReport]]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    item.stash.setdefault(_REPORTS, {})[report.when] = report
    return report


@pytest.fixture(autouse=True)
def _leftovers_of_a_failed_test(request: pytest.FixtureRequest) -> Iterator[None]:
    started: list[subprocess.Popen[Any]] = []
    threads = set(threading.enumerate())
    _STARTED.append(started)
    try:
        yield
    finally:
        _STARTED.remove(started)
    if any(r.failed for r in request.node.stash.get(_REPORTS, {}).values()):
        _stop_leftovers(started, [t for t in threading.enumerate() if t not in threads])


def _stop_leftovers(started: list[subprocess.Popen[Any]], threads: list[threading.Thread]) -> None:
    hook = threading.excepthook
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        threading.excepthook = lambda _args: None  # a thread whose process was just killed
        try:
            for proc in started:
                if proc.poll() is None:
                    proc.kill()
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        proc.wait(timeout=10)
                for pipe in (proc.stdin, proc.stdout, proc.stderr):
                    if pipe is not None:
                        with contextlib.suppress(OSError):
                            pipe.close()
            for thread in threads:
                thread.join(timeout=10)
            for name in ("last_type", "last_value", "last_traceback", "last_exc"):
                with contextlib.suppress(AttributeError):
                    delattr(sys, name)
            gc.collect()
        finally:
            threading.excepthook = hook


def git(repo: Path, *args: str) -> str:
    """Run git in ``repo`` and return stdout."""
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


def git_init(path: Path, object_format: str = "sha1", *, bare: bool = False) -> None:
    """``git init`` with branch main in the given object format."""
    path.mkdir(parents=True, exist_ok=True)
    args = ["init", "-q", "-b", "main", f"--object-format={object_format}"] + (["--bare"] if bare else [])
    git(path, *args)


def plain_repo(path: Path) -> Path:
    """A git repository with one commit of one file and no jobstate in it."""
    path.mkdir(parents=True)
    git(path, "init", "-q")
    (path / "README").write_text("x\n")
    git(path, "add", "README")
    git(path, "commit", "-qm", "first")
    return path


@pytest.fixture
def object_format(request: pytest.FixtureRequest) -> str:
    """The object format of the ``repo`` fixture: SHA-1 unless a test is marked ``both_formats``."""
    return str(getattr(request, "param", "sha1"))


@pytest.fixture(scope="session")
def _initialised(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """A fresh state repository of each object format, built once per run (a few hundred tests copy one)."""

    def built(object_format: str) -> Path:
        def build(top: Path) -> None:
            path = top / "repo"
            path.mkdir()
            if object_format != "sha1":
                git_init(path, object_format)
            with pytest.MonkeyPatch.context() as mp:  # the guard of _isolated knows only the asking test's tmp_path
                mp.setattr(jobstate.store.init, "find_root", find_root)
                mp.setattr(jobstate.store.store, "find_root", find_root)
                store, _ = init(path, git_init=True)
                store.close()
            assert git(path, "rev-parse", "--show-object-format").strip() == object_format

        return built_once(tmp_path_factory, f"repo-{object_format}", build) / "repo"

    return built


@pytest.fixture
def repo(tmp_path: Path, object_format: str, _initialised: Callable[[str], Path]) -> Path:
    """A fresh state repository (git init + jobstate init), copied from the one built for the run."""
    return Path(shutil.copytree(_initialised(object_format), tmp_path / "repo", symlinks=True))


@pytest.fixture
def store(repo: Path) -> Iterator[Store]:
    """The Store of ``repo`` with a fixed clock."""
    s = Store(repo, now=lambda: FIXED, lock_timeout=5)
    yield s
    s.close()


def run_cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 60, process: bool = False
) -> subprocess.CompletedProcess[str]:
    """``jobstate ARGS`` in ``cwd``; never a traceback, and jobstate's own error is one line on stderr.

    In-process through ``main(argv)`` (about 20 times faster), except with ``process=True``, with
    ``env``, and for ``run``, whose command writes to the real file descriptors.
    """
    # a changed environment (a fake git on PATH that kills its caller) needs a process of its own
    in_process = not (process or env or args[:1] == ("run",))
    proc = _run_in_process(args, cwd) if in_process else _run_process(args, cwd, env, timeout)
    assert "Traceback" not in proc.stderr, proc.stderr
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        # jobstate run passes on its command's stderr; jobstate's own part is still one line
        ours = [line for line in lines if line.startswith("jobstate:")] if args[:1] == ("run",) else lines
        assert len(ours) == 1, proc.stderr
    return proc


def _run_process(
    args: tuple[str, ...], cwd: Path, env: dict[str, str] | None, timeout: float
) -> subprocess.CompletedProcess[str]:
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    return subprocess.run(
        [sys.executable, "-m", "jobstate", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        check=False,
    )


def _run_in_process(args: tuple[str, ...], cwd: Path) -> subprocess.CompletedProcess[str]:
    out, err = io.StringIO(), io.StringIO()
    saved_env, saved_cwd = dict(os.environ), Path.cwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as exc:  # --help and --version, as argparse does them
                code = exc.code if isinstance(exc.code, int) else 0
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return subprocess.CompletedProcess(["jobstate", *args], code, out.getvalue(), err.getvalue())


def committed_files(repo: Path) -> set[str]:
    """Every path in HEAD."""
    return set(git(repo, "ls-tree", "-r", "--name-only", "HEAD").split())


def status(repo: Path) -> str:
    """git status --porcelain (empty when clean)."""
    return git(repo, "status", "--porcelain", "--untracked-files=all")


@pytest.fixture
def vendor() -> Iterator[VendorSimulator]:
    """The fake paid vendor on 127.0.0.1, 12.40 USD a task."""
    with VendorSimulator(price="12.40") as sim:
        yield sim


def vendor_step(url: str, kind: str = "generate", *extra: str) -> list[str]:
    """The vendor simulator's paid-step command, as ``jobstate run -- CMD`` runs it."""
    return [sys.executable, "-m", "jobstate_demo.vendor_sim", "step", "--url", url, "--kind", kind, *extra]


def stable_cmd(script: str) -> list[str]:
    """A paid step's command running ``script`` whose argv (and so its request fingerprint) stays the same
    when a test changes what it does between runs: the script lives in a file of the test's own."""
    path = Path.cwd() / "step_cmd.py"  # the test's tmp_path (see _isolated)
    path.write_text(script, encoding="utf-8")
    return [sys.executable, str(path)]


# a template shared by many tests is not the work of the test that happens to ask for it first
BUILD_TIMEOUT = 300


@contextlib.contextmanager
def _limit_of_its_own(seconds: float) -> Iterator[None]:
    """Stop pytest-timeout's clock for the test (its signal method: an interval timer) and run the block
    under a limit of its own; the test then gets back the time it had left."""
    left, _interval = signal.getitimer(signal.ITIMER_REAL)
    if not left:  # no per-test timeout, or pytest-timeout's thread method
        yield
        return
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, left)


def built_once(factory: pytest.TempPathFactory, name: str, build: Callable[[Path], object]) -> Path:
    """The directory ``build`` filled, built once per test run however many xdist workers ask for it.

    Workers share the parent of their base temporary directories: the first to take the lock builds,
    the others wait and reuse it. Treat the result as read-only (copy it into tmp_path to change it).
    ``build`` gets an empty directory and a git configuration of the template's own.
    """
    base = factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    done = shared / f"built-{name}"
    with _limit_of_its_own(BUILD_TIMEOUT), (shared / f"built-{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            work = shared / f"building-{name}"
            shutil.rmtree(work, ignore_errors=True)  # a worker killed mid-build left it half done
            work.mkdir()
            gitconfig = work / "gitconfig"
            gitconfig.write_text(
                "[init]\n\tdefaultBranch = main\n[user]\n\tname = Test\n\temail = test@example.invalid\n"
            )
            with pytest.MonkeyPatch.context() as mp:
                mp.setenv("GIT_CONFIG_GLOBAL", str(gitconfig))
                mp.setenv("GIT_CONFIG_NOSYSTEM", "1")
                for var in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "JOBSTATE_REPO", "JOBSTATE_REMOTE"):
                    mp.delenv(var, raising=False)
                build(work)
            work.rename(done)  # whole or not at all: a failed build is built again by the next test
    return done


@pytest.fixture(scope="session")
def _built_history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from .review_history import build_pipeline_history

    def build(top: Path) -> None:
        git(build_pipeline_history(top / "pipeline"), "gc", "-q", "--prune=now")  # each test copies it

    return built_once(tmp_path_factory, "history", build)


@pytest.fixture
def history(_built_history: Path, tmp_path: Path) -> Path:
    """A copy of the small pipeline history of tests/review_history.py (built once per run: it takes seconds)."""
    return Path(shutil.copytree(_built_history / "pipeline", tmp_path / "pipeline", symlinks=True))


# --- each test's own work, in CPU seconds ----------------------------------------------------
# Wall time says as much about the machine's other work as about the test; the CPU seconds of the test's call
# (this process's threads and every process it started and reaped) do not. A fast test stays under
# CPU_BUDGET: make test (JOBSTATE_TEST_CPU_BUDGET=20, the Makefile says why) fails one that does not,
# unless it is marked slow.
CPU_BUDGET = float(os.environ.get("JOBSTATE_TEST_CPU_BUDGET", "0"))
_CPU: list[tuple[float, float, str, bool]] = []  # cpu seconds, wall seconds, test, marked slow


def _cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    started = _cpu_seconds()
    try:
        return (yield)
    finally:
        item.user_properties.append(("cpu_seconds", round(_cpu_seconds() - started, 3)))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """On the controller too: xdist sends each worker's reports with their user properties."""
    if report.when != "call":
        return
    from .killpoints import SWEEP_ROW, SWEPT

    row = dict(report.user_properties).get(SWEEP_ROW)
    if isinstance(row, list | tuple):
        command, mode, k_max, swept, seconds = row
        SWEPT.append((str(command), str(mode), int(k_max), int(swept), float(seconds)))
    cpu = dict(report.user_properties).get("cpu_seconds")
    if isinstance(cpu, float | int):
        _CPU.append((float(cpu), report.duration, report.nodeid, "slow" in report.keywords))


def pytest_sessionfinish(session: pytest.Session) -> None:
    if CPU_BUDGET and session.exitstatus == 0 and any(c > CPU_BUDGET and not slow for c, _w, _t, slow in _CPU):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _cpu_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _CPU:
        return
    ranked = sorted(_CPU, reverse=True)
    terminalreporter.section("own work per test: CPU seconds of the call (wall seconds)")
    for cpu, wall, nodeid, _slow in ranked[:15]:
        terminalreporter.write_line(f"{cpu:7.2f} ({wall:6.2f})  {nodeid}")
    total_cpu, total_wall = sum(r[0] for r in _CPU), sum(r[1] for r in _CPU)
    terminalreporter.write_line(f"{total_cpu:7.1f} ({total_wall:6.1f})  all {len(_CPU)} tests")
    over = [r for r in ranked if CPU_BUDGET and r[0] > CPU_BUDGET and not r[3]]
    for cpu, _wall, nodeid, _slow in over:
        terminalreporter.write_line(
            f"{nodeid}: {cpu:.1f} CPU seconds, over the {CPU_BUDGET:g} s of a fast test: "
            "make it cheaper, or mark it slow with a comment saying why",
            red=True,
        )


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """The number of kill points the crash sweep visited per command and mode (tests/test_crash_sweep.py),
    and the random order's seed at the end of every run (-q hides pytest-randomly's header), so a
    failure that depends on the order can be replayed with the same order."""
    from .killpoints import SWEPT

    _cpu_summary(terminalreporter)
    if SWEPT:
        terminalreporter.section("crash sweep: kill points per command")
        terminalreporter.write_line(f"{'command':<10} {'mode':<12} {'K_max':>6} {'swept':>6} {'seconds':>8}")
        for command, mode, k_max, swept, seconds in sorted(SWEPT):
            terminalreporter.write_line(f"{command:<10} {mode:<12} {k_max:>6} {swept:>6} {seconds:>8.1f}")
        total = sum(row[3] for row in SWEPT)
        terminalreporter.write_line(f"{'total':<30} {total:>6} {sum(row[4] for row in SWEPT):>8.1f}")
    if config.pluginmanager.hasplugin("randomly"):
        seed = config.getoption("randomly_seed")
        terminalreporter.write_line(f"random order: replay it with --randomly-seed={seed}")
