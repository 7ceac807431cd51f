"""`rebalances`: one row per rebalance of every group (classic generation; KIP-848, streams or share group epoch).

Streams groups (KIP-1071) are read exactly as KIP-848 groups below, from their own record types (17, 19, 22
for 3, 5, 8), their `Bumped streams group epoch` and `streams-member-*` lines, and active tasks pending
revocation for partitions (`consumer.STREAMS`). Share groups (KIP-932) too (11, 10, 14; `consumer.SHARE`): their
lines are a KIP-848 group's but for joins and leaves, so a group that records or lines say is a share group is
read by the share model only; nothing is pending revocation in a share group (its partitions are shared), so
its unavailability is null and `basis` says why.

Counting. Rebalances are counted from DIFFERENCES of generation numbers (classic: GroupMetadata records and
the broker's `Stabilized`/`is now empty` lines; KIP-848: ConsumerGroupMetadata records and `Bumped group epoch`
lines), so the count is exact across compaction gaps: generation 3 followed by 7 is four rebalances — one row
for generation 7 and one GAP row (`gap` = true, `rebalances` = 3, cause "unknown") for 4..6, which no source
shows. A group seen first at generation g > 1 gets a leading gap row for 1..g-1 (history before the first
record). A generation lower than the one before starts a new incarnation of the group (deleted and created
again), never a negative count.

Times. Classic: `started` = the first `Preparing to rebalance … old generation g-1` line, `stabilized` = the
`Stabilized`/`empty` line, else the GroupMetadata record's `currentStateTimestamp` (the same moment: the
group entered CompletingRebalance), else its append time. KIP-848: `started` = the epoch bump (log line or the
ConsumerGroupMetadata record), `stabilized` = the last member's assignment record (type 8) at that epoch in
state STABLE, capped by the next bump. Gap rows: `started`/`stabilized` bound the window the unseen
rebalances happened in; `duration_s` is null.

Cause (closed vocabulary `broker_log.CAUSES`): from the broker's reason (`REASON_RULES`), "left" refined by
the client's KIP-800 reason (`vigil:` → evicted-by-vigil, Java's poll timeout → poll-timeout; librdkafka
sends none: `client_reason` = "not provided"); KIP-848 from the member line just before the bump, or the
member records appended with the epoch record. A rebalance caused by a departure (left, heartbeat or poll
expiry, unknown) with a vigil `eviction-done`/`member-removed` event just before is `evicted-by-vigil`.
Without a log line the cause is "unknown" — the `basis` column says which source every figure came from and
why one is null.

Trigger. `trigger_members`: the member id(s) the broker names — classic: in the `Preparing to rebalance`
reason (`broker_log.TRIGGER_PATTERNS`: the member added, updated, expired or leaving); KIP-848: the member line
before the bump, else the member record appended with the epoch. `trigger_pods`: their pods, where vigil's events
place them (a sidecar's own member, a member the operator removed, the operator's group snapshots).

Partition unavailability (an approximation, stated in `basis`): eager — every partition the group owned
before (generation g-1) for the whole rebalance; cooperative — only the partitions whose owner changed
between g-1 and g (the revoked set) for the rebalance's duration (the follow-up rebalance that hands them out
is a row of its own); KIP-848 — seconds partitions spent in a member's `partitions_pending_revocation`
(from that member's assignment record listing them until its next assignment record), attributed to the
epoch whose window contains the record (an upper bound: the old owner may still consume them meanwhile).
A silent departure starts before its rebalance: a member killed or hung is detected only when its session times
out (heartbeat expiry), a member that stopped polling leaves only after max.poll.interval (poll timeout). For
classic groups `undetected_s` is that wait — the departed member's session timeout, or its rebalance timeout
(the clients send max.poll.interval.ms) — from the previous generation's GroupMetadata, and its partitions count
as unavailable for it too: from the member's last heartbeat or poll, not from the broker's detection. KIP-848
records carry no session timeout: `undetected_s` is null there and `basis` says so.
"""

from typing import Final

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F  # noqa: N812 - the PySpark convention
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DoubleType,
    IntegerType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from vigil_spark.model import classic, common, consumer

#: The vigil events that remove a member.
VIGIL_REMOVALS: Final = ("eviction-done", "member-removed")

#: The part of a group-snapshot payload that pairs members with pods.
_SNAPSHOT_MEMBERS: Final = "struct<members:array<struct<member:struct<member_id:string>,pod:string>>>"

SCHEMA: Final = StructType(
    [
        StructField("cluster", StringType()),
        StructField("group", StringType()),
        StructField("group_type", StringType()),  # "classic", "consumer" (KIP-848), "streams", "share"
        StructField("generation", IntegerType()),  # generation or group epoch reached (gap: the last unseen)
        StructField("rebalances", IntegerType()),  # 1, or how many unseen generations a gap row stands for
        StructField("gap", BooleanType()),
        StructField("started", TimestampType()),
        StructField("stabilized", TimestampType()),
        StructField("duration_s", DoubleType()),
        # seconds the departed member was silent before the rebalance started (its partitions idle, unseen)
        StructField("undetected_s", DoubleType()),
        StructField("cause", StringType()),
        StructField("cause_detail", StringType()),
        StructField("client_reason", StringType()),
        StructField("trigger_members", ArrayType(StringType())),  # the member id(s) the broker names as its trigger
        StructField("trigger_pods", ArrayType(StringType())),  # their pods, as vigil's events matched them
        StructField("members_before", IntegerType()),
        StructField("members_after", IntegerType()),
        StructField("protocol", StringType()),  # the assignor
        StructField("rebalance_protocol", StringType()),  # eager / cooperative / consumer / streams / share / unknown
        StructField("partitions_unavailable", IntegerType()),
        StructField("unavailable_partition_s", DoubleType()),
        StructField("basis", StringType()),
    ]
)


def rebalances(
    group_metadata: DataFrame,
    consumer_group_records: DataFrame,
    broker_log: DataFrame,
    vigil_events: DataFrame,
    *,
    vigil_before_s: float = 60.0,
    vigil_after_s: float = 10.0,
) -> DataFrame:
    """Every rebalance of every group (see the module doc); columns as `SCHEMA`."""
    kinds = consumer.present(consumer_group_records, broker_log)
    every = observed(group_metadata, consumer_group_records, broker_log, kinds)
    both = with_trigger_pods(every, vigil_events)
    return attribute_vigil(both, vigil_events, before_s=vigil_before_s, after_s=vigil_after_s).select(
        *SCHEMA.fieldNames()
    )


def observed(
    group_metadata: DataFrame,
    consumer_group_records: DataFrame,
    broker_log: DataFrame,
    kinds: tuple[consumer.EpochGroups, ...] = consumer.EPOCH_GROUPS,
) -> DataFrame:
    """The classic groups' rows and those of the epoch-based `kinds`, before vigil's attribution. `rebalances`
    asks only for the kinds `consumer.present` finds: the others would add no row, only Spark plans and jobs."""
    share_log = others_log = broker_log
    if consumer.SHARE in kinds:
        shares = consumer.share_groups(consumer_group_records, broker_log)
        share_log = broker_log.join(shares, ["cluster", "group"], "left_semi")
        others_log = broker_log.join(shares, ["cluster", "group"], "left_anti")
    every = classic.classic_rebalances(group_metadata, others_log)
    for kind in kinds:
        log = share_log if kind is consumer.SHARE else others_log
        every = every.unionByName(consumer.consumer_rebalances(consumer_group_records, log, kind))
    return every


def member_pods(vigil_events: DataFrame) -> DataFrame:
    """(cluster, group, member_id, pod) for every member vigil's events place in a pod: a sidecar's own member,
    a member the operator removed, the members of the operator's group snapshots."""
    named = vigil_events.filter(F.col("member_id").isNotNull() & F.col("pod").isNotNull()).select(
        "cluster", "group", "member_id", "pod"
    )
    snapshot = F.from_json("payload_json", _SNAPSHOT_MEMBERS)
    in_snapshots = (
        vigil_events.filter(F.col("type") == F.lit("group-snapshot"))
        .select("cluster", "group", F.explode(snapshot["members"]).alias("m"))
        .select("cluster", "group", F.col("m.member.member_id").alias("member_id"), F.col("m.pod").alias("pod"))
        .filter(F.col("member_id").isNotNull() & F.col("pod").isNotNull())
    )
    return named.unionByName(in_snapshots).groupBy("cluster", "group", "member_id").agg(F.max("pod").alias("pod"))


def with_trigger_pods(rebalances: DataFrame, vigil_events: DataFrame) -> DataFrame:
    """`trigger_pods`: the pods of the trigger members that vigil's events place (null when none is known)."""
    pods = (
        member_pods(vigil_events)
        .groupBy(F.col("cluster").alias("p_cluster"), F.col("group").alias("p_group"))
        .agg(F.map_from_entries(F.collect_list(F.struct("member_id", "pod"))).alias("p_pods"))
    )
    on = (F.col("p_cluster") == F.col("cluster")) & (F.col("p_group") == F.col("group"))
    found = F.array_compact(F.transform("trigger_members", lambda m: F.try_element_at(F.col("p_pods"), m)))
    return (
        rebalances.join(pods, on, "left")
        .withColumn("trigger_pods", F.when(F.size(found) > 0, found))
        .drop("p_cluster", "p_group", "p_pods")
    )


def attribute_vigil(rebalances: DataFrame, vigil_events: DataFrame, *, before_s: float, after_s: float) -> DataFrame:
    """A departure (left, heartbeat expiry, unknown) that a vigil removal event explains becomes `evicted-by-vigil`.

    An event explains at most one rebalance: the nearest departure whose anchor lies in [event - after_s,
    event + before_s] — the anchor is the rebalance's start (vigil writes `eviction-done` after the broker
    answered, so the event may trail the broker's line by `after_s`; a restarted app may leave or expire up to a
    session timeout after it, `before_s`); without a start, the event must fall in (previous stabilization,
    stabilization].
    """
    ev = vigil_events.filter(F.col("type").isin(*VIGIL_REMOVALS)).select(
        F.col("cluster").alias("v_cluster"),
        F.col("group").alias("v_group"),
        F.col("ts").alias("v_ts"),
        F.col("type").alias("v_type"),
        F.col("log_partition").alias("v_partition"),
        F.col("log_offset").alias("v_offset"),
    )
    prev = Window.partitionBy("cluster", "group", "group_type").orderBy(
        F.col("stabilized").asc_nulls_first(), "generation"
    )
    rb = rebalances.withColumn("_prev_stab", F.lag("stabilized").over(prev))
    before = F.expr(f"INTERVAL {int(before_s * 1000)} MILLISECONDS")
    after = F.expr(f"INTERVAL {int(after_s * 1000)} MILLISECONDS")
    in_window = F.when(
        F.col("started").isNotNull(),
        (F.col("v_ts") >= F.col("started") - before) & (F.col("v_ts") <= F.col("started") + after),
    ).otherwise(
        F.col("stabilized").isNotNull()
        & (F.col("v_ts") <= F.col("stabilized"))
        & (F.col("_prev_stab").isNull() | (F.col("v_ts") > F.col("_prev_stab")))
    )
    departure = F.col("cause").isin("left", "heartbeat-expiry", "unknown")
    cond = (
        (F.col("v_cluster") == F.col("cluster"))
        & (F.col("v_group") == F.col("group"))
        & ~F.col("gap")
        & departure
        & in_window
    )
    anchor = F.coalesce(F.col("started"), F.col("stabilized"))
    distance = F.abs(F.unix_micros(anchor) - F.unix_micros(F.col("v_ts")))
    per_event = Window.partitionBy("v_cluster", "v_group", "v_ts", "v_type", "v_partition", "v_offset").orderBy(
        distance.asc_nulls_last(), "generation"
    )
    key = ["cluster", "group", "group_type", "generation", "gap", "started", "stabilized"]
    hit = F.col("v_ts").isNotNull() & (F.col("_event_rank") == 1)
    per_rebalance = Window.partitionBy(*key).orderBy(hit.desc(), F.col("v_ts").desc_nulls_last())
    out = (
        rb.join(ev, cond, "left")
        .withColumn("_event_rank", F.row_number().over(per_event))
        .withColumn("_vigil", F.when(hit, F.col("v_type")))
        .withColumn("_n", F.row_number().over(per_rebalance))
        .filter(F.col("_n") == 1)
    )
    return out.select(
        *[c for c in SCHEMA.fieldNames() if c not in ("cause", "cause_detail", "basis")],
        F.when(F.col("_vigil").isNotNull(), F.lit("evicted-by-vigil")).otherwise(F.col("cause")).alias("cause"),
        F.when(
            F.col("_vigil").isNotNull(),
            F.concat(F.lit("vigil "), F.col("_vigil"), F.lit(" after "), F.col("cause_detail")),
        )
        .otherwise(F.col("cause_detail"))
        .alias("cause_detail"),
        F.when(F.col("_vigil").isNotNull(), common.notes(F.col("basis"), F.lit("cause: vigil event")))
        .otherwise(F.col("basis"))
        .alias("basis"),
    )
