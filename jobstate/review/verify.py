"""Read-only verification of state, and the proof a migration must pass (``--against``).

This is a read-only operation: it takes no lock, writes no cache and runs git
with ``GIT_OPTIONAL_LOCKS=0``. It reads the work tree or, with a revision,
Git objects only, so it works on a pull request head and in a bare clone.

Longer than most modules on purpose: it is one pass of checks over one snapshot, and the
checks share the collected facts and the problem list; split by kind, each piece would need both.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jobstate.core.approvals import approvals_from_yaml_dict
from jobstate.core.artifacts import artifacts_from_yaml_dict
from jobstate.core.attempts import submissions_from_yaml_dict
from jobstate.core.clock import time_text
from jobstate.core.costs import costs_from_yaml_dict
from jobstate.core.layout import APPROVAL, ARTIFACTS, CONFIG_FILE, COSTS, RECORD_FILES, SUBMISSIONS, episode_dir
from jobstate.core.names import validate_artifact_path
from jobstate.core.periods import parse_period
from jobstate.core.records import AttemptState, episode_from_yaml_dict, history_from_yaml_dict
from jobstate.errors import NotInitialized, StateInvalid, UsageError
from jobstate.git.repo import GitRepo
from jobstate.git.signing import decision_commits, signature_problems, signatures
from jobstate.git.snapshot import ROOTS, Revision, Snapshot, WorkTree, is_bare, locate
from jobstate.hashing import Progress
from jobstate.review.budget_audit import check_budgets, check_settlement
from jobstate.review.escape import shell_command
from jobstate.review.facts import (
    Facts,
    Problem,
    artifacts_of,
    compare,
    decided,
    fill_from_episode_fields,
    legacy_facts,
    read_reporting,
)
from jobstate.review.verify_lfs import check_pointers
from jobstate.store.config import Config, config_from_yaml_dict
from jobstate.store.yamlio import loads


@dataclass
class Report:
    """The outcome of verify."""

    source: str
    episodes: int = 0
    artifacts: int = 0
    artifact_bytes: int = 0
    problems: list[Problem] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)
    against: str | None = None

    def errors(self, strict: bool) -> list[Problem]:
        """Problems that fail verify (warnings too with strict)."""
        return [p for p in self.problems if strict or p.severity == "error"]

    def unreadable(self) -> bool:
        """Whether some state could not be read at all (exit 7 rather than 1)."""
        return any(p.unreadable for p in self.problems)

    def ok(self, strict: bool) -> bool:
        """Clean: no failing problem and no drift."""
        return not self.errors(strict) and not self.differences

    def summary(self, strict: bool) -> str:
        """The last line of the human report."""
        warnings = sum(1 for p in self.problems if p.severity == "warning")
        failing = len(self.errors(strict)) + len(self.differences)
        extra = f", {warnings} warning{'s' if warnings != 1 else ''}" if warnings and not strict else ""
        return (
            f"verify: {self.episodes} episodes, {self.artifacts} artifacts ({_size(self.artifact_bytes)}), "
            f"{failing} problem{'s' if failing != 1 else ''}{extra}"
        )

    def to_json(self, strict: bool) -> dict[str, Any]:
        """Machine-readable report."""
        return {
            "ok": self.ok(strict),
            "source": self.source,
            "episodes": self.episodes,
            "artifacts": self.artifacts,
            "artifact_bytes": self.artifact_bytes,
            "problems": [p.to_json(strict) for p in self.problems],
            "against": self.against,
            "differences": self.differences,
        }


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


def _size(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def collect(
    snap: Snapshot, *, hash_artifacts: bool = True, workers: int | None = None
) -> tuple[dict[str, Facts], Report]:
    """Read every episode of a snapshot, check it, and return its facts and the report. Read-only."""
    report = Report(source=snap.label)
    problems = report.problems
    files = snap.files()
    if isinstance(snap, Revision):
        snap.prefetch([p for p in files if p.endswith(".yaml")])
    if isinstance(snap, WorkTree) and not (snap.root / "state").is_dir():
        raise NotInitialized(f"{snap.root} has no state/ directory: nothing to verify (run jobstate init)")
    config = _check_config(snap, problems)
    by_dir: dict[str, list[str]] = {}
    history: dict[str, str] = {}
    for path in files:
        parts = path.split("/")
        if parts[0] == "state":
            if len(parts) < 3:
                if parts[1] != ".gitkeep":
                    problems.append(Problem(path, "state/ holds only episode directories"))
                continue
            by_dir.setdefault(parts[1], []).append(path)
        elif parts[0] == "history" and len(parts) == 2 and parts[1] != ".gitkeep":
            if parts[1].endswith(".yaml"):
                history[parts[1][:-5]] = path
            else:
                problems.append(Problem(path, "history/ holds only <episode_id>.yaml files"))
        elif parts[0] == "history" and len(parts) > 2:
            problems.append(Problem(path, "history/ holds only <episode_id>.yaml files"))
    facts: dict[str, Facts] = {}
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
    _check_uniqueness(facts, problems)
    check_budgets(None if config is None else config.budget, facts, problems)
    report.episodes = len(facts)
    _check_artifacts(snap, files, to_hash, report, hash_artifacts=hash_artifacts, workers=workers)
    return facts, report


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
    try:
        return config_from_yaml_dict(loads(text, CONFIG_FILE) if text.strip() else None)
    except StateInvalid as exc:
        problems.append(Problem(CONFIG_FILE, str(exc).removeprefix(f"{CONFIG_FILE}: "), unreadable=True))
        return None


def _collect_episode(
    snap: Snapshot, name: str, paths: set[str], files: dict[str, Any], problems: list[Problem]
) -> Facts | None:
    base = episode_dir(name)
    episode_path = f"{base}/episode.yaml"
    for path in sorted(paths):
        if files[path].symlink:
            problems.append(Problem(path, "is a symlink; state holds regular files only"))
    if episode_path not in paths:
        problems.append(Problem(base, "episode directory without episode.yaml"))
        return None
    data = _load(snap, episode_path, problems)
    if data is None:
        return None
    if not isinstance(data, dict):
        problems.append(Problem(episode_path, "expected a mapping of episode fields"))
        return None
    legacy_name = _is_period(name)
    if legacy_name and "episode_id" not in data:
        problems.append(
            Problem(base, f"legacy week-only ID {name}: run jobstate migrate to give it a versioned ID", "warning")
        )
        f = legacy_facts(name, data, episode_path, problems)
        _collect_records(snap, f, base, paths, problems)
        return f
    try:
        episode = episode_from_yaml_dict(data, episode_path, name)
    except StateInvalid as exc:
        problems.append(Problem(episode_path, str(exc).removeprefix(f"{episode_path}: ")))
        return None
    f = Facts(
        episode.episode_id,
        period_id=episode.period_id,
        sequence=episode.sequence,
        allocation_key=episode.allocation_key,
    )
    fill_from_episode_fields(f, data, episode_path, problems)
    _collect_records(snap, f, base, paths, problems)
    return f


def _is_period(name: str) -> bool:
    try:
        parse_period(name)
    except UsageError:
        return False
    return True


def _collect_records(snap: Snapshot, f: Facts, base: str, paths: set[str], problems: list[Problem]) -> None:
    for path in (f"{base}/{name}" for name in _COLLECT):
        if path not in paths:
            continue
        data = _load(snap, path, problems)
        if data is None:
            continue
        if not isinstance(data, dict) or data.get("schema") != 1:
            problems.append(Problem(path, "expected a mapping with schema: 1"))
            continue
        _COLLECT[path.rsplit("/", 1)[1]](f, data, path, problems)
    recorded = {f"{base}/{rel}" for rel in f.artifacts}
    for path in sorted(paths):
        rel = path[len(base) + 1 :]
        if rel in RECORD_FILES or path in recorded:
            continue
        problems.append(Problem(path, "file is not a jobstate record nor a recorded artifact", "warning"))


def _collect_costs(f: Facts, data: dict[str, Any], path: str, problems: list[Problem]) -> None:
    f.costs += read_reporting(path, problems, lambda found: costs_from_yaml_dict(data, path, found)) or []


def _collect_artifacts(f: Facts, data: dict[str, Any], path: str, problems: list[Problem]) -> None:
    f.artifacts.update(read_reporting(path, problems, lambda found: artifacts_from_yaml_dict(data, path, found)) or {})


def _collect_approval(f: Facts, data: dict[str, Any], path: str, problems: list[Problem]) -> None:
    decisions = read_reporting(path, problems, lambda _found: approvals_from_yaml_dict(data, path))
    if decisions:
        f.approval = decided(decisions[-1])
        f.decisions += [d for d in map(decided, decisions) if d is not None]


def _collect_submissions(f: Facts, data: dict[str, Any], path: str, problems: list[Problem]) -> None:
    steps = read_reporting(path, problems, lambda found: submissions_from_yaml_dict(data, path, found)) or {}
    for step, attempts in steps.items():
        for attempt in attempts:
            if attempt.remote_ref:
                f.remote_refs.append(attempt.remote_ref)
            check_settlement(attempt, path, problems)
            if attempt.reservation is not None:
                f.reservations.append(attempt)
        if attempts and attempts[-1].state == AttemptState.INTENT:
            f.unknown_steps.append(str(step))
            problems.append(
                Problem(
                    path,
                    f"step {step!r} is unknown (intent without acceptance): "
                    + shell_command("jobstate", "resolve", "--episode", f.episode_id, "--step", step, tail="..."),
                    "warning",
                )
            )


_COLLECT: dict[str, Callable[[Facts, dict[str, Any], str, list[Problem]], None]] = {
    COSTS: _collect_costs,
    SUBMISSIONS: _collect_submissions,
    ARTIFACTS: _collect_artifacts,
    APPROVAL: _collect_approval,
}


def _check_history(snap: Snapshot, name: str, path: str, facts: dict[str, Facts], problems: list[Problem]) -> None:
    data = _load(snap, path, problems)
    if data is None:
        return
    if not isinstance(data, dict):
        problems.append(Problem(path, "expected a mapping"))
        return
    episode = facts.get(name)
    if _is_period(name) and "episode_id" not in data:
        problems.append(Problem(path, f"legacy week-only history {name}: run jobstate migrate", "warning"))
        if episode is None:
            hist = Facts(name, legacy=True, period_id=name)
            fill_from_episode_fields(hist, data, path, problems)
            facts[name] = hist
        elif data.get("completed_at") is not None:
            episode.completed_at = episode.completed_at or time_text(data["completed_at"])
        _compare_history_artifacts(data, path, episode, problems)
        return
    try:
        recorded = history_from_yaml_dict(data, path, name)
    except StateInvalid as exc:
        problems.append(Problem(path, str(exc).removeprefix(f"{path}: ")))
        return
    if episode is None:
        hist = Facts(
            name, period_id=recorded.period_id, sequence=recorded.sequence, allocation_key=recorded.allocation_key
        )
        fill_from_episode_fields(hist, data, path, problems)
        facts[name] = hist
        return
    for attr in ("period_id", "sequence", "allocation_key"):
        mine = getattr(recorded, attr)
        if mine is not None and mine != getattr(episode, attr):
            problems.append(Problem(path, f"{attr} {mine!r} disagrees with state/{name}: {getattr(episode, attr)!r}"))
    completed = time_text(data.get("completed_at"))
    if completed is None:
        problems.append(Problem(path, "completed_at missing"))
    elif episode.completed_at is not None and episode.completed_at != completed:
        problems.append(Problem(path, f"completed_at {completed} disagrees with state/{name}: {episode.completed_at}"))
    else:
        episode.completed_at = completed
    if episode.unknown_steps:
        problems.append(Problem(path, f"episode completed while step {episode.unknown_steps[0]} is unknown"))
    _compare_history_artifacts(data, path, episode, problems)


def _compare_history_artifacts(data: dict[str, Any], path: str, episode: Facts | None, problems: list[Problem]) -> None:
    if episode is None or data.get("artifacts") is None:
        return
    listed = {k: a.sha256 for k, a in artifacts_of(data.get("artifacts"), path, problems).items()}
    actual = {k: a.sha256 for k, a in episode.artifacts.items()}
    if listed != actual:
        missing = sorted(set(listed.items()) ^ set(actual.items()))
        problems.append(Problem(path, f"artifacts disagree with state/{episode.episode_id}: {missing[0][0]}"))


def _check_uniqueness(facts: dict[str, Facts], problems: list[Problem]) -> None:
    seen: dict[tuple[str, int], str] = {}
    keys: dict[str, list[str]] = {}
    for name, f in sorted(facts.items()):
        if f.legacy:
            continue
        slot = (f.period_id, f.sequence)
        if slot in seen:
            problems.append(Problem(episode_dir(name), f"duplicate period and sequence with {seen[slot]}"))
        seen[slot] = name
        if f.allocation_key is not None:
            keys.setdefault(f.allocation_key, []).append(name)
    for key, names in sorted(keys.items()):
        if len(names) > 1:
            problems.append(
                Problem(
                    episode_dir(names[1]), f"allocation key {key!r} belongs to several episodes: {', '.join(names)}"
                )
            )


def _check_artifacts(
    snap: Snapshot,
    files: dict[str, Any],
    wanted: list[tuple[str, str, tuple[str, int | None]]],
    report: Report,
    *,
    hash_artifacts: bool,
    workers: int | None,
) -> None:
    entries = []
    for name, rel, _expected in wanted:
        path = f"{episode_dir(name)}/{rel}"
        try:
            validate_artifact_path(rel)
        except UsageError as exc:
            report.problems.append(Problem(path, str(exc)))
            continue
        entry = files.get(path)
        if entry is None:
            report.problems.append(Problem(path, "recorded artifact is missing"))
        elif entry.symlink:
            report.problems.append(Problem(path, "recorded artifact is a symlink"))
        else:
            entries.append(entry)
    report.artifacts = len(wanted)
    report.artifact_bytes = sum(e.size for e in entries)
    if not hash_artifacts or not entries:
        return
    expected = {f"{episode_dir(name)}/{rel}": exp for name, rel, exp in wanted}
    by_pointer, findings = check_pointers(snap, entries, expected)
    report.problems.extend(Problem(*finding) for finding in findings)
    entries = [e for e in entries if e.path not in by_pointer]
    if not entries:
        return
    progress = Progress(report.artifact_bytes)
    try:
        digests = snap.hash(entries, workers, progress)
    finally:
        progress.finish()
    for path, found in sorted(digests.items()):
        if isinstance(found, OSError):
            report.problems.append(Problem(path, f"cannot read artifact: {found}"))
            continue
        want_sha, want_size = expected[path]
        if found[0] != want_sha:
            report.problems.append(Problem(path, f"sha256 {found[0][:16]}… does not match recorded {want_sha[:16]}…"))
        elif want_size is not None and found[1] != want_size:
            report.problems.append(Problem(path, f"size {found[1]} does not match recorded {want_size}"))


def _check_clean(cwd: Path, report: Report) -> None:
    for code, path in GitRepo(cwd).status(*ROOTS):
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
        if given is not None and not given.is_file():
            raise UsageError(f"cannot read the allowed-signers file {given}: give an existing file")
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
        try:
            base_facts, _base_report = collect(base_snap, hash_artifacts=False)
        finally:
            base_snap.close()
        report.against = base_snap.label
        # kept, not equal: --against runs on every pull request, and a change may add to the ledgers
        report.differences = compare(base_facts, facts, kept_only=True)
    return report


def _check_approvers(cwd: Path, tip: str, against: str | None, approvers: Path, report: Report) -> None:
    decided = set(decision_commits(cwd, tip, against, ROOTS))
    for sha, status, signer in signatures(cwd, tip, against, ROOTS, allowed_signers=approvers):
        if sha in decided and status != "G":
            who = f" (signed by {signer})" if signer else ""
            report.problems.append(
                Problem(
                    f"commit {sha[:12]}",
                    f"records a decision but is not signed by a key of the approvers file {approvers}{who}",
                )
            )
