"""vigil's events topic → `vigil_events` and `problems` (pure DataFrame transforms over Kafka source columns).

Events are JSON and few (one per stall, eviction, bridge, rollout step, snapshot): each is parsed in Python by
`vigil_core.events.parse_event`, the schema's own reader, so the report accepts exactly what the writers write.
A record that is not a vigil event (not JSON, an unknown type, a missing field) becomes a `problems` row.
"""

from collections.abc import Callable
from typing import Final

from pyspark.sql import DataFrame
from pyspark.sql import functions as F  # noqa: N812 - the PySpark convention
from pyspark.sql.types import BooleanType, IntegerType, LongType, StringType, StructField, StructType

from vigil_spark.ingest import rows

#: What `rows.event_row` returns, as Spark sees it.
EVENT_ROW: Final = StructType(
    [
        StructField("ok", BooleanType()),
        StructField("problem", StringType()),
        StructField("ts_us", LongType()),
        StructField("group", StringType()),
        StructField("type", StringType()),
        StructField("schema_version", IntegerType()),
        StructField("member_id", StringType()),
        StructField("instance_id", StringType()),
        StructField("pod", StringType()),
        StructField("payload_json", StringType()),
    ]
)

_parse = F.udf(rows.event_row, EVENT_ROW)


def parsed(raw: DataFrame) -> DataFrame:
    """The records with their parse result `e` (a struct) next to `log_partition`, `log_offset`."""
    return raw.select(
        F.col("partition").cast("int").alias("log_partition"),
        F.col("offset").cast("bigint").alias("log_offset"),
        _parse(F.col("value")).alias("e"),
    )


def vigil_events(events: DataFrame, cluster: str) -> DataFrame:
    """The events that parsed, in the `vigil_events` schema."""
    e = F.col("e")
    return events.where(e["ok"]).select(
        F.lit(cluster).alias("cluster"),
        F.timestamp_micros(e["ts_us"]).alias("ts"),
        e["group"].alias("group"),
        e["type"].alias("type"),
        e["schema_version"].alias("schema_version"),
        e["member_id"].alias("member_id"),
        e["instance_id"].alias("instance_id"),
        e["pod"].alias("pod"),
        e["payload_json"].alias("payload_json"),
        "log_partition",
        "log_offset",
    )


def problems(events: DataFrame, cluster: str, source: str) -> DataFrame:
    """The records that are not vigil events, with why."""
    return events.where(~F.col("e")["ok"]).select(
        F.lit(cluster).alias("cluster"),
        F.lit(source).alias("source"),
        "log_partition",
        "log_offset",
        F.col("e")["problem"].alias("problem"),
    )


def _same(frame: DataFrame) -> DataFrame:
    return frame


def split(
    raw: DataFrame, cluster: str, source: str, keep: Callable[[DataFrame], DataFrame] = _same
) -> dict[str, DataFrame]:
    """Both tables of one batch of the events topic, by table name (`keep`: see `offsets.split`)."""
    events = keep(parsed(raw))
    return {"vigil_events": vigil_events(events, cluster), "problems": problems(events, cluster, source)}
