"""What an episode records, normalised across the legacy and current layouts, and the proof that a
migration preserved it (``verify --against``). Pure: values in, values out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from jobstate.core.approvals import Decision, legacy_decision
from jobstate.core.artifacts import Artifact, artifact_map
from jobstate.core.attempts import Attempt
from jobstate.core.clock import time_text
from jobstate.core.costs import CostEntry, cost_list
from jobstate.core.money import sum_by_currency
from jobstate.errors import StateInvalid

T = TypeVar("T")


@dataclass(frozen=True)
class Problem:
    """One finding: the file, what is wrong, and whether it fails verify."""

    path: str
    message: str
    severity: str = "error"
    line: int | None = None  # 1-based line in the YAML file, when known
    unreadable: bool = False  # not YAML at all, or not readable: verify exits 7, as every command does

    def to_json(self, strict: bool = False) -> dict[str, object]:
        """For ``--json``; the severity is the one the text report prints (``--strict`` makes warnings errors)."""
        out: dict[str, object] = {
            "path": self.path,
            "message": self.message,
            "severity": "error" if strict else self.severity,
            "unreadable": self.unreadable,
        }
        if self.line is not None:
            out["line"] = self.line
        return out


@dataclass
class Facts:
    """What one episode records, normalised across the legacy and current layouts."""

    episode_id: str
    legacy: bool = False
    period_id: str = ""
    sequence: int = -1
    allocation_key: str | None = None
    artifacts: dict[str, Artifact] = field(default_factory=dict)
    costs: list[CostEntry] = field(default_factory=list)
    remote_refs: list[str] = field(default_factory=list)
    approval: tuple[str, str, str] | None = None
    completed_at: str | None = None
    unknown_steps: list[str] = field(default_factory=list)
    reservations: list[Attempt] = field(default_factory=list)  # the attempts that declared a maximum cost
    migrated_from: str | None = None  # the legacy week-only ID a migration gave this episode its ID for
    decisions: list[tuple[str, str, str]] = field(default_factory=list)  # every decision, oldest first


def read_reporting(path: str, problems: list[Problem], read: Callable[[list[str]], T]) -> T | None:
    """``read(found)`` of one of the record readers, with each problem it finds recorded against
    ``path``; None (and a problem) when one stops it."""
    found: list[str] = []
    try:
        value: T | None = read(found)
    except StateInvalid as exc:
        found.append(str(exc).removeprefix(f"{path}: "))
        value = None
    problems += [Problem(path, message) for message in found]
    return value


def artifacts_of(value: Any, path: str, problems: list[Problem]) -> dict[str, Artifact]:
    """An ``artifacts`` mapping in either layout; malformed records are problems."""
    return read_reporting(path, problems, lambda found: artifact_map(value, path, found)) or {}


def costs_of(value: Any, path: str, problems: list[Problem], *, legacy: bool) -> list[CostEntry]:
    """A list of cost entries (costs.yaml's, or a legacy episode.yaml's); malformed ones are problems."""
    return read_reporting(path, problems, lambda found: cost_list(value, path, found, legacy=legacy)) or []


def decided(decision: Decision | None) -> tuple[str, str, str] | None:
    """What a migration must keep of a decision: status, by whom, when."""
    return None if decision is None else (decision.status, decision.by, decision.at)


def legacy_facts(name: str, data: dict[str, Any], path: str, problems: list[Problem]) -> Facts:
    facts = Facts(name, legacy=True, period_id=name)
    fill_from_episode_fields(facts, data, path, problems)
    return facts


def fill_from_episode_fields(facts: Facts, data: dict[str, Any], path: str, problems: list[Problem]) -> None:
    """Fields that legacy episodes (and migrated ones, which keep them) carry in episode.yaml."""
    facts.artifacts.update(artifacts_of(data.get("artifacts"), path, problems))
    facts.costs += costs_of(data.get("costs"), path, problems, legacy=True)
    refs = data.get("remote_tasks") or []
    if not isinstance(refs, list) or not all(isinstance(r, str) for r in refs):
        problems.append(Problem(path, "remote_tasks must be a list of strings"))
    else:
        facts.remote_refs += refs
    legacy = decided(legacy_decision(data.get("approval")))
    facts.approval = legacy or facts.approval
    if legacy is not None:
        facts.decisions.insert(0, legacy)
    if data.get("completed_at") is not None:
        facts.completed_at = time_text(data["completed_at"])
    migration = data.get("migration")
    if isinstance(migration, dict) and isinstance(migration.get("from_id"), str):
        facts.migrated_from = migration["from_id"]


def migration_proof(base: dict[str, Facts], new: dict[str, Facts]) -> list[str]:
    """``compare`` over the episodes a change migrated (a new ID whose ``from_id`` was in base).

    Only those must be kept exactly: other episodes may grow (a cost, a decision), and what must
    never change in them is diff's business (its alarms), on every pull request.
    """
    moves = {eid: f.migrated_from for eid, f in new.items() if f.migrated_from in base and eid not in base}
    return compare({old: base[old] for old in moves.values() if old}, {eid: new[eid] for eid in moves})


def compare(base: dict[str, Facts], new: dict[str, Facts], *, kept_only: bool = False) -> list[str]:
    """What a migration must preserve, as lines ``what: old -> new``; empty when all is kept.

    With ``kept_only`` (``verify --against`` on any pull request) only what base recorded and the
    new revision lost or changed counts: the ledgers are append-only, so a change may add to them.
    """
    lines: list[str] = []
    lost = False

    def multiset(label: str, old: Counter[Any], cur: Counter[Any]) -> None:
        nonlocal lost
        for item in sorted(set(old) | set(cur), key=repr):
            if old[item] > cur[item] or (old[item] != cur[item] and not kept_only):
                lost = lost or old[item] > cur[item]
                lines.append(f"{label} {item}: {old[item]} in base, {cur[item]} now")

    def gather(facts: dict[str, Facts]) -> dict[str, Counter[Any]]:
        kinds = ("hash", "cost", "ref", "approval", "completed", "reservation")
        out: dict[str, Counter[Any]] = {k: Counter() for k in kinds}
        for f in facts.values():
            out["hash"].update(f"sha256:{a.sha256}" for a in f.artifacts.values())
            out["cost"].update((c.step, c.amount, c.currency, c.remote_ref) for c in f.costs)
            out["ref"].update(f.remote_refs)
            out["reservation"].update(
                (f.episode_id, a.step, a.number, *a.reservation) for a in f.reservations if a.reservation
            )
            out["approval"].update(f.decisions)
            if f.completed_at:
                out["completed"][f.completed_at] += 1
        return out

    old, cur = gather(base), gather(new)
    multiset("artifact hash", old["hash"], cur["hash"])
    multiset("cost entry", old["cost"], cur["cost"])
    old_totals = sum_by_currency((a, c) for (_s, a, c, _r), n in old["cost"].items() for _ in range(n))
    cur_totals = sum_by_currency((a, c) for (_s, a, c, _r), n in cur["cost"].items() for _ in range(n))
    for currency in sorted(set(old_totals) | set(cur_totals)):
        if old_totals.get(currency) != cur_totals.get(currency) and (lost or not kept_only):
            lines.append(
                f"total {currency}: {old_totals.get(currency, '0')} in base, {cur_totals.get(currency, '0')} now"
            )
    multiset("remote task", old["ref"], cur["ref"])
    if sum(old["ref"].values()) > sum(cur["ref"].values()) or (
        sum(old["ref"].values()) != sum(cur["ref"].values()) and not kept_only
    ):
        lines.append(f"remote task count: {sum(old['ref'].values())} in base, {sum(cur['ref'].values())} now")
    multiset("approval", old["approval"], cur["approval"])
    multiset("completion time", old["completed"], cur["completed"])
    multiset("reservation", old["reservation"], cur["reservation"])
    return lines
