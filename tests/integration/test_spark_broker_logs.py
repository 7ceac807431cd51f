"""The broker-log source and the rebalance model on the real broker's own server.log.

A real group goes through a known history — three joins, a LeaveGroup sent with a KIP-800 client reason, a
member killed with SIGKILL whose session expires, and the last member's own leave (the group becomes Empty) —
then the broker's server.log is parsed with `sources.broker_logs` and modelled with `model.rebalances`.
Generations are checked against an independent regex over the same log (`vigil_dev.testing.broker_log`),
causes against the test's own action log.
"""

import json
import sys
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from vigil_core.kafka import wire
from vigil_dev import procs
from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import broker_log, clients
from vigil_dev.testing.waiting import bound, wait_for
from vigil_spark import tables
from vigil_spark.model import rebalances
from vigil_spark.parse import broker_log as parse
from vigil_spark.sources import broker_logs

pytest_plugins = ["vigil_dev.testing.spark_fixtures"]
pytestmark = [pytest.mark.integration, pytest.mark.spark]

SESSION_MS = 6000
REASON = "itest: removed by the broker-log test"

#: A member in its own process, so that SIGKILL really silences its heartbeats.
_CONSUMER = """
import json, sys
from confluent_kafka import Consumer
consumer = Consumer(json.loads(sys.argv[1]))
consumer.subscribe([sys.argv[2]])
while True:
    consumer.poll(0.5)
"""


def _completed(kafka: KafkaCluster, group: str) -> list[int]:
    """Generations whose join phase completed, as an independent regex over the broker log sees them."""
    part = r"(?: \(__consumer_offsets-\d+\))?"  # 3.9's classic coordinator names the offsets partition
    pattern = (
        rf"(?:Stabilized group {{g}} generation (\d+){part} with \d+ members"
        rf"|Group {{g}} with generation (\d+) is now empty{part})"
    )
    return sorted(int(a or b) for _, (a, b) in broker_log.broker_lines(kafka, group, pattern))


def _generations_reach(kafka: KafkaCluster, group: str, n: int, timeout: float) -> list[int]:
    return wait_for(
        lambda: _completed(kafka, group),
        lambda gens: len(gens) >= n,
        timeout=timeout,
        what=f"{group}: {n} generations in the broker log",
    )


def test_real_broker_log_gives_the_generations_and_causes_of_a_known_history(
    kafka: KafkaCluster, spark: SparkSession, tmp_path: Path
) -> None:
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("t-blog"), partitions=3)
    group = clients.unique("g-blog")
    actions: list[str] = []  # the cause the test expects for each generation, in order
    joined = bound(10)

    a = clients.Member(conn, group, [topic], client_id=f"{group}-a").start()
    actions.append("joined")
    _generations_reach(kafka, group, len(actions), joined)

    conf = conn.confluent_config() | dict(clients.CONSUMER_DEFAULTS) | clients.QUIET
    conf |= {"group.id": group, "client.id": f"{group}-b", "session.timeout.ms": SESSION_MS}
    b = procs.start(
        f"{group}-b",
        [sys.executable, "-c", _CONSUMER, json.dumps(conf), topic],
        pid_file=tmp_path / "b.pid",
        marker=f"{group}-b",
        log_file=tmp_path / "b.log",
    )
    running = [a]
    try:
        actions.append("joined")
        _generations_reach(kafka, group, len(actions), joined)
        c = clients.Member(conn, group, [topic], client_id=f"{group}-c").start()  # after b: one join, one rebalance
        running.append(c)
        actions.append("joined")
        wait_for(lambda: clients.stable_members(conn, group), lambda n: n == 3, timeout=bound(20), what="3 members")
        _generations_reach(kafka, group, len(actions), joined)

        member_id = wait_for(lambda: c.member_id, bool, timeout=bound(5), what="c's member id")
        assert member_id is not None
        c.paused_polling.set()  # an evicted librdkafka member does not rejoin until its app polls again
        group_wire = wire.GroupWire(conn)
        try:
            coordinator = group_wire.find_coordinator(group)
            result = group_wire.leave_group(coordinator.node_id, group, [wire.LeaveIdentity(member_id, None, REASON)])
        finally:
            group_wire.close()
        assert (result.code, [code for _, _, code in result.members]) == (0, [0])
        actions.append("left")
        _generations_reach(kafka, group, len(actions), joined)

        b.kill()
        actions.append("heartbeat-expiry")
        _generations_reach(kafka, group, len(actions), bound(SESSION_MS / 1000 + 3))

        running.remove(c)
        c.close()  # no longer a member: nothing to leave
        running.remove(a)
        a.close()  # the last member leaves: the group's final generation is empty
        actions.append("left")
        _generations_reach(kafka, group, len(actions), joined)
    finally:
        b.kill()
        for m in running:
            m.close()

    logs = [str(kafka.server_log(node.node_id)) for node in kafka.nodes]
    parsed = broker_logs.read(spark, logs, cluster="itest").filter(f"`group` = '{group}'").cache()
    stabilized = parsed.filter("event in ('stabilized', 'empty')").orderBy("ts").collect()
    # the parser sees exactly the generations an independent regex sees, with the same member counts
    assert [(r["generation"], r["members"]) for r in stabilized if r["event"] == "stabilized"] == (
        broker_log.stabilized(kafka, group)
    )
    emptied = broker_log.broker_lines(kafka, group, r"Group {g} with generation (\d+) is now empty")
    assert [r["generation"] for r in stabilized if r["event"] == "empty"] == [int(n) for _, (n,) in emptied]
    assert [r["generation"] for r in stabilized] == _completed(kafka, group) == list(range(1, len(actions) + 1))

    empty = spark.createDataFrame([], tables.SCHEMAS["group_metadata"])
    rows = (
        rebalances.rebalances(
            empty,
            spark.createDataFrame([], tables.SCHEMAS["consumer_group_records"]),
            parsed,
            spark.createDataFrame([], tables.SCHEMAS["vigil_events"]),
        )
        .orderBy("generation")
        .collect()
    )
    assert [r["generation"] for r in rows] == [r["generation"] for r in stabilized]
    assert [r["cause"] for r in rows] == actions
    assert all(r["cause"] in parse.CAUSES for r in rows)
    left = [r["client_reason"] for r in rows if r["cause"] == "left"]
    assert left == [REASON, parse.NO_CLIENT_REASON]  # librdkafka's own LeaveGroup (v0-1) carries no reason
    assert [r["members_after"] for r in rows] == [r["members"] for r in stabilized]
    assert all(r["duration_s"] is not None and r["duration_s"] >= 0 for r in rows)
    assert not any(r["gap"] for r in rows)
