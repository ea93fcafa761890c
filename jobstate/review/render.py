"""Text, Markdown and JSON renderings of a diff or a report. Pure: values in, strings out.

Markdown fits a character budget (GitHub: 65,536 characters for a pull request
comment, 1 MiB for a step summary). The budget is counted in UTF-8 bytes, so a
page that fits it fits either limit. Whole sections that do not fit are left out
and a marker at the end says which; the loud section (changes that should never
happen) always comes first and is shortened row by row only if it alone is too long.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from jobstate.errors import UsageError
from jobstate.review import escape
from jobstate.review.diff import Diff
from jobstate.review.report import Report

COMMENT_LIMIT = 65_536  # a GitHub pull request comment, in characters
SUMMARY_LIMIT = 1 << 20  # a GitHub step summary, 1 MiB
MIN_CHARS = 2_000
_MARKER_ROOM = 1_000


@dataclass
class Section:
    """A titled table; ``loud`` sections are the ones that should never happen."""

    title: str
    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)
    note: str = ""
    loud: bool = False


def money(sums: dict[str, str]) -> str:
    """``12.40 USD, 3.00 EUR`` (or ``-``)."""
    return ", ".join(f"{amount} {currency}" for currency, amount in sums.items()) or "-"


def _s(value: Any) -> str:
    return "-" if value is None else str(value)


def _by(decision: dict[str, Any]) -> str:
    """``by`` and, beside it, what the decision's commit signature says of who made it."""
    status, signer = decision.get("signature"), decision.get("signer")
    if status == "G":
        return f"{decision['by']} (signed: {signer})"
    if status in (None, "N"):
        return _s(decision["by"])
    return f"{decision['by']} (signature not verified: {status})"


def diff_sections(d: Diff) -> tuple[str, list[Section]]:
    """The heading and sections of a diff, in the order they are shown."""
    head = f"jobstate diff {d.base}..{d.rev}"
    out: list[Section] = []
    if d.alarms:
        rows = [[a["kind"], a["episode"], a["message"]] for a in d.alarms]
        out.append(Section("Changes that should never happen", ["change", "episode", "what"], rows, loud=True))
    if d.settings:
        rows = [[str(s["setting"]), _s(s["old"]), _s(s["new"])] for s in d.settings]
        out.append(Section("Settings changed (jobstate.yaml)", ["setting", "before", "now"], rows))
    if d.retired:
        rows = [[r["episode_id"], _s(r["by"]), _s(r["at"]), _s(r["reason"])] for r in d.retired]
        out.append(
            Section("Episodes retired (ID and key kept by a tombstone)", ["episode", "by", "at", "reason"], rows)
        )
    if d.acknowledged:
        rows = [
            [
                _s(a.get("period")),
                f"{_s(a.get('total'))} of {_s(a.get('cap'))} {_s(a.get('currency'))}",
                _s(a.get("by")),
                _s(a.get("reason")),
            ]
            for a in d.acknowledged
        ]
        out.append(Section("Budget overruns acknowledged", ["budget", "spent of cap", "by", "reason"], rows))
    if d.unreadable:
        out.append(Section("Unreadable files (jobstate verify says more)", ["file"], [[u] for u in d.unreadable]))
    if d.allocated:
        rows = [[a["episode_id"], a["period_id"], _s(a["allocation_key"])] for a in d.allocated]
        out.append(Section("Episodes allocated", ["episode", "period", "key"], rows))
    if d.steps:
        rows = [[s["episode_id"], s["step"], _s(s["attempt"]), "; ".join(s["events"])] for s in d.steps]
        out.append(Section("Paid steps", ["episode", "step", "attempt", "what happened"], rows))
    if d.costs:
        by_period = [[p, money(sums)] for p, sums in d.cost_by_period().items()]
        out.append(
            Section("Costs added per period", ["period", "added"], by_period, note=f"total {money(d.cost_totals())}")
        )
        rows = [[c["episode_id"], _s(c["step"]), c["amount"], _s(c["currency"]), _s(c["remote_ref"])] for c in d.costs]
        out.append(Section("Cost entries added", ["episode", "step", "amount", "currency", "remote task"], rows))
    if d.budgets:
        out.append(Section("Budgets", ["budget", "use"], [[_s(b.get("name")), _s(b.get("use"))] for b in d.budgets]))
    if d.decisions:
        rows = [[x["episode_id"], _s(x["status"]), _by(x), _s(x["reason"])] for x in d.decisions]
        out.append(Section("Approvals and rejections", ["episode", "decision", "by", "reason"], rows))
    if d.completed:
        rows = [[c["episode_id"], c["completed_at"], money(c["cost_totals"])] for c in d.completed]
        out.append(Section("Episodes completed", ["episode", "completed at", "cost"], rows))
    if d.migrations:
        if d.preservation:
            note = "NOT preserved (base beside now): " + "; ".join(d.preservation)
        else:
            note = "preserved: artifact hashes, cost entries and totals, remote tasks, approvals, completion times"
        rows = [[m["from_id"], m["episode_id"]] for m in d.migrations]
        out.append(Section("Migrated", ["from", "to"], rows, note=note, loud=bool(d.preservation)))
    return head, out


def report_sections(r: Report) -> tuple[str, list[Section]]:
    """The heading and sections of a report, in the order they are shown."""
    span = "" if r.since is None and r.until is None else f", periods {r.since or '...'} to {r.until or '...'}"
    head = f"jobstate report {r.rev}{span}: {len(r.episodes)} episodes, spend {money(r.totals)}"
    out: list[Section] = []
    if r.unknown:
        rows = [[u["episode_id"], u["step"], _s(u["attempt"]), _s(u["started_at"]), u["resolve"]] for u in r.unknown]
        out.append(
            Section("Steps left unknown", ["episode", "step", "attempt", "started", "settle with"], rows, loud=True)
        )
    if r.unreadable:
        out.append(Section("Unreadable files (jobstate verify says more)", ["file"], [[u] for u in r.unreadable]))
    rows = [
        [p["period_id"], str(p["episodes"]), ", ".join(f"{n} {s}" for s, n in p["statuses"].items()), money(p["spend"])]
        for p in r.periods
    ]
    out.append(Section("Periods", ["period", "episodes", "statuses", "spend"], rows))
    rows = [[step, money(sums)] for step, sums in r.spend_by_step.items()]
    out.append(Section("Spend per step", ["step", "spend"], rows))
    if r.budgets:
        out.append(Section("Budgets", ["budget", "use"], [[_s(b.get("name")), _s(b.get("use"))] for b in r.budgets]))
    rows = [
        [e["episode_id"], e["status"], _s(e["allocation_key"]), money(e["spend"]), _s(e["completed_at"])]
        for e in r.episodes
    ]
    out.append(Section("Episodes", ["episode", "status", "key", "spend", "completed at"], rows))
    return head, out


def to_text(head: str, sections: list[Section], empty: str = "") -> str:
    """Plain text: a heading, then each section as aligned columns (state content escaped)."""
    lines = [escape.text(head)]
    if not sections and empty:
        lines.append(empty)
    for sec in sections:
        mark = "!! " if sec.loud else ""
        lines += ["", f"{mark}{sec.title} ({len(sec.rows)}):"]
        if sec.note:
            lines.append(f"  {mark}{escape.text(sec.note)}")
        rows = [[escape.text(c) for c in row] for row in sec.rows]
        widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(sec.headers)]
        # one header row, in capitals as kubectl and ps print theirs, so a column is never a guess
        for row in [[h.upper() for h in sec.headers], *rows] if rows else []:
            cells = [c.ljust(min(w, 40)) for c, w in zip(row[:-1], widths, strict=False)] + row[-1:]
            lines.append(f"  {mark}" + "  ".join(cells).rstrip())
    return "\n".join(lines) + "\n"


def _md_section(sec: Section, rows: list[list[str]], more: int = 0) -> str:
    parts = []
    if sec.loud:
        parts.append(f"> [!CAUTION]\n> **{sec.title} ({len(sec.rows)})**\n")
    else:
        parts.append(f"### {sec.title} ({len(sec.rows)})\n")
    if sec.note:
        parts.append(f"{escape.markdown(sec.note)}\n")
    if rows:
        table = "| " + " | ".join(sec.headers) + " |\n|" + "---|" * len(sec.headers) + "\n"
        parts.append(table + "".join("| " + " | ".join(escape.markdown(c) for c in row) + " |\n" for row in rows))
    if more:
        parts.append(f"\n*… and {more} more rows, left out to fit.*\n")
    return "\n".join(parts) + "\n"


def _size(text: str) -> int:
    return len(text.encode("utf-8"))


def to_markdown(head: str, sections: list[Section], *, max_chars: int, full: str, empty: str = "") -> str:
    """Markdown of at most ``max_chars`` (UTF-8 bytes); ``full`` is the command that shows everything."""
    if max_chars < MIN_CHARS:
        raise UsageError(f"--max-chars {max_chars} is too small: give at least {MIN_CHARS}")
    out = f"## {escape.markdown(head)}\n\n" + (f"{empty}\n\n" if not sections and empty else "")
    budget = max_chars - _MARKER_ROOM
    left_out: list[str] = []
    for sec in sections:
        text = _md_section(sec, sec.rows)
        if _size(out) + _size(text) <= budget:
            out += text
            continue
        if sec.loud:  # never drop the loud section: shorten it to what fits
            lo, hi = 0, len(sec.rows)
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if _size(out) + _size(_md_section(sec, sec.rows[:mid], len(sec.rows) - mid)) <= budget:
                    lo = mid
                else:
                    hi = mid - 1
            out += _md_section(sec, sec.rows[:lo], len(sec.rows) - lo)
            continue
        left_out.append(f"{sec.title} ({len(sec.rows)} rows)")
    if left_out:
        out += (
            f"---\n**Cut to fit {max_chars:,} characters.** Left out: {escape.markdown(', '.join(left_out))}. "
            f"Everything: {escape.markdown_code(full)}\n"
        )
    return out


def to_json(value: Diff | Report) -> str:
    """The complete value as indented JSON."""
    return json.dumps(value.to_json(), indent=2, ensure_ascii=False) + "\n"


def render(value: Diff | Report, fmt: str, *, max_chars: int = COMMENT_LIMIT) -> str:
    """``value`` as ``text``, ``markdown`` or ``json`` (``html`` is in jobstate.review.html)."""
    if fmt == "json":
        return to_json(value)
    if isinstance(value, Diff):
        head, sections = diff_sections(value)
        empty = "No changes to the state." if value.empty() else ""
        full = escape.shell_command("jobstate", "diff", value.base, value.rev, "--format", "json")
    else:
        head, sections = report_sections(value)
        empty = ""
        span = [a for k, v in (("--since", value.since), ("--until", value.until)) if v for a in (k, v)]
        full = escape.shell_command("jobstate", "report", "--rev", value.rev, *span, "--format", "json")
    if fmt == "text":
        return to_text(head, sections, empty)
    if fmt == "markdown":
        return to_markdown(head, sections, max_chars=max_chars, full=full, empty=empty)
    raise UsageError(f"unknown format {fmt!r}: use text, markdown or json")
