"""What one episode records at one snapshot (the work tree, the index or a commit), as one value, and
the one normaliser of its files, legacy layout included. Pure: loaded YAML in, records out.

The writers, show, list, report, verify and diff all read an episode into ``EpisodeRecords`` through
``fill``, so a field is parsed once and a legacy episode.yaml (costs, approval, artifacts, remote
tasks, completion kept there byte for byte by a migration) counts the same for every command.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from jobstate.core.approvals import Decision, approvals_from_yaml_dict, legacy_decision
from jobstate.core.artifacts import Artifact, artifact_map, artifacts_from_yaml_dict
from jobstate.core.attempts import Attempt, Steps, submissions_from_yaml_dict
from jobstate.core.clock import time_text
from jobstate.core.costs import CostEntry, cost_list, costs_from_yaml_dict
from jobstate.core.layout import APPROVAL, ARTIFACTS, COSTS, EPISODE_FILE, HISTORY, SUBMISSIONS
from jobstate.core.periods import parse_episode_id, parse_period
from jobstate.core.records import AttemptState, Episode, episode_from_yaml_dict
from jobstate.core.status import episode_status
from jobstate.errors import StateInvalid, UsageError

T = TypeVar("T")

# (path, message): a malformed part of a record, left out of the value; verify reports it
Problems = list[tuple[str, str]]

# The legacy layout, field by field: what this normaliser reads (docs/review-and-ci.md#the-legacy-layout).
# A migration keeps every other field as text, and nothing ever reads it: migrate --check lists them.
LEGACY_EPISODE_FIELDS = ("week", "remote_tasks", "approval", "costs", "completed_at", "artifacts")
LEGACY_HISTORY_FIELDS = ("week", "completed_at", "artifacts", "approval", "remote_refs", "cost_totals")
LEGACY_COST_FIELDS = ("step", "amount", "currency", "remote_ref")
LEGACY_APPROVAL_FIELDS = ("status", "by", "at", "reason")


def legacy_fields_not_read(data: Any, *, history: bool) -> list[str]:
    """The fields of a loaded legacy episode.yaml (or history file) that no command reads:
    ``notes``, ``costs[1].vendor``, ``approval.comment``."""
    if not isinstance(data, dict):
        return []
    known = LEGACY_HISTORY_FIELDS if history else LEGACY_EPISODE_FIELDS
    out = [str(name) for name in data if name not in known]
    costs = data.get("costs") if not history else None
    for i, entry in enumerate(costs if isinstance(costs, list) else []):
        if isinstance(entry, dict):
            out += [f"costs[{i}].{name}" for name in entry if name not in LEGACY_COST_FIELDS]
    if isinstance(data.get("approval"), dict):
        out += [f"approval.{name}" for name in data["approval"] if name not in LEGACY_APPROVAL_FIELDS]
    return out


@dataclass
class EpisodeRecords:
    """One episode's records: allocation, attempts, ledger, decisions, artifacts, history and the blob
    of every file (core.model.Records). A legacy episode.yaml's costs, decision and artifacts come first."""

    episode_id: str
    period_id: str = ""
    sequence: int = -1
    legacy: bool = False  # a week-only ID, before jobstate migrate
    episode: Episode | None = None  # episode.yaml, strictly read (None for a legacy or unreadable one)
    allocation_key: str | None = None  # episode.yaml's (or, without one, its history file's)
    allocated_at: str | None = None
    steps: Steps = field(default_factory=dict)
    costs: list[CostEntry] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)
    artifacts: dict[str, Artifact] = field(default_factory=dict)
    history: dict[str, Any] | None = None
    legacy_refs: list[str] = field(default_factory=list)  # remote_tasks: of a legacy episode.yaml
    legacy_completed_at: str | None = None
    legacy_approval: bool = False  # approval: in a legacy episode.yaml: kept as it was, not judged
    blobs: dict[str, str] = field(default_factory=dict)  # every file of the episode -> its Git blob ID
    has_episode_file: bool = False  # episode.yaml was read: the history file does not stand in for it

    @property
    def migration(self) -> dict[str, Any] | None:
        """The ``migration:`` header a jobstate migrate wrote, or None."""
        found = None if self.episode is None else self.episode.extra.get("migration")
        return found if isinstance(found, dict) else None

    @property
    def completed_at(self) -> str | None:
        """When the episode was completed (a legacy episode.yaml, kept by a migration, or its history file),
        or None; verify names a history file that disagrees."""
        if self.legacy_completed_at is not None:
            return self.legacy_completed_at
        if self.history is not None and self.history.get("completed_at") is not None:
            return time_text(self.history["completed_at"]) or str(self.history["completed_at"])
        return None

    @property
    def approval(self) -> Decision | None:
        """The latest review decision, or None."""
        return self.decisions[-1] if self.decisions else None

    @property
    def remote_refs(self) -> list[str]:
        """Every vendor task the episode records: a legacy episode.yaml's, then its attempts'."""
        return self.legacy_refs + [a.remote_ref for s in self.steps.values() for a in s if a.remote_ref]

    @property
    def reservations(self) -> list[Attempt]:
        """The attempts that declared a maximum cost."""
        return [a for attempts in self.steps.values() for a in attempts if a.reservation is not None]

    @property
    def unknown_steps(self) -> list[str]:
        """Steps whose last attempt is an intent: maybe submitted, maybe not."""
        return [s for s, attempts in self.steps.items() if attempts and attempts[-1].state == AttemptState.INTENT]

    @property
    def status(self) -> str:
        """Derived from the records: see ``status.episode_status``."""
        return episode_status(steps=self.steps, approval=self.approval, completed=self.completed_at is not None)


def new_records(name: str) -> EpisodeRecords | None:
    """Empty records for the episode directory (or history file) ``name``; None when the name is neither
    an episode ID nor a legacy week-only one."""
    try:
        period, sequence = parse_episode_id(name)
        return EpisodeRecords(name, period.id, sequence)
    except UsageError:
        pass
    try:
        return EpisodeRecords(name, parse_period(name).id, 0, legacy=True)
    except UsageError:
        return None


def _reporting(read: Callable[[list[str]], T], source: str, problems: Problems) -> T:
    # a malformed part of a record is reported and left out; the rest is read
    found: list[str] = []
    value = read(found)
    problems += [(source, message) for message in found]
    return value


def fill(records: EpisodeRecords, leaf: str, data: Any, source: str, problems: Problems) -> None:
    """Add one loaded file of the episode (``leaf``: a record file name, or HISTORY for history/<id>.yaml).

    A file that cannot be read at all is StateInvalid; a malformed part of one is added to ``problems``
    and left out. Read episode.yaml first: the legacy fields it carries come before the record files.
    """
    if leaf == EPISODE_FILE:
        _episode_fields(records, data, source, problems)
    elif leaf == SUBMISSIONS:
        records.steps = _reporting(lambda found: submissions_from_yaml_dict(data, source, found), source, problems)
    elif leaf == COSTS:
        records.costs += _reporting(lambda found: costs_from_yaml_dict(data, source, found), source, problems)
    elif leaf == APPROVAL:
        records.decisions += approvals_from_yaml_dict(data, source)
    elif leaf == ARTIFACTS:
        records.artifacts.update(
            _reporting(lambda found: artifacts_from_yaml_dict(data, source, found), source, problems)
        )
    elif leaf == HISTORY:
        if not isinstance(data, dict):
            raise StateInvalid(f"{source}: expected a mapping")
        records.history = data
        if not records.has_episode_file:
            # the history file is all that is left of the episode: it stands in for its episode.yaml
            key = data.get("allocation_key")
            records.allocation_key = key if isinstance(key, str) else None
            legacy_fields(records, data, source, problems)


def _episode_fields(records: EpisodeRecords, data: Any, source: str, problems: Problems) -> None:
    if not isinstance(data, dict):
        raise StateInvalid(f"{source}: expected a mapping of episode fields")
    if "episode_id" in data or not records.legacy:
        # the strict reader: a key or ID the writer would refuse makes the file unreadable here too
        episode = episode_from_yaml_dict(data, source, records.episode_id)
        records.episode, records.legacy = episode, False
        records.allocation_key, records.allocated_at = episode.allocation_key, episode.allocated_at
    records.has_episode_file = True
    legacy_fields(records, data, source, problems)


def legacy_fields(records: EpisodeRecords, data: dict[str, Any], source: str, problems: Problems) -> None:
    """The fields a legacy episode.yaml carries (and a migrated one keeps byte for byte): the one legacy
    normaliser, as lenient as migrations always were."""
    records.costs[:0] = _reporting(
        lambda found: cost_list(data.get("costs"), source, found, legacy=True), source, problems
    )
    refs = data.get("remote_tasks") or []
    if not isinstance(refs, list) or not all(isinstance(r, str) for r in refs):
        problems.append((source, "remote_tasks must be a list of strings"))
    else:
        records.legacy_refs += refs
    decision = legacy_decision(data.get("approval"))
    if decision is not None:
        records.decisions.insert(0, decision)
    records.legacy_approval = records.legacy_approval or "approval" in data
    if data.get("completed_at") is not None:
        records.legacy_completed_at = time_text(data["completed_at"]) or str(data["completed_at"])
    found = _reporting(lambda found: artifact_map(data.get("artifacts"), source, found, legacy=True), source, problems)
    records.artifacts = {**found, **records.artifacts}
