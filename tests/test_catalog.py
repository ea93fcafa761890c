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


def test_a_version_3_catalog_keeps_what_the_branch_ever_had(tmp_path: Path) -> None:
    """The upgrade to one row per (ID, key) copies the old table: a key only the catalog still remembers (its
    commit reset away, the reflog expired) stays refused, where a rebuild would forget it."""
    import sqlite3

    from jobstate.store.catalog import VERSION, Catalog

    path = tmp_path / "catalog.sqlite"
    old = sqlite3.connect(path, isolation_level=None)
    old.executescript(
        "CREATE TABLE meta(k TEXT PRIMARY KEY, v TEXT NOT NULL);"
        "CREATE TABLE ever(episode_id TEXT PRIMARY KEY, period_id TEXT NOT NULL, sequence INTEGER NOT NULL,"
        " allocation_key TEXT NOT NULL, seen_in TEXT NOT NULL);"
        "CREATE INDEX ever_by_key ON ever(allocation_key);"
        "CREATE INDEX ever_by_period ON ever(period_id, sequence);"
        "INSERT INTO meta VALUES('version', '3');"
        "INSERT INTO ever VALUES('2026-W32-4', '2026-W32', 4, 'gone-key', 'abc123');"
    )
    old.close()
    cat = Catalog.open(path)
    try:
        assert [s.episode_id for s in cat.ever_by_key("gone-key")] == ["2026-W32-4"]
        assert cat.ever_max_sequence("2026-W32") == 4
        assert cat.meta("version") == VERSION
        indexes = {r[0] for r in cat.conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
        assert {"ever_by_key", "ever_by_period", "rows_by_blob"} <= indexes
    finally:
        cat.close()
