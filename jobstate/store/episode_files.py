"""The record files of one episode: read from the work tree, written back as one StateChange."""

from __future__ import annotations

from typing import Any, TypeVar

from jobstate.core.approvals import Decision, approvals_from_yaml_dict
from jobstate.core.artifacts import Artifact, artifacts_from_yaml_dict
from jobstate.core.attempts import Steps, submissions_from_yaml_dict, submissions_to_yaml_dict
from jobstate.core.costs import CostEntry, costs_from_yaml_dict
from jobstate.core.layout import APPROVAL, ARTIFACTS, COSTS, SUBMISSIONS, record_path
from jobstate.store.store import Store
from jobstate.store.transaction import StateChange
from jobstate.store.yamlio import dumps, load_file

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


def record_change(
    store: Store,
    episode_id: str,
    records: dict[str, Any],
    message: str,
    *,
    result: T = None,  # type: ignore[assignment]
    extra: tuple[str, ...] = (),
) -> StateChange[T]:
    """A change that writes YAML records (a name in the episode directory, or a repository path)
    and commits them with ``extra`` work-tree files (artifacts) as they are."""
    files: dict[str, bytes | None] = {}
    for name, data in records.items():
        files[name if "/" in name else record_path(episode_id, name)] = dumps(data)
    for rel in extra:
        files[rel] = store.path(rel).read_bytes()
    return StateChange(result, files, message)


def submissions_change(store: Store, episode_id: str, steps: Steps, message: str, result: T) -> StateChange[T]:
    """A change that writes the episode's submissions.yaml with ``steps``."""
    return record_change(store, episode_id, {SUBMISSIONS: submissions_to_yaml_dict(steps)}, message, result=result)
