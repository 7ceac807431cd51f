"""The stats signal's parser and rule (pure): librdkafka's statistics JSON → did the app progress?"""

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vigil_sidecar.signals import stats
from vigil_sidecar.signals.stats import StatsState, Verdict, judge, parse_stats

STALL = 10.0


def part(
    p: int,
    app: int = 100,
    lag: int = 0,
    fetchq: int = 0,
    *,
    paused: bool = False,
    committed: int | None = None,
    ls: int | None = None,
) -> dict[str, Any]:
    """One partition's statistics: `lag` records after the app's position, fetched ahead of it (the fetcher's
    position at the end) unless `paused` (then the fetcher restarted at the app's position, its queue purged);
    `committed` as librdkafka last fetched it (default: the app's position); `ls` the LSO (default: the end)."""
    position = app if app >= 0 else (committed or 0)
    end = position + lag
    return {"partition": p, "app_offset": app, "consumer_lag": -1, "fetchq_cnt": fetchq,
            "next_offset": position if paused else end, "hi_offset": end, "ls_offset": end if ls is None else ls,
            "committed_offset": app if committed is None else committed}  # fmt: skip


def doc(
    ts: int = 1_000_000,
    *,
    join: str = "steady",
    rebalances: int = 1,
    parts: list[dict[str, Any]] | None = None,
    age: int | None = None,
) -> dict[str, Any]:
    parts = [part(0)] if parts is None else parts
    partitions = {str(p["partition"]): p for p in parts}
    partitions["-1"] = {"partition": -1, "app_offset": -1001, "consumer_lag": -1, "fetchq_cnt": 0,
                        "next_offset": -1001, "hi_offset": -1001, "ls_offset": -1001,
                        "committed_offset": -1001}  # fmt: skip
    return {
        "name": "rdkafka#consumer-1", "type": "consumer", "ts": ts, "time": 1_790_000_000,
        "cgrp": {"state": "up", "join_state": join, "rebalance_cnt": rebalances, "rebalance_age": 5000,
                 "assignment_size": len(parts)},
        "topics": {"orders": {"topic": "orders", "partitions": partitions}},
    } | ({} if age is None else {"age": age})  # fmt: skip


def raw(d: dict[str, Any]) -> bytes:
    return json.dumps(d).encode()


def test_parses_a_consumer_document_skipping_the_unassigned_partition() -> None:
    parsed = parse_stats(raw(doc(parts=[part(1, app=7, lag=3, fetchq=2), part(0)])))
    assert (parsed.ts_us, parsed.join_state, parsed.rebalance_cnt, parsed.assignment_size) == (
        1_000_000,
        "steady",
        1,
        2,
    )
    assert [(p.topic, p.partition) for p in parsed.partitions] == [("orders", 0), ("orders", 1)]
    assert parsed.partitions[1] == stats.PartitionStats("orders", 1, 7, 2, 10, 10, 10, 7)
    assert parsed.waiting


def _without(path: str) -> bytes:
    d = doc()
    *parents, leaf = path.split(".")
    target: Any = d
    for key in parents:
        target = target[key]
    del target[leaf]
    return raw(d)


def _with(path: str, value: object) -> bytes:
    d = doc()
    *parents, leaf = path.split(".")
    target: Any = d
    for key in parents:
        target = target[key]
    target[leaf] = value
    return raw(d)


@pytest.mark.parametrize(
    ("data", "names"),
    [
        (b"{not json", "not JSON"),
        (b"[1, 2]", "JSON object"),
        (b"", "not JSON"),
        (_with("type", "producer"), "type must be 'consumer'"),
        (_without("type"), "type is missing"),
        (_without("ts"), "ts is missing"),
        (_with("ts", "12"), "ts must be an integer"),
        (_with("time", True), "time must be an integer"),
        (_without("cgrp"), "cgrp is missing"),
        (_with("cgrp", []), "cgrp must be an object"),
        (_without("cgrp.join_state"), "cgrp.join_state is missing"),
        (_with("cgrp.state", 3), "cgrp.state must be a string"),
        (_without("cgrp.rebalance_cnt"), "cgrp.rebalance_cnt is missing"),
        (_with("cgrp.rebalance_age", 1.5), "cgrp.rebalance_age must be an integer"),
        (_without("cgrp.assignment_size"), "cgrp.assignment_size is missing"),
        (_with("topics.orders", "x"), "topics.orders must be an object"),
        (_without("topics.orders.partitions"), "topics.orders.partitions is missing"),
        (_with("topics.orders.partitions.0", 5), "topics.orders.partitions.0 must be an object"),
        (_without("topics.orders.partitions.0.app_offset"), "topics.orders.partitions.0.app_offset is missing"),
        (_with("topics.orders.partitions.0.next_offset", None), "topics.orders.partitions.0.next_offset must be"),
        (_with("age", "5"), "age must be an integer"),
        (_without("topics.orders.partitions.0.fetchq_cnt"), "topics.orders.partitions.0.fetchq_cnt is missing"),
        (_without("topics.orders.partitions.0.hi_offset"), "hi_offset is missing"),
        (_without("topics.orders.partitions.0.ls_offset"), "ls_offset is missing"),
        (_without("topics.orders.partitions.0.committed_offset"), "committed_offset is missing"),
        (b" " * (stats.MAX_STATS_BYTES + 1), "over the"),
    ],
)
def test_malformed_documents_fail_in_one_line_naming_the_field(data: bytes, names: str) -> None:
    with pytest.raises(stats.StatsError) as caught:
        parse_stats(data)
    message = str(caught.value)
    assert names in message
    assert "\n" not in message
    assert message.startswith("stats: ")


@given(st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
def test_any_bytes_parse_or_fail_with_a_stats_error(data: bytes) -> None:
    problem = ""
    try:
        parse_stats(data)
    except stats.StatsError as exc:
        problem = str(exc)
    assert "\n" not in problem


_ints = st.integers(-(2**63), 2**63 - 1)
_partitions = st.builds(
    stats.PartitionStats,
    topic=st.sampled_from(["orders", "a.b", "x y", ""]),
    partition=st.integers(0, 2**31 - 1),
    app_offset=_ints,
    fetchq_cnt=_ints,
    next_offset=_ints,
    hi_offset=_ints,
    ls_offset=_ints,
    committed_offset=_ints,
)
_docs = st.builds(
    stats.StatsDoc,
    ts_us=_ints,
    time=_ints,
    cgrp_state=st.text(max_size=10),
    join_state=st.text(max_size=10),
    rebalance_cnt=_ints,
    rebalance_age_ms=_ints,
    assignment_size=_ints,
    partitions=st.lists(_partitions, max_size=6, unique_by=lambda p: (p.topic, p.partition)).map(
        lambda ps: tuple(sorted(ps, key=lambda p: (p.topic, p.partition)))
    ),
    age_us=st.none() | _ints,
)


def _as_librdkafka_writes(parsed: stats.StatsDoc) -> dict[str, Any]:
    """The document librdkafka would emit for `parsed`, with fields the parser does not read and the UA partition."""
    topics: dict[str, Any] = {}
    for p in parsed.partitions:
        parts = topics.setdefault(p.topic, {"topic": p.topic, "age": 7, "partitions": {"-1": {"partition": -1}}})
        parts["partitions"][str(p.partition)] = {
            "partition": p.partition, "app_offset": p.app_offset, "fetchq_cnt": p.fetchq_cnt,
            "next_offset": p.next_offset, "hi_offset": p.hi_offset, "ls_offset": p.ls_offset,
            "committed_offset": p.committed_offset, "consumer_lag": -1, "fetch_state": "active",
        }  # fmt: skip
    return {
        "name": "rdkafka#consumer-1", "type": "consumer", "ts": parsed.ts_us, "time": parsed.time,
        "brokers": {"b:9092/1": {"rtt": {"avg": 1.5}}},
        "cgrp": {"state": parsed.cgrp_state, "join_state": parsed.join_state, "rebalance_cnt": parsed.rebalance_cnt,
                 "rebalance_age": parsed.rebalance_age_ms, "assignment_size": parsed.assignment_size, "stateage": 3},
        "topics": topics,
    } | ({} if parsed.age_us is None else {"age": parsed.age_us})  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(_docs)
def test_any_document_reads_back_what_it_says(parsed: stats.StatsDoc) -> None:
    assert parse_stats(json.dumps(_as_librdkafka_writes(parsed))) == parsed


# -- the rule as a table: (previous document or None, this document, now, suspended_until) → verdict -----------
S = 1_000_000  # one second in librdkafka's µs
RULE_CASES = [
    ("first document", None, doc(), 100.0, None, Verdict.FIRST),
    ("app_offset advanced", doc(), doc(2 * S, parts=[part(0, app=101, lag=5)]), 100.0, None, Verdict.PROGRESS),
    ("one of two partitions advanced", doc(parts=[part(0), part(1, app=50, lag=9)]),
     doc(2 * S, parts=[part(0, lag=4), part(1, app=51, lag=9)]), 100.0, None, Verdict.PROGRESS),
    ("a new partition with a first offset", doc(), doc(2 * S, parts=[part(0, lag=3), part(1, app=1, lag=2)]),
     100.0, None, Verdict.PROGRESS),
    ("idle: at the end, empty queue", doc(), doc(2 * S), 100.0, None, Verdict.IDLE),
    ("idle: offsets unknown, empty queue", doc(), doc(2 * S, parts=[part(0, app=-1001, committed=-1001)]), 100.0,
     None, Verdict.IDLE),
    ("exactly-once: at the LSO, the consumer's own committed offset 100 behind (consumer_lag 100)",
     doc(parts=[part(0, app=200, committed=100)]), doc(2 * S, parts=[part(0, app=200, committed=100)]), 100.0, None,
     Verdict.IDLE),
    ("an open transaction: at the LSO, below the high watermark", doc(),
     doc(2 * S, parts=[part(0, lag=20, ls=100)]), 100.0, None, Verdict.IDLE),
    ("paused with 50 records left: the fetcher at the app's position, queue purged",
     doc(parts=[part(0, lag=50, paused=True)]), doc(2 * S, parts=[part(0, lag=50, paused=True)]), 100.0, None,
     Verdict.IDLE),
    ("paused before taking anything", doc(), doc(2 * S, parts=[part(0, app=-1001, committed=100, lag=5, paused=True)]),
     100.0, None, Verdict.IDLE),
    ("stuck with records fetched past its position", doc(parts=[part(0, lag=5)]), doc(2 * S, parts=[part(0, lag=9)]),
     100.0, None, Verdict.WAITING),
    ("stuck with a full fetch queue", doc(), doc(2 * S, parts=[part(0, fetchq=30)]), 100.0, None, Verdict.WAITING),
    ("nothing taken since the assignment, records fetched", doc(),
     doc(2 * S, parts=[part(0, app=-1001, committed=100, lag=5)]), 100.0, None, Verdict.WAITING),
    ("offset went back (seek): not progress", doc(parts=[part(0, app=100, lag=5)]),
     doc(2 * S, parts=[part(0, app=90, lag=15)]), 100.0, None, Verdict.WAITING),
    ("rebalancing", doc(), doc(2 * S, join="wait-sync", parts=[part(0, lag=5)]), 100.0, None, Verdict.SUSPENDED),
    ("rebalance_cnt changed", doc(), doc(2 * S, rebalances=2, parts=[part(0, lag=5)]), 100.0, None,
     Verdict.SUSPENDED),
    ("within a stall timeout after a change", doc(), doc(2 * S, parts=[part(0, lag=5)]), 100.0, 105.0,
     Verdict.SUSPENDED),
    ("a stall timeout after a change", doc(), doc(2 * S, parts=[part(0, lag=5)]), 105.0, 105.0, Verdict.WAITING),
    ("ts went back: the app restarted", doc(5 * S, parts=[part(0, lag=5)]), doc(S, parts=[part(0, lag=5)]),
     100.0, None, Verdict.FIRST),
    ("age went back: the app restarted (the host's ts went on)", doc(5 * S, age=4 * S, parts=[part(0, lag=5)]),
     doc(6 * S, age=S, parts=[part(0, lag=5)]), 100.0, None, Verdict.FIRST),
]  # fmt: skip


@pytest.mark.parametrize(
    ("previous", "current", "now", "suspended_until", "verdict"),
    [case[1:] for case in RULE_CASES],
    ids=[case[0] for case in RULE_CASES],
)
def test_the_rule(
    previous: dict[str, Any] | None,
    current: dict[str, Any],
    now: float,
    suspended_until: float | None,
    verdict: Verdict,
) -> None:
    last = None if previous is None else parse_stats(raw(previous))
    state = StatsState(last=last, suspended_until=suspended_until, last_progress=0.0)
    new, got = judge(state, parse_stats(raw(current)), now, STALL)
    assert got is verdict
    assert new.last == parse_stats(raw(current))
    assert (new.last_progress == now) is verdict.progressed
    assert verdict.progressed is (verdict is not Verdict.WAITING)


def test_a_restart_forgets_the_suspension() -> None:
    state = StatsState(last=parse_stats(raw(doc(5 * S))), suspended_until=1000.0, last_progress=0.0)
    new, verdict = judge(state, parse_stats(raw(doc(S))), 100.0, STALL)
    assert (verdict, new.suspended_until) == (Verdict.FIRST, None)


# -- properties over sequences of documents ------------------------------------------------------------------
@st.composite
def streams(draw: st.DrawFn) -> list[tuple[float, dict[str, Any]]]:
    """Documents a second or so apart: join state, rebalance count, offsets, records left, pauses, the fetch queue
    and the consumer's own committed offset (stale for an app that commits elsewhere) all vary."""
    n = draw(st.integers(1, 40))
    t, ts, rebalances, out = 0.0, S, 1, []
    offsets = [100, 200]
    for _ in range(n):
        t += draw(st.floats(0.1, 4.0))
        ts += draw(st.integers(1, 4 * S))
        rebalances += draw(st.sampled_from([0, 0, 0, 0, 1]))
        join = draw(st.sampled_from(["steady"] * 5 + ["wait-sync", "wait-join", "init"]))
        parts = []
        for i in range(2):
            offsets[i] += draw(st.sampled_from([0, 0, 0, 1, 5]))
            paused = draw(st.sampled_from([False, False, True]))
            parts.append(part(i, app=offsets[i], lag=draw(st.sampled_from([0, 0, 3, 50])),
                              fetchq=0 if paused else draw(st.sampled_from([0, 0, 7])), paused=paused,
                              committed=offsets[i] - draw(st.sampled_from([0, 0, 100]))))  # fmt: skip
        out.append((t, doc(ts, join=join, rebalances=rebalances, parts=parts)))
    return out


def _run(stream: list[tuple[float, dict[str, Any]]]) -> list[tuple[float, stats.StatsDoc, StatsState, Verdict]]:
    state, out = StatsState(), []
    for now, d in stream:
        parsed = parse_stats(raw(d))
        state, verdict = judge(state, parsed, now, STALL)
        out.append((now, parsed, state, verdict))
    return out


@settings(max_examples=300)
@given(streams())
def test_never_stalled_while_rebalancing_or_within_a_stall_timeout_after_a_rebalance(
    stream: list[tuple[float, dict[str, Any]]],
) -> None:
    last_change: float | None = None
    previous: stats.StatsDoc | None = None
    for now, parsed, state, verdict in _run(stream):
        if parsed.join_state != "steady" or (previous is not None and parsed.rebalance_cnt != previous.rebalance_cnt):
            last_change = now
        if last_change is not None and now - last_change < STALL:
            assert verdict.progressed
            assert not state.stalled(now, STALL)
        previous = parsed


@settings(max_examples=300, deadline=None)  # timing is not the property: a loaded machine is slow
@given(streams())
def test_an_idle_app_is_never_stalled(stream: list[tuple[float, dict[str, Any]]]) -> None:
    for _now, parsed, _state, verdict in _run(stream):
        if not parsed.waiting:
            assert verdict.progressed


@settings(max_examples=300)
@given(streams())
def test_a_stall_only_after_app_offset_stayed_put_with_records_waiting_for_a_stall_timeout(
    stream: list[tuple[float, dict[str, Any]]],
) -> None:
    """Stalled at a document ⇒ every document of the last stall timeout was WAITING: steady, same rebalance count,
    records waiting, no app_offset advanced."""
    results = _run(stream)
    for i, (now, _parsed, state, _verdict) in enumerate(results):
        if not state.stalled(now, STALL):
            continue
        window = [r for r in results[: i + 1] if r[0] > now - STALL]
        assert window
        for _t, parsed, _s, verdict in window:
            assert verdict is Verdict.WAITING
            assert parsed.waiting
            assert parsed.join_state == "steady"
        assert state.last_progress is not None
        assert now - state.last_progress >= STALL


def test_a_stall_is_reported_once_waiting_lasts_a_stall_timeout() -> None:
    state, _ = judge(StatsState(), parse_stats(raw(doc(S, parts=[part(0, lag=5)]))), 0.0, STALL)
    for second in range(1, 11):
        state, verdict = judge(state, parse_stats(raw(doc((second + 1) * S, parts=[part(0, lag=5)]))), second, STALL)
        assert verdict is Verdict.WAITING
        assert state.stalled(second, STALL) is (second >= STALL)


@settings(max_examples=300)
@given(streams(), st.integers(0, 10_000))
def test_the_consumers_own_committed_offset_never_decides(
    stream: list[tuple[float, dict[str, Any]]], behind: int
) -> None:
    """librdkafka's committed offset stays where the assignment fetched it for apps that commit through a
    transaction, every N records or elsewhere: moving it (and consumer_lag with it) changes no verdict."""

    def stale(d: dict[str, Any]) -> dict[str, Any]:
        moved = json.loads(json.dumps(d))
        for p in moved["topics"]["orders"]["partitions"].values():
            if p["app_offset"] >= 0:
                p["committed_offset"] = max(0, p["app_offset"] - behind)
                p["consumer_lag"] = p["ls_offset"] - p["committed_offset"]
        return moved

    assert [v for *_, v in _run(stream)] == [v for *_, v in _run([(t, stale(d)) for t, d in stream])]


@given(st.integers(0, 10**9), st.integers(0, 10**6), st.sampled_from([None, 0, 10**9]))
def test_a_paused_partition_never_waits(app: int, left: int, committed: int | None) -> None:
    parsed = parse_stats(raw(doc(parts=[part(0, app=app, lag=left, paused=True, committed=committed)])))
    assert not parsed.partitions[0].waiting
