"""`prevented` on small hand-built tables: bridged restarts priced against a stock expiry, static restarts counted
without credit, evicted stalls against max.poll.interval. Expectations are derived from the inputs."""

import datetime as dt
import json
import statistics
from typing import Any

import pytest
from pyspark.sql import DataFrame, Row, SparkSession

from vigil_spark import tables
from vigil_spark.model import prevented, rebalances

pytest_plugins = ["vigil_dev.testing.spark_fixtures"]
pytestmark = pytest.mark.spark

T0 = dt.datetime(2026, 11, 21, 10, 0, 0)  # naive UTC: the session and this machine run in UTC
C, G = "c1", "g-saved"
SESSION_MS, MAX_POLL_MS = 6000, 300_000
#: member id → (instance id, partitions held) in the group's GroupMetadata
HELD = {"s-old": ("s", 2), "t-old": ("t", 1), "q-old": ("q", 1), "r-old": ("r", 1), "d-1": (None, 3)}
PRICES = [10.0, 20.0, 40.0]  # partition-seconds of the group's observed rebalances


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def frame(spark: SparkSession, name: str, rows: list[dict[str, Any]]) -> DataFrame:
    schema = rebalances.SCHEMA if name == "rebalances" else tables.SCHEMAS[name]
    return spark.createDataFrame([tuple(r.get(f) for f in schema.fieldNames()) for r in rows], schema)


def event(kind: str, seconds: float, member_id: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"cluster": C, "ts": at(seconds), "group": G, "type": kind, "schema_version": 4, "member_id": member_id,
            "instance_id": HELD[member_id][0], "pod": f"pod-{member_id}", "payload_json": json.dumps(payload),
            "log_partition": 0, "log_offset": int(seconds * 1000)}  # fmt: skip


def run(
    spark: SparkSession, events: list[dict[str, Any]], members: DataFrame, stalls: DataFrame, *,
    rbs: list[dict[str, Any]], gm: list[dict[str, Any]],
) -> DataFrame:  # fmt: skip
    return prevented.prevented(
        frame(spark, "vigil_events", events),
        members=members,
        stalls=stalls,
        rebalances=frame(spark, "rebalances", rbs),
        group_metadata=frame(spark, "group_metadata", gm),
        consumer_group_records=frame(spark, "consumer_group_records", []),
    )


def test_each_save_is_priced_against_stock_kafka(spark: SparkSession) -> None:
    members = [Row(member_id=m, instance_id=i, client_id=m, client_host="/10.0.0.1", session_timeout_ms=SESSION_MS,
                   rebalance_timeout_ms=MAX_POLL_MS, subscribed_topics=["t"],
                   assigned=[Row(topic="t", partition=p) for p in range(n)]) for m, (i, n) in HELD.items()]  # fmt: skip
    gm = [{"cluster": C, "group": G, "log_partition": 0, "log_offset": 1, "log_ts": at(0), "tombstone": False,
           "protocol_type": "consumer", "generation": 1, "protocol": "range", "leader": "d-1", "state_ts": at(0),
           "members": members}]  # fmt: skip
    rbs = [{"cluster": C, "group": G, "group_type": "classic", "generation": n + 2, "rebalances": 1, "gap": False,
            "stabilized": at(n), "members_before": 2, "unavailable_partition_s": price}
           for n, price in enumerate(PRICES)]  # fmt: skip
    # the group's first join moved no partition: not a price
    rbs.append({"cluster": C, "group": G, "group_type": "classic", "generation": 1, "rebalances": 1, "gap": False,
                "stabilized": at(0), "members_before": 0, "unavailable_partition_s": 0.0})  # fmt: skip
    # r's replacement cost a rebalance (as a streams group's does on 4.4): static membership absorbed nothing
    rbs.append({"cluster": C, "group": G, "group_type": "streams", "generation": 7, "rebalances": 1, "gap": False,
                "started": at(300.001), "cause": "static-replacement", "members_before": 2})  # fmt: skip
    away = {"s-old": 15_000, "t-old": 3_000}  # s: longer than its session (stock: expiry), t: within it
    events = [event("bridge-ended", 100.0, m, {"outcome": "rejoined", "bridged_ms": ms, "heartbeats_sent": 3})
              for m, ms in away.items()]  # fmt: skip
    events.append(event("bridge-ended", 110.0, "q-old", {"outcome": "deadline", "bridged_ms": 60_000}))
    replaced = spark.createDataFrame(
        [
            (C, G, m, HELD[m][0], "static-replacement", at(t))
            for m, t in (("s-old", 100.0), ("q-old", 100.0), ("r-old", 300.0))
        ],
        "cluster string, group string, member_id string, instance_id string, leave_cause string, last_seen timestamp",
    )
    stalled_s = 35.0
    stalls = spark.createDataFrame(
        [(C, G, "d-1", None, "pod-d", at(200.0), at(200.0 + 31), at(200.0 + stalled_s), "evicted", 3),
         (C, G, "d-1", None, "pod-d", at(400.0), at(431.0), None, "recovered", 3)],
        "cluster string, group string, member_id string, instance_id string, pod string, started timestamp,"
        " detected timestamp, acted timestamp, outcome string, partitions int",
    )  # fmt: skip
    out = run(spark, events, replaced, stalls, rbs=rbs, gm=gm)
    assert tuple(out.columns) == prevented.COLUMNS
    rows = {(r["kind"], r["member_id"]): r for r in out.collect()}
    assert set(rows) == {("bridged-restart", "s-old"), ("bridged-restart", "t-old"), ("static-restart", "q-old"),
                         ("stall-evicted", "d-1")}  # fmt: skip

    price, session_s = statistics.median(PRICES), SESSION_MS / 1000
    s = rows[("bridged-restart", "s-old")]
    kept_idle = (away["s-old"] / 1000 - session_s) * HELD["s-old"][1]
    assert (s["away_s"], s["stock_s"], s["rebalances_avoided"]) == (away["s-old"] / 1000, session_s, 2)
    assert s["partition_s_saved"] == pytest.approx(2 * price - kept_idle)
    assert s["pod"] == "pod-s-old"
    t = rows[("bridged-restart", "t-old")]
    assert (t["rebalances_avoided"], t["partition_s_saved"]) == (0, 0.0)
    assert "static membership alone keeps it" in t["basis"]
    q = rows[("static-restart", "q-old")]
    assert (q["rebalances_avoided"], q["partition_s_saved"]) == (0, 0.0)
    d = rows[("stall-evicted", "d-1")]
    assert (d["away_s"], d["stock_s"], d["partitions"]) == (stalled_s, MAX_POLL_MS / 1000, 3)
    assert d["partition_s_saved"] == pytest.approx(3 * (MAX_POLL_MS / 1000 - stalled_s))
    assert d["at"] == at(200.0 + stalled_s)


def test_unknown_timeouts_leave_the_figures_null_and_say_why(spark: SparkSession) -> None:
    events = [event("bridge-ended", 10.0, "s-old", {"outcome": "rejoined", "bridged_ms": 9000})]
    stalls = spark.createDataFrame(
        [(C, G, "d-1", None, "pod-d", at(0.0), at(31.0), at(32.0), "evicted", None)],
        "cluster string, group string, member_id string, instance_id string, pod string, started timestamp,"
        " detected timestamp, acted timestamp, outcome string, partitions int",
    )
    no_members = spark.createDataFrame(
        [],
        "cluster string, group string, member_id string, instance_id string, leave_cause string, last_seen timestamp",
    )
    out = run(spark, events, no_members, stalls, rbs=[], gm=[])
    rows = {r["kind"]: r for r in out.collect()}
    assert (rows["bridged-restart"]["rebalances_avoided"], rows["bridged-restart"]["partition_s_saved"]) == (None, None)
    assert "session timeout unknown" in rows["bridged-restart"]["basis"]
    assert rows["stall-evicted"]["partition_s_saved"] is None
    assert "max.poll.interval unknown" in rows["stall-evicted"]["basis"]
    assert "partitions unknown" in rows["stall-evicted"]["basis"]
