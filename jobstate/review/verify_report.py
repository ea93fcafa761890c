"""What verify found: its problems, the summary line and the JSON report (``jobstate verify``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from jobstate.core.layout import CONFIG_FILE, HISTORY, STATE, episode_of
from jobstate.review.problem import Problem


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
    migrated: int = 0  # with against: the episodes a migration renamed, whose records must be kept exactly
    present: set[str] = field(default_factory=set)  # names with a directory in state/ or a history file
    retired: set[str] = field(default_factory=set)  # names with a tombstone
    # with against: the paths changed since the base, and their episodes; a warning about anything
    # else was there before the change under review, and --strict does not fail it
    changed: tuple[frozenset[str], frozenset[str]] | None = None

    def fails(self, problem: Problem, strict: bool) -> bool:
        """Whether ``problem`` fails verify: an error always, a warning with ``strict`` when it is about
        what changed (everything, without ``against``)."""
        if problem.severity == "error":
            return True
        if not strict:
            return False
        if self.changed is None:
            return True
        paths, episodes = self.changed
        parts = problem.path.split("/")
        if parts[0] == STATE and len(parts) >= 2:
            return (episode_of(problem.path) or ("",))[0] in episodes or problem.path in paths
        if parts[0] == HISTORY or problem.path == CONFIG_FILE:
            return problem.path in paths or (episode_of(problem.path) or ("",))[0] in episodes
        return True  # a commit, the revision itself: what the range brought

    def errors(self, strict: bool) -> list[Problem]:
        """Problems that fail verify (warnings too with strict, those about what changed with against)."""
        return [p for p in self.problems if self.fails(p, strict)]

    def unreadable(self) -> bool:
        """Whether some state could not be read at all (exit 7 rather than 1)."""
        return any(p.unreadable for p in self.problems)

    def ok(self, strict: bool) -> bool:
        """Clean: no failing problem and no drift."""
        return not self.errors(strict) and not self.differences

    def summary(self, strict: bool) -> str:
        """The last line of the human report."""
        warnings = sum(1 for p in self.problems if not self.fails(p, strict))
        failing = len(self.errors(strict)) + len(self.differences)
        before = " (about what the change did not touch)" if strict else ""
        extra = f", {warnings} warning{'s' if warnings != 1 else ''}{before}" if warnings else ""
        return (
            f"verify: {_count(self.episodes, 'episode')}, {_count(self.artifacts, 'artifact')} "
            f"({_size(self.artifact_bytes)}), "
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
            "problems": [p.to_json(self.fails(p, strict)) for p in self.problems],
            "against": self.against,
            "migrated": self.migrated,
            "differences": self.differences,
        }


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _size(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"
