"""`members`, `stalls`, `daily` and `build` on small hand-built tables; expectations derived from the inputs."""

import datetime as dt
import itertools
import json
import math
from collections import Counter
from pathlib import Path
from typing import Any, Final

import pytest
from pyspark.sql import DataFrame, Row, SparkSession

from vigil_spark import model, tables
from vigil_spark.model import daily, members, rebalances, stalls
from vigil_spark.sources import broker_logs

pytest_plugins = ["vigil_dev.testing.spark_fixtures"]
pytestmark = pytest.mark.spark

T0 = dt.datetime(2026, 11, 21, 10, 0, 0)  # naive UTC: the session and this machine run in UTC
CLUSTER = "c1"
UUIDS = [f"{i:08x}-0000-4000-8000-{i:012x}" for i in range(1, 10)]


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def frame(spark: SparkSession, rows: list[dict[str, Any]], name: str) -> DataFrame:
    schema = {"broker_log": broker_logs.SCHEMA, "rebalances": rebalances.SCHEMA}.get(name) or tables.SCHEMAS[name]
    return spark.createDataFrame([tuple(r.get(f) for f in schema.fieldNames()) for r in rows], schema)


def log(event: str, group: str, seconds: float, **fields: Any) -> dict[str, Any]:
    return {"cluster": CLUSTER, "ts": at(seconds), "group": group, "event": event, "file": "f", **fields}


def vigil(kind: str, group: str, seconds: float, member_id: str, **payload: Any) -> dict[str, Any]:
    return {
        "cluster": CLUSTER,
        "ts": at(seconds),
        "group": group,
        "type": kind,
        "schema_version": 1,
        "member_id": member_id,
        "payload_json": json.dumps(payload),
        "log_partition": 0,
        "log_offset": int(seconds * 1000),
    }


def test_members_count_joins_per_identity_and_flag_flapping(spark: SparkSession) -> None:
    g = "g-members"
    # app-1 restarts every 10 minutes (a new member id each time); app-2 joins once; pod-0 is static
    flappy = [(f"app-1-{UUIDS[i]}", 600.0 * i) for i in range(4)]
    steady = [(f"app-2-{UUIDS[5]}", 0.0)]
    static = [(f"pod-0-{UUIDS[6]}", 0.0), (f"pod-0-{UUIDS[7]}", 5000.0)]
    logs = [log("member-joined", g, t, member_id=m) for m, t in flappy + steady]
    logs += [log("member-failed", g, t + 300.0, member_id=m) for m, t in flappy[:-1]]
    logs += [log("static-member-joined", g, static[0][1], member_id=static[0][0], instance_id="pod-0")]
    logs += [log("static-member-replaced", g, static[1][1], member_id=static[0][0], instance_id="pod-0")]
    logs += [log("static-member-joined", g, static[1][1], member_id=static[1][0], instance_id="pod-0")]
    out = members.members(
        frame(spark, [], "group_metadata"),
        frame(spark, [], "consumer_group_records"),
        frame(spark, logs, "broker_log"),
        flap_joins=3,
        flap_window_s=3600,
    )
    assert tuple(out.columns) == members.COLUMNS
    rows = {r["member_id"]: r for r in out.collect()}
    assert set(rows) == {m for m, _ in flappy + steady + static}
    for ids, identity, replaced in ((flappy, "app-1", 0), (steady, "app-2", 0), (static, "pod-0", 1)):
        expired = sum(1 for x in logs if x["event"] == "member-failed" and x["member_id"] in dict(ids))
        fresh = sorted(t for _, t in ids)[: len(ids) - replaced]
        most_in_an_hour = max(sum(1 for u in fresh if t - 3600 <= u <= t) for t in fresh)
        for member_id, t in ids:
            row = rows[member_id]
            assert row["identity"] == identity
            assert (row["joins"], row["replacements"], row["leaves"]) == (len(fresh), replaced, expired)
            assert row["churn"] == len(fresh) + expired
            assert row["flapping"] == (most_in_an_hour >= 3)
            assert row["first_seen"] == at(t)
    assert rows[flappy[0][0]]["leave_cause"] == "heartbeat-expiry"
    assert (rows[static[0][0]]["leave_cause"], rows[static[0][0]]["replaced"]) == ("static-replacement", False)
    assert (rows[static[1][0]]["left"], rows[static[1][0]]["replaced"]) == (False, True)
    assert rows[steady[0][0]]["left"] is False


def _static_restarts(restarts: int, every_s: float) -> list[tuple[str, float]]:
    return [(f"orders-1-{UUIDS[i]}", every_s * i) for i in range(restarts + 1)]


def _static_generation(group: str, offset: int, generation: int, member_id: str, seconds: float) -> dict[str, Any]:
    """A GroupMetadata record of one static member, orders-1."""
    member = Row(member_id=member_id, instance_id="orders-1", client_id="c", client_host="/10.0.0.1",
                 session_timeout_ms=1, rebalance_timeout_ms=1, subscribed_topics=["t"], assigned=[])  # fmt: skip
    return {"cluster": CLUSTER, "group": group, "log_partition": 0, "log_offset": offset, "log_ts": at(seconds),
            "tombstone": False, "protocol_type": "consumer", "generation": generation, "protocol": "range",
            "leader": member_id, "state_ts": at(seconds), "members": [member]}  # fmt: skip


@pytest.mark.parametrize(
    "source", ["classic log", "kip-848 log and tombstones", "streams log and tombstones", "group metadata only"]
)
def test_static_replacements_are_not_flapping(spark: SparkSession, source: str) -> None:
    """orders-1 restarted 3 times in 15 minutes, each absorbed by static membership (bridged, or a coordinated
    rollout): one join and 3 replacements, no churn, not flapping — however the history tells of it."""
    g = f"g-static-{source.split(maxsplit=1)[0]}"
    ids = _static_restarts(3, 300.0)
    logs: list[dict[str, Any]] = []
    records: list[dict[str, Any]] = []
    gms: list[dict[str, Any]] = []
    if source == "classic log":
        logs.append(log("static-member-joined", g, 0.0, member_id=ids[0][0], instance_id="orders-1"))
        for (old, _), (new, t) in itertools.pairwise(ids):
            logs.append(log("static-member-replaced", g, t, member_id=old, instance_id="orders-1"))
            logs.append(log("static-member-joined", g, t, member_id=new, instance_id="orders-1"))
    elif source.startswith(("kip-848", "streams")):
        prefix, member_type = ("consumer", 5) if source.startswith("kip-848") else ("streams", 19)
        logs.append(log(f"{prefix}-member-joined", g, 0.0, member_id=ids[0][0], instance_id="orders-1"))
        for n, ((old, _), (new, t)) in enumerate(itertools.pairwise(ids)):
            # a static member's temporary leave (epoch -2) keeps its assignment: not a leave
            logs.append(log(f"{prefix}-member-temporarily-left", g, t - 1, member_id=old, instance_id="orders-1"))
            logs.append(log(f"{prefix}-member-replaced", g, t, member_id=new, instance_id="orders-1"))
            records += [
                {"cluster": CLUSTER, "group": g, "log_partition": 0, "log_offset": 2 * n, "log_ts": at(t),
                 "record_type": member_type, "member_id": new, "tombstone": False,
                 "record_json": json.dumps({"instance_id": "orders-1", "client_id": "c"})},
                {"cluster": CLUSTER, "group": g, "log_partition": 0, "log_offset": 2 * n + 1, "log_ts": at(t + 0.001),
                 "record_type": member_type, "member_id": old, "tombstone": True, "record_json": None},
            ]  # fmt: skip
    else:  # one generation throughout: the coordinator rewrote its metadata with each new member id
        for n, (mid, t) in enumerate(ids):
            gms.append(_static_generation(g, n, 1, mid, t))
    out = members.members(
        frame(spark, gms, "group_metadata"),
        frame(spark, records, "consumer_group_records"),
        frame(spark, logs, "broker_log"),
    )
    rows = {r["member_id"]: r for r in out.collect()}
    assert set(rows) == {m for m, _ in ids}
    for mid, _ in ids:
        row = rows[mid]
        assert (row["identity"], row["joins"], row["replacements"], row["leaves"], row["churn"]) == (
            "orders-1", 1, 3, 0, 1)  # fmt: skip
        assert row["flapping"] is False
        assert row["replaced"] is (mid != ids[0][0])
        assert (row["left"], row["leave_cause"]) == (
            (False, None) if mid == ids[-1][0] else (True, "static-replacement"))  # fmt: skip


def test_a_static_member_that_rejoins_after_expiry_is_a_fresh_join(spark: SparkSession) -> None:
    """Generations 1 and 2 (a rebalance between): the second member id of orders-1 is not a replacement."""
    g = "g-static-expired"
    ids = _static_restarts(1, 60.0)
    gms = [_static_generation(g, gen, gen, mid, t) for gen, (mid, t) in enumerate(ids, start=1)]
    logs = [log("member-failed", g, 50.0, member_id=ids[0][0])]
    rows = {r["member_id"]: r for r in members.members(
        frame(spark, gms, "group_metadata"), frame(spark, [], "consumer_group_records"),
        frame(spark, logs, "broker_log")).collect()}  # fmt: skip
    assert [rows[m]["replaced"] for m, _ in ids] == [False, False]
    assert (rows[ids[0][0]]["leave_cause"], rows[ids[1][0]]["joins"], rows[ids[1][0]]["leaves"]) == (
        "heartbeat-expiry", 2, 1)  # fmt: skip


def test_a_kip848_member_that_left_counts_one_leave_with_the_log_s_cause(spark: SparkSession) -> None:
    g = "g-848-members"

    def record(offset: int, seconds: float, member_id: str, *, tombstone: bool = False) -> dict[str, Any]:
        return {"cluster": CLUSTER, "group": g, "log_partition": 0, "log_offset": offset, "log_ts": at(seconds),
                "record_type": 5, "member_id": member_id, "tombstone": tombstone,
                "record_json": None if tombstone else json.dumps({"client_id": member_id[:1]})}  # fmt: skip

    left = log("consumer-member-left", g, 30.0, member_id="a", reason="vigil: kip-848 stall")
    records = [record(1, 10.0, "a"), record(2, 10.0, "b"), record(3, 30.001, "a", tombstone=True)]

    def run(logs: list[dict[str, Any]]) -> dict[str, Row]:
        out = members.members(frame(spark, [], "group_metadata"), frame(spark, records, "consumer_group_records"),
                              frame(spark, logs, "broker_log"))  # fmt: skip
        return {r["member_id"]: r for r in out.collect()}

    alone = members.members(frame(spark, [], "group_metadata"), frame(spark, [], "consumer_group_records"),
                            frame(spark, [left], "broker_log")).collect()[0]  # fmt: skip
    rows = run([left])
    assert alone["leave_cause"] is not None
    assert (rows["a"]["left"], rows["a"]["leave_cause"]) == (True, alone["leave_cause"])
    assert (rows["a"]["joins"], rows["a"]["leaves"], rows["a"]["churn"]) == (1, 1, 2)
    assert (rows["b"]["left"], rows["b"]["leaves"], rows["b"]["churn"]) == (False, 0, 1)
    assert (rows["a"]["generations"], rows["b"]["generations"]) == (None, None)
    tombstone_only = run([])["a"]
    assert (tombstone_only["left"], tombstone_only["leave_cause"], tombstone_only["leaves"]) == (True, None, 1)


def test_members_from_group_metadata_carry_client_and_generations(spark: SparkSession) -> None:
    g = "g-gm"
    mids = [f"c-{UUIDS[0]}", f"d-{UUIDS[1]}"]
    gens = {1: mids[:1], 2: mids, 3: mids[1:]}

    def member(mid: str) -> Row:
        return Row(member_id=mid, instance_id=None, client_id=mid[:1], client_host="/10.0.0.1", session_timeout_ms=1,
                   rebalance_timeout_ms=1, subscribed_topics=["t"], assigned=[])  # fmt: skip

    gms = [
        {"cluster": CLUSTER, "group": g, "log_partition": 0, "log_offset": n, "log_ts": at(n), "tombstone": False,
         "protocol_type": "consumer", "generation": n, "protocol": "range", "leader": ms[0], "state_ts": at(n),
         "members": [member(m) for m in ms]}
        for n, ms in gens.items()
    ]  # fmt: skip
    rows = {
        r["member_id"]: r
        for r in members.members(
            frame(spark, gms, "group_metadata"),
            frame(spark, [], "consumer_group_records"),
            frame(spark, [], "broker_log"),
        ).collect()
    }
    for mid in mids:
        in_gens = [n for n, ms in gens.items() if mid in ms]
        assert rows[mid]["generations"] == len(in_gens)
        assert (rows[mid]["first_seen"], rows[mid]["last_seen"]) == (at(min(in_gens)), at(max(in_gens)))
        assert rows[mid]["client_id"] == rows[mid]["identity"] == mid[:1]


def test_stalls_pair_detection_end_action_and_outcome(spark: SparkSession) -> None:
    g = "g-stall"
    events = [
        # m1: stalled, evicted
        vigil("stall-detected", g, 10.0, "m1", stalled_for_ms=31000, stall_timeout_ms=30000, signal="beacon"),
        vigil("eviction-requested", g, 10.5, "m1", action="leave-group", reason="vigil: no poll"),
        vigil("eviction-done", g, 11.0, "m1", action="leave-group", kafka_error="NONE", already_gone=False),
        # m2: stalled, recovered on its own
        vigil("stall-detected", g, 20.0, "m2", stalled_for_ms=30500, stall_timeout_ms=30000, signal="progress"),
        vigil("stall-ended", g, 26.0, "m2", stalled_for_ms=36500),
        # m3: stalled, eviction refused by the budget; still open
        vigil("stall-detected", g, 30.0, "m3", stalled_for_ms=30000, stall_timeout_ms=30000, signal="beacon"),
        vigil("eviction-refused", g, 30.2, "m3", action="leave-group", cause="budget", message="no budget left"),
        # m4: stalled, its sidecar failed the app's probe (no eviction event), the restarted app polled again
        vigil(
            "stall-detected",
            g,
            40.0,
            "m4",
            stalled_for_ms=30000,
            stall_timeout_ms=30000,
            signal="beacon",
            action="restart",
        ),
        vigil("stall-ended", g, 52.0, "m4", stalled_for_ms=42000),
        # m5: alert only, still open
        vigil(
            "stall-detected",
            g,
            50.0,
            "m5",
            stalled_for_ms=30000,
            stall_timeout_ms=30000,
            signal="stats",
            action="alert",
        ),
    ]
    out = stalls.stalls(frame(spark, events, "vigil_events"))
    assert tuple(out.columns) == stalls.COLUMNS
    rows = {r["member_id"]: r for r in out.collect()}
    assert set(rows) == {"m1", "m2", "m3", "m4", "m5"}
    for mid, row in rows.items():
        detected = next(e for e in events if e["member_id"] == mid and e["type"] == "stall-detected")
        payload = json.loads(detected["payload_json"])
        assert row["detected"] == detected["ts"]
        assert row["started"] == detected["ts"] - dt.timedelta(milliseconds=payload["stalled_for_ms"])
        assert row["stall_timeout_s"] == payload["stall_timeout_ms"] / 1000
        ended = [e for e in events if e["member_id"] == mid and e["type"] == "stall-ended"]
        assert row["ended"] == (ended[0]["ts"] if ended else None)
        if ended:
            assert row["duration_s"] == json.loads(ended[0]["payload_json"])["stalled_for_ms"] / 1000
    assert (rows["m1"]["action"], rows["m1"]["outcome"]) == ("leave-group", "evicted")
    assert (rows["m2"]["action"], rows["m2"]["outcome"]) == (None, "recovered")
    assert (rows["m3"]["action"], rows["m3"]["outcome"]) == ("leave-group", "refused:budget")
    assert (rows["m4"]["action"], rows["m4"]["outcome"]) == ("restart", "recovered")
    assert (rows["m5"]["action"], rows["m5"]["outcome"]) == ("alert", "open")


def _percentile(values: list[float], q: float) -> float:
    """Spark's exact `percentile`: linear interpolation between the closest ranks."""
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def test_daily_aggregates_are_the_rebalances_summed_per_day(spark: SparkSession) -> None:
    g = "g-daily"
    rows: list[dict[str, Any]] = []
    specs = [  # (day, duration, cause, protocol, unavailable partition-seconds)
        (0, 1.0, "joined", "eager", 3.0),
        (0, 4.0, "left", "eager", 12.0),
        (0, 2.0, "joined", "cooperative", 1.0),
        (0, None, "unknown", "eager", None),
        (1, 0.5, "heartbeat-expiry", "consumer", 0.25),
    ]
    for i, (day, took, cause, protocol, unavailable) in enumerate(specs):
        start = at(86400.0 * day + 60.0 * i)
        rows.append({"cluster": CLUSTER, "group": g, "group_type": "classic", "generation": i + 1, "rebalances": 1,
                     "gap": False, "started": start, "stabilized": start + dt.timedelta(seconds=took or 0),
                     "duration_s": took, "cause": cause, "rebalance_protocol": protocol,
                     "unavailable_partition_s": unavailable})  # fmt: skip
    rows.append({"cluster": CLUSTER, "group": g, "group_type": "classic", "generation": 9, "rebalances": 3,
                 "gap": True, "started": at(86400.0 + 100), "stabilized": at(86400.0 + 200), "cause": "unknown",
                 "rebalance_protocol": "eager"})  # fmt: skip
    out = {r["date"]: r for r in daily.daily(frame(spark, rows, "rebalances")).collect()}
    for day in (0, 1):
        date = (T0 + dt.timedelta(days=day)).date()
        mine = [r for r in rows if r["stabilized"].date() == date]
        seen = [r for r in mine if not r["gap"]]
        durations = [r["duration_s"] for r in seen if r["duration_s"] is not None]
        got = out[date]
        assert got["rebalances"] == sum(r["rebalances"] for r in mine)
        assert got["observed_rebalances"] == len(seen)
        assert got["gap_rebalances"] == sum(r["rebalances"] for r in mine if r["gap"])
        assert got["durations_known"] == len(durations)
        assert got["p50_s"] == pytest.approx(_percentile(durations, 0.5))
        assert got["p95_s"] == pytest.approx(_percentile(durations, 0.95))
        assert got["max_s"] == max(durations)
        for protocol in daily.PROTOCOLS:
            figures = [r["unavailable_partition_s"] for r in seen if r["rebalance_protocol"] == protocol]
            known = [f for f in figures if f is not None]
            assert got[f"unavailable_partition_s_{protocol}"] == (pytest.approx(sum(known)) if known else None)
        counts = Counter(r["cause"] for r in seen)
        assert got["top_cause"] == min(counts, key=lambda c: (-counts[c], c))
    assert "durations known for 3 of 4" in out[T0.date()]["basis"]


def test_build_reads_optional_tables_and_writes_parquet_and_json(spark: SparkSession, tmp_path: Path) -> None:
    tables_dir, out_dir = tmp_path / "tables", tmp_path / "out"
    g = "g-build"
    logs = [
        log("rebalance-prepared", g, 1.0, generation=0, reason="Adding new member a-1 with group instance id null"),
        log("member-joined", g, 1.0, member_id="a-1"),
        log("stabilized", g, 1.5, generation=1, members=1),
        log("unparsed", None, 2.0, reason="no template matches this coordinator line"),  # type: ignore[arg-type]
    ]
    frame(spark, logs, "broker_log").write.parquet(str(tables_dir / "broker_log"))
    events = [vigil("stall-detected", g, 5.0, "a-1", stalled_for_ms=1, stall_timeout_ms=1, signal="beacon")]
    batch = tables_dir / "vigil_events" / f"{tables.BATCH_COLUMN}=c1.events.0"
    frame(spark, events, "vigil_events").write.parquet(str(batch))
    # group_metadata and consumer_group_records were never ingested: they are empty, not an error
    model.build(spark, tables_dir, out_dir)

    expected = model.compute(
        frame(spark, [], "group_metadata"),
        frame(spark, [], "consumer_group_records"),
        frame(spark, events, "vigil_events"),
        frame(spark, logs, "broker_log"),
    )
    for name in model.TABLES:
        parquet = spark.read.parquet(str(out_dir / "model" / name / "parquet"))
        assert sorted(map(str, parquet.collect())) == sorted(map(str, expected[name].collect())), name
        assert list((out_dir / "model" / name / "json").glob("part-*.json")), name
    written = spark.read.parquet(str(out_dir / "model" / "rebalances" / "parquet")).collect()
    assert [(r["generation"], r["cause"]) for r in written] == [(1, "joined")]


#: (its record type, its join line, the type it must be read as) for each group of the share-routing test
SHARE_ROUTING: Final = {
    "g-share-by-record": (11, "consumer-member-joined", "share"),
    "g-share-by-line": (None, "share-member-joined", "share"),
    "g-consumer": (None, "consumer-member-joined", "consumer"),
}


def test_a_share_group_s_log_lines_are_not_read_as_a_kip848_group_s(spark: SparkSession) -> None:
    """A share group's coordinator lines are word for word a KIP-848 group's, but for its members' joins and leaves:
    the group's records or those lines tell them apart (three groups, one history, one run)."""
    logs, records = [], []
    for n, (g, (record_type, joined, _)) in enumerate(SHARE_ROUTING.items()):
        logs += [
            log(joined, g, 10.0, member_id=f"a-{g}", reason="consumer"),
            log("epoch-bumped", g, 10.001, generation=1),
            log("consumer-member-fenced", g, 30.0, member_id=f"a-{g}", reason="the member session expired"),
            log("epoch-bumped", g, 30.0, generation=2),
        ]
        if record_type is not None:
            records.append({"cluster": CLUSTER, "group": g, "log_partition": 0, "log_offset": n,
                            "log_ts": at(10.001), "record_type": record_type, "tombstone": False, "epoch": 1,
                            "record_json": "{}"})  # fmt: skip
    out = model.compute(
        frame(spark, [], "group_metadata"),
        frame(spark, records, "consumer_group_records"),
        frame(spark, [], "vigil_events"),
        frame(spark, logs, "broker_log"),
    )
    rows = sorted(out["rebalances"].collect(), key=lambda r: (r["group"], r["generation"]))
    assert [(r["group"], r["group_type"], r["generation"]) for r in rows] == [
        (g, group_type, n) for g, (_, _, group_type) in sorted(SHARE_ROUTING.items()) for n in (1, 2)
    ]
    assert {r["cause"] for r in rows if r["generation"] == 2} == {"heartbeat-expiry"}
    assert sorted(r["member_id"] for r in out["members"].collect()) == sorted(f"a-{g}" for g in SHARE_ROUTING)


def test_empty_inputs_give_empty_tables_with_their_columns(spark: SparkSession) -> None:
    out = model.compute(
        frame(spark, [], "group_metadata"),
        frame(spark, [], "consumer_group_records"),
        frame(spark, [], "vigil_events"),
        frame(spark, [], "broker_log"),
    )
    assert set(out) == set(model.TABLES)
    assert tuple(out["members"].columns) == members.COLUMNS
    assert tuple(out["stalls"].columns) == stalls.COLUMNS
    assert out["rebalances"].columns == rebalances.SCHEMA.fieldNames()
    assert "top_cause" in out["daily"].columns
    assert {name: frame.count() for name, frame in out.items()} == dict.fromkeys(model.TABLES, 0)
