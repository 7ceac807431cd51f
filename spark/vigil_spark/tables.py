"""The ingested tables: their names, schemas and one line per column (the contract the model reads).

Each table is Parquet under `<out>/tables/<name>/`, appended by the incremental ingest
(`vigil_spark.ingest`). Columns are only ever added at the end. On disk every table also carries
`ingest_batch`, a partition column naming the micro-batch that wrote the rows (`<cluster>.<source>.<batch id>`):
a re-run of a failed batch overwrites exactly its own partition, so no row is ever written twice. `read`
returns a table with the contract's columns only.

Times are UTC timestamps. `log_partition` / `log_offset` / `log_ts` are where the record sits in its Kafka topic
(partition, offset and the record's timestamp): together with `cluster` and `source` they identify a record.
"""

from pathlib import Path
from typing import Final

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from vigil_spark.location import Location

#: The partition column every table has on disk (not part of the contract's columns).
BATCH_COLUMN: Final = "ingest_batch"


def _schema(*columns: tuple[str, DataType, str]) -> StructType:
    """A schema whose fields carry their description as metadata (`comment`, as Spark's DDL does)."""
    return StructType([StructField(name, kind, True, {"comment": doc}) for name, kind, doc in columns])


_CLUSTER = ("cluster", StringType(), 'The cluster name given to `vigil report --cluster` (default "default").')
_GROUP = ("group", StringType(), "The consumer group id.")
_LOG_PARTITION = ("log_partition", IntegerType(), "Partition of the record in its topic.")
_LOG_OFFSET = ("log_offset", LongType(), "Offset of the record in its partition.")
_LOG_TS = ("log_ts", TimestampType(), "The record's Kafka timestamp (when the coordinator appended it).")
_TOMBSTONE = ("tombstone", BooleanType(), "The value is null: the key's offset, group or member was deleted.")

OFFSET_COMMITS: Final = _schema(
    _CLUSTER,
    _GROUP,
    ("topic", StringType(), "The committed topic."),
    ("partition", IntegerType(), "The committed partition."),
    ("committed_offset", LongType(), "The committed offset (the next record the group will read); null if tombstone."),
    ("leader_epoch", IntegerType(), "The leader epoch committed with it; -1 when the client sent none or v<3."),
    ("metadata", StringType(), "The client's commit metadata string (usually empty)."),
    ("commit_ts", TimestampType(), "commitTimestamp: when the broker accepted the commit."),
    ("expire_ts", TimestampType(), "expireTimestamp of v1 values; null when -1 (every broker since 2.1)."),
    _LOG_PARTITION,
    _LOG_OFFSET,
    _LOG_TS,
    _TOMBSTONE,
)

ASSIGNED_PARTITION: Final = _schema(
    ("topic", StringType(), "Topic name."),
    ("partition", IntegerType(), "Partition id."),
)

CLASSIC_MEMBER: Final = _schema(
    ("member_id", StringType(), "The member id the coordinator gave it."),
    ("instance_id", StringType(), "group.instance.id of a static member (KIP-345); null when dynamic."),
    ("client_id", StringType(), "client.id the member sent."),
    ("client_host", StringType(), "The address the coordinator saw it connect from (e.g. /10.0.0.7)."),
    ("session_timeout_ms", IntegerType(), "session.timeout.ms of the member."),
    ("rebalance_timeout_ms", IntegerType(), "max.poll.interval.ms (rebalance timeout) of the member."),
    ("subscribed_topics", ArrayType(StringType()), "Topics of its subscription (consumer protocol); null if not."),
    ("assigned", ArrayType(ASSIGNED_PARTITION), "Partitions the leader gave it this generation; null if none yet."),
)

GROUP_METADATA: Final = _schema(
    _CLUSTER,
    _GROUP,
    _LOG_PARTITION,
    _LOG_OFFSET,
    _LOG_TS,
    _TOMBSTONE,
    ("protocol_type", StringType(), '"consumer" for consumers ("connect", ... for others); empty when Empty.'),
    ("generation", IntegerType(), "The classic generation id the record was written for."),
    ("protocol", StringType(), 'The selected assignor ("range", "cooperative-sticky", ...); null when Empty.'),
    ("leader", StringType(), "The leader's member id; null when the group is Empty."),
    ("state_ts", TimestampType(), "currentStateTimestamp (v2+): when the group entered its state; null when -1."),
    ("members", ArrayType(CLASSIC_MEMBER), "The members of this generation (empty when the group is Empty)."),
)

CONSUMER_GROUP_RECORDS: Final = _schema(
    _CLUSTER,
    _GROUP,
    _LOG_PARTITION,
    _LOG_OFFSET,
    _LOG_TS,
    (
        "record_type",
        IntegerType(),
        "The key type. KIP-848: 3 group epoch, 4 partition metadata, 5 member metadata, 6 target assignment epoch, "
        "7 target assignment of a member, 8 current member assignment, 16 regex. Share groups (kept, not modelled): "
        "10 member, 11 group epoch, 12 target assignment epoch, 13 target of a member, 14 current assignment, "
        "15 share-state topics. Streams groups (kept, not modelled): 17 group epoch, 19 member, 20 target "
        "assignment epoch, 21 target tasks of a member, 22 current assignment, 23 topology.",
    ),
    _TOMBSTONE,
    ("member_id", StringType(), "The member of a member record (types 5, 7, 8, 10, 13, 14, 19, 21, 22); null else."),
    (
        "epoch",
        IntegerType(),
        "Group epoch (3, 11, 17), assignment epoch (6, 12, 20) or member epoch (8, 14, 22); null otherwise.",
    ),
    (
        "record_json",
        StringType(),
        "The decoded value as JSON (bytes as Kafka's base64url Uuid text); null if tombstone.",
    ),
)

VIGIL_EVENTS: Final = _schema(
    _CLUSTER,
    ("ts", TimestampType(), "The event's `time`: when it happened."),
    _GROUP,
    ("type", StringType(), 'The envelope type: "stall-detected", "bridge-ended", "group-snapshot", ...'),
    ("schema_version", IntegerType(), "The writer's schema version."),
    ("member_id", StringType(), "payload.member.member_id, when the event names a member."),
    ("instance_id", StringType(), "payload.member.instance_id, when the event names a static member."),
    ("pod", StringType(), "The envelope's pod, when it has one."),
    ("payload_json", StringType(), "The payload as written (JSON), newer writers' fields included."),
    _LOG_PARTITION,
    _LOG_OFFSET,
)

PROBLEMS: Final = _schema(
    _CLUSTER,
    ("source", StringType(), "The topic the record came from (`__consumer_offsets` or the events topic)."),
    _LOG_PARTITION,
    _LOG_OFFSET,
    ("problem", StringType(), "Why the record (or part of it) could not be decoded, naming the field."),
)

#: Every ingested table by name.
SCHEMAS: Final[dict[str, StructType]] = {
    "offset_commits": OFFSET_COMMITS,
    "group_metadata": GROUP_METADATA,
    "consumer_group_records": CONSUMER_GROUP_RECORDS,
    "vigil_events": VIGIL_EVENTS,
    "problems": PROBLEMS,
}


def path(tables_dir: Location | Path, name: str) -> Location:
    """Where table `name` lives under `<out>/tables`."""
    if name not in SCHEMAS:
        raise KeyError(f"no ingested table {name!r} (known: {', '.join(SCHEMAS)})")
    return Location.of(tables_dir) / name


def read(spark: SparkSession, tables_dir: Location | Path, name: str) -> DataFrame:
    """Table `name` with exactly its contract columns (an empty frame when nothing was ingested yet)."""
    schema = SCHEMAS[name]
    where = path(tables_dir, name)
    if not where.has_parquet(spark):
        return spark.createDataFrame([], schema)
    return spark.read.schema(schema).parquet(str(where)).select(*schema.fieldNames())
