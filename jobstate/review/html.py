"""The report as one self-contained HTML page: inline CSS and SVG, no script, nothing fetched.

Pure: a Report in, a string out.
"""

from __future__ import annotations

from decimal import Decimal
from html import escape

from jobstate.review.render import money, report_sections
from jobstate.review.report import Report

COLORS = {
    "allocated": "#9aa5b1",
    "running": "#2f80ed",
    "awaiting-review": "#9b51e0",
    "unknown": "#d64545",
    "approved": "#27ae60",
    "rejected": "#e67e22",
    "completed": "#1b5e20",
}
_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#1f2933;background:#fff}
h1{font-size:20px}h2{font-size:16px;margin-top:28px}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #cbd2d9;padding:3px 8px;text-align:left}
th{background:#f0f4f8}.loud{border:2px solid #d64545;padding:8px;background:#fff5f5}
.legend span{display:inline-block;margin-right:12px}.legend i{display:inline-block;width:12px;height:12px;
margin-right:4px;vertical-align:middle}svg text{font:11px system-ui,sans-serif;fill:#1f2933}
"""
_BAR_W, _CHART_H = 36, 160


def _chart(r: Report, currency: str) -> str:
    values = [(p["period_id"], Decimal(p["spend"].get(currency, "0"))) for p in r.periods]
    top = max((v for _p, v in values), default=Decimal(0)) or Decimal(1)
    width = 60 + len(values) * (_BAR_W + 8)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{_CHART_H + 60}" '
        f'role="img" aria-label="spend per period in {escape(currency)}">',
        f'<line x1="50" y1="{_CHART_H + 10}" x2="{width}" y2="{_CHART_H + 10}" stroke="#52606d"/>',
        f'<text x="0" y="20">{escape(str(top))}</text><text x="0" y="{_CHART_H + 10}">0</text>',
    ]
    for i, (period, value) in enumerate(values):
        h = int(_CHART_H * value / top)
        x = 56 + i * (_BAR_W + 8)
        parts.append(
            f'<rect x="{x}" y="{_CHART_H + 10 - h}" width="{_BAR_W}" height="{h}" fill="#2f80ed">'
            f"<title>{escape(period)}: {value} {escape(currency)}</title></rect>"
            f'<text x="{x}" y="{_CHART_H + 26}" transform="rotate(35 {x} {_CHART_H + 26})">{escape(period)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _timeline(r: Report) -> str:
    by_period: dict[str, list[dict[str, object]]] = {}
    for e in r.episodes:
        by_period.setdefault(str(e["period_id"]), []).append(e)
    box, row_h = 14, 20
    widest = max((len(v) for v in by_period.values()), default=0)
    width = 110 + widest * (box + 3)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{len(by_period) * row_h + 10}" '
        'role="img" aria-label="episodes per period and their status">'
    ]
    for row, (period, episodes) in enumerate(sorted(by_period.items())):
        y = 5 + row * row_h
        parts.append(f'<text x="0" y="{y + 12}">{escape(period)}</text>')
        for i, e in enumerate(episodes):
            status = str(e["status"])
            parts.append(
                f'<rect x="{110 + i * (box + 3)}" y="{y}" width="{box}" height="{box}" '
                f'fill="{COLORS.get(status, "#000")}"><title>{escape(str(e["episode_id"]))}: {escape(status)}'
                "</title></rect>"
            )
    parts.append("</svg>")
    return "".join(parts)


def to_html(r: Report) -> str:
    """One page: heading, spend chart per currency, episode timeline, then the report's tables."""
    head, sections = report_sections(r)
    legend = "".join(f'<span><i style="background:{c}"></i>{s}</span>' for s, c in COLORS.items())
    body = [f"<h1>{escape(head)}</h1>"]
    body.append("<h2>Spend per period</h2>")
    body += [f"<h3>{escape(c)}</h3>{_chart(r, c)}" for c in r.totals] or ["<p>No spend recorded.</p>"]
    body.append(f'<h2>Episodes and their states</h2><p class="legend">{legend}</p>{_timeline(r)}')
    for sec in sections:
        cls = ' class="loud"' if sec.loud else ""
        rows = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in sec.rows)
        head_row = "".join(f"<th>{escape(h)}</th>" for h in sec.headers)
        note = f"<p>{escape(sec.note)}</p>" if sec.note else ""
        body.append(
            f"<section{cls}><h2>{escape(sec.title)} ({len(sec.rows)})</h2>{note}"
            f"<table><thead><tr>{head_row}</tr></thead><tbody>{rows}</tbody></table></section>"
        )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<link rel="icon" href="data:,">'
        f"<title>{escape(head)}</title><style>{_CSS}</style></head>\n<body>\n"
        + "\n".join(body)
        + f"\n<p>Totals: {escape(money(r.totals))}</p>\n</body></html>\n"
    )
