"""The top-level API, called as a user calls it: ``import jobstate`` in a fresh interpreter, any order."""

from __future__ import annotations

import itertools
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import jobstate

PUBLIC_CALLABLES = ("open", "allocate", "paid_step", "parse_period", "period_of")


def _python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.parametrize("order", list(itertools.permutations(("allocate", "paid_step", "open"))))
def test_public_names_are_callables_whatever_is_touched_first(repo: Path, order: tuple[str, ...]) -> None:
    # importing every subpackage first (as the CLI and the library do) must not shadow a public name
    code = f"""
        import importlib, pkgutil, jobstate
        for sub in pkgutil.iter_modules(jobstate.__path__, "jobstate."):
            if not sub.name.endswith("__main__"):
                importlib.import_module(sub.name)
        for name in {order!r} + {PUBLIC_CALLABLES!r}:
            value = getattr(jobstate, name)
            assert callable(value) and not isinstance(value, type(jobstate)), (name, value)
        print("ok")
    """
    done = _python(code, repo)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ok\n"


def test_documented_allocate_call_works_and_a_retry_returns_the_same_episode(repo: Path) -> None:
    code = """
        import jobstate
        s = jobstate.open(".")
        first = jobstate.allocate(s, "k1", jobstate.parse_period("2026-W33"))
        again = jobstate.allocate(s, "k1", jobstate.parse_period("2026-W33"))
        other = jobstate.allocate(s, "k2", jobstate.parse_period("2026-W33"))
        print(first.episode_id, again.episode_id, other.episode_id)
    """
    done = _python(code, repo)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["2026-W33-0", "2026-W33-0", "2026-W33-1"]


def test_repeat_of_a_completed_step_raises_the_exported_documented_exception(repo: Path) -> None:
    code = """
        import jobstate
        s = jobstate.open(".")
        ep = jobstate.allocate(s, "k1", jobstate.parse_period("2026-W33")).episode_id
        with jobstate.paid_step(s, ep, "generate") as step:
            step.accepted("task-1")
        try:
            with jobstate.paid_step(s, ep, "generate") as step:
                raise SystemExit("the body of a completed step ran again")
        except jobstate.StepAlreadyCompleted as exc:
            assert isinstance(exc, jobstate.AlreadyRecorded) and isinstance(exc, jobstate.JobstateError)
            print("repeat", exc.exit_code)
    """
    done = _python(code, repo)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "repeat 0\n"


def test_every_exported_name_exists_and_no_subpackage_shares_one() -> None:
    package = Path(jobstate.__file__).parent
    subpackages = {p.name for p in package.iterdir() if (p / "__init__.py").exists()}
    modules = {p.stem for p in package.glob("*.py")}
    assert not (set(jobstate.__all__) & (subpackages | modules)), "a module name shadows a public name"
    for name in jobstate.__all__:
        assert getattr(jobstate, name) is not None


def test_the_exceptions_a_caller_must_handle_are_documented() -> None:
    docs = (Path(jobstate.__file__).parent.parent / "docs" / "paid-steps.md").read_text(encoding="utf-8")
    for name in ("StepAlreadyCompleted", "SubmissionUnknown", "EpisodeUnknown", "EpisodeCompleted", "BudgetExceeded"):
        assert f"jobstate.{name}" in docs, name
