"""What classic generations and KIP-848 group epochs have in common: incarnations, order, gaps (pure)."""

from typing import Final

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F  # noqa: N812 - the PySpark convention

#: A row of the sequence: the group's incarnation and its generation (or epoch).
KEY: Final = ["cluster", "group", "incarnation", "generation"]


def null_string() -> Column:
    return F.lit(None).cast("string")


def incarnations(observations: DataFrame) -> DataFrame:
    """Number the incarnations of each group: a tombstone, or a generation lower than the one before (in time),
    starts a new one. Observations have `ts`, `generation` (null for tombstones) and `tomb`; tombstones go."""
    by_time = Window.partitionBy("cluster", "group").orderBy(
        F.col("ts").asc_nulls_last(), F.col("tomb").asc(), F.col("generation").asc_nulls_first()
    )
    last_gen = F.last("generation", ignorenulls=True).over(by_time.rowsBetween(Window.unboundedPreceding, -1))
    restart = F.when(
        (F.lag("tomb").over(by_time) == F.lit(True)) | (F.col("generation") < last_gen), F.lit(1)
    ).otherwise(F.lit(0))
    return (
        observations.withColumn("_restart", restart)
        .withColumn("incarnation", F.sum("_restart").over(by_time.rowsBetween(Window.unboundedPreceding, 0)))
        .filter(~F.col("tomb"))
        .drop("_restart", "tomb")
    )


def sequence(observed: DataFrame) -> DataFrame:
    """The previous generation seen in the same incarnation of the group."""
    by_gen = Window.partitionBy("cluster", "group", "incarnation").orderBy("generation")
    return observed.withColumn("prev_generation", F.lag("generation").over(by_gen))


def gap_rows(seq: DataFrame, group_type: str, lower_ts: Column, upper_ts: Column, first: int = 1) -> DataFrame:
    """One row per run of generations no source shows (between two seen ones, or from the type's `first`
    generation to the first seen one)."""
    first_unseen = F.coalesce(F.col("prev_generation") + 1, F.lit(first))
    count = F.col("generation") - first_unseen
    return seq.filter(count > 0).select(
        "cluster",
        "group",
        F.lit(group_type).alias("group_type"),
        (F.col("generation") - 1).alias("generation"),
        count.cast("int").alias("rebalances"),
        F.lit(True).alias("gap"),
        lower_ts.alias("started"),
        upper_ts.alias("stabilized"),
        F.lit(None).cast("double").alias("duration_s"),
        F.lit(None).cast("double").alias("undetected_s"),
        F.lit("unknown").alias("cause"),
        F.lit("gap").alias("cause_detail"),
        null_string().alias("client_reason"),
        F.lit(None).cast("array<string>").alias("trigger_members"),
        F.lit(None).cast("int").alias("members_before"),
        F.lit(None).cast("int").alias("members_after"),
        F.col("protocol"),
        F.col("rebalance_protocol"),
        F.lit(None).cast("int").alias("partitions_unavailable"),
        F.lit(None).cast("double").alias("unavailable_partition_s"),
        F.when(
            F.col("prev_generation").isNull(),
            F.format_string(
                "gap: generations %d..%d are before the first record of the group",
                first_unseen,
                F.col("generation") - 1,
            ),
        )
        .otherwise(
            F.format_string(
                "gap: generations %d..%d are in no source (compacted or not ingested); started/stabilized bound "
                "the window",
                first_unseen,
                F.col("generation") - 1,
            )
        )
        .alias("basis"),
    )
