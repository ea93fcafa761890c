"""A derived catalog of episodes in SQLite (``.jobstate/catalog.sqlite``).

It is never the truth: it records which commit it was derived from, every row
carries the blob ID of the file it was read from, and it is brought up to date
(incrementally from ``git diff-tree``, or rebuilt whole) whenever HEAD is not
the commit it knows. Deleting it is always safe.

Beside the rows of HEAD it keeps what the branch's history ever had (``ever``:
every episode ID with its key, never forgotten), the tombstones of HEAD, and
every tombstone a commit it saw had (``retired_ever``, each with that commit),
so that an ID or key is never handed out twice; a rebuild derives the same from
``git log`` (jobstate.store.history).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from jobstate.core.layout import RETIRED, STATE
from jobstate.core.periods import is_episode_id
from jobstate.errors import StateInvalid

VERSION = "5"  # 3: paths of the state/<year>/<period>/<id> layout; 4: every key an ID ever had; 5: retirements

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(k TEXT PRIMARY KEY, v TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS rows(
    path TEXT PRIMARY KEY, episode_id TEXT NOT NULL, period_id TEXT NOT NULL,
    sequence INTEGER NOT NULL, allocation_key TEXT NOT NULL, blob TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS rows_by_key ON rows(allocation_key);
CREATE INDEX IF NOT EXISTS rows_by_period ON rows(period_id, sequence);
CREATE INDEX IF NOT EXISTS rows_by_blob ON rows(blob);
CREATE TABLE IF NOT EXISTS ever(
    episode_id TEXT NOT NULL, period_id TEXT NOT NULL, sequence INTEGER NOT NULL,
    allocation_key TEXT NOT NULL, seen_in TEXT NOT NULL, PRIMARY KEY(episode_id, allocation_key));
CREATE INDEX IF NOT EXISTS ever_by_key ON ever(allocation_key);
CREATE INDEX IF NOT EXISTS ever_by_period ON ever(period_id, sequence);
CREATE TABLE IF NOT EXISTS retired(
    path TEXT PRIMARY KEY, episode_id TEXT NOT NULL, period_id TEXT NOT NULL,
    sequence INTEGER NOT NULL, allocation_key TEXT NOT NULL, blob TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS retired_ever(
    episode_id TEXT NOT NULL, allocation_key TEXT NOT NULL, path TEXT NOT NULL, seen_in TEXT NOT NULL,
    PRIMARY KEY(episode_id, seen_in));
CREATE INDEX IF NOT EXISTS retired_ever_by_key ON retired_ever(allocation_key);
"""
# version 4 knew HEAD's tombstones only, and kept ones a branch switch took away: the rows of HEAD are
# derived again and every tombstone read from history (the commit it knew is forgotten: a whole walk follows)
_FROM_4 = """
BEGIN;
DELETE FROM retired;
DELETE FROM rows;
DELETE FROM meta WHERE k='head';
UPDATE meta SET v='5' WHERE k='version';
COMMIT;
"""
# version 3 kept one key per ID: its table is moved aside and copied, so what the branch ever had survives
# (a rebuild would see history and the reflog only)
_FROM_3 = """
DROP INDEX IF EXISTS ever_by_key;
DROP INDEX IF EXISTS ever_by_period;
ALTER TABLE ever RENAME TO ever_3;
"""
_COPY_3 = """
BEGIN;
INSERT OR IGNORE INTO ever SELECT * FROM ever_3;
DROP TABLE ever_3;
UPDATE meta SET v='4' WHERE k='version';
COMMIT;
"""


class Row(NamedTuple):
    """One committed file that describes an episode (episode.yaml or a history file)."""

    path: str
    episode_id: str
    period_id: str
    sequence: int
    allocation_key: str
    blob: str


class Seen(NamedTuple):
    """An episode the branch's history had, and the commit it was first seen in."""

    episode_id: str
    period_id: str
    sequence: int
    allocation_key: str  # empty when the file that had it could not be read
    seen_in: str


class Catalog:
    """Connection to the catalog; writers hold the jobstate lock."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    @classmethod
    def open(cls, path: Path) -> Catalog:
        """Open for writing, creating it (or recreating it when unreadable)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(2):
            try:
                conn = sqlite3.connect(path, timeout=30, isolation_level=None)
            except sqlite3.Error as exc:
                raise StateInvalid(
                    f"{path}: cannot open the catalog ({exc}); it is derived data: remove it and retry"
                ) from None
            try:
                conn.execute("PRAGMA synchronous=OFF")
                old = _version(conn) == "3"
                if old:
                    conn.executescript(_FROM_3)
                conn.executescript(_SCHEMA)
                if old:
                    conn.executescript(_COPY_3)
                if _version(conn) == "4":
                    conn.executescript(_FROM_4)
                if conn.execute("SELECT v FROM meta WHERE k='version'").fetchone() not in (None, (VERSION,)):
                    raise sqlite3.DatabaseError("other version")
                conn.execute("INSERT OR REPLACE INTO meta VALUES('version', ?)", (VERSION,))
                return cls(conn)
            except sqlite3.Error as exc:
                # derived data: a damaged or foreign catalog is dropped and rebuilt
                conn.close()
                try:
                    path.unlink(missing_ok=True)
                except OSError:
                    raise StateInvalid(
                        f"{path}: cannot use the catalog ({exc}); it is derived data: remove it and retry"
                    ) from None
        raise StateInvalid(f"{path}: cannot create the catalog; it is derived data: remove it and retry")

    @classmethod
    def open_readonly(cls, path: Path) -> Catalog | None:
        """Open without writing anything; None when there is no usable catalog."""
        if not path.exists():
            return None
        try:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30, isolation_level=None)
        except sqlite3.Error:
            return None
        try:
            version = conn.execute("SELECT v FROM meta WHERE k='version'").fetchone()
        except sqlite3.Error:
            version = None
        if version != (VERSION,):
            conn.close()  # damaged or from another version: the locked path rebuilds it
            return None
        return cls(conn)

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()

    def meta(self, key: str) -> str | None:
        """One stored setting, e.g. the commit the rows were derived from."""
        row = self.conn.execute("SELECT v FROM meta WHERE k=?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def by_key(self, key: str) -> list[Row]:
        """Rows whose allocation key is ``key``."""
        cur = self.conn.execute("SELECT * FROM rows WHERE allocation_key=?", (key,))
        return [Row(*r) for r in cur.fetchall()]

    def known_blobs(self, blobs: Iterable[str]) -> set[str]:
        """Those of ``blobs`` a committed file of HEAD has (an episode.yaml names its ID: the same blob, the same
        episode and key, wherever it was added)."""
        wanted, found = sorted(set(blobs)), set()
        for start in range(0, len(wanted), 500):  # under SQLite's limit of bound parameters
            part = wanted[start : start + 500]
            query = f"SELECT blob FROM rows WHERE blob IN ({','.join('?' * len(part))})"  # noqa: S608 - only ? marks
            found |= {r[0] for r in self.conn.execute(query, part).fetchall()}
        return found

    def row(self, path: str) -> Row | None:
        """The row of one committed file, or None."""
        found = self.conn.execute("SELECT * FROM rows WHERE path=?", (path,)).fetchone()
        return None if found is None else Row(*found)

    def by_period(self, period_id: str) -> list[Row]:
        """Rows of one period, by sequence."""
        cur = self.conn.execute("SELECT * FROM rows WHERE period_id=? ORDER BY sequence", (period_id,))
        return [Row(*r) for r in cur.fetchall()]

    def ever_by_key(self, key: str) -> list[Seen]:
        """Every episode the key ever had on this branch."""
        cur = self.conn.execute("SELECT * FROM ever WHERE allocation_key=? ORDER BY episode_id", (key,))
        return [Seen(*r) for r in cur.fetchall()]

    def ever_by_id(self, episode_id: str) -> Seen | None:
        """The episode ``episode_id`` as the branch's history had it, or None."""
        # the first key the branch gave it (two branches may have given one ID two keys: each stays refused)
        row = self.conn.execute(
            "SELECT * FROM ever WHERE episode_id=? ORDER BY rowid LIMIT 1", (episode_id,)
        ).fetchone()
        return None if row is None else Seen(*row)

    def ever_max_sequence(self, period_id: str) -> int | None:
        """The highest sequence the period ever had on this branch, or None."""
        row = self.conn.execute("SELECT MAX(sequence) FROM ever WHERE period_id=?", (period_id,)).fetchone()
        return None if row is None or row[0] is None else int(row[0])

    def knowledge(self) -> tuple[str, list[Seen]] | None:
        """The commit the catalog reflects and every episode the branch ever had up to it;
        None when it cannot be read (it is derived data)."""
        try:
            return self.meta("head") or "", [Seen(*r) for r in self.conn.execute("SELECT * FROM ever").fetchall()]
        except sqlite3.Error:
            return None

    def retirement(self, episode_id: str) -> Row | None:
        """The tombstone of a retired episode HEAD holds, or None."""
        row = self.conn.execute("SELECT * FROM retired WHERE episode_id=?", (episode_id,)).fetchone()
        return None if row is None else Row(*row)

    def retirements(self, *, episode_id: str | None = None, key: str | None = None) -> list[tuple[str, str, str]]:
        """Every tombstone of the episode (or keeping the key) that a commit this clone saw had: (episode ID,
        path, the commit seen in); one that is in HEAD's history retires it there, whatever HEAD holds now."""
        column, value = ("episode_id", episode_id) if episode_id is not None else ("allocation_key", key)
        query = f"SELECT episode_id, path, seen_in FROM retired_ever WHERE {column}=? ORDER BY rowid"  # noqa: S608
        return [(r[0], r[1], r[2]) for r in self.conn.execute(query, (value,)).fetchall()]

    def remember_retired(self, rows: list[Row], seen_in: str) -> None:
        """Record tombstones the branch's history had (call under the lock)."""
        with self.conn:
            self.conn.execute("BEGIN IMMEDIATE")
            self._remember_retired(rows, seen_in)

    def _remember_retired(self, rows: list[Row], seen_in: str) -> None:
        self.conn.executemany(
            "INSERT OR IGNORE INTO retired_ever VALUES(?,?,?,?)",
            [(r.episode_id, r.allocation_key, r.path, seen_in) for r in rows],
        )

    def seen_of_key(self, key: str) -> list[tuple[str, str]]:
        """(episode ID of today's form, the commit it was first seen in) of every episode the key ever had."""
        rows = self.conn.execute("SELECT episode_id, seen_in FROM ever WHERE allocation_key=? ORDER BY rowid", (key,))
        return [(r[0], r[1]) for r in rows if is_episode_id(r[0])]

    def remember(self, rows: list[Row], seen_in: str) -> None:
        """Record episodes the branch's history had: every key an ID was ever committed with stays (two
        branches that handed out one ID gave it two keys, and a merge keeps one file)."""
        with self.conn:
            self.conn.execute("BEGIN IMMEDIATE")
            self._remember(rows, seen_in)

    def _remember(self, rows: list[Row], seen_in: str) -> None:
        self.conn.executemany(
            "INSERT OR IGNORE INTO ever VALUES(?,?,?,?,?)",
            [(r.episode_id, r.period_id, r.sequence, r.allocation_key, seen_in) for r in rows],
        )
        # a file that named no key (a migrated history file, an unreadable one) holds its ID until a key is known
        self.conn.executemany(
            "DELETE FROM ever WHERE episode_id=? AND allocation_key='' AND EXISTS "
            "(SELECT 1 FROM ever AS k WHERE k.episode_id=ever.episode_id AND k.allocation_key<>'')",
            [(r.episode_id,) for r in rows if r.allocation_key],
        )

    def state_ids(self, period_id: str | None = None) -> set[str]:
        """Episode IDs that have a committed episode.yaml under state/ (of one period, when given)."""
        if period_id is None:
            cur = self.conn.execute("SELECT episode_id FROM rows WHERE path LIKE ?", (f"{STATE}/%",))
        else:
            cur = self.conn.execute(
                "SELECT episode_id FROM rows WHERE path LIKE ? AND period_id=?", (f"{STATE}/%", period_id)
            )
        return {r[0] for r in cur.fetchall()}

    def update(
        self, *, head: str | None, add: list[Row], remove: list[str], replace_all: bool = False, **meta: str
    ) -> None:
        """Apply one change in a single transaction and record the commit it reflects."""
        with self.conn:
            self.conn.execute("BEGIN IMMEDIATE")
            if replace_all:
                self.conn.execute("DELETE FROM rows")
                self.conn.execute("DELETE FROM retired")
            for table in ("rows", "retired"):
                self.conn.executemany(f"DELETE FROM {table} WHERE path=?", [(p,) for p in remove])  # noqa: S608
            for r in add:
                table = "retired" if r.path.startswith(f"{RETIRED}/") else "rows"
                self.conn.execute(f"INSERT OR REPLACE INTO {table} VALUES(?,?,?,?,?,?)", r)
            # an episode once committed is never forgotten, whatever later commits do to it; nor a retirement
            self._remember(add, head or "")
            self._remember_retired([r for r in add if r.path.startswith(f"{RETIRED}/")], head or "")
            meta["head"] = head or ""
            self.conn.executemany("INSERT OR REPLACE INTO meta VALUES(?,?)", list(meta.items()))


def _version(conn: sqlite3.Connection) -> str | None:
    """The catalog's version, or None for a new (or foreign) file."""
    try:
        row = conn.execute("SELECT v FROM meta WHERE k='version'").fetchone()
    except sqlite3.OperationalError:
        return None  # no meta table yet
    return None if row is None else str(row[0])
