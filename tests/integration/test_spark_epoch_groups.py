"""`vigil report` on a real streams group (KIP-1071) and a real share group (KIP-932): their rebalances come out
of the model (Kafka 4.2+, where both are on by default).

- Streams: two Kafka Streams instances on the streams protocol. `a` joins, the static `s` joins (a hands tasks
  over to s), `s` restarts within its session (4.4's static membership: a temporary leave, then a replacement
  that bumps the epoch, unlike a KIP-848 consumer's), `a` closes and leaves.
- Share: two ShareConsumers (confluent-kafka) join one after the other and leave in turn.

One report ingests `__consumer_offsets` and the broker's server.log. Each group's `rebalances` rows must be exactly
the epochs the broker wrote — the bump lines, an independent regex over the same log, not vigil's parser, and one
per departure the test caused — with the causes of the test's own action log; the streams group's `members` show
s's restart as a replacement, not churn, and `prevented` does not count it as a restart absorbed.
"""

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from pyspark.sql import Row, SparkSession

from vigil_core.kafka.group_client import GroupClient
from vigil_core.kafka.model import GroupState
from vigil_core.kafka.security import KafkaConnection
from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import broker_log, clients, report_cli, streams_app
from vigil_dev.testing.sharer import Sharer
from vigil_dev.testing.waiting import wait_for
from vigil_spark.model import consumer

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.kafka_min("4.2")]
pytest_plugins = ["vigil_dev.testing.spark_fixtures"]

#: The broker's epoch-bump lines (Kafka 4.4 GroupMetadataManager's wording): a streams group's, and a share
#: group's (word for word a KIP-848 group's).
STREAMS_BUMPED = r"\[GroupId {g}\]\[MemberId [^\]]+\] Bumped streams group epoch to (\d+) with"
SHARE_BUMPED = r"\[GroupId {g}\] Bumped group epoch to (\d+)"
#: A static streams member's close (4.4) and its return under a new member id.
TEMPORARILY_LEFT = r"\[GroupId {g}\]\[MemberId [^\]]+\] Static member \S+ with instance id \S+ temporarily left"
REJOINED = r"\[GroupId {g}\]\[MemberId [^\]]+\] Static member with instance id \S+ re-joins the streams group"

#: (cause, members after) for each epoch the test caused, in order.
Actions = list[tuple[str, int]]


@dataclass(frozen=True)
class History:
    streams: str
    streams_actions: Actions
    share: str
    share_actions: Actions
    model: Path


def _epochs(kafka: KafkaCluster, group: str, pattern: str) -> list[int]:
    return [int(n) for _, (n,) in broker_log.broker_lines(kafka, group, pattern)]


def _members(conn: KafkaConnection, group: str) -> tuple[GroupState, int]:
    client = GroupClient(conn)
    try:
        described = client.describe(group, subscriptions=False)
        return described.state, len(described.members)
    finally:
        client.close()


def _settled(conn: KafkaConnection, group: str, members: int) -> None:
    state = GroupState.EMPTY if members == 0 else GroupState.STABLE
    wait_for(lambda: _members(conn, group), lambda s: s == (state, members), timeout=60,
             what=f"{group} {state.value} with {members}")  # fmt: skip


def _share_history(kafka: KafkaCluster, group: str) -> Actions:
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("share-in"), partitions=2)
    clients.produce_spread(conn, topic, [f"r{i}" for i in range(10)], 2)
    actions: Actions = []
    first = Sharer(kafka, group, topic, client_id=f"{group}-x")
    second: Sharer | None = None
    try:
        actions.append(("joined", 1))
        _settled(conn, group, 1)
        second = Sharer(kafka, group, topic, client_id=f"{group}-y")
        actions.append(("joined", 2))
        _settled(conn, group, 2)
        second.close()
        second = None
        actions.append(("left", 1))
        _settled(conn, group, 1)
    finally:
        if second is not None:
            second.close()
        first.close()
    actions.append(("left", 0))
    _settled(conn, group, 0)
    return actions


@pytest.fixture(scope="module")
def history(kafka: KafkaCluster, spark_kafka: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> History:
    """Both groups' histories, then one report over them (s stays up until the report has read the history: its
    close is a temporary leave, and its session's expiry 45 s later a fence the test does not wait for)."""
    tmp = tmp_path_factory.mktemp("epoch-groups")
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("streams-in"), partitions=4)
    out = clients.create_topic(conn, clients.unique("streams-out"), partitions=4)
    group, share = clients.unique("g-streams-history"), clients.unique("g-share-history")
    static = f"{group}-s"
    apps: dict[str, streams_app.StreamsApp] = {}

    def start(name: str, instance_id: str | None = None) -> streams_app.StreamsApp:
        app = streams_app.start(
            kafka.libs, conn, application_id=group, input_topic=topic, output_topic=out, name=f"{group}-{name}",
            state_dir=tmp, protocol="streams", instance_id=instance_id,
        )  # fmt: skip
        apps[name] = app
        return app

    def logged(pattern: str) -> Callable[[], bool]:
        return lambda: bool(broker_log.broker_lines(kafka, group, pattern))

    actions: Actions = []
    try:
        start("a").wait_state("RUNNING", timeout=90)
        actions.append(("joined", 1))
        _settled(conn, group, 1)
        start("s", static).wait_state("RUNNING", timeout=90)
        actions.append(("joined", 2))
        _settled(conn, group, 2)
        apps.pop("s").stop()
        wait_for(logged(TEMPORARILY_LEFT), bool, timeout=30, what=f"{static}: a temporary leave")
        start("s", static).wait_state("RUNNING", timeout=90)
        wait_for(logged(REJOINED), bool, timeout=30, what=f"{static}: a replacement")
        actions.append(("static-replacement", 2))
        _settled(conn, group, 2)
        apps.pop("a").stop()
        actions.append(("left", 1))
        _settled(conn, group, 1)
        share_actions = _share_history(kafka, share)
        code, err = report_cli.run_report(conn, kafka, tmp / "out", "itest-epoch-groups")
        assert code == 0, err
    finally:
        for app in apps.values():
            app.stop()
    return History(group, actions, share, share_actions, tmp / "out" / "model")


def _rows(spark: SparkSession, model: Path, table: str, group: str) -> list[Row]:
    return [r for r in spark.read.parquet(str(model / table / "parquet")).collect() if r["group"] == group]


def _check_epochs(rows: list[Row], actions: Actions, bumps: list[int], kind: consumer.EpochGroups) -> None:
    """One row per epoch from the type's first on, the bump lines' epochs among them, causes and counts as the
    test made them."""
    rows = sorted(rows, key=lambda r: r["generation"])
    assert bumps, "no epoch bump line"
    assert [r["generation"] for r in rows] == list(range(kind.first_epoch, kind.first_epoch + len(actions))), rows
    assert set(bumps) <= {r["generation"] for r in rows}, (bumps, rows)
    assert {(r["group_type"], r["gap"]) for r in rows} == {(kind.group_type, False)}, rows
    assert [(r["cause"], r["members_after"]) for r in rows] == actions, rows
    assert [r["members_before"] for r in rows] == [0] + [after for _, after in actions[:-1]], rows


def test_the_report_models_a_streams_group_s_rebalances(
    history: History, kafka: KafkaCluster, spark_kafka: SparkSession
) -> None:
    rows = sorted(_rows(spark_kafka, history.model, "rebalances", history.streams), key=lambda r: r["generation"])
    bumps = _epochs(kafka, history.streams, STREAMS_BUMPED)
    _check_epochs(rows, history.streams_actions, bumps, consumer.STREAMS)
    # the broker logs a bump for a join or a replacement, not for a leave
    assert [r["generation"] for r in rows if r["cause"] != "left"] == bumps, rows
    # s's join moved two of a's four tasks: they were pending revocation on a for a while
    assert (rows[1]["partitions_unavailable"], rows[1]["unavailable_partition_s"] > 0) == (2, True), rows[1]
    assert all(r["duration_s"] >= 0 for r in rows), rows  # s is still there: every epoch was reached

    # the replacement cost a rebalance: not a restart static membership absorbed
    assert _rows(spark_kafka, history.model, "prevented", history.streams) == []
    members = _rows(spark_kafka, history.model, "members", history.streams)
    seen = sorted(
        (r["first_seen"], r["instance_id"] or r["identity"], r["replaced"], r["left"], r["leave_cause"], r["joins"],
         r["replacements"], r["leaves"]) for r in members
    )  # fmt: skip
    static = f"{history.streams}-s-1"  # Kafka Streams suffixes the instance id with the thread's number
    assert [row[1:] for row in seen] == [
        (f"{history.streams}-a-StreamThread-1-consumer", False, True, "left", 1, 0, 1),
        (static, False, True, "static-replacement", 1, 1, 0),
        (static, True, False, None, 1, 1, 0),
    ], members


def test_the_report_models_a_share_group_s_rebalances(
    history: History, kafka: KafkaCluster, spark_kafka: SparkSession
) -> None:
    rows = _rows(spark_kafka, history.model, "rebalances", history.share)
    _check_epochs(rows, history.share_actions, _epochs(kafka, history.share, SHARE_BUMPED), consumer.SHARE)
    # nothing is pending revocation in a share group: its partitions are shared
    assert {(r["partitions_unavailable"], r["unavailable_partition_s"]) for r in rows} == {(None, None)}, rows
    members = _rows(spark_kafka, history.model, "members", history.share)
    assert sorted((r["identity"], r["joins"], r["leaves"], r["leave_cause"]) for r in members) == [
        (f"{history.share}-{name}", 1, 1, "left") for name in "xy"
    ], members
