"""Classic groups' rebalances: generations from GroupMetadata records and the broker's lines (pure).

See `vigil_spark.model.rebalances` for what each column means and where it comes from.
"""

from typing import Final

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F  # noqa: N812 - the PySpark convention
from pyspark.sql.types import ArrayType, IntegerType, StringType, StructField, StructType

from vigil_spark.model import common, generations

_OWNED: Final = ArrayType(
    StructType(
        [
            StructField("member_id", StringType()),
            StructField("topic", StringType()),
            StructField("partition", IntegerType()),
        ]
    )
)
_ASSIGNED: Final = "array<struct<topic:string,partition:int>>"


def _owned_by(members: Column) -> Column:
    """(member_id, topic, partition) of every partition the members of a GroupMetadata record own."""
    per_member = F.transform(
        members,
        lambda m: F.transform(
            F.coalesce(m["assigned"], F.array().cast(_ASSIGNED)),
            lambda a: F.struct(
                m["member_id"].alias("member_id"), a["topic"].alias("topic"), a["partition"].alias("partition")
            ),
        ),
    )
    return F.coalesce(F.flatten(per_member), F.array().cast(_OWNED))


def classic_generations(group_metadata: DataFrame, broker_log: DataFrame) -> DataFrame:
    """Every classic generation any source shows, per incarnation of the group, with its times and members."""
    null = F.lit(None)
    gm = group_metadata.filter(F.col("tombstone") | F.col("generation").isNotNull()).select(
        "cluster",
        "group",
        F.when(~F.col("tombstone"), F.col("generation")).alias("generation"),
        F.when(F.col("tombstone"), F.col("log_ts")).otherwise(F.coalesce("state_ts", "log_ts")).alias("ts"),
        F.col("tombstone").alias("tomb"),
        F.lit("gm").alias("src"),
        F.col("log_offset"),
        F.struct(
            F.coalesce("state_ts", "log_ts").alias("gm_ts"),
            F.when(F.col("members").isNull(), 0).otherwise(F.size("members")).alias("gm_members"),
            F.col("protocol").alias("gm_protocol"),
            F.col("protocol_type").alias("gm_protocol_type"),
            _owned_by(F.col("members")).alias("owned"),
            F.transform(
                F.coalesce(F.col("members"), F.array().cast(group_metadata.schema["members"].dataType)),
                lambda m: F.struct(m["member_id"], m["session_timeout_ms"], m["rebalance_timeout_ms"]),
            ).alias("timeouts"),
        ).alias("gm"),
        null.cast("int").alias("log_members"),
    )
    log = broker_log.filter(F.col("event").isin("stabilized", "empty") & F.col("generation").isNotNull()).select(
        "cluster",
        "group",
        "generation",
        "ts",
        F.lit(False).alias("tomb"),
        F.lit("log").alias("src"),
        null.cast("long").alias("log_offset"),
        null.cast(gm.schema["gm"].dataType).alias("gm"),
        F.col("members").alias("log_members"),
    )
    observed = generations.incarnations(gm.unionByName(log))
    is_log = F.col("src") == F.lit("log")
    return (
        observed.groupBy("cluster", "group", "incarnation", "generation")
        .agg(
            F.min_by("gm", F.when(~is_log, F.col("log_offset"))).alias("gm"),
            # the generation as it ended: a static member replaced within it has its new id only here
            F.max_by("gm", F.when(~is_log, F.col("log_offset"))).alias("gm_last"),
            F.min(F.when(is_log, F.col("ts"))).alias("log_ts"),
            F.min_by("log_members", F.when(is_log, F.col("ts"))).alias("log_members"),
        )
        .select(
            "cluster",
            "group",
            "incarnation",
            "generation",
            "gm.*",
            F.col("gm_last.owned").alias("last_owned"),
            F.col("gm_last.timeouts").alias("last_timeouts"),
            "log_ts",
            "log_members",
        )
    )


def _rebalance_protocol(protocol: Column) -> Column:
    return (
        F.when(protocol.isNull(), F.lit("unknown"))
        .when(protocol.rlike("(?i)cooperative"), F.lit("cooperative"))
        .otherwise(F.lit("eager"))
    )


def classic_rebalances(group_metadata: DataFrame, broker_log: DataFrame) -> DataFrame:
    """The classic groups' rebalances (no vigil attribution yet)."""
    observed = classic_generations(group_metadata, broker_log).withColumn("stab_ts", F.coalesce("log_ts", "gm_ts"))
    seq = generations.sequence(observed)
    by_gen = Window.partitionBy("cluster", "group", "incarnation").orderBy("generation")
    known_protocol = F.last("gm_protocol", ignorenulls=True).over(by_gen.rowsBetween(Window.unboundedPreceding, 0))
    adjacent = F.col("prev_generation") == F.col("generation") - 1
    seq = (
        seq.withColumn("protocol", known_protocol)
        .withColumn("rebalance_protocol", _rebalance_protocol(F.col("protocol")))
        .withColumn("members_after", F.coalesce("gm_members", "log_members"))
        .withColumn("prev_stab_ts", F.lag("stab_ts").over(by_gen))
        .withColumn(
            "members_before",
            F.when(adjacent, F.lag("members_after").over(by_gen)).when(
                F.col("prev_generation").isNull() & (F.col("generation") == 1), F.lit(0)
            ),
        )
        .withColumn("prev_owned", F.when(adjacent, F.lag("last_owned").over(by_gen)))
        .withColumn("prev_timeouts", F.when(adjacent, F.lag("last_timeouts").over(by_gen)))
        .withColumn("prev_adjacent_ts", F.when(adjacent, F.col("prev_stab_ts")))
    )
    gaps = generations.gap_rows(seq, "classic", F.col("prev_stab_ts"), F.col("stab_ts"))

    rows = seq.filter(F.col("generation") >= 1)
    rows = _with_prepare(rows, broker_log)
    rows = _with_leave_reason(rows, broker_log)
    detail = common.reason_detail(F.col("prep_reason"))
    client = F.coalesce(common.client_reason(F.col("prep_reason")), F.col("left_reason"))
    rows = (
        rows.withColumn("client_reason", client)
        .withColumn("cause_detail", F.when(F.col("prep_ts").isNotNull(), detail).otherwise(F.lit("no-log")))
        .withColumn(
            # from the column, not `detail` again: `detail_cause` tests it once per rule, and each copy of the
            # expression carried every rule's regex into the plan (12 % of its optimized text)
            "cause",
            F.when(
                F.col("prep_ts").isNotNull(), common.detail_cause(F.col("cause_detail"), F.col("client_reason"))
            ).otherwise(F.lit("unknown")),
        )
    )
    duration = common.seconds_between(F.col("stab_ts"), F.col("prep_ts"))
    rows = _with_undetected(rows.withColumn("trigger_members", common.trigger_members(F.col("prep_reason"))))
    eager = F.col("rebalance_protocol") == F.lit("eager")
    coop = F.col("rebalance_protocol") == F.lit("cooperative")
    unavailable = (
        F.when(F.col("prev_owned").isNull() | F.col("owned").isNull(), F.lit(None).cast("int"))
        .when(eager, F.size("prev_owned"))
        .when(coop, F.size(F.array_except("prev_owned", "owned")))
    )
    # the departed member's partitions also sat idle while the coordinator waited to notice it
    unavailable_s = unavailable * duration + F.coalesce(F.col("departed_partitions") * F.col("undetected_s"), F.lit(0))
    basis = common.notes(
        F.when(F.col("log_ts").isNotNull(), F.lit("stabilized: broker log")).otherwise(
            F.lit("stabilized: GroupMetadata record (no Stabilized line)")
        ),
        F.when(F.col("prep_ts").isNotNull(), F.lit("started and cause: broker log")).otherwise(
            F.lit("started, duration and cause unknown: no 'Preparing to rebalance' line")
        ),
        F.when(F.col("members_before").isNull(), F.lit("members_before unknown: previous generation not seen")),
        F.when(
            unavailable.isNull(),
            F.lit("partitions unknown: assignments of both generations are needed (GroupMetadata)"),
        )
        .when(eager, F.lit("unavailable: eager, all partitions owned before, for the whole rebalance"))
        .when(coop, F.lit("unavailable: cooperative, partitions whose owner changed, for the rebalance")),
        F.col("undetected_basis"),
    )
    observed_rows = common.observed_rebalances(
        rows, "classic", started=F.col("prep_ts"), stabilized=F.col("stab_ts"), duration=duration,
        undetected=F.col("undetected_s"), unavailable=unavailable, unavailable_s=unavailable_s, basis=basis,
    )  # fmt: skip
    return observed_rows.unionByName(gaps)


def _with_undetected(rows: DataFrame) -> DataFrame:
    """`undetected_s`: how long a silently departed member's partitions sat idle before the rebalance started —
    its session timeout on a heartbeat expiry, its rebalance timeout (= max.poll.interval.ms, as Java and
    librdkafka send it) on a poll timeout — from the previous generation's GroupMetadata; with
    `departed_partitions` (what it owned) and a `undetected_basis` note."""
    departed = F.when(F.size("trigger_members") == 1, F.try_element_at("trigger_members", F.lit(1)))
    # the departed member's timeouts; null (not an ANSI error) when the previous generation does not list it
    timeouts = F.try_element_at(F.filter(F.col("prev_timeouts"), lambda t: t["member_id"] == departed), F.lit(1))
    expiry = (F.col("cause") == F.lit("heartbeat-expiry")) & (F.col("cause_detail") == F.lit("heartbeat-expiry"))
    poll = F.col("cause") == F.lit("poll-timeout")
    timeout_ms = F.when(expiry, timeouts["session_timeout_ms"]).when(poll, timeouts["rebalance_timeout_ms"])
    silent = expiry | poll
    basis = F.when(
        silent & timeout_ms.isNotNull(),
        F.when(expiry, F.lit("undetected: the expired member's session timeout (since its last heartbeat)")).otherwise(
            F.lit("undetected: the member's max.poll.interval (rebalance timeout; since its last poll)")
        ),
    ).when(silent, F.lit("undetected unknown: the departed member is not in the previous generation's GroupMetadata"))
    owned = F.filter(F.col("prev_owned"), lambda o: o["member_id"] == departed)
    return (
        rows.withColumn("undetected_s", F.when(silent, timeout_ms / F.lit(1000.0)))
        .withColumn("departed_partitions", F.when(silent & F.col("prev_owned").isNotNull(), F.size(owned)))
        .withColumn("undetected_basis", basis)
    )


def _with_prepare(rows: DataFrame, broker_log: DataFrame) -> DataFrame:
    """The first `Preparing to rebalance … old generation g-1` line inside the rebalance's window."""
    prep = broker_log.filter(F.col("event") == "rebalance-prepared").select(
        F.col("cluster").alias("p_cluster"),
        F.col("group").alias("p_group"),
        F.col("generation").alias("p_old"),
        F.col("ts").alias("p_ts"),
        F.col("reason").alias("p_reason"),
    )
    cond = (
        (F.col("p_cluster") == F.col("cluster"))
        & (F.col("p_group") == F.col("group"))
        & (F.col("p_old") == F.col("generation") - 1)
        & (F.col("stab_ts").isNull() | (F.col("p_ts") <= F.col("stab_ts")))
        & (F.col("prev_adjacent_ts").isNull() | (F.col("p_ts") >= F.col("prev_adjacent_ts")))
    )
    joined = rows.join(prep, cond, "left")
    return (
        common.first_per(joined, generations.KEY, F.col("p_ts").asc_nulls_last())
        .withColumnRenamed("p_ts", "prep_ts")
        .withColumnRenamed("p_reason", "prep_reason")
        .drop("p_cluster", "p_group", "p_old")
    )


def _with_leave_reason(rows: DataFrame, broker_log: DataFrame, window_s: int = 10) -> DataFrame:
    """4.x logs the client's LeaveGroup reason on its own line just before the rebalance: join it back."""
    left = broker_log.filter(F.col("event").isin("member-left", "pending-member-left")).select(
        F.col("cluster").alias("l_cluster"),
        F.col("group").alias("l_group"),
        F.col("ts").alias("l_ts"),
        F.col("member_id").alias("l_member"),
        F.col("reason").alias("l_reason"),
    )
    cond = (
        (F.col("l_cluster") == F.col("cluster"))
        & (F.col("l_group") == F.col("group"))
        & F.col("prep_reason").startswith("explicit `LeaveGroup` request")
        & (F.col("l_ts") <= F.col("prep_ts"))
        & (F.col("l_ts") >= F.col("prep_ts") - F.expr(f"INTERVAL {window_s} SECONDS"))
        & (F.instr(F.col("prep_reason"), F.col("l_member")) > 0)
    )
    return (
        common.first_per(rows.join(left, cond, "left"), generations.KEY, F.col("l_ts").desc_nulls_last())
        .withColumnRenamed("l_reason", "left_reason")
        .drop("l_cluster", "l_group", "l_ts", "l_member")
    )
