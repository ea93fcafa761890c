"""The state of one revision as reviewers see it, read from Git objects.

This is a read-only operation: Git runs with ``GIT_OPTIONAL_LOCKS=0`` through
``snapshot.Revision``; nothing is written, no lock is taken. Files that cannot be
read are listed (verify is the checker), so a review of a broken state still works.
"""

from __future__ import annotations

import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from jobstate.core.budget import Acknowledgement, Budget
from jobstate.core.episode_records import EpisodeRecords, Problems, new_records
from jobstate.core.layout import (
    BUDGET_ACKNOWLEDGED,
    CONFIG_FILE,
    HISTORY,
    RECORD_FILES,
    RETIRED,
    STATE,
    describes_episode,
    episode_dir,
    episode_of,
    history_path,
    is_retired_path,
    misplaced,
    mode_problem,
    unrecorded,
)
from jobstate.core.rules_state import Settings
from jobstate.core.tombstones import Tombstone, tombstone_from_yaml_dict
from jobstate.errors import StateInvalid
from jobstate.store.config import config_from_text
from jobstate.store.records import read_acknowledgements, read_episode
from jobstate.store.snapshot import FLAT, TWICE, Revision, locate
from jobstate.store.yamlio import loads

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
class StateView:
    """Every episode of one revision."""

    rev: str
    commit: str
    episodes: dict[str, EpisodeRecords] = field(default_factory=dict)
    unreadable: list[str] = field(default_factory=list)
    budget: Budget | None = None  # budget: of jobstate.yaml at this revision
    settings: Settings | None = None  # what the lifecycle model compares of jobstate.yaml
    config_text: bytes = b""  # jobstate.yaml as it is: any change to it is shown
    acknowledgements: list[Acknowledgement] = field(default_factory=list)  # budget overruns people accepted
    tombstones: dict[str, Tombstone] = field(default_factory=dict)  # the readable ones, by retired episode
    unrecorded: list[str] = field(default_factory=list)  # files in episode directories no record names


def _settings(snap: Revision, view: StateView) -> None:
    try:
        view.acknowledgements = read_acknowledgements(snap.read(BUDGET_ACKNOWLEDGED), BUDGET_ACKNOWLEDGED)
    except OSError:
        pass  # none recorded
    except StateInvalid as exc:
        view.unreadable.append(str(exc))
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
    view.settings = Settings(
        config.period,
        budget.per if budget else None,
        dict(budget.limits) if budget else {},
        budget.since if budget else None,
        {step: shlex.join(argv) for step, (argv, _timeout) in config.probes().items()},
    )


def _tombstones(snap: Revision, paths: list[str], view: StateView) -> None:
    snap.prefetch(paths)
    for path in paths:
        name = describes_episode(path)
        assert name is not None
        try:
            view.tombstones[name] = tombstone_from_yaml_dict(loads(snap.read(path), path), path, name)
        except StateInvalid as exc:
            view.unreadable.append(str(exc))


def read_state(path: Path, rev: str, *, progress: bool | None = None, only: set[str] | None = None) -> StateView:
    """Every episode at ``rev`` (or those named in ``only``), from Git objects. This is a read-only operation."""
    snap = Revision(locate(path), rev)
    try:
        view = StateView(rev, snap.commit)
        blobs: dict[str, dict[str, str]] = {}
        _settings(snap, view)
        if only is None:
            files = snap.files()
        else:  # a few episodes of a large state: list only theirs
            # each at its place in either layout: an old revision has the flat one
            wanted_paths = tuple(
                sorted(
                    p for n in only for p in (episode_dir(n), history_path(n), f"{STATE}/{n}", f"{HISTORY}/{n}.yaml")
                )
            )
            files = snap.files((*wanted_paths, RETIRED))  # every tombstone: a touched episode may hold its key
        view.unreadable += [f"{p}: {text}" for p, mode in snap.odd if (text := mode_problem(mode))]
        view.unreadable += [f"{p}: {text}" for p, text in snap.attribute_problems(files)]
        view.unreadable += [f"{p}: {TWICE}" for p in snap.twice]
        view.unreadable += [f"{STATE}: {FLAT}"] if snap.flat_episodes() else []
        _tombstones(snap, [p for p in sorted(files) if is_retired_path(p)], view)
        by_name: dict[str, list[str]] = {}  # episode -> the record files it has here
        for p, entry in sorted(files.items()):
            described = episode_of(p)
            if described is None and (why := misplaced(p)) is not None:
                view.unreadable.append(f"{p}: {why}")
            if described is None or described[1] == "":
                continue
            name, leaf = described
            if (only is not None and name not in only) or new_records(name) is None:
                continue
            by_name.setdefault(name, [])
            assert entry.blob is not None
            blobs.setdefault(name, {})[p] = entry.blob
            if leaf == HISTORY or leaf in RECORD_FILES:
                by_name[name].append(p)
        ticker = Ticker(f"reading {rev}:", sum(len(paths) for paths in by_name.values()), progress)
        try:
            names = sorted(by_name)
            start = 0
            while start < len(names):
                # whole episodes, up to _CHUNK files a batch (a running count: the sum once per batch)
                end, size = start + 1, len(by_name[names[start]])
                while end < len(names) and size + len(by_name[names[end]]) <= _CHUNK:
                    size += len(by_name[names[end]])
                    end += 1
                chunk, start = names[start:end], end
                snap.prefetch([p for n in chunk for p in by_name[n]])
                for name in chunk:
                    found: Problems = []
                    records = read_episode(snap, name, present=set(by_name[name]), problems=found)
                    records.blobs = blobs[name]
                    view.episodes[name] = records
                    view.unrecorded += unrecorded(name, blobs[name], records.artifacts)
                    view.unreadable += [f"{path}: {message}" for path, message in found]
                    ticker.add(len(by_name[name]))
        finally:
            ticker.finish()
        return view
    finally:
        snap.close()
