"""`vigil report` on a real streams group (KIP-1071, Kafka 4.2+): its rebalances come out of the model.

Two Kafka Streams instances on the streams protocol: `a` joins, the static `s` joins (a hands tasks over to s),
`s` restarts within its session (4.4's static membership: a temporary leave, then a replacement that bumps the
epoch, unlike a KIP-848 consumer's), `a` closes and leaves. The report ingests `__consumer_offsets` and the
broker's server.log. Its `rebalances` rows for the group must be exactly the epochs the broker logged (an
independent regex over the same log, not vigil's parser) with the causes of the test's own action log; its
`members` show s's restart as a replacement, not churn, and `prevented` does not count it as a restart absorbed.
"""

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from vigil_core.kafka.group_client import GroupClient
from vigil_core.kafka.model import GroupState
from vigil_core.kafka.security import KafkaConnection
from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import broker_log, clients, report_cli, streams_app
from vigil_dev.testing.fixtures import release, run_kafka_version
from vigil_dev.testing.waiting import wait_for
from vigil_spark.model import consumer

pytestmark = [pytest.mark.integration, pytest.mark.spark]
pytest_plugins = ["vigil_dev.testing.spark_fixtures"]

#: The broker's line for a streams group's epoch bump (Kafka 4.4 GroupMetadataManager's wording).
BUMPED = r"\[GroupId {g}\]\[MemberId [^\]]+\] Bumped streams group epoch to (\d+) with"
#: A static streams member's close (4.4) and its return under a new member id.
TEMPORARILY_LEFT = r"\[GroupId {g}\]\[MemberId [^\]]+\] Static member \S+ with instance id \S+ temporarily left"
REJOINED = r"\[GroupId {g}\]\[MemberId [^\]]+\] Static member with instance id \S+ re-joins the streams group"
#: Kafka runs streams groups by default from 4.2's metadata version on.
STREAMS_GROUPS = (4, 2)


def _epochs(kafka: KafkaCluster, group: str) -> list[int]:
    return [int(n) for _, (n,) in broker_log.broker_lines(kafka, group, BUMPED)]


def _members(conn: KafkaConnection, group: str) -> tuple[GroupState, int]:
    client = GroupClient(conn)
    try:
        described = client.describe(group, subscriptions=False)
        return described.state, len(described.members)
    finally:
        client.close()


def test_the_report_models_a_streams_group_s_rebalances(
    spark_kafka: SparkSession, kafka: KafkaCluster, tmp_path: Path
) -> None:
    running = release(run_kafka_version())
    assert running >= STREAMS_GROUPS, f"streams groups need Kafka 4.2+, the broker runs {run_kafka_version()}"
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("streams-in"), partitions=4)
    out = clients.create_topic(conn, clients.unique("streams-out"), partitions=4)
    group = clients.unique("g-streams-history")
    apps: dict[str, streams_app.StreamsApp] = {}

    def start(name: str, instance_id: str | None = None) -> streams_app.StreamsApp:
        app = streams_app.start(
            kafka.libs, conn, application_id=group, input_topic=topic, output_topic=out, name=f"{group}-{name}",
            state_dir=tmp_path, protocol="streams", instance_id=instance_id,
        )  # fmt: skip
        apps[name] = app
        return app

    def settled(members: int) -> None:
        wait_for(lambda: _members(conn, group), lambda s: s == (GroupState.STABLE, members), timeout=60,
                 what=f"{group} Stable with {members}")  # fmt: skip

    static = f"{group}-s"
    actions: list[tuple[str, int]] = []  # (cause, members after) for each epoch the test causes
    try:
        start("a").wait_state("RUNNING", timeout=90)
        actions.append(("joined", 1))
        settled(1)
        start("s", static).wait_state("RUNNING", timeout=90)
        actions.append(("joined", 2))
        settled(2)
        # the static member restarts within its session: its close is a temporary leave (epoch -2), its return a
        # replacement under a new member id — which, unlike a KIP-848 consumer's, bumps the epoch on 4.4.0
        apps.pop("s").stop()
        wait_for(lambda: broker_log.broker_lines(kafka, group, TEMPORARILY_LEFT), bool, timeout=30,
                 what=f"{static}: a temporary leave")  # fmt: skip
        start("s", static).wait_state("RUNNING", timeout=90)
        wait_for(lambda: broker_log.broker_lines(kafka, group, REJOINED), bool, timeout=30,
                 what=f"{static}: a replacement")  # fmt: skip
        actions.append(("static-replacement", 2))
        settled(2)
        apps.pop("a").stop()
        actions.append(("left", 1))
        settled(1)
        # s stays until the report has read the history: its close would be a temporary leave, and its session's
        # expiry (45 s later) a fence the test does not wait for
        code, err = report_cli.run_report(conn, kafka, tmp_path / "out", "itest-streams")
    finally:
        for app in apps.values():
            app.stop()

    assert code == 0, err
    model = tmp_path / "out" / "model"
    rows = sorted(
        (r for r in spark_kafka.read.parquet(str(model / "rebalances" / "parquet")).collect() if r["group"] == group),
        key=lambda r: r["generation"],
    )
    # the broker logs a bump for a join or a replacement, not for a leave
    logged = _epochs(kafka, group)
    assert logged[0] == consumer.STREAMS.first_epoch, logged
    assert [r["generation"] for r in rows] == list(range(logged[0], logged[0] + len(actions))), rows
    assert [r["generation"] for r in rows if r["cause"] != "left"] == logged, rows
    assert {(r["group_type"], r["gap"]) for r in rows} == {("streams", False)}, rows
    assert [(r["cause"], r["members_after"]) for r in rows] == actions, rows
    assert [r["members_before"] for r in rows] == [0] + [after for _, after in actions[:-1]], rows
    # s's join moved two of a's four tasks: they were pending revocation on a for a while
    assert (rows[1]["partitions_unavailable"], rows[1]["unavailable_partition_s"] > 0) == (2, True), rows[1]
    assert all(r["duration_s"] >= 0 for r in rows), rows

    members = [r for r in spark_kafka.read.parquet(str(model / "members" / "parquet")).collect() if r["group"] == group]
    # the replacement cost a rebalance: not a restart static membership absorbed
    saves = [r for r in spark_kafka.read.parquet(str(model / "prevented" / "parquet")).collect() if r["group"] == group]
    assert saves == [], saves
    seen = sorted(
        (r["first_seen"], r["instance_id"] or r["identity"], r["replaced"], r["left"], r["leave_cause"], r["joins"],
         r["replacements"], r["leaves"]) for r in members
    )  # fmt: skip
    assert [row[1:] for row in seen] == [
        (f"{group}-a-StreamThread-1-consumer", False, True, "left", 1, 0, 1),
        (f"{static}-1", False, True, "static-replacement", 1, 1, 0),  # Kafka Streams suffixes the thread's number
        (f"{static}-1", True, False, None, 1, 1, 0),
    ], members
