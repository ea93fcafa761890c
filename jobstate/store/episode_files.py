"""The record files of one episode: read from the work tree, written back as one StateChange."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from jobstate.core.approvals import Decision, approvals_from_yaml_dict
from jobstate.core.artifacts import Artifact, artifacts_from_yaml_dict
from jobstate.core.attempts import Steps, submissions_from_yaml_dict, submissions_to_yaml_dict
from jobstate.core.costs import CostEntry, costs_from_yaml_dict
from jobstate.core.layout import APPROVAL, ARTIFACTS, COSTS, SUBMISSIONS, history_path, record_path
from jobstate.core.model import episode_change
from jobstate.errors import ModelRefused
from jobstate.store.store import Store
from jobstate.store.transaction import StateChange
from jobstate.store.yamlio import dumps, load_file, loads

T = TypeVar("T")


def submissions(store: Store, episode_id: str) -> Steps:
    """Attempts per step, from submissions.yaml (a malformed one is StateInvalid, exit 7). Read-only."""
    rel = record_path(episode_id, SUBMISSIONS)
    path = store.path(rel)
    if not path.exists():
        return {}
    return submissions_from_yaml_dict(load_file(path, rel), rel)


def cost_entries(store: Store, episode_id: str) -> list[CostEntry]:
    """The cost ledger of an episode, oldest first. Read-only."""
    rel = record_path(episode_id, COSTS)
    path = store.path(rel)
    return costs_from_yaml_dict(load_file(path, rel), rel) if path.exists() else []


def artifacts(store: Store, episode_id: str) -> dict[str, Artifact]:
    """Recorded artifacts by path relative to the episode directory. Read-only."""
    rel = record_path(episode_id, ARTIFACTS)
    path = store.path(rel)
    return artifacts_from_yaml_dict(load_file(path, rel), rel) if path.exists() else {}


def approval_file(store: Store, episode_id: str) -> tuple[list[Decision], dict[str, Any]]:
    """The review decisions, oldest first, and the file as read (empty when absent). Read-only."""
    rel = record_path(episode_id, APPROVAL)
    path = store.path(rel)
    if not path.exists():
        return [], {}
    data = load_file(path, rel)
    return approvals_from_yaml_dict(data, rel), data


def approval(store: Store, episode_id: str) -> Decision | None:
    """The latest review decision, or None. Read-only."""
    found, _data = approval_file(store, episode_id)
    return found[-1] if found else None


@dataclass
class _Records:
    """One episode's records as the lifecycle model reads them (core.model.Records)."""

    episode_id: str
    allocation_key: str | None = None
    allocated_at: str | None = None
    steps: Steps = field(default_factory=dict)
    costs: list[CostEntry] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)
    artifacts: dict[str, Artifact] = field(default_factory=dict)
    history: dict[str, Any] | None = None
    blobs: dict[str, str] = field(default_factory=dict)
    legacy_approval: bool = False

    @property
    def completed_at(self) -> str | None:
        return None if self.history is None else str(self.history.get("completed_at"))


def _records(store: Store, episode_id: str) -> _Records:
    """The episode's records as committed (the guard has checked the work tree is)."""
    history = store.path(history_path(episode_id))
    return _Records(
        episode_id,
        steps=submissions(store, episode_id),
        costs=cost_entries(store, episode_id),
        decisions=approval_file(store, episode_id)[0],
        artifacts=artifacts(store, episode_id),
        history=load_file(history, history_path(episode_id)) if history.exists() else None,
    )


def _check_model(store: Store, episode_id: str, files: dict[str, bytes | None]) -> None:
    """Every change a command writes goes through the lifecycle model first: what it refuses, no
    command writes (and verify and diff flag, through the same functions)."""
    old = _records(store, episode_id)
    new = replace(old, steps=dict(old.steps), decisions=list(old.decisions))
    for rel, data in files.items():
        if data is None:
            continue
        if rel == record_path(episode_id, SUBMISSIONS):
            new.steps = submissions_from_yaml_dict(loads(data, rel), rel)
        elif rel == record_path(episode_id, COSTS):
            new.costs = costs_from_yaml_dict(loads(data, rel), rel)
        elif rel == record_path(episode_id, APPROVAL):
            new.decisions = approvals_from_yaml_dict(loads(data, rel), rel)
        elif rel == record_path(episode_id, ARTIFACTS):
            new.artifacts = artifacts_from_yaml_dict(loads(data, rel), rel)
        elif rel == history_path(episode_id):
            new.history = loads(data, rel)
    refused = episode_change(old, new)
    if refused:
        first = refused[0]
        raise ModelRefused(f"{first.kind}: {first.message}; jobstate does not write this, nothing was written")


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
    files: dict[str, bytes | None] = {}
    for name, data in records.items():
        files[name if "/" in name else record_path(episode_id, name)] = dumps(data)
    if files:
        _check_model(store, episode_id, files)
    return StateChange(result, files, message)


def submissions_change(store: Store, episode_id: str, steps: Steps, message: str, result: T) -> StateChange[T]:
    """A change that writes the episode's submissions.yaml with ``steps``."""
    return record_change(store, episode_id, {SUBMISSIONS: submissions_to_yaml_dict(steps)}, message, result=result)
