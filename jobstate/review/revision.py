"""The state of one revision as reviewers see it, read from Git objects.

This is a read-only operation: Git runs with ``GIT_OPTIONAL_LOCKS=0`` through
``snapshot.Revision``; nothing is written, no lock is taken. Files that cannot be
read are listed (verify is the checker), so a review of a broken state still works.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from jobstate.core.approvals import Decision, approvals_from_yaml_dict, legacy_decision
from jobstate.core.artifacts import Artifact, artifact_map, artifacts_from_yaml_dict
from jobstate.core.attempts import Steps, submissions_from_yaml_dict
from jobstate.core.budget import Budget
from jobstate.core.costs import CostEntry, cost_list, costs_from_yaml_dict
from jobstate.core.layout import CONFIG_FILE, RECORD_FILES
from jobstate.core.model import Settings
from jobstate.core.periods import parse_episode_id, parse_period
from jobstate.core.records import episode_from_yaml_dict
from jobstate.core.status import episode_status
from jobstate.errors import StateInvalid, UsageError
from jobstate.store.config import config_from_text
from jobstate.store.snapshot import Revision, locate
from jobstate.store.yamlio import loads

T = TypeVar("T")
_CHUNK = 2000  # files per git cat-file batch; progress is shown between batches


class Ticker:
    """A progress line on stderr, as verify's hashing shows: only on a terminal and after a second."""

    def __init__(self, label: str, total: int, enabled: bool | None = None) -> None:
        self.label, self.total, self.done = label, total, 0
        self.start = time.monotonic()
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.shown = False

    def add(self, count: int) -> None:
        """Count ``count`` more items done."""
        self.done += count
        if self.enabled and time.monotonic() - self.start >= 1.0:
            self.shown = True
            print(f"\r{self.label} {self.done} of {self.total} files", end="", file=sys.stderr, flush=True)

    def finish(self) -> None:
        """Clear the line if one was shown."""
        if self.shown:
            print("\r" + " " * 60 + "\r", end="", file=sys.stderr, flush=True)


@dataclass
class EpisodeView:
    """What one episode records at one revision (current and legacy layouts alike)."""

    episode_id: str
    period_id: str
    sequence: int
    allocation_key: str | None = None
    allocated_at: str | None = None
    legacy: bool = False
    steps: Steps = field(default_factory=dict)
    costs: list[CostEntry] = field(default_factory=list)  # a legacy episode.yaml's first
    decisions: list[Decision] = field(default_factory=list)
    artifacts: dict[str, Artifact] = field(default_factory=dict)
    history: dict[str, Any] | None = None
    migration: dict[str, Any] | None = None
    legacy_completed_at: str | None = None
    legacy_approval: bool = False
    blobs: dict[str, str] = field(default_factory=dict)  # every file of the episode -> Git blob ID

    @property
    def completed_at(self) -> str | None:
        """When the episode was completed, or None."""
        if self.history is not None and self.history.get("completed_at") is not None:
            return str(self.history["completed_at"])
        return self.legacy_completed_at

    @property
    def status(self) -> str:
        """Derived from the records: see ``status.episode_status``."""
        latest = self.decisions[-1] if self.decisions else None
        return episode_status(steps=self.steps, approval=latest, completed=self.completed_at is not None)


@dataclass
class StateView:
    """Every episode of one revision."""

    rev: str
    commit: str
    episodes: dict[str, EpisodeView] = field(default_factory=dict)
    unreadable: list[str] = field(default_factory=list)
    budget: Budget | None = None  # budget: of jobstate.yaml at this revision
    settings: Settings | None = None  # what the lifecycle model compares of jobstate.yaml
    config_text: bytes = b""  # jobstate.yaml as it is: any change to it is shown


def _period_and_sequence(name: str) -> tuple[str, int, bool] | None:
    try:
        period, sequence = parse_episode_id(name)
        return period.id, sequence, False
    except UsageError:
        pass
    try:
        return parse_period(name).id, 0, True
    except UsageError:
        return None


def _reporting(read: Callable[[list[str]], T], source: str, unreadable: list[str]) -> T:
    # a malformed record is listed and left out; the rest of the file is reviewed
    found: list[str] = []
    value = read(found)
    unreadable += [f"{source}: {problem}" for problem in found]
    return value


def _fill(view: EpisodeView, name: str, data: Any, source: str, unreadable: list[str]) -> None:
    if name == "episode.yaml":
        if not isinstance(data, dict):
            raise StateInvalid("expected a mapping of episode fields")
        if "episode_id" in data:
            view.legacy = False
            # the strict reader: a key or ID the writer would refuse makes the file unreadable here too
            view.allocation_key = episode_from_yaml_dict(data, source, view.episode_id).allocation_key
            view.allocated_at = str(data.get("allocated_at"))
            view.migration = data.get("migration") if isinstance(data.get("migration"), dict) else None
        # legacy fields, kept byte for byte by a migration
        view.costs += _reporting(
            lambda found: cost_list(data.get("costs"), source, found, legacy=True), source, unreadable
        )
        legacy = legacy_decision(data.get("approval"))
        if legacy is not None:
            view.decisions.insert(0, legacy)
        view.legacy_approval = "approval" in data
        if data.get("completed_at") is not None:
            view.legacy_completed_at = str(data["completed_at"])
        view.artifacts.update(
            _reporting(lambda found: artifact_map(data.get("artifacts"), source, found), source, unreadable)
        )
    elif name == "submissions.yaml":
        view.steps = _reporting(lambda found: submissions_from_yaml_dict(data, source, found), source, unreadable)
    elif name == "costs.yaml":
        entries = _reporting(lambda found: costs_from_yaml_dict(data, source, found), source, unreadable)
        view.costs = [c for c in view.costs if c.legacy] + entries
    elif name == "approval.yaml":
        view.decisions += approvals_from_yaml_dict(data, source)
    elif name == "artifacts.yaml":
        view.artifacts.update(
            _reporting(lambda found: artifacts_from_yaml_dict(data, source, found), source, unreadable)
        )


def _settings(snap: Revision, view: StateView) -> None:
    try:
        text = snap.read(CONFIG_FILE)
    except OSError:
        text = b""
    view.config_text = text
    try:
        config = config_from_text(text)
    except StateInvalid as exc:
        view.unreadable.append(str(exc))
        return
    view.budget = config.budget
    budget = config.budget
    view.settings = Settings(config.period, budget.per if budget else None, dict(budget.limits) if budget else {})


def read_state(path: Path, rev: str, *, progress: bool | None = None, only: set[str] | None = None) -> StateView:
    """Every episode at ``rev`` (or those named in ``only``), from Git objects. This is a read-only operation."""
    snap = Revision(locate(path), rev)
    try:
        view = StateView(rev, snap.commit)
        _settings(snap, view)
        if only is None:
            files = snap.files()
        else:  # a few episodes of a large state: list only theirs
            wanted_paths = tuple(sorted(f"{p}/{n}" for n in only for p in ("state",))) + tuple(
                sorted(f"history/{n}.yaml" for n in only)
            )
            files = snap.files(wanted_paths) if wanted_paths else {}
        wanted: list[tuple[str, str, str]] = []  # path, episode name, file name
        for p, entry in sorted(files.items()):
            parts = p.split("/")
            if parts[0] == "state" and len(parts) >= 3:
                name, leaf = parts[1], "/".join(parts[2:])
            elif parts[0] == "history" and len(parts) == 2 and p.endswith(".yaml"):
                name, leaf = parts[1][:-5], "history"
            else:
                continue
            found = _period_and_sequence(name)
            if found is None or (only is not None and name not in only):
                continue
            if name not in view.episodes:
                view.episodes[name] = EpisodeView(name, found[0], found[1], legacy=found[2])
            assert entry.blob is not None
            view.episodes[name].blobs[p] = entry.blob
            if leaf == "history" or leaf in RECORD_FILES:
                wanted.append((p, name, leaf))
        # episode.yaml first: the legacy fields it carries come before the record files
        wanted.sort(key=lambda w: (w[1], w[2] != "episode.yaml", w[2]))
        ticker = Ticker(f"reading {rev}:", len(wanted), progress)
        try:
            for start in range(0, len(wanted), _CHUNK):
                chunk = wanted[start : start + _CHUNK]
                snap.prefetch([p for p, _n, _l in chunk])
                for p, name, leaf in chunk:
                    try:
                        data = loads(snap.read(p), p)
                        if leaf == "history":
                            if not isinstance(data, dict):
                                raise StateInvalid("expected a mapping")
                            view.episodes[name].history = data
                        else:
                            _fill(view.episodes[name], leaf, data, p, view.unreadable)
                    except StateInvalid as exc:
                        view.unreadable.append(f"{p}: {str(exc).removeprefix(p + ': ')}")
                ticker.add(len(chunk))
        finally:
            ticker.finish()
        return view
    finally:
        snap.close()
