"""The CLI's lock-free retry path stays cheap to start: it imports no YAML, no lock and no git library."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from jobstate.arguments import build_parser
from jobstate.main import COMMANDS

from .conftest import run_cli

HEAVY = ("yaml", "portalocker", "git", "gitdb")
# standard modules that cost a retry 2-10 ms each to import and that it does not use: dataclasses
# (through inspect), subprocess (no process is started), shutil (argparse asks it for the width),
# zoneinfo (only --at needs a timezone) and decimal (only budgets do sums)
SLOW_STDLIB = ("dataclasses", "inspect", "subprocess", "shutil", "zoneinfo", "decimal")

_PROBE = """
import sys
from jobstate.main import main
code = main(sys.argv[1:])
import json
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def _modules_of(repo: Path, *args: str) -> tuple[str, set[str]]:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, *args], cwd=repo, capture_output=True, text=True, check=False, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    answer, report = proc.stdout.strip().splitlines()
    found = json.loads(report)
    assert found["code"] == 0, proc.stderr
    return answer, {m.split(".")[0] for m in found["modules"]}


def test_the_retry_path_imports_no_yaml_lock_or_git_library(repo: Path) -> None:
    first = run_cli("allocate", "--key", "k", "--week", "2026-W32", cwd=repo)
    assert first.returncode == 0, first.stderr
    answer, modules = _modules_of(repo, "allocate", "--key", "k", "--week", "2026-W32")
    assert answer == "2026-W32-0"
    assert not modules & set(HEAVY), sorted(modules & set(HEAVY))
    assert not modules & set(SLOW_STDLIB), sorted(modules & set(SLOW_STDLIB))


def test_a_new_key_does_import_them_so_the_check_above_can_see_them(repo: Path) -> None:
    answer, modules = _modules_of(repo, "allocate", "--key", "new", "--week", "2026-W32")
    assert answer == "2026-W32-0"
    assert {"yaml", "portalocker", "subprocess"} <= modules


def test_every_command_is_known_to_the_one_command_parser() -> None:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert set(sub.choices or {}) == COMMANDS


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_one_command_parser_gives_the_same_help_as_the_whole_parser(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    texts = []
    for parser in (build_parser(), build_parser(command)):
        with pytest.raises(SystemExit):
            parser.parse_args([command, "--help"])
        texts.append(capsys.readouterr().out)
    assert texts[0] == texts[1]
    assert f"jobstate {command}" in texts[0]


@pytest.mark.parametrize("columns", ["50", "132", "0", "wide"])
def test_help_is_as_wide_as_argparse_would_make_it(columns: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    from jobstate.arguments import _columns

    monkeypatch.setenv("COLUMNS", columns)
    assert _columns() == shutil.get_terminal_size().columns
