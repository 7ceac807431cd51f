"""Spark's Kafka source reads the real `__consumer_offsets`, and the SQL decoder gives the broker's offsets.

The ground truth is the broker (OffsetFetch through the AdminClient), never the decoder under test.
"""

from pathlib import Path

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions
from pyspark.sql import SparkSession
from pyspark.sql import functions as F  # noqa: N812 - the PySpark convention

from vigil_core.kafka.security import KafkaConnection, Mechanism, Protocol
from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import clients
from vigil_dev.testing.waiting import wait_for
from vigil_spark.decode import sql
from vigil_spark.sources import kafka as source

pytest_plugins = ["vigil_dev.testing.spark_fixtures"]
pytestmark = [pytest.mark.integration, pytest.mark.spark]

OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_PARTITIONS = 4  # offsets.topic.num.partitions of the test broker (tests/README.md)


def broker_offsets(conn: KafkaConnection, group: str) -> dict[tuple[str, int], int]:
    """The group's committed offsets as the broker reports them (OffsetFetch, require_stable)."""
    admin = clients.admin(conn)  # keep the handle alive until the future resolves
    result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], require_stable=True)
    answer = result[group].result(timeout=15)
    return {(tp.topic, tp.partition): tp.offset for tp in answer.topic_partitions if tp.offset >= 0}


@pytest.fixture(scope="module")
def committed_group(kafka: KafkaCluster) -> tuple[str, str, dict[tuple[str, int], int]]:
    """A real classic group that consumed everything, committed and left: (topic, group, broker's offsets)."""
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("spark-src"), partitions=3)
    group = clients.unique("spark-grp")
    produced = clients.produce(conn, topic, (f"m{i}" for i in range(90)))
    members = clients.start_group(conn, group, [topic], size=2)
    wait_for(
        lambda: sum(broker_offsets(conn, group).values()),
        lambda total: total == produced,
        timeout=60,
        what=f"group {group} committed all {produced} records",
    )
    for member in members:
        member.close()
    return topic, group, broker_offsets(conn, group)


def test_consumer_offsets_resolves_partitions_and_returns_records(
    spark_kafka: SparkSession, kafka: KafkaCluster, committed_group: tuple[str, str, dict[tuple[str, int], int]]
) -> None:
    """The workaround: with the consumer-based offset reader, the internal topic's partitions do resolve."""
    raw = source.read_topic(spark_kafka, kafka.connection(), OFFSETS_TOPIC)
    per_partition = raw.groupBy("partition").count().collect()
    assert len(per_partition) > 0
    assert {r.partition for r in per_partition} <= set(range(OFFSETS_PARTITIONS))
    assert sum(r["count"] for r in per_partition) > 0
    assert spark_kafka.conf.get(source.DEPRECATED_OFFSET_FETCHING) == "true"


def test_without_the_workaround_spark_drops_the_internal_topic(spark_kafka: SparkSession, kafka: KafkaCluster) -> None:
    """Why the switch exists: the Admin-based reader filters internal topics out (0 partitions → no rows)."""
    reader = spark_kafka.read.format("kafka").options(**source.kafka_options(kafka.connection()))
    df = reader.option("subscribe", OFFSETS_TOPIC).load()
    spark_kafka.conf.set(source.DEPRECATED_OFFSET_FETCHING, "false")
    try:
        rows = df.count()
    finally:
        spark_kafka.conf.set(source.DEPRECATED_OFFSET_FETCHING, "true")
    assert rows == 0


def test_decoded_commits_equal_the_brokers_offsets(
    spark_kafka: SparkSession, kafka: KafkaCluster, committed_group: tuple[str, str, dict[tuple[str, int], int]]
) -> None:
    topic, group, expected = committed_group
    commits = sql.offset_commits(source.read_topic(spark_kafka, kafka.connection(), OFFSETS_TOPIC))
    assert commits.where("corrupt").count() == 0
    mine = commits.where(F.col("group") == group)
    assert mine.where("tombstone").count() == 0
    latest = (
        mine.groupBy("topic", "partition").agg(F.max_by("committed_offset", "log_offset").alias("offset")).collect()
    )
    assert {(r.topic, r.partition): r.offset for r in latest} == expected
    assert {t for t, _ in expected} == {topic}
    assert mine.select("value_version").distinct().collect()[0].value_version in (3, 4)


def test_regular_topic_reads_with_subscribe(spark_kafka: SparkSession, kafka: KafkaCluster) -> None:
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("spark-plain"), partitions=3)
    clients.produce(conn, topic, (f"v{i}" for i in range(30)))
    values = source.read_topic(spark_kafka, conn, topic).selectExpr("CAST(value AS STRING) AS v").collect()
    assert sorted(r.v for r in values) == sorted(f"v{i}" for i in range(30))


def test_sasl_and_mutual_tls_map_to_java_client_options(tmp_path: Path) -> None:
    """The Java client gets the same credentials librdkafka would (read from the mounted files)."""
    (tmp_path / "pw").write_text('se"cret\n')
    (tmp_path / "cert.pem").write_text("CERT")
    (tmp_path / "key.pem").write_text("KEY")
    conn = KafkaConnection(
        bootstrap_servers="b:9093",
        security_protocol=Protocol.SASL_SSL,
        sasl_mechanism=Mechanism.SCRAM_SHA_512,
        sasl_username="app",
        sasl_password_file=tmp_path / "pw",
        ssl_ca_file=tmp_path / "ca.pem",
        ssl_cert_file=tmp_path / "cert.pem",
        ssl_key_file=tmp_path / "key.pem",
        ssl_check_hostname=False,
    )
    assert source.kafka_options(conn) == {
        "kafka.bootstrap.servers": "b:9093",
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required username="app" '
        'password="se\\"cret";',
        "kafka.ssl.endpoint.identification.algorithm": "",
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": str(tmp_path / "ca.pem"),
        "kafka.ssl.keystore.type": "PEM",
        "kafka.ssl.keystore.certificate.chain": "CERT",
        "kafka.ssl.keystore.key": "KEY",
    }
