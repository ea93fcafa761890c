"""The state repository: paths, settings, the lock, the derived catalog, and reads.

Every state change goes through ``Store.transact()`` (see jobstate.commits):
the lock is taken, an interrupted earlier change is repaired, the remote (if
any) is fetched, the catalog is brought up to date with HEAD, and only then
does the caller read, decide and commit.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from jobstate.catalog import Catalog, Row
from jobstate.config import CONFIG_FILE, Config
from jobstate.errors import EpisodeUnknown, StateInvalid, UsageError
from jobstate.gitrepo import GitRepo, blob_sha, find_root
from jobstate.periods import parse_episode_id

if TYPE_CHECKING:
    from jobstate.commits import Change
    from jobstate.paid import PaidStep
    from jobstate.records import Episode

T = TypeVar("T")

STATE = "state"
HISTORY = "history"
EPISODE_FILE = "episode.yaml"
PRIVATE = ".jobstate"


def episode_path(episode_id: str) -> str:
    """``state/<id>/episode.yaml``."""
    return f"{STATE}/{episode_id}/{EPISODE_FILE}"


def describes_episode(path: str) -> str | None:
    """The episode ID a committed path describes, if it is an episode or history file."""
    parts = path.split("/")
    if len(parts) == 3 and parts[0] == STATE and parts[2] == EPISODE_FILE:
        return parts[1]
    if len(parts) == 2 and parts[0] == HISTORY and parts[1].endswith(".yaml"):
        return parts[1][:-5]
    return None


def utc_now() -> datetime:
    """The real clock (tests pass their own ``now``)."""
    return datetime.now(UTC)


def format_time(moment: datetime) -> str:
    """UTC, ISO 8601, seconds: ``2026-08-07T10:00:00Z``."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


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
        self._lock_timeout = lock_timeout
        self._remote = remote
        self._config: Config | None = None
        self._catalog: Catalog | None = None
        self._readonly: Catalog | None = None
        self._readonly_ino: int | None = None

    # ------------------------------------------------------------------ basics
    def close(self) -> None:
        """Release the catalog connections."""
        for cat in (self._catalog, self._readonly):
            if cat is not None:
                cat.close()
        self._catalog = self._readonly = None

    def _read_only_catalog(self) -> Catalog | None:
        # one read-only connection serves both the config lookup and the lock-free retry;
        # a catalog rebuilt since (a new file) is opened afresh
        try:
            ino = self._catalog_path.stat().st_ino
        except OSError:
            ino = None
        if self._readonly is not None and self._readonly_ino != ino:
            self._readonly.close()
            self._readonly = None
        if self._readonly is None and ino is not None:
            self._readonly = Catalog.open_readonly(self._catalog_path)
            self._readonly_ino = ino
        return self._readonly

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def path(self, relative: str) -> Path:
        """Absolute path of a repository-relative path."""
        return self.root / relative

    def require_initialized(self) -> None:
        """Refuse to work in a repository that ``jobstate init`` has not set up."""
        if not (self.root / STATE).is_dir():
            raise UsageError(f"{self.root} has no state/ directory: run jobstate init there first")

    @property
    def config(self) -> Config:
        """Settings from jobstate.yaml (cached in the catalog by the file's blob ID)."""
        if self._config is None:
            try:
                data = (self.root / CONFIG_FILE).read_bytes()
            except FileNotFoundError:
                data = b""
            cat = self._read_only_catalog()
            if cat is not None and cat.meta("config_blob") == blob_sha(data):
                cached = cat.meta("config")
                if cached:
                    self._config = Config.from_json(cached)
            if self._config is None:
                from jobstate.config import config_from_yaml_dict  # noqa: PLC0415
                from jobstate.yamlio import loads  # noqa: PLC0415

                self._config = config_from_yaml_dict(loads(data, CONFIG_FILE) if data else None)
        return self._config

    @property
    def lock_timeout(self) -> float:
        """Seconds to wait for the lock: argument, then JOBSTATE_LOCK_TIMEOUT, then jobstate.yaml."""
        if self._lock_timeout is not None:
            return _checked_timeout(self._lock_timeout, "--lock-timeout")
        env = os.environ.get("JOBSTATE_LOCK_TIMEOUT")
        if env:
            try:
                value = float(env)
            except ValueError:
                raise UsageError(f"JOBSTATE_LOCK_TIMEOUT={env!r} is not a number of seconds") from None
            return _checked_timeout(value, "JOBSTATE_LOCK_TIMEOUT")
        return self.config.lock_timeout

    @property
    def _catalog_path(self) -> Path:
        return self.private / "catalog.sqlite"

    @property
    def lock_path(self) -> Path:
        """The lock file (host-local)."""
        return self.private / "lock"

    def lock_holder(self) -> dict[str, object] | None:
        """Who holds the lock, or None. Read-only apart from opening the lock file."""
        from jobstate.lock import read_holder  # noqa: PLC0415

        return read_holder(self.lock_path)

    def ensure_private(self) -> None:
        # self-ignoring, like .pytest_cache: nothing in it can ever be committed
        if not (self.private / ".gitignore").exists():
            self.private.mkdir(exist_ok=True)
            (self.private / ".gitignore").write_text("*\n", encoding="utf-8")

    # ----------------------------------------------------------------- catalog
    def read_catalog(self) -> Catalog | None:
        """The catalog if it matches HEAD exactly, for lock-free lookups; else None. Read-only.

        The connection belongs to the store (``close()`` releases it): do not close it.
        """
        cat = self._read_only_catalog()
        if cat is None or cat.meta("head") != (self.git.head_commit() or "") or self.interrupted():
            return None
        return cat

    def catalog(self) -> Catalog:
        """The catalog, brought up to date with HEAD (call under the lock)."""
        if self._catalog is None:
            self.ensure_private()
            self._catalog = Catalog.open(self._catalog_path)
        cat = self._catalog
        head = self.git.head_commit()
        known = cat.meta("head") or None
        if known != head:
            self._refresh(cat, known, head)
        if cat.meta("config_blob") is None:
            try:
                data = (self.root / CONFIG_FILE).read_bytes()
            except FileNotFoundError:
                data = b""
            cat.update(head=head, add=[], remove=[], config_blob=blob_sha(data), config=self.config.to_json())
        return cat

    def _refresh(self, cat: Catalog, known: str | None, head: str | None) -> None:
        if head is None:
            cat.update(head=None, add=[], remove=[], replace_all=True)
            return
        changed = self.git.diff_names(known, head, STATE, HISTORY) if known else None
        if changed is None:
            entries = self.git.ls_tree(head, STATE, HISTORY)
            replace_all = True
        else:
            relevant = [p for p in changed if describes_episode(p)]
            if len(relevant) > 1000:  # one listing, not a command line longer than the system allows
                wanted = set(relevant)
                entries = [e for e in self.git.ls_tree(head, STATE, HISTORY) if e[2] in wanted]
            else:
                entries = self.git.ls_tree(head, *relevant) if relevant else []
            replace_all = False
        add = self.rows_from_blobs([(sha, path) for _mode, sha, path in entries if describes_episode(path)])
        remove = [] if changed is None else [p for p in changed if describes_episode(p)]
        cat.update(head=head, add=add, remove=remove, replace_all=replace_all)

    def rows_from_blobs(self, blobs: list[tuple[str, str]]) -> list[Row]:
        """Catalog rows for committed files (blob ID, path), read from the work tree when it matches."""
        from jobstate.records import episode_from_yaml_dict, history_from_yaml_dict  # noqa: PLC0415
        from jobstate.yamlio import loads  # noqa: PLC0415

        rows: list[Row] = []
        missing: list[tuple[str, str]] = []
        datas: dict[str, bytes] = {}
        for sha, path in blobs:
            try:
                data = (self.root / path).read_bytes()
            except OSError:
                data = None
            if data is not None and blob_sha(data) == sha:
                datas[path] = data
            else:
                missing.append((sha, path))
        if missing:
            with self.git.object_reader() as read:
                for sha, path in missing:
                    datas[path] = read(sha)[1]
        for sha, path in blobs:
            name = describes_episode(path)
            assert name is not None
            data = loads(datas[path], path)
            if path.startswith(HISTORY):
                rec = history_from_yaml_dict(data, path, name)
                key = rec.allocation_key or ""  # a migrated history file names only its episode
                rows.append(Row(path, rec.episode_id, rec.period_id, rec.sequence, key, sha))
            else:
                ep = episode_from_yaml_dict(data, path, name)
                rows.append(Row(path, ep.episode_id, ep.period_id, ep.sequence, ep.allocation_key, sha))
        return rows

    # ---------------------------------------------------------------- mutation
    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the lock, after finishing whatever an interrupted change left undone."""
        from jobstate.commits import finish_pending  # noqa: PLC0415
        from jobstate.lock import FileLock  # noqa: PLC0415

        self.require_initialized()
        self.ensure_private()
        with FileLock(self.lock_path, self.lock_timeout):
            finish_pending(self)
            yield

    @contextmanager
    def mutation(self, *, trust_remote_tip: bool = False) -> Iterator[Catalog]:
        """Hold the lock for a whole read-decide-write-commit; yields the catalog, fresh from HEAD.

        ``trust_remote_tip``: see jobstate.commits.sync_remote.
        """
        from jobstate.commits import sync_remote  # noqa: PLC0415

        with self.locked():
            sync_remote(self, trust_remote_tip=trust_remote_tip)
            yield self.catalog()

    def interrupted(self) -> bool:
        """Whether a killed jobstate left work for the next command under the lock."""
        return (self.private / "pending.json").exists() or (self.private / "undo.json").exists()

    def matches_remote_tip(self) -> bool:
        """Whether HEAD is the remote branch's tip as last fetched or pushed (read from files, no network)."""
        remote = self.remote
        if remote is None:
            return True
        branch = self.git.head_ref().removeprefix("refs/heads/")
        return self.git.head_commit() == self.git.resolve_ref(f"refs/remotes/{remote}/{branch}")

    def sync(self) -> None:
        """With a remote: under the lock, bring the branch and work tree to the remote's tip."""
        from jobstate.commits import sync_remote  # noqa: PLC0415

        with self.locked():
            sync_remote(self)

    def transact(self, decide: Callable[[Catalog], Change[T]]) -> T:
        """Run ``decide`` on the freshest state under the lock and commit what it returns.

        See jobstate.commits.transact.
        """
        from jobstate.commits import transact  # noqa: PLC0415

        return transact(self, decide)

    @property
    def remote(self) -> str | None:
        """The shared Git remote state changes must reach (--remote, $JOBSTATE_REMOTE, jobstate.yaml)."""
        if self._remote is not None:
            return self._remote or None
        return os.environ.get("JOBSTATE_REMOTE") or self.config.remote

    def state_mtime(self, head: str | None) -> str:
        """state/'s mtime, valid only for the commit it was seen with (a reset changes what is committed)."""
        return f"{head or ''}:{(self.root / STATE).stat().st_mtime_ns}"

    def uncommitted_episodes(self, cat: Catalog) -> list[Episode]:
        """Episodes written to state/ but never committed (a killed allocate); call under the lock.

        Anything else in state/ that Git does not know is an error: jobstate
        never commits files it did not write.
        """
        from jobstate.records import episode_from_yaml_dict  # noqa: PLC0415
        from jobstate.yamlio import load_file  # noqa: PLC0415

        if cat.meta("state_mtime") == self.state_mtime(cat.meta("head")):
            return []
        known = cat.state_ids()
        present = set()
        found: list[Episode] = []
        with os.scandir(self.root / STATE) as it:
            entries = list(it)
        for entry in entries:
            if entry.name.startswith("."):
                continue
            present.add(entry.name)
            if entry.name in known:
                continue
            rel = f"{STATE}/{entry.name}"
            if not entry.is_dir(follow_symlinks=False):
                raise StateInvalid(f"{rel}: state/ holds only episode directories; move this file away")
            files = os.listdir(entry.path)
            if EPISODE_FILE not in files:
                if all(f.startswith(".tmp-") for f in files):
                    # a killed atomic write: the episode never existed
                    import shutil  # noqa: PLC0415

                    shutil.rmtree(entry.path)
                    continue
                raise StateInvalid(f"{rel}: directory has no {EPISODE_FILE}; remove it or restore the file")
            path = episode_path(entry.name)
            found.append(episode_from_yaml_dict(load_file(self.root / path, path), path, entry.name))
        gone = sorted(known - present)
        if gone:
            raise UsageError(
                f"{STATE}/{gone[0]} is committed but missing from the work tree; restore it with: "
                f"git checkout -- {STATE}/{gone[0]}"
            )
        if not found:
            cat.update(head=cat.meta("head"), add=[], remove=[], state_mtime=self.state_mtime(cat.meta("head")))
        return found

    def check_clean(self, row: Row) -> bytes:
        """The bytes of a committed file, refusing when the work tree differs from the commit."""
        try:
            data = (self.root / row.path).read_bytes()
        except FileNotFoundError:
            raise UsageError(
                f"{row.path} is committed but missing from the work tree; restore it with: git checkout -- {row.path}"
            ) from None
        if blob_sha(data) != row.blob:
            raise UsageError(
                f"{row.path} has uncommitted changes; commit them or restore the file with: git checkout -- {row.path}"
            )
        return data

    def paid_step(self, episode_id: str, step: str) -> AbstractContextManager[PaidStep]:
        """``with store.paid_step(id, step) as step:`` (see jobstate.paid.paid_step)."""
        from jobstate.paid import paid_step  # noqa: PLC0415

        return paid_step(self, episode_id, step)

    # ----------------------------------------------------------------- reading
    def episode(self, episode_id: str) -> Episode:
        """The committed episode ``episode_id``; EpisodeUnknown if absent. Read-only."""
        from jobstate.records import episode_from_yaml_dict  # noqa: PLC0415
        from jobstate.yamlio import load_file  # noqa: PLC0415

        parse_episode_id(episode_id)
        path = episode_path(episode_id)
        file = self.root / path
        if not file.is_file():
            raise EpisodeUnknown(
                f"episode {episode_id} does not exist in {self.root / STATE}; allocate it first with: "
                "jobstate allocate --key KEY --date YYYY-MM-DD"
            )
        return episode_from_yaml_dict(load_file(file, path), path, episode_id)

    def episodes(self, period_id: str | None = None) -> list[Episode]:
        """Every episode in the work tree's state/ (optionally one period), in order. Read-only."""
        from jobstate.records import episode_from_yaml_dict  # noqa: PLC0415
        from jobstate.yamlio import load_file  # noqa: PLC0415

        self.require_initialized()
        out = []
        with os.scandir(self.root / STATE) as it:
            entries = sorted(it, key=lambda e: e.name)
        for entry in entries:
            if entry.name.startswith(".") or not entry.is_dir(follow_symlinks=False):
                continue
            if period_id is not None and not entry.name.startswith(period_id + "-"):
                continue
            path = episode_path(entry.name)
            ep = episode_from_yaml_dict(load_file(self.root / path, path), path, entry.name)
            if period_id is None or ep.period_id == period_id:
                out.append(ep)
        out.sort(key=lambda e: (e.period_id, e.sequence))
        return out


def _checked_timeout(value: float, name: str) -> float:
    if not math.isfinite(value) or not 0 <= value <= 86400:
        raise UsageError(f"{name} {value} is not a number of seconds between 0 and 86400")
    return value


def open_store(path: str | os.PathLike[str] | None = None, **kwargs: object) -> Store:
    """The store containing ``path``, ``$JOBSTATE_REPO`` or the current directory."""
    start = Path(path) if path is not None else Path(os.environ.get("JOBSTATE_REPO") or ".")
    if not start.exists():
        raise UsageError(f"repository path {start} does not exist")
    return Store(find_root(start), **kwargs)  # type: ignore[arg-type]
