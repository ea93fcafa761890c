"""Read-only verification of state, and the proof a migration must pass (``--against``).

This is a read-only operation: it takes no lock, writes no cache and runs git
with ``GIT_OPTIONAL_LOCKS=0``. It reads the work tree or, with a revision,
Git objects only, so it works on a pull request head and in a bare clone.

The report it returns is ``review.verify_report``'s; the artifacts' hashes are checked in
``review.verify_artifacts``, what vanished from history in ``review.vanished``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any, TypeVar

from jobstate.core.budget import Acknowledgement, acknowledgements_from_yaml_dict
from jobstate.core.clock import time_text
from jobstate.core.episode_records import EpisodeRecords, Problems, fill, legacy_fields, new_records
from jobstate.core.keys import key_problems
from jobstate.core.layout import (
    APPROVAL,
    ARTIFACTS,
    BUDGET_ACKNOWLEDGED,
    CONFIG_FILE,
    COSTS,
    EPISODE_FILE,
    HISTORY,
    PRIVATE,
    STATE,
    SUBMISSIONS,
    UNRECORDED,
    episode_dir,
    episode_of,
    is_retired_path,
    misplaced,
    mode_problem,
    unrecorded,
)
from jobstate.core.model import (
    Violation,
    attempts_violations,
    completion_problems,
    history_artifact_problems,
)
from jobstate.core.periods import is_period, parse_period
from jobstate.core.preservation import compare
from jobstate.core.records import AttemptState, history_from_yaml_dict
from jobstate.core.rules_state import key_owner_problem, sequence_problem, shared_remote_tasks, tracked_private
from jobstate.core.tombstones import Tombstone, tombstone_from_yaml_dict
from jobstate.errors import NotInitialized, StateInvalid, UsageError
from jobstate.git.repo import GitRepo
from jobstate.git.signing import signature_problems
from jobstate.review.changes import change_violations, changed_paths
from jobstate.review.decisions import require_signers_file, signed_decisions
from jobstate.review.escape import shell_command
from jobstate.review.merges import merge_findings
from jobstate.review.problem import Problem, problems_of
from jobstate.review.spending import check_budgets, check_settlement
from jobstate.review.vanished import check_vanished, keys_at
from jobstate.review.verify_artifacts import check_artifacts
from jobstate.review.verify_report import Report
from jobstate.store.config import Config, config_from_text
from jobstate.store.snapshot import FLAT, ROOTS, TWICE, Revision, Snapshot, WorkTree, is_bare, locate
from jobstate.store.yamlio import loads

R = TypeVar("R")


def _load(snap: Snapshot, path: str, problems: list[Problem]) -> Any:
    try:
        return loads(snap.read(path), path)
    except StateInvalid as exc:
        where = re.search(r"\(line (\d+)\)", str(exc))
        line = int(where[1]) if where else None
        problems.append(Problem(path, str(exc).removeprefix(f"{path}: "), line=line, unreadable=True))
    except OSError as exc:
        problems.append(Problem(path, f"cannot read: {exc}", unreadable=True))
    return None


def collect(
    snap: Snapshot, *, hash_artifacts: bool = True, workers: int | None = None
) -> tuple[dict[str, EpisodeRecords], Report]:
    """Read every episode of a snapshot, check it, and return its facts and the report. Read-only."""
    report = Report(source=snap.label)
    problems = report.problems
    files = snap.files()
    problems += [Problem(p, TWICE) for p in snap.twice]
    problems += [Problem(p, text) for p, mode in snap.odd if (text := mode_problem(mode))]
    problems += [Problem(p, text) for p, text in snap.attribute_problems(files)]
    flat = snap.flat_episodes()
    if flat:
        problems.append(Problem(STATE, f"{FLAT} ({len(flat)}, {flat[0]} first)", "warning"))
    if isinstance(snap, WorkTree) and not (snap.root / "state").is_dir():
        raise NotInitialized(f"{snap.root} has no state/ directory: nothing to verify (run jobstate init)")
    config = _check_config(snap, problems)
    problems += [Problem(v.record, f"{v.kind}: {v.rule}") for v in tracked_private(snap.tracked(PRIVATE))]
    by_dir: dict[str, list[str]] = {}
    history: dict[str, str] = {}
    tombstones: dict[str, str] = {}
    for path in files:
        described = episode_of(path)  # the one reading of which episode a path describes
        if described is not None and described[1] == HISTORY:
            history[described[0]] = path
        elif described is not None:
            by_dir.setdefault(described[0], []).append(path)
        elif is_retired_path(path):
            tombstones[path.rpartition("/")[2][:-5]] = path
        elif (why := misplaced(path)) is not None:  # the budget's acknowledgements are read below
            problems.append(Problem(path, why))
    if isinstance(snap, Revision):  # read ahead in the order read below: tombstones, episodes, history
        present = set(files)
        snap.prefetch(
            [p for _n, p in sorted(tombstones.items())]
            + [
                p
                for name in sorted(by_dir)
                for leaf in (EPISODE_FILE, *_COLLECT)  # _collect_episode's order
                if (p := f"{episode_dir(name)}/{leaf}") in present
            ]
            + [p for _n, p in sorted(history.items())]
        )
    report.present = set(by_dir) | set(history)
    report.retired = set(tombstones)
    retired_keys = {}
    for name, path in sorted(tombstones.items()):
        stone = _check_tombstone(snap, name, path, report.present, problems)
        if stone is not None:
            retired_keys[stone.allocation_key] = name
    facts: dict[str, EpisodeRecords] = {}
    to_hash: list[tuple[str, str, tuple[str, int | None]]] = []
    for name in sorted(by_dir):
        f = _collect_episode(snap, name, set(by_dir[name]), files, problems)
        if f is None:
            continue
        facts[name] = f
        for rel, artifact in f.artifacts.items():
            to_hash.append((name, rel, (artifact.sha256, artifact.size)))
    for name, path in sorted(history.items()):
        _check_history(snap, name, path, facts, problems)
    _check_uniqueness(facts, problems, retired_keys)
    problems += [Problem(v.record, f"{v.kind}: {v.message}") for v in shared_remote_tasks(facts)]
    keys = {n: (f.period_id, f.allocation_key) for n, f in facts.items() if not f.legacy and f.allocation_key}
    problems += [Problem(episode_dir(eid), text, "warning") for eid, text in key_problems(keys)]
    if config is not None:
        _check_period_kind(config.period, facts, problems)
    acknowledgements = _acknowledgements(snap, files, problems)
    check_budgets(None if config is None else config.budget, facts, problems, acknowledgements)
    report.episodes = len(facts)
    check_artifacts(snap, files, to_hash, report, hash_artifacts=hash_artifacts, workers=workers)
    return facts, report


def _acknowledgements(snap: Snapshot, files: Collection[str], problems: list[Problem]) -> list[Acknowledgement]:
    if BUDGET_ACKNOWLEDGED not in files:
        return []
    data = _load(snap, BUDGET_ACKNOWLEDGED, problems)
    if data is None:
        return []
    found = _strictly(BUDGET_ACKNOWLEDGED, problems, lambda: acknowledgements_from_yaml_dict(data, BUDGET_ACKNOWLEDGED))
    return found or []


def _check_config(snap: Snapshot, problems: list[Problem]) -> Config | None:
    """The settings of the snapshot; None (and a problem) when they cannot be read."""
    # every command reads jobstate.yaml first: settings no command can use are exit 7 here too
    try:
        text = snap.read(CONFIG_FILE)
    except FileNotFoundError:
        return None
    except OSError as exc:
        problems.append(Problem(CONFIG_FILE, f"cannot read: {exc}", unreadable=True))
        return None
    except StateInvalid as exc:  # over the size limit, refused from its object header
        problems.append(Problem(CONFIG_FILE, str(exc).removeprefix(f"{CONFIG_FILE}: "), unreadable=True))
        return None
    try:
        return config_from_text(text)
    except StateInvalid as exc:
        problems.append(Problem(CONFIG_FILE, str(exc).removeprefix(f"{CONFIG_FILE}: "), unreadable=True))
        return None


def _collect_episode(
    snap: Snapshot, name: str, paths: set[str], files: dict[str, Any], problems: list[Problem]
) -> EpisodeRecords | None:
    base = episode_dir(name)
    episode_path = f"{base}/{EPISODE_FILE}"
    if episode_path not in paths:
        problems.append(Problem(base, "episode directory without episode.yaml"))
        return None
    data = _load(snap, episode_path, problems)
    f = new_records(name)
    if data is None or f is None:
        return None
    if not _fill(f, EPISODE_FILE, data, episode_path, problems):  # the writers' reader, its rules and its words
        return None
    if f.legacy:
        problems.append(
            Problem(base, f"legacy week-only ID {name}: run jobstate migrate to give it a versioned ID", "warning")
        )
    _collect_records(snap, f, base, paths, problems)
    return f


def _legacy_fields(f: EpisodeRecords, data: dict[str, Any], path: str, problems: list[Problem]) -> None:
    found: Problems = []
    legacy_fields(f, data, path, found)
    problems += problems_of(found)


def _fill(f: EpisodeRecords, leaf: str, data: Any, path: str, problems: list[Problem]) -> bool:
    """``fill``, the one reader of records: a malformed part is a problem, left out; False when the
    whole file is unreadable (also a problem)."""
    found: Problems = []
    try:
        fill(f, leaf, data, path, found)
    except StateInvalid as exc:
        found.append((path, str(exc).removeprefix(f"{path}: ")))
        problems += problems_of(found)
        return False
    problems += problems_of(found)
    return True


def _collect_records(snap: Snapshot, f: EpisodeRecords, base: str, paths: set[str], problems: list[Problem]) -> None:
    for path in (f"{base}/{name}" for name in _COLLECT):
        if path not in paths:
            continue
        data = _load(snap, path, problems)
        if data is not None and _fill(f, path.rsplit("/", 1)[1], data, path, problems):
            _COLLECT[path.rsplit("/", 1)[1]](f, path, problems)
    problems += [Problem(path, UNRECORDED, "warning") for path in unrecorded(f.episode_id, paths, f.artifacts)]


def _nothing_more(f: EpisodeRecords, path: str, problems: list[Problem]) -> None:
    """What review asks of a record file beyond what its reader does: nothing."""


def _check_submissions(f: EpisodeRecords, path: str, problems: list[Problem]) -> None:
    steps = f.steps
    problems += [Problem(path, f"{v.field}: {v.rule}") for v in attempts_violations(f.episode_id, steps)]
    for step, attempts in steps.items():
        for attempt in attempts:
            check_settlement(attempt, path, problems)
        if attempts and attempts[-1].state == AttemptState.INTENT:
            problems.append(
                Problem(
                    path,
                    f"step {step!r} is unknown (intent without acceptance): "
                    + shell_command("jobstate", "resolve", "--episode", f.episode_id, "--step", step, tail="..."),
                    "warning",
                )
            )


# each record file verify reads (in reading order, after episode.yaml), and what it asks beyond its reader
_COLLECT: dict[str, Callable[[EpisodeRecords, str, list[Problem]], None]] = {
    COSTS: _nothing_more,
    SUBMISSIONS: _check_submissions,
    ARTIFACTS: _nothing_more,
    APPROVAL: _nothing_more,
}


def _check_history(
    snap: Snapshot, name: str, path: str, facts: dict[str, EpisodeRecords], problems: list[Problem]
) -> None:
    data = _load(snap, path, problems)
    if data is None:
        return
    if not isinstance(data, dict):
        problems.append(Problem(path, "expected a mapping"))
        return
    episode = facts.get(name)
    if is_period(name) and "episode_id" not in data:
        problems.append(Problem(path, f"legacy week-only history {name}: run jobstate migrate", "warning"))
        if episode is None:
            hist = EpisodeRecords(name, period_id=name, legacy=True)
            _legacy_fields(hist, data, path, problems)
            facts[name] = hist
        elif data.get("completed_at") is not None:
            episode.legacy_completed_at = episode.legacy_completed_at or time_text(data["completed_at"])
        if episode is not None:
            problems += _history_problems(history_artifact_problems(name, data, episode.artifacts))
        return
    try:
        recorded = history_from_yaml_dict(data, path, name)
    except StateInvalid as exc:
        problems.append(Problem(path, str(exc).removeprefix(f"{path}: ")))
        return
    if episode is None:
        hist = EpisodeRecords(
            name, period_id=recorded.period_id, sequence=recorded.sequence, allocation_key=recorded.allocation_key
        )
        _legacy_fields(hist, data, path, problems)
        facts[name] = hist
        return
    completed = time_text(data.get("completed_at"))
    if completed is None:
        problems.append(Problem(path, "completed_at missing"))
    elif episode.completed_at is not None and episode.completed_at != completed:
        problems.append(Problem(path, f"completed_at {completed} disagrees with state/{name}: {episode.completed_at}"))
    episode.history = data
    problems += _history_problems(completion_problems(episode))


def _history_problems(found: list[Violation]) -> list[Problem]:
    return [Problem(v.record, f"{v.rule} ({v.field}: records {v.old!r}, history {v.new!r})") for v in found]


def _check_period_kind(kind: str, facts: dict[str, EpisodeRecords], problems: list[Problem]) -> None:
    for name, f in sorted(facts.items()):
        if f.legacy or not f.period_id:
            continue
        found = parse_period(f.period_id).kind
        if found != kind:
            problems.append(
                Problem(episode_dir(name), f"a {found} episode in a repository of {kind} periods (jobstate.yaml)")
            )


def _strictly(path: str, problems: list[Problem], read: Callable[[], R]) -> R | None:
    """``read()``, or None with the strict reader's complaint recorded against ``path``."""
    try:
        return read()
    except StateInvalid as exc:
        problems.append(Problem(path, str(exc).removeprefix(f"{path}: ")))
        return None


def _check_tombstone(
    snap: Snapshot, name: str, path: str, present: set[str], problems: list[Problem]
) -> Tombstone | None:
    """A readable tombstone of an episode that is no longer in state/ or history/."""
    data = _load(snap, path, problems)
    if data is None:
        return None
    stone = _strictly(path, problems, lambda: tombstone_from_yaml_dict(data, path, name))
    if stone is not None and name in present:
        problems.append(Problem(path, f"episode {name} is retired but still in state/ or history/; remove one of them"))
    return stone


def _check_uniqueness(facts: dict[str, EpisodeRecords], problems: list[Problem], retired_keys: dict[str, str]) -> None:
    slots: dict[tuple[str, int], list[str]] = {}
    keys: dict[str, list[str]] = {}
    for name, f in sorted(facts.items()):
        if f.legacy:
            continue
        slots.setdefault((f.period_id, f.sequence), []).append(name)
        if f.allocation_key is not None:
            keys.setdefault(f.allocation_key, []).append(name)
    for slot, names in sorted(slots.items()):
        problem = sequence_problem(slot, names)
        if problem is not None:
            problems.append(Problem(episode_dir(names[1]), problem))
    for key, names in sorted(keys.items()):
        problem = key_owner_problem(key, names, retired_keys.get(key))
        if problem is not None:
            problems.append(Problem(episode_dir(names[-1]), problem))


def _check_clean(cwd: Path, report: Report) -> None:
    for code, path in GitRepo(cwd).status(*ROOTS, CONFIG_FILE):  # the settings verify judges the state by too
        what = "untracked" if code == "??" else "uncommitted change"
        report.problems.append(Problem(path, f"{what} ({code.strip()}): commit it or remove it"))


def verify(
    path: Path,
    *,
    rev: str | None = None,
    against: str | None = None,
    workers: int | None = None,
    check_clean: bool = True,
    require_signed: bool = False,
    allowed_signers: Path | None = None,
    approvers: Path | None = None,
) -> Report:
    """Check the state at ``path`` (work tree, or ``rev`` from Git objects). Read-only.

    ``check_clean=False`` skips the check that the work tree is committed (a pre-commit
    hook checks staged changes before they are committed). With ``require_signed``, every
    commit that changed state/, history/ or jobstate.yaml (since ``against``, if given) must
    carry a good signature from a trusted key (``allowed_signers`` replaces the repository's
    gpg.ssh.allowedSignersFile). With ``approvers`` (an allowed-signers file), every commit that
    records a decision must be signed by one of its keys. Both refuse in a shallow clone.
    """
    cwd = locate(path)
    if rev is None and is_bare(cwd):
        raise UsageError(f"{cwd} is a bare repository: pass --rev REV")
    for given in (allowed_signers, approvers):
        require_signers_file(given)
    snap: Snapshot = Revision(cwd, rev) if rev is not None else WorkTree(cwd)
    try:
        facts, report = collect(snap, workers=workers)
    finally:
        snap.close()
    if rev is None and check_clean:
        _check_clean(cwd, report)
    tip = snap.commit if isinstance(snap, Revision) else "HEAD"
    if require_signed:
        signed = (*ROOTS, CONFIG_FILE)
        for sha, problem in signature_problems(cwd, tip, against, signed, allowed_signers=allowed_signers):
            report.problems.append(
                Problem(f"commit {sha[:12]}", f"{problem}; it changes state/, history/ or jobstate.yaml")
            )
    if approvers is not None:
        _check_approvers(cwd, tip, against, approvers, report)
    if against is not None:
        base_snap = Revision(cwd, against)
        base_snap.close()
        report.against = base_snap.label
        report.changed = changed_paths(cwd, base_snap.commit, snap.commit if isinstance(snap, Revision) else None)
        violations, notes, moves = change_violations(cwd, against, rev or "HEAD")
        report.migrated = len(moves)
        report.differences = preservation(cwd, against, moves, facts)
        report.problems += [Problem(v.record, f"{v.kind}: {v.message}") for v in violations]
        report.problems += [Problem(rev or "HEAD", note, "warning") for note in notes]
        # the base was checked when it was made: only what it had and the commits since are looked at
        since: tuple[str, dict[str, str | None]] | None = (base_snap.commit, keys_at(cwd, base_snap.commit))
    else:
        since = None
    check_vanished(cwd, snap, report, since)
    tip_commit = snap.commit if isinstance(snap, Revision) else "HEAD"
    found = merge_findings(cwd, since[0] if since else None, tip_commit, work_tree=rev is None)
    report.problems += [Problem(episode_dir(eid), text) for eid, text in found]
    return report


def preservation(cwd: Path, base: str, moves: dict[str, str], facts: dict[str, EpisodeRecords]) -> list[str]:
    """The proof a migration must pass, over the migrated episodes (new ID -> legacy ID in ``base``):
    what they record is kept exactly. Other changes are the lifecycle model's business."""
    if not moves:
        return []
    snap = Revision(cwd, base)
    try:
        base_facts = collect(snap, hash_artifacts=False)[0]
    finally:
        snap.close()
    old = {origin: base_facts[origin] for origin in moves.values() if origin in base_facts}
    return compare(old, {eid: facts[eid] for eid in moves if eid in facts})


def _check_approvers(cwd: Path, tip: str, against: str | None, approvers: Path, report: Report) -> None:
    for found in signed_decisions(cwd, tip, against, approvers=approvers):
        if found.problem is not None:
            report.problems.append(Problem(f"commit {found.commit[:12]}", found.problem))
