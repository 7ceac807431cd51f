"""Read a Kafka topic, `__consumer_offsets` included, as a batch DataFrame with Spark's Kafka source.

Since Spark 3.4 the Admin-based offset reader drops internal topics (`ConsumerStrategy.retrieveAllPartitions`
filters `isInternal`), for `assign` and `subscribe` alike, so `__consumer_offsets` resolves to nothing. The
consumer-based reader (`spark.sql.streaming.kafka.useDeprecatedOffsetFetching=true`) has no such filter. It is
a session-wide SQL conf read when the scan is planned (at the action, not at `load()`), so it is set on the
session and left on. Internal topics are read with `assign` over partitions listed from the broker's
metadata: assign joins no group, so reading the offsets topic writes no group records of our own into it.

Streams (`stream_topic`, the incremental ingest) use `assign` for every topic: with the consumer-based reader
switched on for the session, `subscribe` would join a consumer group, and that group's records would land in the
very `__consumer_offsets` the report reads.
"""

import json
from pathlib import Path

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession

from vigil_core.kafka.security import KafkaConnection, Mechanism
from vigil_spark.session import SessionError

DEPRECATED_OFFSET_FETCHING = "spark.sql.streaming.kafka.useDeprecatedOffsetFetching"
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
_LOGIN_MODULES = {
    Mechanism.PLAIN: "org.apache.kafka.common.security.plain.PlainLoginModule",
    Mechanism.SCRAM_SHA_256: "org.apache.kafka.common.security.scram.ScramLoginModule",
    Mechanism.SCRAM_SHA_512: "org.apache.kafka.common.security.scram.ScramLoginModule",
}


class SourceError(Exception):
    """A topic cannot be read; the message is one line naming the topic and why."""


def _jaas_quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def kafka_options(conn: KafkaConnection) -> dict[str, str]:
    """`kafka.*` options (Java client properties) for a vigil connection; secrets are read from files now."""
    opts = {
        "kafka.bootstrap.servers": conn.bootstrap_servers,
        "kafka.security.protocol": conn.security_protocol.value,
    }
    if conn.uses_sasl:
        rdkafka = conn.confluent_config()  # reads the password file, raising vigil's one-line ConfigError
        assert conn.sasl_mechanism is not None
        module = _LOGIN_MODULES[conn.sasl_mechanism]
        user, password = str(rdkafka["sasl.username"]), str(rdkafka["sasl.password"])
        opts["kafka.sasl.mechanism"] = conn.sasl_mechanism.value
        opts["kafka.sasl.jaas.config"] = (
            f"{module} required username={_jaas_quote(user)} password={_jaas_quote(password)};"
        )
    if conn.uses_ssl:
        opts["kafka.ssl.endpoint.identification.algorithm"] = "https" if conn.ssl_check_hostname else ""
        if conn.ssl_ca_file is not None:
            opts["kafka.ssl.truststore.type"] = "PEM"
            opts["kafka.ssl.truststore.location"] = str(conn.ssl_ca_file)
        if conn.ssl_cert_file is not None and conn.ssl_key_file is not None:
            # PEM keystore given inline: Kafka takes a separate chain and (unencrypted PKCS#8) key this way
            opts["kafka.ssl.keystore.type"] = "PEM"
            opts["kafka.ssl.keystore.certificate.chain"] = _read(conn.ssl_cert_file)
            opts["kafka.ssl.keystore.key"] = _read(conn.ssl_key_file)
    return opts


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="ascii")
    except OSError as exc:
        raise SourceError(f"cannot read {path}: {exc.strerror}") from exc


def partitions(conn: KafkaConnection, topic: str, timeout: float = 15.0) -> list[int]:
    """The topic's partition ids from the broker's metadata (empty list: the topic does not exist).

    SourceError when the cluster cannot be reached in `timeout` seconds or refuses to describe the topic.
    """
    # log_level 0: librdkafka would print a line per failed connection attempt; the one error raised says it all
    client = AdminClient(conn.confluent_config() | {"log_level": 0})
    try:
        meta = client.list_topics(topic=topic, timeout=timeout).topics.get(topic)
    except KafkaException as exc:
        error = exc.args[0] if exc.args else None
        why = error.str() if isinstance(error, KafkaError) else str(exc)
        raise SourceError(
            f"{topic}: cannot list partitions from {conn.bootstrap_servers} within {timeout:g}s: {why}"
        ) from exc
    if meta is None or (meta.error is not None and meta.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
        return []
    if meta.error is not None:  # e.g. TOPIC_AUTHORIZATION_FAILED: not the same as "no such topic"
        raise SourceError(f"{topic}: {meta.error.name()}: {meta.error.str()}")
    return sorted(meta.partitions)


def read_topic(
    spark: SparkSession,
    conn: KafkaConnection,
    topic: str,
    *,
    starting_offsets: str = "earliest",
    ending_offsets: str = "latest",
) -> DataFrame:
    """The topic's records from `starting_offsets` to `ending_offsets` (Spark's JSON or earliest/latest).

    Columns are Spark's: key, value (binary), topic, partition, offset, timestamp, timestampType. Offsets
    are read_committed (aborted transactional commits are not history) and a real gap fails the read.
    """
    reader = spark.read.format("kafka").options(**kafka_options(conn))
    reader = reader.option("kafka.isolation.level", "read_committed").option("failOnDataLoss", "true")
    if topic in INTERNAL_TOPICS:
        spark.conf.set(DEPRECATED_OFFSET_FETCHING, "true")
        ids = partitions(conn, topic)
        if not ids:
            raise SourceError(f"{topic}: no partitions on {conn.bootstrap_servers} (does the cluster have groups?)")
        reader = reader.option("assign", json.dumps({topic: ids}))
    else:
        reader = reader.option("subscribe", topic)
    return reader.option("startingOffsets", starting_offsets).option("endingOffsets", ending_offsets).load()


def stream_topic(
    spark: SparkSession,
    conn: KafkaConnection,
    topic: str,
    ids: list[int],
    *,
    group_id: str | None = None,
    max_records_per_batch: int | None = None,
) -> DataFrame:
    """A streaming read of partitions `ids` of `topic`, from the earliest offsets on a query's first run.

    Same columns and isolation as `read_topic`. `group_id` fixes the consumers' `group.id`: they join no group
    and commit nothing (assign), but the consumer-based reader still looks the group up, so under an authorizer
    it needs DESCRIBE on that group — a fixed id makes that one literal ACL instead of Spark's random
    `spark-kafka-source-<uuid>-…` ids. `max_records_per_batch` caps a micro-batch (an `availableNow` trigger then
    runs several until it has caught up). SessionError when the session lacks Spark's Kafka source.
    """
    if not ids:
        raise SourceError(f"{topic}: no partitions to read")
    spark.conf.set(DEPRECATED_OFFSET_FETCHING, "true")
    reader = spark.readStream.format("kafka").options(**kafka_options(conn))
    reader = reader.option("kafka.isolation.level", "read_committed").option("failOnDataLoss", "true")
    reader = reader.option("assign", json.dumps({topic: ids})).option("startingOffsets", "earliest")
    if group_id is not None:
        reader = reader.option("kafka.group.id", group_id)
    if max_records_per_batch is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(max_records_per_batch))
    try:
        return reader.load()
    except PySparkException as exc:
        text = str(exc).lower()
        if "find data source: kafka" in text or ("data_source_not_found" in text and "kafka" in text):
            raise SessionError(
                "Spark's Kafka source is not on the classpath: set VIGIL_SPARK_JARS or --jars to a directory holding "
                "spark-sql-kafka-0-10 and its dependencies (the report image has one; in a checkout: make setup)"
            ) from None
        raise
