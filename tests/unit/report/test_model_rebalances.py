"""The `rebalances` model on small hand-built tables: counts from generation differences (gaps reported),
times and causes from the broker log, vigil's evictions, partition unavailability, KIP-848 epochs, empty inputs.

Every expectation is derived in the test from the rows it builds (the generations it lists, the reasons it
writes — classified by the pure parser's own `reason_cause`), not typed in as magic numbers.
"""

import datetime as dt
import importlib.util
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import pytest
from pyspark.sql import DataFrame, Row, SparkSession

from vigil_spark import tables
from vigil_spark.model import common, consumer, rebalances
from vigil_spark.parse import broker_log as bl
from vigil_spark.sources import broker_logs

pytest_plugins = ["vigil_dev.testing.spark_fixtures"]
pytestmark = pytest.mark.spark

T0 = dt.datetime(2026, 11, 21, 10, 0, 0)  # naive UTC: the session and this machine run in UTC
CLUSTER = "c1"


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def member(member_id: str, assigned: Sequence[tuple[str, int]] = (), instance_id: str | None = None) -> Row:
    return Row(
        member_id=member_id,
        instance_id=instance_id,
        client_id=member_id.rsplit("-", 1)[0],
        client_host="/127.0.0.1",
        session_timeout_ms=6000,
        rebalance_timeout_ms=300000,
        subscribed_topics=["t"],
        assigned=[Row(topic=t, partition=p) for t, p in assigned],
    )


def gm(group: str, generation: int, seconds: float, members: Sequence[Row] = (), protocol: str = "range") -> Row:
    return Row(
        cluster=CLUSTER,
        group=group,
        log_partition=0,
        log_offset=int(seconds * 1000) + generation,
        log_ts=at(seconds + 0.05),
        tombstone=False,
        protocol_type="consumer",
        generation=generation,
        protocol=protocol,
        leader=members[0]["member_id"] if members else None,
        state_ts=at(seconds),
        members=list(members),
    )


def log(event: str, group: str, seconds: float, **fields: Any) -> Row:
    values: dict[str, Any] = {
        "cluster": CLUSTER,
        "node": "1",
        "ts": at(seconds),
        "group": group,
        "event": event,
        "generation": None,
        "members": None,
        "member_id": None,
        "instance_id": None,
        "reason": None,
        "line": "",
        "file": "server.log",
    }
    values.update(fields)
    return Row(**values)


def event(kind: str, group: str, seconds: float, member_id: str | None = None, payload: Any = None) -> Row:
    return Row(
        cluster=CLUSTER,
        ts=at(seconds),
        group=group,
        type=kind,
        schema_version=1,
        member_id=member_id,
        instance_id=None,
        pod=None,
        payload_json=json.dumps(payload or {}),
        log_partition=0,
        log_offset=int(seconds * 1000),
    )


def frame(spark: SparkSession, rows: Sequence[Row], name: str) -> DataFrame:
    schema = broker_logs.SCHEMA if name == "broker_log" else tables.SCHEMAS[name]
    return spark.createDataFrame([tuple(r[f] for f in schema.fieldNames()) for r in rows], schema)


def run(
    spark: SparkSession,
    *,
    gms: Sequence[Row] = (),
    records: Sequence[Row] = (),
    logs: Sequence[Row] = (),
    events: Sequence[Row] = (),
) -> list[Row]:
    out = rebalances.rebalances(
        frame(spark, gms, "group_metadata"),
        frame(spark, records, "consumer_group_records"),
        frame(spark, logs, "broker_log"),
        frame(spark, events, "vigil_events"),
    )
    assert out.schema.fieldNames() == rebalances.SCHEMA.fieldNames()
    return sorted(out.collect(), key=lambda r: (r["group"], r["group_type"], r["generation"], r["gap"]))


def test_counts_come_from_generation_differences_and_gaps_are_rows(spark: SparkSession) -> None:
    seen = {"g-gap": [1, 2, 3, 7, 8], "g-late": [5, 6], "g-again": [1, 2]}
    gms = [gm(g, n, 10.0 * n) for g, gens in seen.items() for n in gens]
    gms += [gm("g-again", n, 100.0 + 10 * n) for n in (1, 2)]  # deleted and created again: generations restart
    rows = run(spark, gms=gms)

    for group, gens in seen.items():
        mine = [r for r in rows if r["group"] == group]
        incarnations = 2 if group == "g-again" else 1
        # from generation 0, each incarnation went through max(gens) generations: one rebalance each
        assert sum(r["rebalances"] for r in mine) == max(gens) * incarnations
        observed = [r["generation"] for r in mine if not r["gap"]]
        assert sorted(observed) == sorted(gens * incarnations)
        expected_gaps = [
            (hi - 1, hi - lo - 1) for lo, hi in zip([0, *gens], gens, strict=False) if hi - lo > 1
        ]  # (last unseen generation, how many)
        assert [(r["generation"], r["rebalances"]) for r in mine if r["gap"]] == expected_gaps
        for r in mine:
            assert r["cause"] == "unknown"
            assert r["started"] is None or r["gap"]
            assert r["duration_s"] is None
    gap = next(r for r in rows if r["group"] == "g-gap" and r["gap"])
    assert (gap["started"], gap["stabilized"]) == (at(30.0), at(70.0))  # bounded by generations 3 and 7
    assert "gap: generations 4..6" in gap["basis"]
    after_gap = next(r for r in rows if r["group"] == "g-gap" and r["generation"] == 7)
    assert after_gap["members_before"] is None
    assert "members_before unknown" in after_gap["basis"]
    leading = next(r for r in rows if r["group"] == "g-late" and r["gap"])
    assert "before the first record" in leading["basis"]
    assert leading["started"] is None


def test_times_and_causes_come_from_the_broker_log(spark: SparkSession) -> None:
    g = "g-log"
    m = [f"{g}-m{i}-0000" for i in range(4)]
    # (seconds of the prepare line, its reason, the member-left line's client reason if any, seconds to stabilize)
    history: list[tuple[float, str, str | None, float]] = [
        (10.0, f"Adding new member {m[0]} with group instance id null; client reason: not provided", None, 0.2),
        (20.0, f"Adding new member {m[1]} with group instance id null; client reason: not provided", None, 1.5),
        (30.0, f"explicit `LeaveGroup` request for ({m[1]}) members.", "the consumer is being closed", 0.7),
        (40.0, f"removing member {m[0]} on heartbeat expiration.", None, 0.3),
        (50.0, f"Adding new member {m[2]} with group instance id null; client reason: not provided", None, 2.0),
        (60.0, f"explicit `LeaveGroup` request for ({m[2]}) members.", "vigil: no poll for 31.0s (stall timeout 30s)",
         0.4),
        (70.0, f"Adding new member {m[3]} with group instance id null; client reason: not provided", None, 1.0),
        (80.0, f"explicit `LeaveGroup` request for ({m[3]}) members.", "not provided", 0.5),
        (90.0, "Removing member x-1 on LeaveGroup; client reason: consumer poll timeout has expired.", None, 0.5),
    ]  # fmt: skip
    logs: list[Row] = []
    members = 0
    for gen0, (start, reason, client, took) in enumerate(history):
        if client is not None:
            left = next(x for x in m if x in reason)
            logs.append(log("member-left", g, start - 0.001, member_id=left, reason=client))
        logs.append(log("rebalance-prepared", g, start, generation=gen0, reason=reason))
        members += 1 if reason.startswith("Adding") else -1 if "LeaveGroup" in reason or "heartbeat" in reason else 0
        logs.append(log("stabilized", g, start + took, generation=gen0 + 1, members=max(members, 0)))
    # vigil restarted the last leaver's container: its eviction-done event trails the broker's line by 0.2 s
    events = [event("eviction-done", g, 80.2, m[3], {"action": "restart"})]
    rows = run(spark, logs=logs, events=events)

    assert [r["generation"] for r in rows] == list(range(1, len(history) + 1))
    expected = []
    for _, reason, client, _ in history:
        cause, _ = bl.reason_cause(reason)
        expected.append(bl.left_cause(client) if client is not None else cause)
    # the eviction event explains the nearest departure starting in [event - 10 s, event + 60 s] (the defaults)
    for e in events:
        candidates = [
            i
            for i, (start, _, _, _) in enumerate(history)
            if expected[i] in ("left", "heartbeat-expiry", "unknown")
            and e["ts"] - dt.timedelta(seconds=10) <= at(start) <= e["ts"] + dt.timedelta(seconds=60)
        ]
        nearest = min(candidates, key=lambda i: abs(at(history[i][0]) - e["ts"]))
        expected[nearest] = "evicted-by-vigil"
    for row, (start, reason, client, took), cause in zip(rows, history, expected, strict=True):
        assert row["started"] == at(start)
        assert row["stabilized"] == at(start + took)
        assert row["duration_s"] == pytest.approx(took)
        assert row["cause"] == cause, reason
        assert row["client_reason"] == (client if client is not None else bl.client_reason(reason))
        assert row["gap"] is False
    assert {r["cause"] for r in rows} >= {"joined", "left", "heartbeat-expiry", "evicted-by-vigil", "poll-timeout"}


def test_a_join_right_after_an_eviction_stays_a_join(spark: SparkSession) -> None:
    g = "g-join"
    logs = [
        log("rebalance-prepared", g, 10.0, generation=0, reason="Adding new member a-1 with group instance id null"),
        log("stabilized", g, 10.5, generation=1, members=1),
    ]
    rows = run(spark, logs=logs, events=[event("eviction-done", g, 9.0, "b-1")])
    assert [r["cause"] for r in rows] == ["joined"]


def test_without_a_log_vigil_events_between_generations_attribute_the_rebalance(spark: SparkSession) -> None:
    g = "g-nolog"
    gms = [gm(g, 1, 10.0, [member("a-1")]), gm(g, 2, 20.0, [member("a-1"), member("b-1")]), gm(g, 3, 30.0)]
    rows = run(spark, gms=gms, events=[event("member-removed", g, 25.0, "b-1", {"cause": "pod-gone"})])
    causes = {r["generation"]: r["cause"] for r in rows}
    assert causes == {1: "unknown", 2: "unknown", 3: "evicted-by-vigil"}
    assert [r["members_after"] for r in rows] == [len(x["members"]) for x in gms]
    assert [r["members_before"] for r in rows] == [0] + [len(x["members"]) for x in gms[:-1]]


def test_partition_unavailability_follows_the_rebalance_protocol(spark: SparkSession) -> None:
    before = {"m1-0": [("t", 0), ("t", 1)], "m2-0": [("t", 2)]}
    after = {"m1-0": [("t", 0)], "m2-0": [("t", 2)], "m3-0": [("t", 1)]}
    gms, logs = [], []
    for group, protocol in (("g-eager", "range"), ("g-coop", "cooperative-sticky")):
        gms.append(gm(group, 1, 10.0, [member(k, v) for k, v in before.items()], protocol))
        gms.append(gm(group, 2, 22.0, [member(k, v) for k, v in after.items()], protocol))
        logs.append(log("rebalance-prepared", group, 20.0, generation=1, reason="Adding new member m3-0 with x"))
        logs.append(log("stabilized", group, 22.0, generation=2, members=3))
    rows = {(r["group"], r["generation"]): r for r in run(spark, gms=gms, logs=logs)}

    owned_before = {(k, t, p) for k, v in before.items() for t, p in v}
    owned_after = {(k, t, p) for k, v in after.items() for t, p in v}
    duration = 22.0 - 20.0
    eager, coop = rows[("g-eager", 2)], rows[("g-coop", 2)]
    assert (eager["rebalance_protocol"], coop["rebalance_protocol"]) == ("eager", "cooperative")
    assert eager["partitions_unavailable"] == len(owned_before)
    assert eager["unavailable_partition_s"] == pytest.approx(len(owned_before) * duration)
    assert coop["partitions_unavailable"] == len(owned_before - owned_after)
    assert coop["unavailable_partition_s"] == pytest.approx(len(owned_before - owned_after) * duration)
    first = rows[("g-eager", 1)]
    assert first["partitions_unavailable"] is None
    assert "partitions unknown" in first["basis"]


def _with_timeouts(m: Row, session_ms: int, rebalance_ms: int) -> Row:
    return Row(**{**m.asDict(), "session_timeout_ms": session_ms, "rebalance_timeout_ms": rebalance_ms})


@pytest.mark.parametrize(
    ("departure", "protocol"),
    [("expiry", "range"), ("expiry", "cooperative-sticky"), ("poll timeout", "range"), ("leave", "range")],
)
def test_a_silent_departure_counts_from_the_member_s_last_sign_of_life(
    spark: SparkSession, departure: str, protocol: str
) -> None:
    """A member killed -9 sits unseen for its session timeout before the coordinator notices; one that stopped
    polling for its max.poll.interval. Its partitions were idle all that time: they count, and `undetected_s`
    says how long. A plain LeaveGroup is not silent."""
    g = f"g-silent-{departure.replace(' ', '-')}-{protocol}"
    session_ms, rebalance_ms = 6000, 9000
    dead = _with_timeouts(member("dead-1", [("t", 0), ("t", 1)]), session_ms, rebalance_ms)
    alive = _with_timeouts(member("alive-1", [("t", 2)]), session_ms, rebalance_ms)
    after = _with_timeouts(member("alive-1", [("t", 0), ("t", 1), ("t", 2)]), session_ms, rebalance_ms)
    gms = [gm(g, 1, 10.0, [dead, alive], protocol), gm(g, 2, 30.025, [after], protocol)]
    logs = [log("stabilized", g, 10.0, generation=1, members=2), log("stabilized", g, 30.025, generation=2, members=1)]
    if departure == "expiry":
        reason = "removing member dead-1 on heartbeat expiration."
    else:
        reason = "explicit `LeaveGroup` request for (dead-1) members."
        why = "consumer poll timeout has expired." if departure == "poll timeout" else "the consumer is being closed"
        logs.append(log("member-left", g, 29.999, member_id="dead-1", reason=why))
    logs.append(log("rebalance-prepared", g, 30.0, generation=1, reason=reason))
    row = next(r for r in run(spark, gms=gms, logs=logs) if r["generation"] == 2)

    silent_s = {"expiry": session_ms / 1000, "poll timeout": rebalance_ms / 1000}.get(departure)
    cause = {"expiry": "heartbeat-expiry", "poll timeout": "poll-timeout", "leave": "left"}[departure]
    assert (row["cause"], row["undetected_s"]) == (cause, silent_s)
    owned_before = {(m["member_id"], a["topic"], a["partition"]) for m in (dead, alive) for a in m["assigned"]}
    owned_after = {(after["member_id"], a["topic"], a["partition"]) for a in after["assigned"]}
    moved = owned_before if protocol == "range" else owned_before - owned_after
    expected = len(moved) * row["duration_s"] + len(dead["assigned"]) * (silent_s or 0)
    assert row["duration_s"] == pytest.approx(0.025)
    assert row["unavailable_partition_s"] == pytest.approx(expected)
    assert ("undetected:" in row["basis"]) is (silent_s is not None), row["basis"]


def test_a_member_replaced_within_the_previous_generation_is_read_from_its_last_record(spark: SparkSession) -> None:
    """A static restart rewrites GroupMetadata in the same generation with the new member id: the departure of that
    id is priced from the generation's LAST record (its timeouts, its partitions), and a cooperative rebalance does
    not count the replaced id's partitions as moved."""
    g, protocol = "g-replaced-then-expired", "cooperative-sticky"
    old, new = (
        _with_timeouts(member(m, [("t", 0), ("t", 1)], instance_id="s"), 6000, 9000) for m in ("s-old", "s-new")
    )
    other = member("other-1", [("t", 2)])
    after = member("other-1", [("t", 0), ("t", 1), ("t", 2)])
    gms = [gm(g, 1, 10.0, [old, other], protocol), gm(g, 1, 20.0, [new, other], protocol),
           gm(g, 2, 40.025, [after], protocol)]  # fmt: skip
    logs = [log("rebalance-prepared", g, 40.0, generation=1, reason="removing member s-new on heartbeat expiration."),
            log("stabilized", g, 40.025, generation=2, members=1)]  # fmt: skip
    row = next(r for r in run(spark, gms=gms, logs=logs) if r["generation"] == 2 and not r["gap"])
    moved = {("s-new", "t", 0), ("s-new", "t", 1)}  # other-1 kept t-2
    assert (row["undetected_s"], row["partitions_unavailable"]) == (6.0, len(moved))
    assert row["unavailable_partition_s"] == pytest.approx(len(moved) * row["duration_s"] + 2 * 6.0)


@pytest.mark.parametrize("previous", ["no GroupMetadata", "GroupMetadata without the member"])
def test_an_expiry_without_the_member_s_timeouts_says_its_undetected_time_is_unknown(
    spark: SparkSession, previous: str
) -> None:
    g = f"g-silent-unknown-{len(previous)}"
    logs = [
        log("rebalance-prepared", g, 30.0, generation=1, reason="removing member dead-1 on heartbeat expiration."),
        log("stabilized", g, 30.5, generation=2, members=1),
    ]
    gms = [] if previous == "no GroupMetadata" else [gm(g, 1, 10.0, [member("other-1", [("t", 0)])]),
                                                     gm(g, 2, 30.5, [member("other-1", [("t", 0)])])]  # fmt: skip
    row = next(r for r in run(spark, logs=logs, gms=gms) if not r["gap"] and r["generation"] == 2)
    assert (row["cause"], row["undetected_s"]) == ("heartbeat-expiry", None)
    assert "undetected unknown" in row["basis"]


def _record(group: str, kind: int, seconds: float, offset: int, **fields: Any) -> Row:
    values: dict[str, Any] = {
        "cluster": CLUSTER,
        "group": group,
        "log_partition": 2,
        "log_offset": offset,
        "log_ts": at(seconds),
        "record_type": kind,
        "tombstone": False,
        "member_id": None,
        "epoch": None,
        "record_json": "{}",
    }
    values.update(fields)
    return Row(**values)


def _epoch_history(kind: consumer.EpochGroups, base: int) -> tuple[list[Row], dict[str, Any]]:
    """One group's records: a joins, b joins (a gives two partitions or tasks up), an epoch compacted away, b leaves;
    and a record of another epoch-based type in the same group. Returns the records and the pending assignment."""
    g = f"g-{kind.group_type}"
    meta, mem, assign, stable = kind.metadata_type, kind.member_type, kind.assignment_type, kind.stable_state
    e1, e2, _, e4 = range(kind.first_epoch, kind.first_epoch + 4)
    pending: dict[str, Any] = {"member_epoch": e1, "state": stable + 1}  # UNREVOKED_PARTITIONS / UNREVOKED_TASKS
    if kind.pending_field is not None:
        pending[kind.pending_field] = [{"topic_id": "x", "subtopology_id": "0", "partitions": [0, 1]}]

    def reached(epoch: int) -> str:
        return json.dumps({"member_epoch": epoch, "state": stable})

    other = consumer.STREAMS if kind is consumer.CONSUMER else consumer.CONSUMER
    records = [
        # the first epoch: member a joins (its member record appended with the epoch record, same batch timestamp)
        _record(g, mem, 10.0, base + 1, member_id="a", record_json='{"instance_id":null,"client_id":"a"}'),
        _record(g, meta, 10.0, base + 2, epoch=e1, record_json=json.dumps({"epoch": e1})),
        _record(g, assign, 10.5, base + 3, member_id="a", epoch=e1, record_json=reached(e1)),
        # the second: member b joins; a must give partitions (tasks) 0 and 1 up
        _record(g, mem, 20.0, base + 4, member_id="b", record_json='{"client_id":"b"}'),
        _record(g, meta, 20.0, base + 5, epoch=e2, record_json=json.dumps({"epoch": e2})),
        _record(g, assign, 20.1, base + 6, member_id="a", epoch=e1, record_json=json.dumps(pending)),
        _record(g, assign, 20.6, base + 7, member_id="a", epoch=e2, record_json=reached(e2)),
        # a streams group (4.4) rewrites its metadata record at the same epoch: not a rebalance
        _record(g, meta, 20.7, base + 8, epoch=e2, record_json=json.dumps({"epoch": e2})),
        _record(g, assign, 20.9, base + 9, member_id="b", epoch=e2, record_json=reached(e2)),
        # the third is compacted away; the fourth: member b leaves
        _record(g, mem, 40.0, base + 10, member_id="b", tombstone=True, record_json=None),
        _record(g, meta, 40.0, base + 11, epoch=e4, record_json=json.dumps({"epoch": e4})),
        # another epoch-based type's record in the same group is not this type's
        _record(g, other.metadata_type, 50.0, base + 12, epoch=9, record_json='{"epoch":9}'),
    ]
    return records, pending


def test_epochs_members_causes_and_pending_revocation(spark: SparkSession) -> None:
    """KIP-848, streams and share groups keep the same books under their own record types, state numbers and
    first epoch (a streams group's first record is at epoch 2); a share group revokes nothing. One run for the
    three (each type's pipeline is a Spark plan of its own)."""
    histories = {kind: _epoch_history(kind, 100 * n) for n, kind in enumerate(consumer.EPOCH_GROUPS)}
    out = run(spark, records=[r for records, _ in histories.values() for r in records])
    for kind, (_, pending) in histories.items():
        rows = [r for r in out if r["group"] == f"g-{kind.group_type}" and r["group_type"] == kind.group_type]
        e1, e2, e3, e4 = range(kind.first_epoch, kind.first_epoch + 4)
        assert [(r["generation"], r["gap"], r["rebalances"]) for r in rows] == [
            (e1, False, 1),
            (e2, False, 1),
            (e3, True, 1),
            (e4, False, 1),
        ], kind.group_type
        observed = [r for r in rows if not r["gap"]]
        assert {r["rebalance_protocol"] for r in rows} == {kind.group_type}
        assert [r["cause"] for r in observed] == ["joined", "joined", "left"], kind.group_type
        assert [r["members_after"] for r in observed] == [1, 2, 1], kind.group_type
        # the group's first epoch (0 members before it); the third is unseen, so what came before the fourth is
        # unknown
        assert [r["members_before"] for r in observed] == [0, 1, None], kind.group_type
        assert observed[0]["started"] == at(10.0)
        assert observed[0]["duration_s"] == pytest.approx(0.5)
        assert observed[1]["duration_s"] == pytest.approx(20.9 - 20.0)  # the last member reached the second epoch
        assert observed[2]["stabilized"] is None  # nobody is left to reach the fourth
        assert "stabilized unknown" in observed[2]["basis"]
        assert kind.pending_basis in observed[1]["basis"]
        if kind.pending_field is None:  # a share group's partitions are shared: nothing waits on a revocation
            assert (observed[1]["partitions_unavailable"], observed[1]["unavailable_partition_s"]) == (None, None)
            continue
        count = sum(len(tp["partitions"]) for tp in pending[kind.pending_field])
        assert observed[1]["partitions_unavailable"] == count, kind.group_type
        assert observed[1]["unavailable_partition_s"] == pytest.approx(count * (20.6 - 20.1))


def test_causes_from_the_log_win_over_records(spark: SparkSession) -> None:
    """Each type's member lines give its causes; the three types' groups in one history, one run."""
    logs: dict[consumer.EpochGroups, list[Row]] = {}
    for kind in consumer.EPOCH_GROUPS:
        g = f"g-{kind.group_type}log"
        t = kind.group_type
        fenced = "consumer-member-fenced" if t == "share" else f"{t}-member-fenced"  # a share group's: KIP-848's
        logs[kind] = [
            log(f"{t}-member-joined", g, 10.0, member_id="a", reason="consumer"),
            log(kind.bump_event, g, 10.001, generation=1),
            log(fenced, g, 30.0, member_id="a", reason="the member session expired"),
            log(kind.bump_event, g, 30.0, generation=2),
            log(f"{t}-member-left", g, 40.0, member_id="b", reason="vigil: kip-848 stall"),
            log(kind.bump_event, g, 40.0, generation=3),
        ]
    out = run(spark, logs=[x for lines in logs.values() for x in lines])
    for kind, lines in logs.items():
        t = kind.group_type
        rows = [r for r in out if r["group"] == f"g-{t}log"]
        bumps = [x for x in lines if x["event"] == kind.bump_event]
        causes = [bl.event_cause(x["event"], x["reason"]) for x in lines if x["event"] != kind.bump_event]
        assert causes == ["joined", "heartbeat-expiry", "evicted-by-vigil"]
        assert [(r["group_type"], r["generation"]) for r in rows] == [(t, b["generation"]) for b in bumps]
        assert [r["cause"] for r in rows] == causes, t
        assert [r["started"] for r in rows] == [b["ts"] for b in bumps], t


def _causes_table() -> list[tuple[str, str, str]]:
    """The reason → cause table of the parser's unit test (shared, not copied: tests/ has no packages)."""
    path = Path(__file__).with_name("test_broker_log_parse.py")
    spec = importlib.util.spec_from_file_location("_vigil_broker_log_cases", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return list(module.CAUSES)


def test_spark_classifies_reasons_exactly_as_the_parser_does(spark: SparkSession) -> None:
    cases = _causes_table()
    df = spark.createDataFrame([(r,) for r, _, _ in cases], "reason string")
    detail = common.reason_detail(df["reason"])
    out = df.select("reason", detail.alias("d"), common.detail_cause(detail, common.client_reason(df["reason"])))
    got = {r[0]: (r[2], r[1]) for r in out.collect()}
    assert got == {r: bl.reason_cause(r) for r, _, _ in cases}


def test_spark_reads_trigger_members_exactly_as_the_parser_does(spark: SparkSession) -> None:
    reasons = [r for r, _, _ in _causes_table()] + ["explicit `LeaveGroup` request for (a-1, b-2) members.", None]
    df = spark.createDataFrame([(r,) for r in reasons], "reason string")
    got = {r[0]: tuple(r[1]) for r in df.select("reason", common.trigger_members(df["reason"])).collect()}
    assert got == {r: bl.trigger_members(r) for r in reasons}


def test_trigger_pods_come_from_vigil_s_events_and_the_operator_s_snapshots(spark: SparkSession) -> None:
    g = "g-pods"
    logs = []
    for n, reason in enumerate(["Adding new member a-1 with group instance id null", "removing member a-1 on heartbeat "
                                "expiration.", "Adding new member b-1 with group instance id null",
                                "explicit `LeaveGroup` request for (b-1, c-1) members."]):  # fmt: skip
        logs += [log("rebalance-prepared", g, 10.0 * n + 10, generation=n, reason=reason),
                 log("stabilized", g, 10.0 * n + 11, generation=n + 1, members=1)]  # fmt: skip
    own = Row(**{**event("stall-ended", g, 1.0, "a-1").asDict(), "pod": "pod-a"})
    snapshot = {"members": [{"member": {"member_id": "b-1"}, "host": "/10.0.0.2", "pod": "pod-b"},
                            {"member": {"member_id": "x-1"}, "host": "/10.0.0.3", "pod": None}]}  # fmt: skip
    rows = run(spark, logs=logs, events=[own, event("group-snapshot", g, 25.0, payload=snapshot)])
    got = [(r["trigger_members"], r["trigger_pods"]) for r in rows]
    assert got == [(["a-1"], ["pod-a"]), (["a-1"], ["pod-a"]), (["b-1"], ["pod-b"]), (["b-1", "c-1"], ["pod-b"])]


def test_empty_inputs_give_an_empty_table_with_the_schema(spark: SparkSession) -> None:
    out = rebalances.rebalances(
        frame(spark, [], "group_metadata"),
        frame(spark, [], "consumer_group_records"),
        frame(spark, [], "broker_log"),
        frame(spark, [], "vigil_events"),
    )
    assert out.schema.fieldNames() == rebalances.SCHEMA.fieldNames()
    assert out.count() == 0


#: (record types, log events) → the epoch-based types `consumer.present` finds: a type's epochs come only from its
#: metadata records and bump lines (share: any share record or line), so only those types' pipelines are built.
PRESENT_CASES: Final = [
    ((), (), ()),
    ((5, 8), ("consumer-member-joined",), ()),  # no epoch record or bump line: no epoch to model
    ((3,), (), ("consumer",)),
    ((), ("streams-epoch-bumped",), ("streams",)),
    ((), ("share-member-joined",), ("share",)),
    ((10, 17), ("epoch-bumped",), ("consumer", "streams", "share")),
]


def test_only_the_types_the_input_has_epochs_of_are_modelled(spark: SparkSession) -> None:
    for types, events, expected in PRESENT_CASES:
        records = [_record("g", t, 10.0, n, epoch=2, member_id="m") for n, t in enumerate(types)]
        logs = [log(e, "g", 10.0, generation=2 if e.endswith("bumped") else None) for e in events]
        found = consumer.present(frame(spark, records, "consumer_group_records"), frame(spark, logs, "broker_log"))
        assert tuple(k.group_type for k in found) == expected, (types, events)
    # what it leaves out adds no row: a classic and a KIP-848 group's history, with and without the other pipelines
    records = [_record("g", 3, 10.0, 0, epoch=1), _record("g", 5, 10.0, 1, member_id="m")]
    logs = [log("consumer-member-joined", "g", 9.0, member_id="m"), log("epoch-bumped", "g", 10.0, generation=1),
            log("member-failed", "c", 20.0, member_id="x"), log("stabilized", "c", 21.0, generation=2)]  # fmt: skip
    inputs = (
        frame(spark, [gm("c", 1, 5.0, [member("x")]), gm("c", 2, 21.0)], "group_metadata"),
        frame(spark, records, "consumer_group_records"),
        frame(spark, logs, "broker_log"),
    )
    kinds = consumer.present(inputs[1], inputs[2])
    assert kinds == (consumer.CONSUMER,)
    every, found = (rebalances.observed(*inputs, k).collect() for k in (consumer.EPOCH_GROUPS, kinds))
    assert sorted(map(str, found)) == sorted(map(str, every))
    assert {(r["group"], r["group_type"]) for r in found} == {("g", "consumer"), ("c", "classic")}
