"""What the report says, from the model's rows (plain dicts, as `DataFrame.collect()` gives them): a summary per
group and for the cluster, and the short text printed on stdout. Pure: the report time is an argument.

The per-group summary is what a `ConsumerGroup`'s `status.report` carries: rebalances in the last 24 h, their p95
duration, the top cause, the last rebalance, the report time.
"""

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

Row = Mapping[str, Any]
DAY = timedelta(hours=24)


@dataclass(frozen=True)
class GroupSummary:
    cluster: str
    group: str
    rebalances_24h: int
    """Rebalances that completed (or, for gap rows, were last seen) in the 24 h before the report time."""
    rebalances_total: int
    p95_duration_s_24h: float | None
    """Nearest-rank p95 of the known durations of the last 24 h; None when none is known."""
    top_cause_24h: str | None
    """The most frequent cause of the last 24 h (ties: alphabetical); None without rebalances."""
    last_rebalance: datetime | None
    gaps: int
    """Generations no source shows (compaction): counted in the totals, never given a cause."""

    def status_report(self, now: datetime) -> dict[str, Any]:
        """The `status.report` of the group's ConsumerGroup (camelCase, RFC 3339 times)."""
        return {
            "rebalances24h": self.rebalances_24h,
            "p95DurationSeconds": None if self.p95_duration_s_24h is None else round(self.p95_duration_s_24h, 3),
            "topCause": self.top_cause_24h,
            "lastRebalance": _stamp(self.last_rebalance),
            "reportTime": _stamp(now),
        }


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (`q` in 0..1) of `values`; None for none."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[rank - 1]


def when(row: Row) -> datetime | None:
    """When a rebalance row happened: stabilized, else started."""
    found = row.get("stabilized") or row.get("started")
    return found if isinstance(found, datetime) else None


def in_last_day(row: Row, now: datetime) -> bool:
    """Whether a rebalance row counts in "the last 24 h" before `now`."""
    found = when(row)
    return found is not None and now - DAY <= found <= now


def summarize(rebalances: Iterable[Row], now: datetime) -> list[GroupSummary]:
    """One summary per (cluster, group) with at least one rebalance row, worst first (24 h count, then total)."""
    by_group: dict[tuple[str, str], list[Row]] = {}
    for row in rebalances:
        by_group.setdefault((str(row["cluster"]), str(row["group"])), []).append(row)
    out = []
    for (cluster, group), rows in by_group.items():
        recent = [r for r in rows if in_last_day(r, now)]
        causes = Counter(str(r["cause"]) for r in recent if not r.get("gap") and r.get("cause"))
        top = min(causes.items(), key=lambda kv: (-kv[1], kv[0]))[0] if causes else None
        durations = [float(r["duration_s"]) for r in recent if r.get("duration_s") is not None]
        seen = [w for r in rows if (w := when(r)) is not None and w <= now]
        out.append(
            GroupSummary(
                cluster=cluster,
                group=group,
                rebalances_24h=sum(int(r.get("rebalances") or 1) for r in recent),
                rebalances_total=sum(int(r.get("rebalances") or 1) for r in rows),
                p95_duration_s_24h=percentile(durations, 0.95),
                top_cause_24h=top,
                last_rebalance=max(seen, default=None),
                gaps=sum(int(r.get("rebalances") or 1) for r in rows if r.get("gap")),
            )
        )
    return sorted(out, key=lambda s: (-s.rebalances_24h, -s.rebalances_total, s.cluster, s.group))


def text(summaries: Sequence[GroupSummary], now: datetime, *, limit: int = 10) -> str:
    """The few lines printed on stdout: totals, then the worst groups."""
    total = sum(s.rebalances_24h for s in summaries)
    lines = [f"vigil report {_stamp(now)}: {total} rebalances in the last 24 h across {len(summaries)} group(s)"]
    for s in summaries[:limit]:
        p95 = "-" if s.p95_duration_s_24h is None else f"{s.p95_duration_s_24h:.1f}s"
        lines.append(f"  {s.cluster}/{s.group}: {s.rebalances_24h} in 24 h (p95 {p95}, top cause"
                     f" {s.top_cause_24h or '-'}), {s.rebalances_total} in all")  # fmt: skip
    if len(summaries) > limit:
        lines.append(f"  … and {len(summaries) - limit} more (report.html)")
    return "\n".join(lines)


def as_json(summaries: Sequence[GroupSummary], now: datetime) -> dict[str, Any]:
    """The JSON summary written beside the report."""
    return {
        "report_time": _stamp(now),
        "groups": [asdict(s) | {"last_rebalance": _stamp(s.last_rebalance)} for s in summaries],
    }


def _stamp(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    return moment.replace(microsecond=0).isoformat().replace("+00:00", "Z")
