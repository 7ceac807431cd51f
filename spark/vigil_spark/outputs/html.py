"""The self-contained HTML report: inline SVG charts and tables, no script, no network (it opens anywhere, from a
CronJob's volume or a CI artifact). Pure: rows in, one HTML string out; every number comes from the model's rows.

The page: totals; rebalances over time for the worst groups, the duration distribution, causes; the worst groups
(each linking to its section); the latest rebalances of all groups; flapping identities; vigil's actions on
stalls; then a section per worst group — its timeline (marks by cause, member count) and its rebalances, newest
first. Filtering without a script is by anchor: a group's name links to its section.
"""

import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from html import escape
from typing import Any, Final

from vigil_spark.outputs import charts
from vigil_spark.outputs.summary import GroupSummary, Row, in_last_day, when

#: Duration buckets of the distribution chart (upper bounds in seconds; the last is open).
BUCKETS: tuple[tuple[str, float], ...] = (("<1 s", 1), ("1–5 s", 5), ("5–30 s", 30), ("30–120 s", 120),
                                          ("2–10 min", 600), (">10 min", float("inf")))  # fmt: skip
STYLE = (
    "body{font-family:system-ui,sans-serif;margin:2em;color:#222} table{border-collapse:collapse;margin:1em 0}"
    " td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left} th{background:#f3f3f3}"
    " figure{margin:1.5em 0} figcaption{font-weight:bold;margin-bottom:.5em} svg text{font-size:12px}"
    " .empty{color:#888} section{border-top:2px solid #ddd;margin-top:2em}"
)
WORST_COLUMNS = (("group", "group"), ("24h", "last 24 h"), ("all", "all"), ("p95", "p95 (24 h, s)"),
                 ("mix", "causes (24 h)"), ("last", "last rebalance"), ("gaps", "unseen (gaps)"))  # fmt: skip
FLAPPING_COLUMNS = (("group", "group"), ("identity", "identity"), ("joins", "joins"), ("leaves", "leaves"),
                    ("churn", "churn"), ("replacements", "static replacements"),
                    ("last_seen", "last seen"))  # fmt: skip
STALL_COLUMNS = (("group", "group"), ("pod", "pod"), ("started", "started"), ("duration_s", "duration (s)"),
                 ("action", "vigil's action"), ("outcome", "outcome"))  # fmt: skip
REBALANCE_COLUMNS = (("time", "time"), ("group", "group"), ("kind", "type / protocol"), ("cause", "cause"),
                     ("trigger", "triggered by (pod)"), ("client_reason", "client reason"),
                     ("duration_s", "duration (s)"), ("undetected_s", "undetected before (s)"),
                     ("unavailable", "partitions unavailable (partition-s)"),
                     ("members", "members before → after"))  # fmt: skip
PREVENTED_COLUMNS = (("at", "when"), ("group", "group"), ("kind", "what"), ("pod", "pod"), ("away_s", "away (s)"),
                     ("stock_s", "stock waits (s)"), ("partitions", "partitions"),
                     ("rebalances_avoided", "rebalances avoided"),
                     ("partition_s_saved", "partition-s saved"))  # fmt: skip
#: The latest rebalances of all groups listed, and of each group in its section.
LATEST: Final = 100
PER_GROUP: Final = 50
#: Groups listed in the worst table (and given a section).
WORST_LISTED: Final = 25


@dataclass(frozen=True)
class Link:
    """A table cell that links within the page."""

    text: str
    href: str


def anchor(cluster: Any, group: Any) -> str:
    """The id of a group's section: readable, and unique however the names are spelled."""
    key = f"{cluster}/{group}"
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", key).strip("-")[:60]
    return f"group-{slug}-{hashlib.sha1(key.encode(), usedforsecurity=False).hexdigest()[:8]}"


def table(rows: Sequence[Mapping[str, Any]], columns: Sequence[tuple[str, str]], *, title: str, note: str = "") -> str:
    """An HTML table of `rows` with (key, header) `columns`; empty → a line saying so."""
    heading = f"<h2>{escape(title)}</h2>" if title else ""
    if not rows:
        return f'{heading}<p class="empty">none</p>'
    head = "".join(f"<th>{escape(h)}</th>" for _, h in columns)
    body = "".join("<tr>" + "".join(f"<td>{_td(r.get(k))}</td>" for k, _ in columns) + "</tr>" for r in rows)
    tail = f'<p class="empty">{escape(note)}</p>' if note else ""
    return f"{heading}<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{tail}"


def newest_first(rebalances: Iterable[Row]) -> list[Row]:
    """Rebalances (gaps included: they are rebalances no source shows) from the latest."""
    timed = [(t, r) for r in rebalances if (t := when(r)) is not None]
    return [r for _, r in sorted(timed, key=lambda tr: tr[0], reverse=True)]


def rebalance_cells(r: Row, *, linked: set[str]) -> dict[str, Any]:
    """One rebalance as the list shows it; the group links to its section when it has one."""
    group_id = anchor(r.get("cluster"), r.get("group"))
    name = f"{r.get('cluster')}/{r.get('group')}"
    triggers = ", ".join(r.get("trigger_members") or [])
    pods = ", ".join(r.get("trigger_pods") or [])
    seconds = r.get("unavailable_partition_s")
    unavailable = None if r.get("partitions_unavailable") is None else (
        f"{r['partitions_unavailable']}" + ("" if seconds is None else f" ({seconds:.1f})"))  # fmt: skip
    gap = f"unknown: {r.get('rebalances')} rebalance(s) no source shows" if r.get("gap") else None
    return {
        "time": when(r),
        "group": Link(name, f"#{group_id}") if group_id in linked else name,
        "kind": f"{r.get('group_type')} / {r.get('rebalance_protocol')}",
        "cause": gap or r.get("cause"),
        "trigger": (triggers + (f" ({pods})" if pods else "")) or None,
        "client_reason": r.get("client_reason"),
        "duration_s": r.get("duration_s"),
        "undetected_s": r.get("undetected_s"),
        "unavailable": unavailable,
        "members": None if r.get("gap") else f"{_cell(r.get('members_before'))} → {_cell(r.get('members_after'))}",
    }


def cause_mix(rows: Iterable[Row]) -> str | None:
    """The causes of `rows` with their counts, most frequent first ("heartbeat-expiry 3 · joined 1")."""
    counts = Counter(str(r.get("cause") or "unknown") for r in rows if not r.get("gap"))
    return " · ".join(f"{c} {n}" for c, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))) or None


def group_section(s: GroupSummary, rows: Sequence[Row]) -> str:
    """A worst group's own section: its totals and cause mix, its timeline, its rebalances newest first."""
    ordered = newest_first(rows)
    shown = [rebalance_cells(r, linked=set()) for r in ordered[:PER_GROUP]]
    more = len(ordered) - len(shown)
    note = f"… and {more} older in model/rebalances" if more > 0 else ""
    line = (f"{s.rebalances_total} rebalance(s) in all, {s.rebalances_24h} in the last 24 h; causes (all):"
            f" {escape(cause_mix(rows) or '–')}")  # fmt: skip
    columns = [c for c in REBALANCE_COLUMNS if c[0] != "group"]
    return (
        f'<section id="{anchor(s.cluster, s.group)}"><h2>{escape(f"{s.cluster}/{s.group}")}</h2><p>{line}</p>'
        f"{charts.group_timeline(rows)}{table(shown, columns, title='', note=note)}</section>"
    )


def prevented_section(saves: Sequence[Row]) -> str:
    """What vigil spared the groups, in one sentence and a table (the model's `prevented`, newest first)."""
    kinds = Counter(str(r.get("kind")) for r in saves)
    avoided = sum(int(r.get("rebalances_avoided") or 0) for r in saves)
    saved = sum(float(r.get("partition_s_saved") or 0.0) for r in saves)
    line = (f"{kinds['bridged-restart']} restart(s) bridged by vigil ({avoided} rebalance(s) avoided),"
            f" {kinds['static-restart']} absorbed by static membership, {kinds['stall-evicted']} stall(s) ended by"
            f" removing the member: about <strong>{round(saved):,}</strong> partition-seconds of consumption saved"
            " against stock Kafka (each row's basis in model/prevented).")  # fmt: skip
    ordered = sorted((r for r in saves if r.get("at")), key=lambda r: r["at"], reverse=True)
    ordered += [r for r in saves if not r.get("at")]
    rows = [{**r, "group": f"{r.get('cluster')}/{r.get('group')}"} for r in ordered[:PER_GROUP]]
    note = f"… and {len(saves) - PER_GROUP} more in model/prevented" if len(saves) > PER_GROUP else ""
    return f'<h2>What vigil prevented</h2><p id="prevented">{line}</p>' + table(
        rows, PREVENTED_COLUMNS, title="", note=note
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


def render(
    now: datetime, summaries: Sequence[GroupSummary], rebalances: Sequence[Row], members: Sequence[Row],
    stalls: Sequence[Row], *, prevented: Sequence[Row] = (), worst: int = 8,
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
    listed = summaries[:WORST_LISTED]
    by_group: dict[tuple[str, str], list[Row]] = {}
    for r in rebalances:
        by_group.setdefault((str(r.get("cluster")), str(r.get("group"))), []).append(r)
    linked = {anchor(s.cluster, s.group) for s in listed}
    worst_rows = [
        {"group": Link(f"{s.cluster}/{s.group}", f"#{anchor(s.cluster, s.group)}"), "24h": s.rebalances_24h,
         "all": s.rebalances_total, "p95": s.p95_duration_s_24h, "last": s.last_rebalance, "gaps": s.gaps,
         "mix": cause_mix(r for r in by_group.get((s.cluster, s.group), []) if in_last_day(r, now))}
        for s in listed
    ]  # fmt: skip
    latest = newest_first(rebalances)
    latest_rows = [rebalance_cells(r, linked=linked) for r in latest[:LATEST]]
    total = sum(s.rebalances_24h for s in summaries)
    sections = [
        prevented_section(prevented),
        charts.timeline(rebalances, top_groups),
        charts.bars(histogram, title="Duration of rebalances"),
        charts.bars(sorted(causes.items(), key=lambda kv: (-kv[1], kv[0])), title="Causes"),
        table(worst_rows, WORST_COLUMNS, title="Worst groups"),
        table(latest_rows, REBALANCE_COLUMNS, title="Latest rebalances",
              note=f"… and {len(latest) - LATEST} older in model/rebalances" if len(latest) > LATEST else ""),
        table(flapping, FLAPPING_COLUMNS, title="Flapping members"),
        table(stalls, STALL_COLUMNS, title="vigil's actions on stalls"),
        *(group_section(s, by_group.get((s.cluster, s.group), [])) for s in listed),
    ]  # fmt: skip
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


def _after(a: Any, b: Any) -> bool:
    return b is None or (a is not None and a > b)


def _td(value: Any) -> str:
    if isinstance(value, Link):
        return f'<a href="{escape(value.href)}">{escape(value.text)}</a>'
    return escape(_cell(value))


def _cell(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, datetime):
        return value.replace(microsecond=0).isoformat().replace("+00:00", "Z")
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)
