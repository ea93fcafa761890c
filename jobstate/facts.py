"""What an episode records, normalised across the legacy and current layouts, and the proof that a
migration preserved it (``verify --against``). Pure: values in, values out.
"""

from __future__ import annotations

import reprlib
from collections import Counter
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from jobstate.core.attempts import Attempt
from jobstate.core.money import check_cost_entry, totals
from jobstate.errors import StateInvalid


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
    artifacts: dict[str, tuple[str, int | None]] = field(default_factory=dict)
    costs: list[tuple[str, str, str, str | None]] = field(default_factory=list)
    remote_refs: list[str] = field(default_factory=list)
    approval: tuple[str, str, str] | None = None
    completed_at: str | None = None
    unknown_steps: list[str] = field(default_factory=list)
    reservations: list[Attempt] = field(default_factory=list)  # the attempts that declared a maximum cost


def artifact_map(value: Any, path: str, problems: list[Problem]) -> dict[str, tuple[str, int | None]]:
    """Both layouts: ``{name: 'sha256:<hex>'}`` (legacy) and ``{name: {sha256, size}}``."""
    out: dict[str, tuple[str, int | None]] = {}
    if value is None:
        return out
    if not isinstance(value, dict):
        problems.append(Problem(path, "artifacts must be a mapping of path to hash"))
        return out
    for name, record in value.items():
        if isinstance(record, str) and record.startswith("sha256:") and len(record) == 71:
            out[str(name)] = (record[7:], None)
        elif isinstance(record, dict) and isinstance(record.get("sha256"), str) and isinstance(record.get("size"), int):
            out[str(name)] = (record["sha256"], record["size"])
        else:
            problems.append(Problem(path, f"artifact {name!r}: expected sha256 and size, found {reprlib.repr(record)}"))
    return out


def cost_tuples(
    entries: Any, path: str, problems: list[Problem], legacy: bool
) -> list[tuple[str, str, str, str | None]]:
    out: list[tuple[str, str, str, str | None]] = []
    if entries is None:
        return out
    if not isinstance(entries, list):
        problems.append(Problem(path, "costs must be a list of entries"))
        return out
    for entry in entries:
        try:
            if legacy:
                if not isinstance(entry, dict):
                    raise StateInvalid("a cost entry must be a mapping")
                Decimal(str(entry["amount"]))
                if not isinstance(entry["amount"], str):
                    raise StateInvalid(f"amount {entry['amount']!r} must be a decimal string, not a number")
            else:
                check_cost_entry(entry, path)
            out.append((str(entry["step"]), str(entry["amount"]), str(entry["currency"]), entry.get("remote_ref")))
        except (StateInvalid, KeyError, InvalidOperation, TypeError) as exc:
            problems.append(
                Problem(path, f"malformed cost entry {reprlib.repr(entry)}: {str(exc).removeprefix(path + ': ')}")
            )
    return out


def approval(value: Any) -> tuple[str, str, str] | None:
    if isinstance(value, dict) and "status" in value:
        return (str(value.get("status")), str(value.get("by")), str(value.get("at")))
    return None


def legacy_facts(name: str, data: dict[str, Any], path: str, problems: list[Problem]) -> Facts:
    facts = Facts(name, legacy=True, period_id=name)
    fill_from_episode_fields(facts, data, path, problems)
    return facts


def fill_from_episode_fields(facts: Facts, data: dict[str, Any], path: str, problems: list[Problem]) -> None:
    """Fields that legacy episodes (and migrated ones, which keep them) carry in episode.yaml."""
    facts.artifacts.update(artifact_map(data.get("artifacts"), path, problems))
    facts.costs += cost_tuples(data.get("costs"), path, problems, legacy=True)
    refs = data.get("remote_tasks") or []
    if not isinstance(refs, list) or not all(isinstance(r, str) for r in refs):
        problems.append(Problem(path, "remote_tasks must be a list of strings"))
    else:
        facts.remote_refs += refs
    facts.approval = approval(data.get("approval")) or facts.approval
    if data.get("completed_at") is not None:
        facts.completed_at = time_text(data["completed_at"])


def compare(base: dict[str, Facts], new: dict[str, Facts]) -> list[str]:
    """What a migration must preserve, as lines ``what: old -> new``; empty when all is kept."""
    lines: list[str] = []

    def multiset(label: str, old: Counter[Any], cur: Counter[Any]) -> None:
        for item in sorted(set(old) | set(cur), key=repr):
            if old[item] != cur[item]:
                lines.append(f"{label} {item}: {old[item]} in base, {cur[item]} now")

    def gather(facts: dict[str, Facts]) -> dict[str, Counter[Any]]:
        kinds = ("hash", "cost", "ref", "approval", "completed", "reservation")
        out: dict[str, Counter[Any]] = {k: Counter() for k in kinds}
        for f in facts.values():
            out["hash"].update(f"sha256:{sha}" for sha, _size in f.artifacts.values())
            out["cost"].update(f.costs)
            out["ref"].update(f.remote_refs)
            out["reservation"].update(
                (f.episode_id, a.step, a.number, *a.reservation) for a in f.reservations if a.reservation
            )
            if f.approval:
                out["approval"][f.approval] += 1
            if f.completed_at:
                out["completed"][f.completed_at] += 1
        return out

    old, cur = gather(base), gather(new)
    multiset("artifact hash", old["hash"], cur["hash"])
    multiset("cost entry", old["cost"], cur["cost"])
    old_totals = totals([{"amount": a, "currency": c} for (_s, a, c, _r), n in old["cost"].items() for _ in range(n)])
    cur_totals = totals([{"amount": a, "currency": c} for (_s, a, c, _r), n in cur["cost"].items() for _ in range(n)])
    for currency in sorted(set(old_totals) | set(cur_totals)):
        if old_totals.get(currency) != cur_totals.get(currency):
            lines.append(
                f"total {currency}: {old_totals.get(currency, '0')} in base, {cur_totals.get(currency, '0')} now"
            )
    multiset("remote task", old["ref"], cur["ref"])
    if sum(old["ref"].values()) != sum(cur["ref"].values()):
        lines.append(f"remote task count: {sum(old['ref'].values())} in base, {sum(cur['ref'].values())} now")
    multiset("approval", old["approval"], cur["approval"])
    multiset("completion time", old["completed"], cur["completed"])
    multiset("reservation", old["reservation"], cur["reservation"])
    return lines


def time_text(value: Any) -> str | None:
    """A recorded time as text: jobstate writes strings; a legacy file may hold an unquoted YAML
    timestamp, which loads as a datetime and is compared in the same text either way."""
    if isinstance(value, str):
        return value
    if isinstance(value, (datetime, date)):
        return str(value)
    return None
