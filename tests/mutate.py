"""``make mutate``: mutation testing of the modules that hold the rules (on demand, not in CI).

mutmut 2 changes one module at a time on disk, runs the tests named for it, and puts the module back;
a mutant no test notices survives. Each module is run against the fast tests that cover it, so a run
takes minutes, not hours: ``make mutate MODULES="model guard"`` for some of them. Do not edit or test
the work tree while it runs; a run that is killed can leave a mutant on disk: ``git diff jobstate``
shows it, ``git checkout jobstate`` removes it. ``.venv/bin/mutmut show ID`` prints a survivor.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTEST = f"{sys.executable} -m pytest -x -q -p no:randomly -p no:cacheprovider -p no:xdist -p no:hypothesispytest"
# module -> (its file, the tests that cover it, fast enough to run once per mutant)
MODULES: dict[str, tuple[str, str]] = {
    # pure: without the suite's conftest (real repositories), a run is a second or two
    "model": ("jobstate/core/model.py", "--noconftest tests/test_model_rules.py"),
    "guard": (
        "jobstate/paid/guard.py",
        "tests/test_guard.py tests/test_exit_codes.py tests/test_running.py "
        "tests/test_paid.py::test_complete_refuses_unknown_and_unapproved "
        "-k 'guard or run] or test_running.py or complete_refuses'",
    ),
    "transaction": (
        "jobstate/store/transaction.py",
        "tests/test_transaction.py tests/test_transaction_crash.py -m 'not slow'",
    ),
    "decision": ("jobstate/allocation/decision.py", "tests/test_allocation.py tests/test_idempotent_decisions.py"),
}


def run(name: str) -> tuple[int, int]:
    """Mutate one module; (mutants, survivors)."""
    path, tests = MODULES[name]
    subprocess.run(
        [
            sys.executable,
            "-m",
            "mutmut",
            "run",
            "--paths-to-mutate",
            path,
            "--tests-dir",
            "tests",
            "--runner",
            f"{PYTEST} {tests}",
            "--no-progress",
        ],
        cwd=ROOT,
        check=False,  # mutmut's exit code encodes what it found; the figures come from its cache
    )
    with sqlite3.connect(ROOT / ".mutmut-cache") as db:
        rows = db.execute(
            "SELECT m.status, COUNT(*) FROM mutant m JOIN line l ON m.line = l.id "
            "JOIN sourcefile f ON l.sourcefile = f.id WHERE f.filename = ? GROUP BY m.status",
            (path,),
        ).fetchall()
    counts = dict(rows)
    return sum(counts.values()), counts.get("bad_survived", 0) + counts.get("bad_timeout", 0)


def main(names: list[str]) -> int:
    unknown = [n for n in names if n not in MODULES]
    if unknown:
        print(f"unknown module {unknown[0]!r}: choose from {', '.join(MODULES)}", file=sys.stderr)
        return 2
    figures = {name: run(name) for name in names or list(MODULES)}
    print("\nmodule        mutants  survived")
    for name, (total, survived) in figures.items():
        print(f"{name:<13} {total:>7}  {survived:>8}")
    print("survivors: .venv/bin/mutmut results; one of them: .venv/bin/mutmut show ID")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
