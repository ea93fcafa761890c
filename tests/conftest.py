"""Real Git repositories under tmp_path; no test can touch a state repo outside it."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

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


@pytest.fixture
def repo(tmp_path: Path, object_format: str) -> Path:
    """A fresh state repository (git init + jobstate init)."""
    path = tmp_path / "repo"
    path.mkdir()
    if object_format != "sha1":
        git_init(path, object_format)
    store, _ = init(path, git_init=True)
    store.close()
    assert git(path, "rev-parse", "--show-object-format").strip() == object_format
    return path


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


@pytest.fixture(scope="module")
def _built_history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from .review_history import build_pipeline_history

    top = tmp_path_factory.mktemp("built")
    gitconfig = top / "gitconfig"
    gitconfig.write_text("[init]\n\tdefaultBranch = main\n[user]\n\tname = Test\n\temail = test@example.invalid\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GIT_CONFIG_GLOBAL", str(gitconfig))
        mp.setenv("GIT_CONFIG_NOSYSTEM", "1")
        return build_pipeline_history(top / "pipeline")


@pytest.fixture
def history(_built_history: Path, tmp_path: Path) -> Path:
    """A copy of the small pipeline history of tests/review_history.py (built once per module: it takes seconds)."""
    return Path(shutil.copytree(_built_history, tmp_path / "pipeline", symlinks=True))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """The number of kill points the crash sweep visited per command and mode (tests/test_crash_sweep.py),
    and the random order's seed at the end of every run (-q hides pytest-randomly's header), so a
    failure that depends on the order can be replayed with the same order."""
    from .killpoints import SWEPT

    if SWEPT:
        terminalreporter.section("crash sweep: kill points per command")
        terminalreporter.write_line(f"{'command':<10} {'mode':<7} {'K_max':>6} {'swept':>6} {'seconds':>8}")
        for command, mode, k_max, swept, seconds in SWEPT:
            terminalreporter.write_line(f"{command:<10} {mode:<7} {k_max:>6} {swept:>6} {seconds:>8.1f}")
        total = sum(row[3] for row in SWEPT)
        terminalreporter.write_line(f"{'total':<25} {total:>6} {sum(row[4] for row in SWEPT):>8.1f}")
    if config.pluginmanager.hasplugin("randomly"):
        seed = config.getoption("randomly_seed")
        terminalreporter.write_line(f"random order: replay it with --randomly-seed={seed}")
