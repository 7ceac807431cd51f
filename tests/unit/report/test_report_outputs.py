"""The report's outputs from model rows (pure, no Spark): per-group summaries (what `status.report` carries), the
stdout text and the self-contained HTML. Expected values are derived from the rows in each test."""

import math
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from vigil_spark.outputs import charts, html, summary

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def rb(group: str, ago_h: float, *, cause: str = "joined", duration: float | None = 1.0, gap: bool = False,
       n: int = 1) -> dict[str, Any]:  # fmt: skip
    at = NOW - timedelta(hours=ago_h)
    return {"cluster": "c", "group": group, "generation": 1, "rebalances": n, "gap": gap, "started": at,
            "stabilized": at, "duration_s": duration, "cause": None if gap else cause}  # fmt: skip


def test_summary_counts_the_last_24_hours_and_all() -> None:
    rows = [rb("a", 1, cause="left", duration=4.0), rb("a", 2, cause="left", duration=2.0),
            rb("a", 3, cause="joined", duration=9.0), rb("a", 30), rb("a", 5, gap=True, n=3), rb("b", 1)]  # fmt: skip
    a, b = summary.summarize(rows, NOW)
    assert (a.group, b.group) == ("a", "b")  # worst first
    assert a.rebalances_24h == 3 + 3  # three observed and a gap row of three, all within 24 h
    assert a.rebalances_total == 7
    assert a.gaps == 3
    assert a.top_cause_24h == "left"  # gap rows have no cause
    assert a.p95_duration_s_24h == 9.0
    assert a.last_rebalance == NOW - timedelta(hours=1)
    report = a.status_report(NOW)
    assert report == {"rebalances24h": 6, "p95DurationSeconds": 9.0, "topCause": "left",
                      "lastRebalance": "2026-11-21T11:00:00Z", "reportTime": "2026-11-21T12:00:00Z"}  # fmt: skip


def test_a_tie_of_causes_is_broken_alphabetically_and_unknown_durations_are_none() -> None:
    (only,) = summary.summarize([rb("a", 1, cause="left", duration=None), rb("a", 2, cause="joined", duration=None)],
                                NOW)  # fmt: skip
    assert only.top_cause_24h == "joined"
    assert only.p95_duration_s_24h is None


@given(st.lists(st.floats(min_value=0, max_value=1e6, allow_nan=False), min_size=1, max_size=50),
       st.floats(min_value=0.01, max_value=1.0))  # fmt: skip
def test_percentile_is_an_element_with_enough_below(values: list[float], q: float) -> None:
    found = summary.percentile(values, q)
    assert found in values
    assert sum(1 for v in values if v <= found) >= math.ceil(q * len(values))


def test_text_names_the_worst_groups_first() -> None:
    summaries = summary.summarize([rb("a", 1), rb("b", 1), rb("b", 2)], NOW)
    lines = summary.text(summaries, NOW, limit=1).splitlines()
    assert lines[0] == "vigil report 2026-11-21T12:00:00Z: 3 rebalances in the last 24 h across 2 group(s)"
    assert lines[1].startswith("  c/b: 2 in 24 h (p95 1.0s, top cause joined)")
    assert lines[2] == "  … and 1 more (report.html)"


def test_the_html_report_is_self_contained_and_shows_the_figures() -> None:
    rows = [rb("orders", 1, cause="left", duration=0.5), rb("orders", 26, cause="heartbeat-expiry", duration=40.0),
            rb("pay<ments>", 2, cause="joined", duration=700.0)]  # fmt: skip
    members = [{"group": "orders", "identity": "orders-1", "joins": 5, "leaves": 4, "churn": 9, "flapping": True,
                "last_seen": NOW}, {"group": "orders", "identity": "orders-0", "flapping": False}]  # fmt: skip
    stalls = [{"group": "orders", "pod": "orders-2", "started": NOW, "duration_s": 42.1, "action": "leave-group",
               "outcome": "evicted"}]  # fmt: skip
    page = html.render(NOW, summary.summarize(rows, NOW), rows, members, stalls)
    assert page.startswith("<!doctype html>")
    assert not re.search(r"<script|https?://|<link", page)  # no script, no network
    groups = {r["group"] for r in rows}
    assert page.count("<svg") == 3 + len(groups)  # timeline, durations, causes; a timeline in each group's section
    targets = re.findall(r'href="#([^"]+)"', page)
    assert targets  # the worst groups link to their sections
    assert set(targets) <= set(re.findall(r'id="([^"]+)"', page))
    assert "pay&lt;ments&gt;" in page and "pay<ments>" not in page  # escaped  # noqa: PT018
    assert ">2</strong> rebalances in the last 24 h" in page
    for label, count in (("&lt;1 s", 1), ("30–120 s", 1), ("&gt;10 min", 1), ("1–5 s", 0)):
        assert f"<title>{label}: {count}</title>" in page
    assert "<title>heartbeat-expiry: 1</title>" in page
    assert "orders-1" in page and "orders-0" not in page  # only flapping members listed  # noqa: PT018
    assert "leave-group" in page and "evicted" in page  # noqa: PT018


def test_flapping_lists_one_row_per_identity_its_latest() -> None:
    """The model repeats an identity's totals on each member id: the page shows the identity once."""
    ids = [{"cluster": "c", "group": "orders", "identity": "orders-1", "member_id": f"m{n}", "flapping": True,
            "joins": 3, "replacements": 2, "churn": 5, "last_seen": NOW - timedelta(minutes=10 - n)}
           for n in range(3)]  # fmt: skip
    other = {"cluster": "c", "group": "pay", "identity": "orders-1", "member_id": "p", "flapping": True, "churn": 9}
    rows = html.flapping_identities([ids[1], ids[2], other, ids[0], {**ids[0], "flapping": False, "member_id": "x"}])
    assert [(r["group"], r["member_id"]) for r in rows] == [("pay", "p"), ("orders", "m2")]
    page = html.render(NOW, [], [], ids, [])
    assert page.count("<td>orders-1</td>") == 1
    assert "1 flapping member(s)" in page


def test_an_empty_report_says_so() -> None:
    page = html.render(NOW, [], [], [], [])
    assert ">0</strong> rebalances" in page
    assert page.count("nothing to show") == 3


def test_a_short_history_is_binned_by_the_hour_with_a_dot_per_group_and_bin() -> None:
    """A one-day history in daily bins was a single dot; hourly, every bin from first to last is a dot per group,
    titled with its count (a polyline of one point draws nothing)."""
    rows = [rb("orders", 1), rb("orders", 1.5), rb("orders", 3), rb("payments", 1)]
    figure = charts.timeline(rows, ["orders", "payments"])
    hours = [(NOW - timedelta(hours=h)).strftime("%Y-%m-%d %H:00") for h in (3, 2, 1)]
    assert "Rebalances per hour" in figure
    assert figure.count("<circle") == 2 * len(hours)
    expected = {("orders", hours[0]): 1, ("orders", hours[1]): 1, ("orders", hours[2]): 1,
                ("payments", hours[0]): 0, ("payments", hours[1]): 0, ("payments", hours[2]): 1}  # fmt: skip
    for (group, hour), count in expected.items():
        assert f"<title>{group} {hour}: {count}</title>" in figure


def test_a_long_history_is_binned_by_the_day_idle_days_included() -> None:
    rows = [rb("orders", 1), rb("orders", 24 * 5)]
    figure = charts.timeline(rows, ["orders"])
    first, last = (NOW - timedelta(hours=24 * 5)).date(), (NOW - timedelta(hours=1)).date()
    assert "Rebalances per day" in figure
    assert figure.count("<circle") == (last - first).days + 1
    assert f"<title>orders {first + timedelta(days=1)}: 0</title>" in figure


def test_the_latest_rebalances_are_listed_newest_first_with_their_trigger() -> None:
    rows = [{**rb("orders", h, cause="heartbeat-expiry"), "trigger_members": [f"m-{h}"], "trigger_pods": [f"p-{h}"],
             "group_type": "classic", "rebalance_protocol": "eager", "undetected_s": 6.0, "members_before": 2,
             "members_after": 1, "partitions_unavailable": 3, "unavailable_partition_s": 18.075}
            for h in range(1, html.LATEST + 6)]  # fmt: skip
    rows.append(rb("orders", 0.5, gap=True, n=3))
    page = html.render(NOW, summary.summarize(rows, NOW), rows, [], [])
    latest = page.split("<h2>Latest rebalances</h2>")[1].split("</table>")[0]
    times = re.findall(r"<tr><td>([^<]+)</td>", latest)
    assert len(times) == html.LATEST
    assert times == sorted(times, reverse=True)
    assert "unknown: 3 rebalance(s) no source shows" in latest  # the gap is the newest
    assert "m-1 (p-1)" in latest and "m-99" in latest and f"m-{html.LATEST}" not in latest  # noqa: PT018
    assert "6.00" in latest and "3 (18.1)" in latest and "2 → 1" in latest  # noqa: PT018
    assert f"… and {len(rows) - html.LATEST} older in model/rebalances" in page


def test_the_worst_groups_show_their_cause_mix_and_sections_their_own_list() -> None:
    rows = [rb("orders", 1, cause="joined"), rb("orders", 2, cause="heartbeat-expiry"),
            rb("orders", 3, cause="heartbeat-expiry"), rb("orders", 30, cause="left")]  # fmt: skip
    page = html.render(NOW, summary.summarize(rows, NOW), rows, [], [])
    assert "<td>heartbeat-expiry 2 · joined 1</td>" in page  # the last 24 h
    section = page.split(f'<section id="{html.anchor("c", "orders")}">')[1].split("</section>")[0]
    assert "causes (all): heartbeat-expiry 2 · joined 1 · left 1" in section
    assert section.count("<tr><td>") == len(rows)
    assert section.count("<rect") >= len(rows)  # a mark per rebalance (and the legend)


def test_a_group_timeline_marks_each_rebalance_by_cause_and_steps_the_members() -> None:
    rows = [{**rb("orders", h, cause=c), "members_before": b, "members_after": a}
            for h, c, b, a in ((3, "joined", 0, 1), (2, "joined", 1, 2), (1, "heartbeat-expiry", 2, 1))]  # fmt: skip
    figure = charts.group_timeline([*rows, rb("orders", 0.5, gap=True, n=2)])
    marks = re.findall(r'fill="([^"]+)" opacity="0.6"><title>([^<]+)</title>', figure)
    assert [title.split(" ", 2)[2] for _, title in marks] == ["joined: 0 → 1", "joined: 1 → 2",
                                                             "heartbeat-expiry: 2 → 1"]  # fmt: skip
    assert {c for c, _ in marks} == {charts.CAUSE_COLORS["joined"], charts.CAUSE_COLORS["heartbeat-expiry"]}
    assert len(re.search(r'<polyline[^>]*points="([^"]+)"', figure).group(1).split()) == 1 + 2 * 2  # type: ignore[union-attr]
    assert charts.group_timeline([]).count("nothing to show") == 1


def test_two_rebalances_at_the_same_instant_are_both_marked() -> None:
    """Seen in the e2e report job on Kafka 4.4: two of a group's rebalances at one instant failed the page (their
    rows were compared)."""
    rows = [{**rb("orders", 1, cause=c), "members_before": 1, "members_after": 2} for c in ("joined", "left")]
    figure = charts.group_timeline(rows)
    assert len(re.findall(r'opacity="0.6"><title>', figure)) == 2


def test_what_vigil_prevented_is_summed_from_the_model_rows() -> None:
    saves = [
        {"cluster": "c", "group": "orders", "kind": "bridged-restart", "at": NOW - timedelta(hours=2), "pod": "o-1",
         "rebalances_avoided": 2, "partition_s_saved": 22.5},
        {"cluster": "c", "group": "orders", "kind": "static-restart", "at": NOW - timedelta(hours=1),
         "rebalances_avoided": 0, "partition_s_saved": 0.0},
        {"cluster": "c", "group": "pay", "kind": "stall-evicted", "at": NOW, "pod": "p-0", "rebalances_avoided": 0,
         "partition_s_saved": 1000.0},
        {"cluster": "c", "group": "pay", "kind": "bridged-restart", "at": None, "rebalances_avoided": None,
         "partition_s_saved": None},
    ]  # fmt: skip
    page = html.render(NOW, [], [], [], [], prevented=saves)
    line = re.search(r'<p id="prevented">(.*?)</p>', page).group(1)  # type: ignore[union-attr]
    assert line.startswith("2 restart(s) bridged by vigil (2 rebalance(s) avoided), 1 absorbed by static membership,"
                           " 1 stall(s) ended")  # fmt: skip
    assert "<strong>1,022</strong> partition-seconds" in line
    listed = page.split('<p id="prevented">')[1].split("</table>")[0]
    assert [m for m in re.findall(r"<td>(c/\w+)</td><td>([\w-]+)</td>", listed)] == [
        ("c/pay", "stall-evicted"), ("c/orders", "static-restart"), ("c/orders", "bridged-restart"),
        ("c/pay", "bridged-restart")]  # fmt: skip
    assert "none" in html.render(NOW, [], [], [], []).split('<p id="prevented">')[1].split("<h2>")[0]
    tiny = html.render(NOW, [], [], [], [], prevented=[{**saves[0], "partition_s_saved": -0.01}])
    assert "<strong>0</strong> partition-seconds" in tiny  # never "-0"


def test_group_anchors_are_unique_and_safe() -> None:
    names = [("c", "orders"), ("c", "Orders"), ("c", "a b/<x>"), ("c2", "orders")]
    ids = [html.anchor(c, g) for c, g in names]
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"[A-Za-z0-9_.-]+", i) for i in ids)
