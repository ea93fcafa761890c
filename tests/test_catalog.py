"""jobstate.store.catalog: derived data, never the truth."""

from __future__ import annotations

from pathlib import Path

from jobstate.core.periods import parse_period

from .conftest import run_cli

W32 = parse_period("2026-W32")


def test_unusable_catalog_path_is_one_line_exit_7(repo: Path) -> None:
    (repo / ".jobstate").mkdir(exist_ok=True)
    (repo / ".jobstate" / "catalog.sqlite").unlink(missing_ok=True)
    (repo / ".jobstate" / "catalog.sqlite").mkdir()
    proc = run_cli("allocate", "--key", "c", "--week", "2026-W32", cwd=repo)
    assert proc.returncode == 7
    assert "catalog" in proc.stderr
