"""The self-contained HTML report: inline SVG charts and tables, no script, no network (it opens anywhere, from a
CronJob's volume or a CI artifact). Pure: rows in, one HTML string out.

Charts: rebalances per day (per group, the worst ones), the duration distribution, causes; tables: worst groups,
flapping members, vigil's actions on stalls and what became of them.
"""

from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime
from html import escape
from typing import Any

from vigil_spark.outputs.summary import GroupSummary, Row, when

#: Duration buckets of the distribution chart (upper bounds in seconds; the last is open).
BUCKETS: tuple[tuple[str, float], ...] = (("<1 s", 1), ("1–5 s", 5), ("5–30 s", 30), ("30–120 s", 120),
                                          ("2–10 min", 600), (">10 min", float("inf")))  # fmt: skip
STYLE = (
    "body{font-family:system-ui,sans-serif;margin:2em;color:#222} table{border-collapse:collapse;margin:1em 0}"
    " td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left} th{background:#f3f3f3}"
    " figure{margin:1.5em 0} figcaption{font-weight:bold;margin-bottom:.5em} svg text{font-size:12px}"
    " .empty{color:#888}"
)
WORST_COLUMNS = (("group", "group"), ("24h", "last 24 h"), ("all", "all"), ("p95", "p95 (24 h, s)"),
                 ("cause", "top cause (24 h)"), ("last", "last rebalance"), ("gaps", "unseen (gaps)"))  # fmt: skip
FLAPPING_COLUMNS = (("group", "group"), ("identity", "identity"), ("joins", "joins"), ("leaves", "leaves"),
                    ("churn", "churn"), ("replacements", "static replacements"),
                    ("last_seen", "last seen"))  # fmt: skip
STALL_COLUMNS = (("group", "group"), ("pod", "pod"), ("started", "started"), ("duration_s", "duration (s)"),
                 ("action", "vigil's action"), ("outcome", "outcome"))  # fmt: skip
_PALETTE = ("#3366cc", "#dc3912", "#ff9900", "#109618", "#990099", "#0099c6", "#dd4477", "#66aa00")


def bars(items: Sequence[tuple[str, float]], *, title: str, width: int = 640, unit: str = "") -> str:
    """A horizontal bar chart (SVG) of `items` (label, value); with nothing above 0 it says so instead."""
    if not any(value > 0 for _, value in items):
        return f'<figure><figcaption>{escape(title)}</figcaption><p class="empty">nothing to show</p></figure>'
    row, label_w = 22, 160
    top = max(v for _, v in items) or 1.0
    height = row * len(items) + 10
    parts = [f'<svg role="img" aria-label="{escape(title)}" width="{width}" height="{height}"'
             f' viewBox="0 0 {width} {height}">']  # fmt: skip
    for i, (label, value) in enumerate(items):
        y = 5 + i * row
        w = max(1.0, (width - label_w - 70) * value / top)
        parts.append(f'<text x="{label_w - 6}" y="{y + 15}" text-anchor="end">{escape(label)}</text>')
        color = _PALETTE[i % len(_PALETTE)]
        parts.append(f'<rect x="{label_w}" y="{y + 3}" width="{w:.1f}" height="{row - 6}" fill="{color}">'
                     f"<title>{escape(label)}: {value:g}{escape(unit)}</title></rect>")  # fmt: skip
        parts.append(f'<text x="{label_w + w + 6:.1f}" y="{y + 15}">{value:g}{escape(unit)}</text>')
    parts.append("</svg>")
    return f"<figure><figcaption>{escape(title)}</figcaption>{''.join(parts)}</figure>"


def timeline(rebalances: Sequence[Row], groups: Sequence[str], *, width: int = 720, height: int = 220) -> str:
    """Rebalances per day for each of `groups` (one polyline each, a legend), SVG."""
    days = sorted({d.date() for r in rebalances if (d := when(r)) is not None})
    title = "Rebalances per day"
    if not days or not groups:
        return f'<figure><figcaption>{title}</figcaption><p class="empty">nothing to show</p></figure>'
    counts: Counter[tuple[str, Any]] = Counter()
    for r in rebalances:
        d = when(r)
        if d is not None and str(r["group"]) in groups:
            counts[(str(r["group"]), d.date())] += int(r.get("rebalances") or 1)
    top = max(counts.values(), default=1)
    left, bottom = 40, 30
    step = (width - left - 10) / max(1, len(days) - 1)

    def point(i: int, value: int) -> str:
        return f"{left + i * step:.1f},{height - bottom - (height - bottom - 10) * value / top:.1f}"

    parts = [f'<svg role="img" aria-label="{title}" width="{width}" height="{height + 20 * len(groups)}"'
             f' viewBox="0 0 {width} {height + 20 * len(groups)}">',
             f'<line x1="{left}" y1="{height - bottom}" x2="{width - 10}" y2="{height - bottom}" stroke="#999"/>',
             f'<text x="4" y="16">{top}</text>',
             f'<text x="{left}" y="{height - 10}">{days[0]}</text>',
             f'<text x="{width - 10}" y="{height - 10}" text-anchor="end">{days[-1]}</text>']  # fmt: skip
    for g, group in enumerate(groups):
        color = _PALETTE[g % len(_PALETTE)]
        points = " ".join(point(i, counts[(group, day)]) for i, day in enumerate(days))
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{points}">'
                     f"<title>{escape(group)}</title></polyline>")  # fmt: skip
        for i, day in enumerate(days):  # a dot per day: a single day's line would be invisible
            x, y_value = point(i, counts[(group, day)]).split(",")
            parts.append(f'<circle cx="{x}" cy="{y_value}" r="3" fill="{color}">'
                         f"<title>{escape(group)} {day}: {counts[(group, day)]}</title></circle>")  # fmt: skip
        y = height + 16 + 20 * g
        parts.append(f'<rect x="{left}" y="{y - 10}" width="12" height="12" fill="{color}"/>'
                     f'<text x="{left + 18}" y="{y}">{escape(group)}</text>')  # fmt: skip
    parts.append("</svg>")
    return f"<figure><figcaption>{title}</figcaption>{''.join(parts)}</figure>"


def table(rows: Sequence[Mapping[str, Any]], columns: Sequence[tuple[str, str]], *, title: str) -> str:
    """An HTML table of `rows` with (key, header) `columns`; empty → a line saying so."""
    if not rows:
        return f'<h2>{escape(title)}</h2><p class="empty">none</p>'
    head = "".join(f"<th>{escape(h)}</th>" for _, h in columns)
    body = "".join("<tr>" + "".join(f"<td>{escape(_cell(r.get(k)))}</td>" for k, _ in columns) + "</tr>" for r in rows)
    return f"<h2>{escape(title)}</h2><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render(
    now: datetime, summaries: Sequence[GroupSummary], rebalances: Sequence[Row], members: Sequence[Row],
    stalls: Sequence[Row], *, worst: int = 8,
) -> str:  # fmt: skip
    """The whole report."""
    observed = [r for r in rebalances if not r.get("gap")]
    causes = Counter(str(r.get("cause") or "unknown") for r in observed)
    durations = [float(r["duration_s"]) for r in observed if r.get("duration_s") is not None]
    lowers = (0.0, *(upper for _, upper in BUCKETS[:-1]))
    histogram = [(label, float(sum(1 for d in durations if lower <= d < upper)))
                 for (label, upper), lower in zip(BUCKETS, lowers, strict=True)]  # fmt: skip
    top_groups = [s.group for s in summaries[:worst]]
    flapping = flapping_identities(members)
    worst_rows = [
        {"group": f"{s.cluster}/{s.group}", "24h": s.rebalances_24h, "all": s.rebalances_total,
         "p95": s.p95_duration_s_24h, "cause": s.top_cause_24h, "last": s.last_rebalance, "gaps": s.gaps}
        for s in summaries[:25]
    ]  # fmt: skip
    total = sum(s.rebalances_24h for s in summaries)
    sections = [
        timeline(rebalances, top_groups),
        bars(histogram, title="Duration of rebalances"),
        bars(sorted(causes.items(), key=lambda kv: (-kv[1], kv[0])), title="Causes"),
        table(worst_rows, WORST_COLUMNS, title="Worst groups"),
        table(flapping, FLAPPING_COLUMNS, title="Flapping members"),
        table(stalls, STALL_COLUMNS, title="vigil's actions on stalls"),
    ]
    totals = (
        f"{escape(_cell(now))}: <strong>{total}</strong> rebalances in the last 24 h across"
        f" <strong>{len(summaries)}</strong> group(s); {len(observed)} rebalances observed in all,"
        f" {len(flapping)} flapping member(s), {len(stalls)} stall(s) vigil saw."
    )
    body = "\n".join(sections)
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>vigil rebalance report</title>\n'
        f"<style>{STYLE}</style></head><body>\n<h1>Rebalance report</h1>\n"
        f'<p id="totals">{totals}</p>\n{body}\n</body></html>\n'
    )


def flapping_identities(members: Sequence[Row]) -> list[Row]:
    """One row per flapping (cluster, group, identity), its latest member id's: the model repeats an identity's
    totals on each of its member ids, and one restart-prone pod is one problem, not one per restart."""
    latest: dict[tuple[Any, Any, Any], Row] = {}
    for m in members:
        if not m.get("flapping"):
            continue
        key = (m.get("cluster"), m.get("group"), m.get("identity"))
        seen = latest.get(key)
        if seen is None or _after(m.get("last_seen"), seen.get("last_seen")):
            latest[key] = m
    return sorted(
        latest.values(), key=lambda m: (-int(m.get("churn") or 0), str(m.get("group")), str(m.get("identity")))
    )


def _after(a: Any, b: Any) -> bool:
    return b is None or (a is not None and a > b)


def _cell(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, datetime):
        return value.replace(microsecond=0).isoformat().replace("+00:00", "Z")
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)
