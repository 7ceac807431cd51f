"""KIP-848 groups' rebalances: group epochs from ConsumerGroupMetadata records and the broker's lines (pure).

See `vigil_spark.model.rebalances` for what each column means and where it comes from.
"""

from typing import Final

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F  # noqa: N812 - the PySpark convention

from vigil_spark.model import common, generations
from vigil_spark.parse import broker_log as bl

_TP_JSON: Final = (
    "struct<member_epoch:int,state:int,partitions_pending_revocation:array<struct<partitions:array<int>>>>"
)


def consumer_epochs(consumer_group_records: DataFrame, broker_log: DataFrame) -> DataFrame:
    """Every KIP-848 group epoch any source shows, per incarnation, with its start (record or log line)."""
    null = F.lit(None)
    rec = consumer_group_records.filter(
        (F.col("record_type") == 3) & (F.col("tombstone") | F.col("epoch").isNotNull())
    ).select(
        "cluster",
        "group",
        F.when(~F.col("tombstone"), F.col("epoch")).alias("generation"),
        F.col("log_ts").alias("ts"),
        F.col("tombstone").alias("tomb"),
        F.lit("rec").alias("src"),
        F.struct(
            F.col("log_ts").alias("rec_ts"),
            F.col("log_partition").alias("rec_partition"),
            F.col("log_offset").alias("rec_offset"),
        ).alias("rec"),
    )
    log = broker_log.filter((F.col("event") == "epoch-bumped") & F.col("generation").isNotNull()).select(
        "cluster",
        "group",
        "generation",
        "ts",
        F.lit(False).alias("tomb"),
        F.lit("log").alias("src"),
        null.cast(rec.schema["rec"].dataType).alias("rec"),
    )
    is_log = F.col("src") == F.lit("log")
    epochs = (
        generations.incarnations(rec.unionByName(log))
        .groupBy("cluster", "group", "incarnation", "generation")
        .agg(
            F.min_by("rec", F.when(~is_log, F.col("rec.rec_offset"))).alias("rec"),
            F.min(F.when(is_log, F.col("ts"))).alias("bump_ts"),
        )
        .select("cluster", "group", "incarnation", "generation", "rec.*", "bump_ts")
    )
    assignor = (
        broker_log.filter(F.col("event") == "target-assignment-computed")
        .groupBy("cluster", "group", "generation")
        .agg(F.min_by("reason", "ts").alias("assignor"))
    )
    return epochs.join(assignor, ["cluster", "group", "generation"], "left")


def _member_deltas(consumer_group_records: DataFrame) -> DataFrame:
    """Type-5 (member metadata) records with +1 (new member), -1 (tombstone of a live one) or 0 (update)."""
    per_member = Window.partitionBy("cluster", "group", "member_id").orderBy("log_partition", "log_offset")
    prev_tomb = F.lag("tombstone").over(per_member)
    delta = (
        F.when(~F.col("tombstone") & (prev_tomb.isNull() | prev_tomb), 1)
        .when(F.col("tombstone") & (prev_tomb == F.lit(False)), -1)
        .otherwise(0)
    )
    return consumer_group_records.filter(F.col("record_type") == 5).withColumn("delta", delta)


def consumer_rebalances(consumer_group_records: DataFrame, broker_log: DataFrame) -> DataFrame:
    """The KIP-848 groups' rebalances, one per group epoch (no vigil attribution yet)."""
    epochs = consumer_epochs(consumer_group_records, broker_log).withColumn("start_ts", F.coalesce("bump_ts", "rec_ts"))
    seq = generations.sequence(epochs)
    by_gen = Window.partitionBy("cluster", "group", "incarnation").orderBy("generation")
    seq = (
        seq.withColumn("protocol", F.col("assignor"))
        .withColumn("rebalance_protocol", F.lit("consumer"))
        .withColumn("prev_start_ts", F.lag("start_ts").over(by_gen))
        .withColumn("next_start_ts", F.lead("start_ts").over(by_gen))
    )
    gaps = generations.gap_rows(seq, "consumer", F.col("prev_start_ts"), F.col("start_ts"))
    rows = seq.filter(F.col("generation") >= 1)
    rows = _with_consumer_members(rows, consumer_group_records)
    rows = _with_consumer_end(rows, consumer_group_records)
    rows = _with_consumer_cause(rows, consumer_group_records, broker_log)
    rows = _with_pending_revocation(rows, consumer_group_records)
    adjacent = F.col("prev_generation") == F.col("generation") - 1
    first = F.col("prev_generation").isNull() & (F.col("generation") == 1)  # epoch 1: the group's first member joined
    before = F.when(adjacent, F.lag("members_after").over(by_gen)).when(first, F.lit(0))
    rows = rows.withColumn("members_before", before)
    duration = common.seconds_between(F.col("end_ts"), F.col("start_ts"))
    basis = common.notes(
        F.when(F.col("bump_ts").isNotNull(), F.lit("started: broker log")).otherwise(
            F.lit("started: ConsumerGroupMetadata record")
        ),
        F.when(
            F.col("end_ts").isNull(),
            F.lit("stabilized unknown: no member assignment record (type 8) in state STABLE at this epoch"),
        ).otherwise(F.lit("stabilized: last member assignment record at this epoch")),
        F.col("cause_basis"),
        F.when(F.col("members_after").isNull(), F.lit("members unknown: no member records (type 5)")),
        F.when(
            F.col("pending_s").isNull(),
            F.lit("unavailable unknown: no member assignment records with partitions pending revocation"),
        ).otherwise(F.lit("unavailable: KIP-848, seconds partitions were pending revocation (upper bound)")),
        F.when(
            F.col("cause") == F.lit("heartbeat-expiry"),
            F.lit(
                "undetected unknown: KIP-848 records carry no session timeout (the fenced member's partitions sat"
                " idle up to the group's session timeout before this epoch, not counted)"
            ),
        ),
    )
    observed_rows = common.observed_rebalances(
        rows, "consumer", started=F.col("start_ts"), stabilized=F.col("end_ts"), duration=duration,
        undetected=F.lit(None), unavailable=F.col("pending_partitions"), unavailable_s=F.col("pending_s"), basis=basis,
    )  # fmt: skip
    return observed_rows.unionByName(gaps)


def _with_consumer_members(rows: DataFrame, records: DataFrame) -> DataFrame:
    """Live members (type-5 records not tombstoned) as of each epoch record."""
    deltas = _member_deltas(records).select("cluster", "group", "log_partition", "log_offset", "delta")
    markers = rows.filter(F.col("rec_offset").isNotNull()).select(
        "cluster",
        "group",
        F.col("rec_partition").alias("log_partition"),
        F.col("rec_offset").alias("log_offset"),
        F.lit(None).cast("int").alias("delta"),
    )
    stream = Window.partitionBy("cluster", "group").orderBy("log_partition", "log_offset")
    has_members = records.filter(F.col("record_type") == 5).select("cluster", "group").distinct()
    counted = (
        deltas.unionByName(markers)
        .withColumn("live", F.sum(F.coalesce("delta", F.lit(0))).over(stream.rowsBetween(Window.unboundedPreceding, 0)))
        .filter(F.col("delta").isNull())
        .join(has_members, ["cluster", "group"], "inner")
        .select(
            "cluster",
            "group",
            F.col("log_partition").alias("rec_partition"),
            F.col("log_offset").alias("rec_offset"),
            F.col("live").alias("members_after"),
        )
    )
    return rows.join(counted, ["cluster", "group", "rec_partition", "rec_offset"], "left")


def _with_consumer_end(rows: DataFrame, records: DataFrame) -> DataFrame:
    """The last member assignment record (type 8) reaching the epoch in state STABLE, capped by the next bump."""
    parsed = records.filter((F.col("record_type") == 8) & ~F.col("tombstone")).withColumn(
        "j", F.from_json("record_json", _TP_JSON)
    )
    reached = (
        parsed.filter(F.col("j.state") == 0)
        .groupBy("cluster", "group", F.col("epoch").alias("generation"))
        .agg(F.max("log_ts").alias("reach_ts"))
    )
    joined = rows.join(reached, ["cluster", "group", "generation"], "left")
    capped = F.when(
        F.col("next_start_ts").isNotNull() & (F.col("reach_ts") > F.col("next_start_ts")), F.col("next_start_ts")
    ).otherwise(F.col("reach_ts"))
    return joined.withColumn("end_ts", capped)


def _with_consumer_cause(rows: DataFrame, records: DataFrame, broker_log: DataFrame, window_s: int = 2) -> DataFrame:
    """The member line just before the bump (log), else the member record appended with the epoch record."""
    events = broker_log.filter(F.col("event").isin(*bl.EVENT_CAUSES)).select(
        F.col("cluster").alias("e_cluster"),
        F.col("group").alias("e_group"),
        F.col("ts").alias("e_ts"),
        F.col("event").alias("e_event"),
        F.col("reason").alias("e_reason"),
        F.col("member_id").alias("e_member"),
    )
    cond = (
        (F.col("e_cluster") == F.col("cluster"))
        & (F.col("e_group") == F.col("group"))
        & F.col("bump_ts").isNotNull()
        & (F.col("e_ts") <= F.col("bump_ts"))
        & (F.col("e_ts") >= F.col("bump_ts") - F.expr(f"INTERVAL {window_s} SECONDS"))
    )
    rows = common.first_per(rows.join(events, cond, "left"), generations.KEY, F.col("e_ts").desc_nulls_last()).drop(
        "e_cluster", "e_group"
    )
    deltas = _member_deltas(records).select(
        F.col("cluster").alias("d_cluster"),
        F.col("group").alias("d_group"),
        F.col("log_partition").alias("d_partition"),
        F.col("log_offset").alias("d_offset"),
        F.col("log_ts").alias("d_ts"),
        F.col("delta").alias("d_delta"),
        F.col("member_id").alias("d_member"),
    )
    same_batch = (
        (F.col("d_cluster") == F.col("cluster"))
        & (F.col("d_group") == F.col("group"))
        & (F.col("d_partition") == F.col("rec_partition"))
        & (F.col("d_offset") < F.col("rec_offset"))
        & (F.col("d_ts") == F.col("rec_ts"))
    )
    rows = common.first_per(
        rows.join(deltas, same_batch, "left"), generations.KEY, F.col("d_offset").desc_nulls_last()
    ).drop("d_cluster", "d_group", "d_partition", "d_ts")
    from_log = common.event_cause(F.col("e_event"), F.col("e_reason"))
    from_records = (
        F.when(F.col("d_delta") == 1, F.lit("joined"))
        .when(F.col("d_delta") == -1, F.lit("left"))
        .when(F.col("d_delta") == 0, F.lit("metadata-change"))
    )
    has_log = F.col("e_event").isNotNull()
    return (
        rows.withColumn("cause", F.when(has_log, from_log).otherwise(F.coalesce(from_records, F.lit("unknown"))))
        .withColumn(
            "cause_detail",
            F.when(has_log, F.col("e_event"))
            .when(F.col("d_delta").isNotNull(), F.lit("member-record"))
            .otherwise(F.lit("no-log")),
        )
        .withColumn(
            "client_reason",
            F.when(
                F.col("e_event").isin("consumer-member-left", "consumer-member-fenced"), F.col("e_reason")
            ).otherwise(generations.null_string()),
        )
        .withColumn(
            "trigger_members",
            F.when(has_log & F.col("e_member").isNotNull(), F.array("e_member"))
            .when(~has_log & F.col("d_member").isNotNull(), F.array("d_member"))
            .otherwise(F.array().cast("array<string>")),
        )
        .withColumn(
            "cause_basis",
            F.when(has_log, F.lit("cause: broker log"))
            .when(F.col("d_delta").isNotNull(), F.lit("cause: member record appended with the epoch"))
            .otherwise(F.lit("cause unknown: no broker log line and no member record with the epoch")),
        )
    )


def _with_pending_revocation(rows: DataFrame, records: DataFrame) -> DataFrame:
    """Partition-seconds pending revocation, attributed to the epoch whose window holds the record."""
    parsed = records.filter((F.col("record_type") == 8) & ~F.col("tombstone")).withColumn(
        "j", F.from_json("record_json", _TP_JSON)
    )
    per_member = Window.partitionBy("cluster", "group", "member_id").orderBy("log_partition", "log_offset")
    pending_count = F.aggregate(
        F.coalesce(F.col("j.partitions_pending_revocation"), F.array().cast("array<struct<partitions:array<int>>>")),
        F.lit(0),
        lambda acc, tp: acc + F.coalesce(F.size(tp["partitions"]), F.lit(0)),
    )
    pending = (
        parsed.withColumn("k", pending_count)
        .withColumn("next_ts", F.lead("log_ts").over(per_member))
        .filter((F.col("k") > 0) & F.col("next_ts").isNotNull())
        .select(
            F.col("cluster").alias("q_cluster"),
            F.col("group").alias("q_group"),
            F.col("log_ts").alias("q_ts"),
            F.col("k").alias("q_k"),
            (F.col("k") * common.seconds_between(F.col("next_ts"), F.col("log_ts"))).alias("q_s"),
        )
    )
    cond = (
        (F.col("q_cluster") == F.col("cluster"))
        & (F.col("q_group") == F.col("group"))
        & (F.col("q_ts") >= F.col("start_ts"))
        & (F.col("next_start_ts").isNull() | (F.col("q_ts") < F.col("next_start_ts")))
    )
    summed = (
        rows.select(*generations.KEY, "start_ts", "next_start_ts")
        .join(pending, cond, "inner")
        .groupBy(*generations.KEY)
        .agg(F.sum("q_k").alias("pending_partitions"), F.sum("q_s").alias("pending_s"))
    )
    return rows.join(summed, generations.KEY, "left")
