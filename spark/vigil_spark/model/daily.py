"""`daily`: per cluster, group and UTC day — rebalances, durations, partition unavailability, top cause.

- The day of a rebalance is the day of its `stabilized` time (else `started`); gap rows count in
  `gap_rebalances` on the day of their upper bound, and in `rebalances` (the exact total), never in the
  duration figures.
- `p50_s`/`p95_s`/`max_s`: exact percentiles of the known durations (`durations_known` of them).
- `unavailable_partition_s_<protocol>`: the sum of the rebalances' partition-seconds (eager: all partitions
  owned before; cooperative: the revoked set; consumer/KIP-848: time pending revocation — see
  `rebalances`); null when no rebalance of that protocol had a figure; `unavailable_known` counts those that had.
- `top_cause`: the most frequent cause of observed rebalances (ties: alphabetical).
"""

from typing import Final

from pyspark.sql import DataFrame
from pyspark.sql import functions as F  # noqa: N812 - the PySpark convention

from vigil_spark.model import common

PROTOCOLS: Final = ("eager", "cooperative", "consumer")


def daily(rebalances: DataFrame) -> DataFrame:
    """Per-group daily aggregates of `rebalances`."""
    key = ["cluster", "group", "date"]
    dated = rebalances.withColumn("date", F.to_date(F.coalesce("stabilized", "started")))
    observed = ~F.col("gap")
    sums = [
        F.sum(F.when(F.col("rebalance_protocol") == F.lit(p), F.col("unavailable_partition_s"))).alias(
            f"unavailable_partition_s_{p}"
        )
        for p in PROTOCOLS
    ]
    agg = dated.groupBy(*key).agg(
        F.sum("rebalances").cast("int").alias("rebalances"),
        F.sum(F.when(observed, 1).otherwise(0)).cast("int").alias("observed_rebalances"),
        F.sum(F.when(F.col("gap"), F.col("rebalances")).otherwise(0)).cast("int").alias("gap_rebalances"),
        F.count("duration_s").cast("int").alias("durations_known"),
        F.percentile("duration_s", 0.5).alias("p50_s"),
        F.percentile("duration_s", 0.95).alias("p95_s"),
        F.max("duration_s").alias("max_s"),
        *sums,
        F.count("unavailable_partition_s").cast("int").alias("unavailable_known"),
        # deterministic: of equally frequent causes the lowest; null on a day of gap rows only
        F.mode(F.when(observed, F.col("cause")), deterministic=True).alias("top_cause"),
    )
    basis = common.notes(
        F.when(
            F.col("durations_known") < F.col("observed_rebalances"),
            F.format_string(
                "durations known for %d of %d rebalances (no broker log for the rest)",
                F.col("durations_known"),
                F.col("observed_rebalances"),
            ),
        ),
        F.when(
            F.col("gap_rebalances") > 0,
            F.format_string("%d rebalances in gaps of the history (no times, no cause)", F.col("gap_rebalances")),
        ),
        F.when(
            F.col("unavailable_known") < F.col("observed_rebalances"),
            F.format_string(
                "unavailability known for %d of %d rebalances",
                F.col("unavailable_known"),
                F.col("observed_rebalances"),
            ),
        ),
    )
    return agg.withColumn("basis", basis).select(
        *key,
        "rebalances",
        "observed_rebalances",
        "gap_rebalances",
        "durations_known",
        "p50_s",
        "p95_s",
        "max_s",
        *[f"unavailable_partition_s_{p}" for p in PROTOCOLS],
        "unavailable_known",
        "top_cause",
        "basis",
    )
