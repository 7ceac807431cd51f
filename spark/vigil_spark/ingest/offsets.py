"""`__consumer_offsets` records → `offset_commits`, `group_metadata`, `consumer_group_records`, `problems`.

Pure DataFrame transforms over a frame with the Kafka source's columns (key, value, partition, offset, timestamp).
Offset commits, the bulk, are decoded in the JVM (`vigil_spark.decode.sql`); the rest is filtered by key type
first and decoded in Python (`vigil_spark.ingest.rows.other_record`, a plain UDF: a few records per rebalance).
"""

from collections.abc import Callable
from typing import Final

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F  # noqa: N812 - the PySpark convention
from pyspark.sql.types import ArrayType, BooleanType, IntegerType, LongType, StringType, StructField, StructType

from vigil_spark import tables
from vigil_spark.decode import sql
from vigil_spark.ingest import rows

SOURCE: Final = "__consumer_offsets"

_GROUP_METADATA_FIELDS: Final = StructType(
    [
        StructField("tombstone", BooleanType()),
        StructField("protocol_type", StringType()),
        StructField("generation", IntegerType()),
        StructField("protocol", StringType()),
        StructField("leader", StringType()),
        StructField("state_ts_ms", LongType()),
        StructField("members", ArrayType(tables.CLASSIC_MEMBER)),
    ]
)
_CONSUMER_GROUP_FIELDS: Final = StructType(
    [
        StructField("record_type", IntegerType()),
        StructField("tombstone", BooleanType()),
        StructField("member_id", StringType()),
        StructField("epoch", IntegerType()),
        StructField("record_json", StringType()),
    ]
)
#: What `rows.other_record` returns, as Spark sees it.
OTHER_RECORD: Final = StructType(
    [
        StructField("kind", StringType()),
        StructField("group", StringType()),
        StructField("record_type", IntegerType()),
        StructField("problem", StringType()),
        StructField(rows.GROUP_METADATA, _GROUP_METADATA_FIELDS),
        StructField(rows.CONSUMER_GROUP, _CONSUMER_GROUP_FIELDS),
    ]
)

_decode_other = F.udf(rows.other_record, OTHER_RECORD)

_PROBLEM_TEXT: Final = {
    sql.PROBLEM_KEY: "OffsetCommitKey: does not match the schema",
    sql.PROBLEM_VALUE: "OffsetCommitValue: does not match the schema",
}


def _ts_millis(ms: Column) -> Column:
    """Epoch milliseconds as a timestamp; null for null and for Kafka's "none" (-1)."""
    return F.when(ms.isNotNull() & (ms != -1), F.timestamp_millis(ms))


def with_record_type(raw: DataFrame) -> DataFrame:
    """The raw records with `record_type` (the key's int16; null when there is no key)."""
    return sql.with_record_type(raw)


def offset_commits(decoded: DataFrame, cluster: str) -> DataFrame:
    """The offset commits (`sql.offset_commits` output) that decoded cleanly, in the `offset_commits` schema."""
    return decoded.where(F.col("problem").isNull()).select(
        F.lit(cluster).alias("cluster"),
        "group",
        "topic",
        "partition",
        "committed_offset",
        "leader_epoch",
        "metadata",
        _ts_millis(F.col("commit_timestamp")).alias("commit_ts"),
        _ts_millis(F.col("expire_timestamp")).alias("expire_ts"),
        F.col("log_partition").cast("int").alias("log_partition"),
        F.col("log_offset").cast("bigint").alias("log_offset"),
        F.col("log_timestamp").alias("log_ts"),
        "tombstone",
    )


def _offset_problems(decoded: DataFrame, cluster: str, source: str) -> DataFrame:
    text = F.when(F.col("problem") == sql.PROBLEM_VERSION, F.format_string(
        "OffsetCommitValue version %d not known (0-%d)", F.col("value_version"), F.lit(sql.MAX_VALUE_VERSION)
    ))  # fmt: skip
    for code, message in _PROBLEM_TEXT.items():
        text = text.when(F.col("problem") == code, F.lit(message))
    return decoded.where(F.col("problem").isNotNull()).select(
        F.lit(cluster).alias("cluster"),
        F.lit(source).alias("source"),
        F.col("log_partition").cast("int").alias("log_partition"),
        F.col("log_offset").cast("bigint").alias("log_offset"),
        text.otherwise(F.col("problem")).alias("problem"),
    )


def other_records(typed: DataFrame) -> DataFrame:
    """Every record that is not an offset commit, decoded in Python: `log_*` columns plus struct `d`."""
    rest = sql.non_offset_records(typed)
    return rest.select(
        F.col("partition").cast("int").alias("log_partition"),
        F.col("offset").cast("bigint").alias("log_offset"),
        F.col("timestamp").alias("log_ts"),
        _decode_other(F.col("key"), F.col("value")).alias("d"),
    )


def group_metadata(other: DataFrame, cluster: str) -> DataFrame:
    """GroupMetadata records (and their tombstones) in the `group_metadata` schema."""
    gm = F.col(f"d.{rows.GROUP_METADATA}")
    return other.where(F.col("d.kind") == rows.GROUP_METADATA).select(
        F.lit(cluster).alias("cluster"),
        F.col("d.group").alias("group"),
        "log_partition",
        "log_offset",
        "log_ts",
        gm["tombstone"].alias("tombstone"),
        gm["protocol_type"].alias("protocol_type"),
        gm["generation"].alias("generation"),
        gm["protocol"].alias("protocol"),
        gm["leader"].alias("leader"),
        _ts_millis(gm["state_ts_ms"]).alias("state_ts"),
        gm["members"].alias("members"),
    )


def consumer_group_records(other: DataFrame, cluster: str) -> DataFrame:
    """KIP-848 records (types 3–8, 16) and their tombstones in the `consumer_group_records` schema."""
    cg = F.col(f"d.{rows.CONSUMER_GROUP}")
    return other.where(F.col("d.kind") == rows.CONSUMER_GROUP).select(
        F.lit(cluster).alias("cluster"),
        F.col("d.group").alias("group"),
        "log_partition",
        "log_offset",
        "log_ts",
        cg["record_type"].alias("record_type"),
        cg["tombstone"].alias("tombstone"),
        cg["member_id"].alias("member_id"),
        cg["epoch"].alias("epoch"),
        cg["record_json"].alias("record_json"),
    )


def problems(decoded: DataFrame, other: DataFrame, cluster: str, source: str = SOURCE) -> DataFrame:
    """Every record (or part of one) that could not be decoded, from both paths (`decoded`: the SQL path's
    output, `other`: `other_records`)."""
    python_side = other.where(F.col("d.problem").isNotNull()).select(
        F.lit(cluster).alias("cluster"),
        F.lit(source).alias("source"),
        "log_partition",
        "log_offset",
        F.col("d.problem").alias("problem"),
    )
    return _offset_problems(decoded, cluster, source).unionByName(python_side)


def _same(frame: DataFrame) -> DataFrame:
    return frame


def split(
    raw: DataFrame, cluster: str, source: str = SOURCE, keep: Callable[[DataFrame], DataFrame] = _same
) -> dict[str, DataFrame]:
    """All four tables of one batch of `__consumer_offsets` records, by table name.

    `source` names the topic in `problems` (another one only when records in the same format are read from a
    copy). `keep` is applied to the two decoded intermediates every table is cut from (e.g. `persist`, so each
    record is decoded once however many tables and actions use it).
    """
    typed = with_record_type(raw)
    decoded = keep(sql.offset_commits(typed))
    other = keep(other_records(typed))
    return {
        "offset_commits": offset_commits(decoded, cluster),
        "group_metadata": group_metadata(other, cluster),
        "consumer_group_records": consumer_group_records(other, cluster),
        "problems": problems(decoded, other, cluster, source),
    }
