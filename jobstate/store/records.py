"""An episode's records: read by the one reader from any snapshot (the work tree, a Git revision, or a
change about to be written over the work tree, ``Overlay``), and written back as one StateChange that
the lifecycle model has checked first."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from decimal import Decimal
from typing import Any, TypeVar

from jobstate.core.approvals import Decision, approvals_from_yaml_dict
from jobstate.core.artifacts import Artifact
from jobstate.core.attempts import Steps, submissions_to_yaml_dict
from jobstate.core.budget import (
    Acknowledgement,
    Budget,
    Usage,
    acknowledgements_from_yaml_dict,
    episode_periods,
    spent_and_held,
)
from jobstate.core.costs import CostEntry
from jobstate.core.episode_records import EpisodeRecords, Problems, fill, new_records
from jobstate.core.layout import (
    APPROVAL,
    ARTIFACTS,
    COSTS,
    EPISODE_FILE,
    HISTORY,
    SUBMISSIONS,
    episode_dir,
    episode_of,
    episode_path,
    history_path,
    record_path,
    retired_path,
)
from jobstate.core.model import episode_change
from jobstate.errors import ModelRefused, StateInvalid, UsageError
from jobstate.git.loose import Content, StoredBlob
from jobstate.store.snapshot import Snapshot, WorkTree
from jobstate.store.store import Store, walk_state
from jobstate.store.transaction import StateChange
from jobstate.store.yamlio import dumps, load_file, loads

# episode.yaml first: the legacy fields it carries come before the record files; history last
_LEAVES = (EPISODE_FILE, SUBMISSIONS, COSTS, APPROVAL, ARTIFACTS)


def record_paths(name: str) -> list[tuple[str, str]]:
    """(path, leaf) of every file ``fill`` reads for the episode ``name``, in reading order."""
    base = episode_dir(name)
    return [(f"{base}/{leaf}", leaf) for leaf in _LEAVES] + [(history_path(name), HISTORY)]


def read_episode(
    snap: Snapshot, name: str, *, present: Collection[str] | None = None, problems: Problems | None = None
) -> EpisodeRecords:
    """The records of episode ``name`` in ``snap``; a file that is not there is an empty record.

    ``present``: the snapshot's files, when listed already (nothing else is tried). Without
    ``problems`` anything malformed is StateInvalid (exit 7); with it (reviews), each unreadable file
    or malformed part is described there and left out. This is a read-only operation.
    """
    records = new_records(name)
    if records is None:
        raise UsageError(f"{name!r} is not an episode ID")
    found: Problems = []
    for path, leaf in record_paths(name):
        if present is not None and path not in present:
            continue
        try:
            try:
                data = snap.read(path)
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise StateInvalid(f"{path}: cannot read: {exc.strerror}") from None
            fill(records, leaf, loads(data, path), path, found)
        except StateInvalid as exc:
            found.append((path, str(exc).removeprefix(f"{path}: ")))
            if problems is None:
                break
    if problems is None and found:
        raise StateInvalid(f"{found[0][0]}: {found[0][1]}")
    if problems is not None:
        problems += found
    return records


class Overlay(Snapshot):
    """A snapshot with some files replaced (None: removed): what a change would make of it."""

    def __init__(self, base: Snapshot, files: Mapping[str, bytes | None]) -> None:
        self.base, self.changed = base, files
        self.label = f"{base.label} with the change"

    def read(self, path: str) -> bytes:
        if path in self.changed:
            data = self.changed[path]
            if data is None:
                raise FileNotFoundError(path)
            return data
        return self.base.read(path)


T = TypeVar("T")


def episode_records(store: Store, episode_id: str) -> EpisodeRecords:
    """Everything the episode records in the work tree, legacy fields included (the guard has checked the
    work tree is as committed). Read-only."""
    return read_episode(WorkTree(store.root), episode_id)


def _file(store: Store, episode_id: str, leaf: str) -> EpisodeRecords:
    # one record file as it is, through the same reader: what a writer appends to and writes back
    return read_episode(WorkTree(store.root), episode_id, present={record_path(episode_id, leaf)})


def submissions(store: Store, episode_id: str) -> Steps:
    """Attempts per step, from submissions.yaml (a malformed one is StateInvalid, exit 7). Read-only."""
    return _file(store, episode_id, SUBMISSIONS).steps


def cost_entries(store: Store, episode_id: str) -> list[CostEntry]:
    """The entries of costs.yaml, oldest first (a legacy episode.yaml's are in ``records``). Read-only."""
    return _file(store, episode_id, COSTS).costs


def artifacts(store: Store, episode_id: str) -> dict[str, Artifact]:
    """artifacts.yaml, by path relative to the episode directory. Read-only."""
    return _file(store, episode_id, ARTIFACTS).artifacts


def approval_file(store: Store, episode_id: str) -> tuple[list[Decision], dict[str, Any]]:
    """The decisions of approval.yaml, oldest first, and the file as read (empty when absent). Read-only."""
    rel = record_path(episode_id, APPROVAL)
    path = store.path(rel)
    if not path.exists():
        return [], {}
    data = load_file(path, rel)
    return approvals_from_yaml_dict(data, rel), data


def approval(store: Store, episode_id: str) -> Decision | None:
    """The latest review decision (a legacy episode.yaml's included), or None. Read-only."""
    return episode_records(store, episode_id).approval


def _touched(files: Mapping[str, object]) -> set[str]:
    # the episodes a change writes: their directories and history files (a tombstone is no record)
    return {found[0] for found in map(episode_of, files) if found is not None}


def check_change(store: Store, change: Mapping[str, Content | None]) -> None:
    """Every change a command writes goes through the lifecycle model first: what it refuses, no
    command writes (and verify and diff flag, through the same functions). Each episode the change
    touches is read before and after it by the one reader; an episode retired with its tombstone
    is removal's business, not a change of its records. A blob (an artifact streamed into the object
    store) is no record: the model reads records, and artifacts through artifacts.yaml."""
    files = {rel: data for rel, data in change.items() if not isinstance(data, StoredBlob)}
    work_tree = WorkTree(store.root)
    after = Overlay(work_tree, files)
    for episode_id in sorted(_touched(files)):
        if new_records(episode_id) is None:
            continue  # not an episode name: verify's business
        if files.get(episode_path(episode_id), b"") is None and files.get(retired_path(episode_id)) is not None:
            continue
        refused = episode_change(read_episode(work_tree, episode_id), read_episode(after, episode_id))
        if refused:
            first = refused[0]
            raise ModelRefused(f"{first.kind}: {first.message}; jobstate does not write this, nothing was written")


def checked(store: Store, change: StateChange[T]) -> StateChange[T]:
    """``change``, once the lifecycle model has accepted it (ModelRefused, exit 4, otherwise)."""
    if change.files:
        check_change(store, change.files)
    return change


def record_change(
    store: Store,
    episode_id: str,
    records: dict[str, Any],
    message: str,
    *,
    result: T = None,  # type: ignore[assignment]
) -> StateChange[T]:
    """A change that writes YAML records (a name in the episode directory, or a repository path).
    The lifecycle model checks it first (ModelRefused, exit 4)."""
    files: dict[str, Content | None] = {}
    for name, data in records.items():
        files[name if "/" in name else record_path(episode_id, name)] = dumps(data)
    return checked(store, StateChange(result, files, message))


def submissions_change(store: Store, episode_id: str, steps: Steps, message: str, result: T) -> StateChange[T]:
    """A change that writes the episode's submissions.yaml with ``steps``."""
    return record_change(store, episode_id, {SUBMISSIONS: submissions_to_yaml_dict(steps)}, message, result=result)


def _episodes_in(store: Store, period_ids: list[str]) -> list[str]:
    found = []
    for rel, entry in walk_state(store.root, period_ids):
        described = episode_of(rel)
        if described is not None and described[1] == "" and entry.is_dir(follow_symlinks=False):
            found.append(described[0])
    return sorted(found)


def read_acknowledgements(text: bytes, source: str) -> list[Acknowledgement]:
    """The budget overruns people acknowledged, from the file's bytes (StateInvalid when malformed)."""
    return acknowledgements_from_yaml_dict(loads(text, source), source)


def budget_usage(store: Store, budget: Budget, period_id: str) -> dict[str, Usage]:
    """Cap, spent and reserved per currency of one budget period, from the work tree's records. Under the
    lock (a paid step's intent) the input of the budget decision; outside it (``jobstate budget``) a view.
    Read-only."""
    episodes = []
    for eid in _episodes_in(store, episode_periods(period_id, store.config.period)):
        found = episode_records(store, eid)
        episodes.append((found.period_id, found.costs, found.steps))
    used = {currency: use for (_period, currency), use in spent_and_held(episodes, budget.per).items()}
    return {
        c: Usage(
            period_id,
            c,
            Decimal(budget.limits[c]) if c in budget.limits else Decimal(0),
            *used.get(c, (Decimal(0), Decimal(0))),
        )
        for c in sorted(set(budget.limits) | set(used))
    }
