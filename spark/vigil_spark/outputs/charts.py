"""The report's charts: inline SVG strings, no script (they open anywhere). Pure: rows in, markup out.

`timeline` draws rebalances over time for the worst groups: hourly bins when the history is short (a one-day
history in daily bins was a single dot), daily otherwise, every bin from the first to the last (an idle day is a
0, not skipped), each group's dots a little apart so one cannot hide another. `group_timeline` draws one group:
each rebalance a mark coloured by its cause, and the member count after each as a step line.
"""

import itertools
from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timedelta
from html import escape
from typing import Final

from vigil_spark.outputs.summary import Row, when
from vigil_spark.parse.broker_log import CAUSES

PALETTE: Final = ("#3366cc", "#dc3912", "#ff9900", "#109618", "#990099", "#0099c6", "#dd4477", "#66aa00")
#: One colour per cause of the closed vocabulary, the same in every chart.
CAUSE_COLORS: Final = {cause: PALETTE[i % len(PALETTE)] for i, cause in enumerate(CAUSES)}
#: Up to this long a history is binned by the hour.
HOURLY_UP_TO: Final = timedelta(days=3)


def empty(title: str) -> str:
    return f'<figure><figcaption>{escape(title)}</figcaption><p class="empty">nothing to show</p></figure>'


def bars(items: Sequence[tuple[str, float]], *, title: str, width: int = 640, unit: str = "") -> str:
    """A horizontal bar chart of `items` (label, value); with nothing above 0 it says so instead."""
    if not any(value > 0 for _, value in items):
        return empty(title)
    row, label_w = 22, 160
    top = max(v for _, v in items) or 1.0
    height = row * len(items) + 10
    parts = [f'<svg role="img" aria-label="{escape(title)}" width="{width}" height="{height}"'
             f' viewBox="0 0 {width} {height}">']  # fmt: skip
    for i, (label, value) in enumerate(items):
        y = 5 + i * row
        w = max(1.0, (width - label_w - 70) * value / top)
        parts.append(f'<text x="{label_w - 6}" y="{y + 15}" text-anchor="end">{escape(label)}</text>')
        color = CAUSE_COLORS.get(label, PALETTE[i % len(PALETTE)])
        parts.append(f'<rect x="{label_w}" y="{y + 3}" width="{w:.1f}" height="{row - 6}" fill="{color}">'
                     f"<title>{escape(label)}: {value:g}{escape(unit)}</title></rect>")  # fmt: skip
        parts.append(f'<text x="{label_w + w + 6:.1f}" y="{y + 15}">{value:g}{escape(unit)}</text>')
    parts.append("</svg>")
    return f"<figure><figcaption>{escape(title)}</figcaption>{''.join(parts)}</figure>"


def bins(times: Sequence[datetime]) -> tuple[str, list[datetime]]:
    """("hour" or "day", every bin start from the first time's to the last's)."""
    first, last = min(times), max(times)
    unit = "hour" if last - first <= HOURLY_UP_TO else "day"
    if unit == "hour":
        start, step = first.replace(minute=0, second=0, microsecond=0), timedelta(hours=1)
    else:
        start, step = first.replace(hour=0, minute=0, second=0, microsecond=0), timedelta(days=1)
    found = [start]
    while found[-1] + step <= last:
        found.append(found[-1] + step)
    return unit, found


def _bin_label(start: datetime, unit: str) -> str:
    return start.strftime("%Y-%m-%d %H:00") if unit == "hour" else start.strftime("%Y-%m-%d")


def timeline(rebalances: Sequence[Row], groups: Sequence[str], *, width: int = 720, height: int = 220) -> str:
    """Rebalances per hour or day for each of `groups` (a polyline and a dot per bin each, a legend)."""
    mine = [(str(r["group"]), t, int(r.get("rebalances") or 1)) for r in rebalances
            if (t := when(r)) is not None and str(r["group"]) in groups]  # fmt: skip
    if not mine or not groups:
        return empty("Rebalances over time")
    unit, starts = bins([t for _, t, _ in mine])
    title = f"Rebalances per {unit}"
    step = timedelta(hours=1) if unit == "hour" else timedelta(days=1)
    counts: Counter[tuple[str, int]] = Counter()
    for group, t, n in mine:
        counts[(group, min(len(starts) - 1, int((t - starts[0]) / step)))] += n
    top = max(counts.values(), default=1)
    left, bottom = 40, 30
    x_step = (width - left - 20) / max(1, len(starts) - 1)
    parts = [f'<svg role="img" aria-label="{title}" width="{width}" height="{height + 20 * len(groups)}"'
             f' viewBox="0 0 {width} {height + 20 * len(groups)}">',
             f'<line x1="{left}" y1="{height - bottom}" x2="{width - 10}" y2="{height - bottom}" stroke="#999"/>',
             f'<text x="4" y="16">{top}</text>',
             f'<text x="{left}" y="{height - 10}">{_bin_label(starts[0], unit)}</text>',
             f'<text x="{width - 10}" y="{height - 10}" text-anchor="end">'
             f"{_bin_label(starts[-1], unit)}</text>"]  # fmt: skip
    for g, group in enumerate(groups):
        color = PALETTE[g % len(PALETTE)]
        nudge = (g - (len(groups) - 1) / 2) * 3  # equal counts of two groups stay visible side by side
        points = [(left + 10 + i * x_step + nudge, height - bottom - (height - bottom - 10) * counts[(group, i)] / top)
                  for i in range(len(starts))]  # fmt: skip
        line = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{line}">'
                     f"<title>{escape(group)}</title></polyline>")  # fmt: skip
        for i, (x, y) in enumerate(points):  # a dot per bin: a single bin's line would be invisible
            label = f"{group} {_bin_label(starts[i], unit)}: {counts[(group, i)]}"
            parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{color}"><title>{escape(label)}</title>'
                         "</circle>")  # fmt: skip
        y = height + 16 + 20 * g
        parts.append(f'<rect x="{left}" y="{y - 10}" width="12" height="12" fill="{color}"/>'
                     f'<text x="{left + 18}" y="{y}">{escape(group)}</text>')  # fmt: skip
    parts.append("</svg>")
    return f"<figure><figcaption>{title}</figcaption>{''.join(parts)}</figure>"


def group_timeline(rows: Sequence[Row], *, width: int = 720, height: int = 150) -> str:
    """One group's rebalances as marks coloured by cause (above the axis), its member count after each as a step
    line; a legend of the causes shown."""
    # by time alone: two rebalances at the same instant must not compare their rows (dicts do not order)
    marks = sorted(((t, r) for r in rows if (t := when(r)) is not None and not r.get("gap")), key=lambda tr: tr[0])
    title = "Rebalances and members over time"
    if not marks:
        return empty(title)
    first, last = marks[0][0], marks[-1][0]
    span = max((last - first).total_seconds(), 10.0)
    start = first - timedelta(seconds=span * 0.05)  # marks at the ends stay off the axis labels' edges
    span *= 1.1
    left, right, top_pad, bottom = 40, 20, 10, 30
    most = max([int(r.get("members_after") or 0) for _, r in marks] + [1])

    def x(t: datetime) -> float:
        return left + (width - left - right) * (t - start).total_seconds() / span

    def y(members: int) -> float:
        return height - bottom - (height - bottom - top_pad) * members / most

    parts = [f'<svg role="img" aria-label="{title}" width="{width}" height="{height + 22}"'
             f' viewBox="0 0 {width} {height + 22}">',
             f'<line x1="{left}" y1="{height - bottom}" x2="{width - right}" y2="{height - bottom}" stroke="#999"/>',
             f'<text x="4" y="{top_pad + 8}">{most}</text><text x="4" y="{height - bottom}">0</text>',
             f'<text x="{left}" y="{height - 12}">{first:%Y-%m-%d %H:%M}</text>',
             f'<text x="{width - right}" y="{height - 12}" text-anchor="end">{last:%Y-%m-%d %H:%M}</text>']  # fmt: skip
    known = [(t, int(r["members_after"])) for t, r in marks if r.get("members_after") is not None]
    if known:
        steps = [f"{x(known[0][0]):.1f},{y(known[0][1]):.1f}"]
        for (_, before), (t, after) in itertools.pairwise(known):
            steps += [f"{x(t):.1f},{y(before):.1f}", f"{x(t):.1f},{y(after):.1f}"]
        parts.append(f'<polyline fill="none" stroke="#888" stroke-width="1.5" points="{" ".join(steps)}">'
                     "<title>members after each rebalance</title></polyline>")  # fmt: skip
    for t, r in marks:
        cause = str(r.get("cause") or "unknown")
        color = CAUSE_COLORS.get(cause, "#888")
        label = f"{t:%Y-%m-%d %H:%M:%S} {cause}: {_cell(r.get('members_before'))} → {_cell(r.get('members_after'))}"
        parts.append(f'<rect x="{x(t) - 2:.1f}" y="{top_pad}" width="4" height="{height - bottom - top_pad}"'
                     f' fill="{color}" opacity="0.6"><title>{escape(label)}</title></rect>')  # fmt: skip
    shown = sorted({str(r.get("cause") or "unknown") for _, r in marks})
    for i, cause in enumerate(shown):
        lx, color = left + 130 * i, CAUSE_COLORS.get(cause, "#888")
        parts.append(f'<rect x="{lx}" y="{height + 6}" width="12" height="12" fill="{color}"/>'
                     f'<text x="{lx + 16}" y="{height + 16}">{escape(cause)}</text>')  # fmt: skip
    parts.append("</svg>")
    return f"<figure><figcaption>{title}</figcaption>{''.join(parts)}</figure>"


def _cell(value: object) -> str:
    return "?" if value is None else str(value)
