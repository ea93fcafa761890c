"""The state repository: its root, settings, the derived catalog, and reads. Nothing here writes state.

Every state change goes through jobstate.store.transaction: the lock is taken, an
interrupted earlier change is repaired, the remote (if any) is fetched, the
catalog is brought up to date with HEAD, and only then does the caller read,
decide and commit.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Callable, Collection, Iterator
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

from jobstate.core import advice
from jobstate.core.clock import utc_now
from jobstate.core.inputs import env_number
from jobstate.core.layout import (
    CONFIG_FILE,
    EPISODE_FILE,
    PRIVATE,
    STATE,
    episode_dir,
    episode_of,
    episode_path,
    is_flat_name,
    is_period_dir,
    is_year_dir,
    period_dir,
    retired_path,
)
from jobstate.core.periods import Period, is_episode_id, parse_episode_id, require_kind
from jobstate.core.records import Episode, episode_from_yaml_dict
from jobstate.errors import DirtyState, EpisodeUnknown, NotInitialized, StateInvalid, UsageError
from jobstate.git.repo import GitRepo, find_root
from jobstate.store.catalog import Catalog
from jobstate.store.config import Config
from jobstate.store.journal import JOURNAL, ObjectJournal

# written when a push's answer was lost; removed by the next fetch, which settles what the remote holds
REMOTE_UNSURE = "remote-unsure"


class Store:
    """A jobstate state repository (a Git work tree with state/ and history/)."""

    def __init__(
        self,
        root: Path,
        *,
        now: Callable[[], datetime] = utc_now,
        lock_timeout: float | None = None,
        remote: str | None = None,
    ) -> None:
        self.root = root
        self.now = now
        self.git = GitRepo(root)
        self.private = root / PRIVATE
        self.journal = ObjectJournal(self.git, self.private / JOURNAL)
        self.git.on_created = self.journal.add
        self.git.on_superseded = self.journal.superseded
        self._lock_timeout = lock_timeout
        self._remote = remote
        self._config: Config | None = None
        self._catalog: Catalog | None = None
        self._readonly: Catalog | None = None
        self._readonly_ino: int | None = None

    # ------------------------------------------------------------------ basics
    def close(self) -> None:
        """Release the catalog connections and the object journal."""
        self.journal.close()
        for cat in (self._catalog, self._readonly):
            if cat is not None:
                cat.close()
        self._catalog = self._readonly = None

    def _read_only_catalog(self) -> Catalog | None:
        # one read-only connection serves both the config lookup and the lock-free retry;
        # a catalog rebuilt since (a new file) is opened afresh
        try:
            ino = self.catalog_path.stat().st_ino
        except OSError:
            ino = None
        if self._readonly is not None and self._readonly_ino != ino:
            self._readonly.close()
            self._readonly = None
        if self._readonly is None and ino is not None:
            self._readonly = Catalog.open_readonly(self.catalog_path)
            self._readonly_ino = ino
        return self._readonly

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def path(self, relative: str) -> Path:
        """Absolute path of a repository-relative path."""
        return self.root / relative

    def require_initialized(self, *, flat_ok: bool = False) -> None:
        """Refuse to work in a repository that ``jobstate init`` has not set up, or (unless ``flat_ok``:
        jobstate migrate) whose state/ still has the flat layout (``state/<id>/``)."""
        try:
            entries = os.scandir(self.root / STATE)
        except (FileNotFoundError, NotADirectoryError):
            elsewhere = self.state_elsewhere()
            if elsewhere is not None:  # a clone whose remote HEAD names another branch than the state's
                raise NotInitialized(elsewhere) from None
            raise NotInitialized(f"{self.root} has no state/ directory: run jobstate init there first") from None
        with entries:  # a year per entry: a few names, read on every command
            flat = None if flat_ok else next((e.name for e in entries if is_flat_name(e.name)), None)
        if flat is not None:
            raise StateInvalid(
                f"{STATE}/{flat} is in the flat layout (state/<id>/); jobstate now keeps "
                f"it in {episode_dir(flat)}/: move every episode there in one reviewable commit with: "
                "jobstate migrate (jobstate migrate --dry-run shows the plan first)"
            )

    def state_elsewhere(self) -> str | None:
        """When other branches, local or remote-tracking, hold a jobstate state: the advice that names
        one and how to check it out (or bring it in); None when none does."""
        from jobstate.git.branches import branches_holding  # noqa: PLC0415 - start-up: on the way to a refusal

        try:
            head: str | None = self.git.head_ref()
        except UsageError:  # detached
            head = None
        refs = branches_holding(self.root, (CONFIG_FILE, STATE), besides=head)
        return advice.state_elsewhere(str(self.root), refs, head) if refs else None

    def require_period_kind(self, period: Period) -> None:
        """Refuse a period of another kind than the repository counts (``period`` in jobstate.yaml)."""
        require_kind(period, self.config.period, self.root)

    @property
    def config(self) -> Config:
        """Settings from jobstate.yaml (cached in the catalog by the file's blob ID)."""
        if self._config is None:
            data = self.config_bytes()
            cat = self._read_only_catalog()
            if cat is not None and cat.meta("config_blob") == self.git.blob_sha(data):
                cached = cat.meta("config")
                if cached:
                    self._config = Config.from_json(cached)
            if self._config is None:
                from jobstate.store.config import config_from_text  # noqa: PLC0415 - start-up: no YAML on the retry path

                self._config = config_from_text(data)
        return self._config

    def config_bytes(self) -> bytes:
        """jobstate.yaml as it is in the work tree; empty when there is none (every setting defaults)."""
        try:
            return (self.root / CONFIG_FILE).read_bytes()
        except FileNotFoundError:
            return b""

    @property
    def lock_timeout(self) -> float:
        """Seconds to wait for the lock: argument, then JOBSTATE_LOCK_TIMEOUT, then jobstate.yaml."""
        if self._lock_timeout is not None:
            return _checked_timeout(self._lock_timeout, "--lock-timeout")
        value = env_number(os.environ, "JOBSTATE_LOCK_TIMEOUT")
        return self.config.lock_timeout if value is None else value

    @property
    def remote_timeout(self) -> float:
        """Seconds one git fetch or push may take: remote_timeout in jobstate.yaml, else the lock timeout
        (at least 1 s: a lock timeout of 0 means "do not wait for the lock", not "no time for the network")."""
        return self.config.remote_timeout or max(1.0, self.lock_timeout)

    @property
    def lock_path(self) -> Path:
        """The lock file (host-local)."""
        return self.private / "lock"

    def lock_holder(self) -> dict[str, object] | None:
        """Who holds the lock, or None. Read-only apart from opening the lock file."""
        from jobstate.store.lock import read_holder  # noqa: PLC0415 - start-up: the retry path loads no portalocker

        return read_holder(self.lock_path)

    def ensure_private(self) -> None:
        # self-ignoring, like .pytest_cache: nothing in it can ever be committed
        if not os.path.lexists(self.private / ".gitignore"):  # a dangling symlink is never written through
            self.private.mkdir(exist_ok=True)
            (self.private / ".gitignore").write_text("*\n", encoding="utf-8")

    @property
    def catalog_path(self) -> Path:
        """The derived catalog's file."""
        return self.private / "catalog.sqlite"

    # ----------------------------------------------------------------- catalog
    def read_catalog(self) -> Catalog | None:
        """The catalog if it matches HEAD exactly, for lock-free lookups; else None. Read-only.

        The connection belongs to the store (``close()`` releases it): do not close it.
        """
        cat = self._read_only_catalog()
        if cat is None or cat.meta("head") != (self.git.head_commit() or "") or self.interrupted():
            return None
        return cat

    def retired_in_history(
        self, *, episode_id: str | None = None, key: str | None = None, cat: Catalog | None = None
    ) -> tuple[str, str] | None:
        """(episode ID, tombstone path) of a retirement of the episode (or keeping the key) that a commit of
        HEAD's history had, as this clone saw it: it stands whatever HEAD holds now (a merge that took the
        tombstone away), and a branch that never had it, or a reset that undid it, is not bound. Read-only."""
        cat = cat or self._read_only_catalog()
        found = [] if cat is None else cat.retirements(episode_id=episode_id, key=key)
        head = self.git.head_commit() if found else None  # no git process in the common case
        if head is None:
            return None
        for eid, path, seen in found:
            if seen == head or self.git.is_ancestor(seen, head):
                return eid, path
        return None

    def key_holders(self, key: str) -> list[str]:
        """The episodes of HEAD (as the catalog last saw it) that hold ``key``. Read-only."""
        cat = self.read_catalog()  # HEAD's rows exactly: a stale catalog may hold a copy removed since
        rows = [] if cat is None else cat.by_key(key)
        return sorted({row.episode_id for row in rows if is_episode_id(row.episode_id)})

    def other_first(self, key: str, episode_id: str | None, cat: Catalog | None = None) -> list[str] | None:
        """When ``key`` has had more than one episode ID (one copied or renamed by hand): every ID it had, unless
        ``episode_id`` is provably its first (its first commit precedes every other's in HEAD's history); None
        when the key had one ID, or ``episode_id`` is its first. Which of several ran is never guessed: a
        rewritten history or a fresh clone that saw them at once proves no order. Read-only."""
        cat = cat or self._read_only_catalog()
        seen = [] if cat is None else cat.seen_of_key(key)
        ids = sorted({eid for eid, _commit in seen})
        head = self.git.head_commit() if len(ids) > 1 else None  # no git process in the common case
        if head is None:
            return None
        mine = [c for eid, c in seen if eid == episode_id and (c == head or self.git.is_ancestor(c, head))]
        others = [c for eid, c in seen if eid != episode_id]
        if mine and all(any(m == c or self.git.is_ancestor(m, c) for m in mine) for c in others):
            return None
        return ids

    def open_catalog(self) -> Catalog:
        """The writable catalog connection, as it is (the transaction brings it up to date under the lock)."""
        if self._catalog is None:
            self.ensure_private()
            self._catalog = Catalog.open(self.catalog_path)
        return self._catalog

    def interrupted(self) -> bool:
        """Whether a killed jobstate left work for the next command under the lock."""
        return (self.private / "pending.json").exists() or (self.private / "undo.json").exists()

    def matches_remote_tip(self) -> bool:
        """Whether HEAD is the remote branch's tip as last fetched or pushed (read from files, no network)."""
        remote = self.remote
        if remote is None:
            return True
        if (self.private / REMOTE_UNSURE).exists():
            return False  # a push's answer was lost: what the remote holds is known only after a fetch
        branch = self.git.head_ref().removeprefix("refs/heads/")
        return self.git.head_commit() == self.git.resolve_ref(f"refs/remotes/{remote}/{branch}")

    @property
    def remote(self) -> str | None:
        """The shared Git remote state changes must reach (--remote, $JOBSTATE_REMOTE, jobstate.yaml)."""
        if self._remote is not None:
            return self._remote or None
        return os.environ.get("JOBSTATE_REMOTE") or self.config.remote

    def state_mtime(self) -> str:
        """The mtimes of state/ and of its year directories. A new year or period directory changes one of
        them; jobstate touches the year directory before it creates an episode directory in an existing
        period (undo.put_all), so a killed allocate's directory changes one too, while the cost stays one
        stat per year, not per period, however many episodes there are. What a commit from outside
        changes (a pull, a reset) the catalog's refresh names by period (worktree.uncommitted_episodes),
        and what the mtimes miss an allocation still finds in its own period."""
        digest = hashlib.sha256(str((self.root / STATE).stat().st_mtime_ns).encode())
        for year in _entries(self.root / STATE):
            if is_year_dir(year.name):
                digest.update(f"{year.name}:{year.stat(follow_symlinks=False).st_mtime_ns}".encode())
        return digest.hexdigest()[:32]

    # ----------------------------------------------------------------- reading
    def episode(self, episode_id: str) -> Episode:
        """The committed episode ``episode_id``; EpisodeUnknown if absent. Read-only."""
        from jobstate.store.yamlio import load_file  # noqa: PLC0415 - start-up: no YAML on the retry path

        parse_episode_id(episode_id)
        self.require_initialized()
        path = episode_path(episode_id)
        file = self.root / path
        if not file.is_file():
            if self.git.run("cat-file", "-e", f"HEAD:{path}", check=False).returncode == 0:
                # deleted from the work tree only: allocating again would give another ID
                directory = episode_dir(episode_id)
                raise DirtyState(
                    f"episode {episode_id} is committed but {directory} is missing from the work tree; "
                    f"restore it with: {advice.restore(directory, ' D')}"
                )
            stone = retired_path(episode_id)
            if (self.root / stone).is_file():  # not "allocate it first": its ID and key are used for ever
                raise EpisodeUnknown(
                    f"episode {episode_id} was retired ({stone}): nothing more is paid for it or decided on it"
                )
            remote = self.remote
            if remote is not None:
                # another host may have allocated it: advising a new allocation would invite a duplicate run
                raise EpisodeUnknown(
                    f"episode {episode_id} is not in this clone, which may be behind {remote}: another host may "
                    f"have allocated it; fetch it (git pull {remote}) and look again before allocating anything"
                )
            raise EpisodeUnknown(
                f"episode {episode_id} does not exist in {self.root / STATE}; allocate it first with: "
                "jobstate allocate --key KEY --date YYYY-MM-DD"
            )
        return episode_from_yaml_dict(load_file(file, path), path, episode_id)

    def episodes(self, period_id: str | None = None) -> list[Episode]:
        """Every episode in the work tree's state/ (optionally one period), in order. Read-only."""
        from jobstate.store.yamlio import load_file  # noqa: PLC0415 - start-up: no YAML on the retry path

        self.require_initialized()
        out = []
        for rel, entry in walk_state(self.root, None if period_id is None else [period_id]):
            if entry.name.startswith(".") or not entry.is_dir(follow_symlinks=False):
                continue
            found = episode_of(rel)
            name = found[0] if found is not None and found[1] == "" else None
            if period_id is not None and (name is None or not name.startswith(period_id + "-")):
                continue
            path = f"{rel}/{EPISODE_FILE}"
            if name is None or not (self.root / path).is_file():
                tracked = self.git.run("ls-files", "-z", "--", rel).stdout
                raise (StateInvalid if tracked else DirtyState)(
                    f"{rel} is not an episode (it has no {EPISODE_FILE}): state/ holds only "
                    "episode directories (state/<year>/<period>/<id>/); move it out of state/"
                )
            ep = episode_from_yaml_dict(load_file(self.root / path, path), path, name)
            if period_id is None or ep.period_id == period_id:
                out.append(ep)
        out.sort(key=lambda e: (e.period_id, e.sequence))
        return out


def _checked_timeout(value: float, name: str) -> float:
    if not math.isfinite(value) or not 0 <= value <= 86400:
        raise UsageError(f"{name} {value} is not a number of seconds between 0 and 86400")
    return value


def repo_path(path: str | os.PathLike[str] | None) -> Path:
    """``path``, else ``$JOBSTATE_REPO``, else the current directory; it must exist."""
    start = Path(path) if path is not None else Path(os.environ.get("JOBSTATE_REPO") or ".")
    if not start.exists():
        raise UsageError(f"repository path {start} does not exist")
    return start


def open_store(
    path: str | os.PathLike[str] | None = None,
    *,
    now: Callable[[], datetime] = utc_now,
    lock_timeout: float | None = None,
    remote: str | None = None,
) -> Store:
    """The store containing ``path``, ``$JOBSTATE_REPO`` or the current directory."""
    if remote is not None and not remote.strip():
        raise UsageError("--remote needs the name of a git remote, e.g. --remote origin")
    return Store(find_root(repo_path(path)), now=now, lock_timeout=lock_timeout, remote=remote)


class StoreOptions(NamedTuple):
    """Where the store is and how to work with it, as the command line gives it."""

    repo: str | None = None
    lock_timeout: float | None = None
    remote: str | None = None
    now: Callable[[], datetime] = utc_now  # tests and replays pass their own clock

    def open(self, *, settings: bool = True) -> Store:
        """The store these options name; with ``settings``, jobstate.yaml is read (and checked) at once,
        so that every command refuses a malformed one the same way (exit 7)."""
        store = open_store(self.repo, now=self.now, lock_timeout=self.lock_timeout, remote=self.remote)
        if settings:
            try:
                _ = store.config
            except BaseException:
                store.close()
                raise
        return store


def walk_state(root: Path, periods: Collection[str] | None = None) -> Iterator[tuple[str, os.DirEntry[str]]]:
    """Every entry of state/ as (repository path, entry), in name order, looking into year and period
    directories rather than yielding them: an episode directory (``state/<year>/<period>/<id>``), or
    anything else found on the way (a file or stray directory at any level, a legacy or flat name).
    ``periods``: only those periods' directories, walked the same way (a link or a file where one of
    them or its year goes is yielded, never followed)."""
    wanted = None if periods is None else {period_dir(p) for p in periods}
    years = None if wanted is None else {w.split("/")[1] for w in wanted}
    for top in _entries(root / STATE):
        if years is not None and top.name not in years:
            continue
        if not (is_year_dir(top.name) and top.is_dir(follow_symlinks=False)):
            yield f"{STATE}/{top.name}", top
            continue
        for period in _entries(Path(top.path)):
            rel = f"{STATE}/{top.name}/{period.name}"
            if wanted is not None and rel not in wanted:
                continue
            if is_period_dir(top.name, period.name) and period.is_dir(follow_symlinks=False):
                yield from ((f"{rel}/{e.name}", e) for e in _entries(Path(period.path)))
            else:
                yield rel, period


def _entries(directory: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(directory) as it:
            return sorted(it, key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return []
