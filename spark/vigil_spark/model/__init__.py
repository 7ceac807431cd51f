"""The report's model: pure DataFrame → DataFrame transforms over the ingested tables, and `build`.

- `rebalances.rebalances`: one row per rebalance (classic generation / KIP-848, streams or share group epoch),
  gaps included — built from `classic` and `consumer` (KIP-848, streams, share) over the shared `generations`
  helpers;
- `members.members`: one row per member id, with its identity's churn and flapping;
- `stalls.stalls`: one row per stall vigil detected, with its action and outcome;
- `daily.daily`: per group and UTC day — counts, p50/p95/max duration, partition unavailability, top cause;
- `prevented.prevented`: what vigil spared the groups (bridged restarts, stalls ended by eviction), priced
  against stock Kafka's outcome.

`build` is the only function here that reads and writes: the ingested tables under `tables_dir` (each
optional: a missing one is an empty frame of its schema; `tables_dir/broker_log` is the parsed broker logs,
`vigil_spark.sources.broker_logs.SCHEMA`) in, Parquet and JSON under `out_dir/model/<table>/{parquet,json}`
out (each run replaces the previous model: it is recomputed from the whole history).
"""

from pathlib import Path
from typing import Final

from pyspark.sql import DataFrame, SparkSession

from vigil_spark import tables
from vigil_spark.location import Location
from vigil_spark.model import daily, members, prevented, rebalances, stalls
from vigil_spark.sources import broker_logs

#: The model's tables, in the order `build` writes them.
TABLES: Final = ("rebalances", "members", "stalls", "daily", "prevented")


def read_broker_log(spark: SparkSession, tables_dir: Location | Path) -> DataFrame:
    """`tables_dir/broker_log` (Parquet, any partitioning) with exactly its columns; empty when absent."""
    where = Location.of(tables_dir) / "broker_log"
    if not where.has_parquet(spark):
        return spark.createDataFrame([], broker_logs.SCHEMA)
    return spark.read.schema(broker_logs.SCHEMA).parquet(str(where)).select(*broker_logs.SCHEMA.fieldNames())


def compute(
    group_metadata: DataFrame,
    consumer_group_records: DataFrame,
    vigil_events: DataFrame,
    broker_log: DataFrame,
) -> dict[str, DataFrame]:
    """Every model table from the input frames (pure)."""
    log = broker_log.filter(broker_log["event"] != broker_logs.UNPARSED)
    rb = rebalances.rebalances(group_metadata, consumer_group_records, log, vigil_events)
    mb = members.members(group_metadata, consumer_group_records, log)
    st = stalls.stalls(vigil_events)
    return {
        "rebalances": rb,
        "members": mb,
        "stalls": st,
        "daily": daily.daily(rb),
        "prevented": prevented.prevented(
            vigil_events,
            members=mb,
            stalls=st,
            rebalances=rb,
            group_metadata=group_metadata,
            consumer_group_records=consumer_group_records,
        ),
    }


def build(spark: SparkSession, tables_dir: Location | Path, out_dir: Location | Path) -> None:
    """Read the ingested tables, compute the model, write each table as Parquet and JSON under out_dir/model."""
    frames = compute(
        tables.read(spark, tables_dir, "group_metadata"),
        tables.read(spark, tables_dir, "consumer_group_records"),
        tables.read(spark, tables_dir, "vigil_events"),
        read_broker_log(spark, tables_dir),
    )
    # every table stays cached until the last is written: `daily` and `prevented` are built over `rebalances`,
    # `members` and `stalls`, and Spark substitutes a cached frame for its plan wherever it recurs — else each
    # later table recomputes the earlier ones from the input (on Kubernetes executors the step took 1.8x as long)
    model_dir = Location.of(out_dir) / "model"
    cached = [frames[name].cache() for name in TABLES]
    try:
        for name, frame in zip(TABLES, cached, strict=True):
            target = model_dir / name
            frame.write.mode("overwrite").parquet(str(target / "parquet"))
            frame.coalesce(1).write.mode("overwrite").json(str(target / "json"))
    finally:
        for frame in cached:
            frame.unpersist()
