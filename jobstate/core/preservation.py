"""What a migration must preserve, and the proof it did (``verify --against``). Pure: records in,
differences out."""

from __future__ import annotations

from collections import Counter
from typing import Any

from jobstate.core.episode_records import EpisodeRecords
from jobstate.core.money import sum_by_currency


def compare(base: dict[str, EpisodeRecords], new: dict[str, EpisodeRecords]) -> list[str]:
    """What a migration must preserve, as lines ``what: old -> new``; empty when all is kept."""
    lines: list[str] = []

    def multiset(label: str, old: Counter[Any], cur: Counter[Any]) -> None:
        for item in sorted(set(old) | set(cur), key=repr):
            if old[item] != cur[item]:
                lines.append(f"{label} {item}: {old[item]} in base, {cur[item]} now")

    def gather(found: dict[str, EpisodeRecords]) -> dict[str, Counter[Any]]:
        kinds = ("hash", "cost", "ref", "approval", "completed", "reservation")
        out: dict[str, Counter[Any]] = {k: Counter() for k in kinds}
        for f in found.values():
            out["hash"].update(f"sha256:{a.sha256}" for a in f.artifacts.values())
            out["cost"].update((c.step, c.amount, c.currency, c.remote_ref) for c in f.costs)
            out["ref"].update(f.remote_refs)
            out["reservation"].update(
                (f.episode_id, a.step, a.number, *a.reservation) for a in f.reservations if a.reservation
            )
            if f.approval is not None:
                # what a migration must keep of a decision: status, by whom, when
                out["approval"][(f.approval.status, f.approval.by, f.approval.at)] += 1
            if f.completed_at:
                out["completed"][f.completed_at] += 1
        return out

    old, cur = gather(base), gather(new)
    multiset("artifact hash", old["hash"], cur["hash"])
    multiset("cost entry", old["cost"], cur["cost"])
    old_totals = sum_by_currency((a, c) for (_s, a, c, _r), n in old["cost"].items() for _ in range(n))
    cur_totals = sum_by_currency((a, c) for (_s, a, c, _r), n in cur["cost"].items() for _ in range(n))
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
