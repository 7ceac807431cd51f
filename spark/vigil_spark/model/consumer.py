"""Epoch-based groups' rebalances: KIP-848 consumer groups, KIP-1071 streams groups, KIP-932 share groups (pure).

The three coordinators keep the same books under different record types: a group epoch (ConsumerGroupMetadata,
type 3 / StreamsGroupMetadata, 17 / ShareGroupMetadata, 11), members (5 / 19 / 10) and each member's current
assignment with its epoch, state and what it still has to revoke (8 / 22 / 14: a share group revokes nothing, its
partitions are shared), and they log a line per epoch bump. So one transform reads all three, told by an
`EpochGroups` which types, states and lines are whose. See `vigil_spark.model.rebalances` for what each column
means and where it comes from.
"""

from dataclasses import dataclass
from typing import Final

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F  # noqa: N812 - the PySpark convention

from vigil_core.consumer_offsets.records import SHARE_GROUP_RECORDS
from vigil_spark.model import common, generations
from vigil_spark.parse import broker_log as bl


@dataclass(frozen=True, slots=True)
class EpochGroups:
    """Where one epoch-based group type keeps its epochs, members and assignments, and how its lines read."""

    group_type: str
    metadata_type: int
    member_type: int
    assignment_type: int
    stable_state: int
    """The assignment record's state once the member reached the epoch (consumer 0 STABLE, streams 1 STABLE)."""
    pending_field: str | None
    """The assignment record's list of what the member still has to give up (partitions or active tasks; None
    for share groups: nothing is ever pending revocation)."""
    bump_event: str
    member_events: tuple[str, ...]
    """The member lines that explain a bump (`broker_log.EVENT_CAUSES`)."""
    metadata_name: str
    pending_basis: str
    first_epoch: int
    """The epoch of a new group's first record and bump line: a streams or share group's is 2 (Kafka 4.4.0
    measured: no record or line shows epoch 1; tests/integration/test_spark_epoch_groups.py)."""

    def assignment_json(self) -> str:
        if self.pending_field is None:
            return "struct<member_epoch:int,state:int>"
        return f"struct<member_epoch:int,state:int,{self.pending_field}:array<struct<partitions:array<int>>>>"

    def pending(self, parsed: Column) -> Column:
        return parsed[self.pending_field]


CONSUMER: Final = EpochGroups(
    group_type="consumer",
    metadata_type=3,
    member_type=5,
    assignment_type=8,
    stable_state=0,
    pending_field="partitions_pending_revocation",
    bump_event="epoch-bumped",
    member_events=tuple(e for e in bl.EVENT_CAUSES if e.startswith("consumer-member-")),
    metadata_name="ConsumerGroupMetadata",
    pending_basis="unavailable: KIP-848, seconds partitions were pending revocation (upper bound)",
    first_epoch=1,
)
STREAMS: Final = EpochGroups(
    group_type="streams",
    metadata_type=17,
    member_type=19,
    assignment_type=22,
    stable_state=1,
    pending_field="active_tasks_pending_revocation",
    bump_event="streams-epoch-bumped",
    member_events=tuple(e for e in bl.EVENT_CAUSES if e.startswith("streams-member-")),
    metadata_name="StreamsGroupMetadata",
    pending_basis="unavailable: streams, seconds active tasks were pending revocation, a task counted as one "
    "partition (upper bound)",
    first_epoch=2,
)
SHARE: Final = EpochGroups(
    group_type="share",
    metadata_type=11,
    member_type=10,
    assignment_type=14,
    stable_state=0,
    pending_field=None,
    bump_event="epoch-bumped",  # a share group's coordinator lines are a KIP-848 group's, but for joins and leaves
    member_events=("share-member-joined", "share-member-left", "consumer-member-fenced"),
    metadata_name="ShareGroupMetadata",
    pending_basis="unavailable: none, a share group's partitions are shared (a departed member's acquired records "
    "return when their acquisition lock expires)",
    first_epoch=2,
)

#: Every epoch-based group type, in the order the model reads them.
EPOCH_GROUPS: Final = (CONSUMER, STREAMS, SHARE)


def share_groups(consumer_group_records: DataFrame, broker_log: DataFrame) -> DataFrame:
    """(cluster, group) of every group whose records or log lines say share group: its other lines ("Bumped group
    epoch", "fenced") read exactly like a KIP-848 group's, so they go to the share model only."""
    by_record = consumer_group_records.filter(F.col("record_type").isin(*SHARE_GROUP_RECORDS)).select(
        "cluster", "group"
    )
    by_line = broker_log.filter(F.col("event").isin(*bl.SHARE_EVENTS)).select("cluster", "group")
    return by_record.unionByName(by_line).distinct()


#: "record <type>" / "line <event>" → the epoch-based type it shows epochs of (`present`).
_MARKERS: Final = {
    **{f"record {k.metadata_type}": k for k in EPOCH_GROUPS if k is not SHARE},
    **{f"line {k.bump_event}": k for k in EPOCH_GROUPS if k is not SHARE},
    **{f"record {t}": SHARE for t in SHARE_GROUP_RECORDS},
    **{f"line {e}": SHARE for e in bl.SHARE_EVENTS},
}


def present(consumer_group_records: DataFrame, broker_log: DataFrame) -> tuple[EpochGroups, ...]:
    """The epoch-based group types the input has epochs of (a metadata record or a bump line) — share: any share
    record or line — so the model builds only their pipelines (one small job: a pipeline over no input still
    costs Spark its plans and jobs, in every report and test).

    Skipping a type changes no row: its epochs come only from those records and lines."""
    by_record = consumer_group_records.select(
        F.concat(F.lit("record "), F.col("record_type").cast("string")).alias("m")
    )
    by_line = broker_log.filter(F.col("generation").isNotNull() | F.col("event").isin(*bl.SHARE_EVENTS)).select(
        F.concat(F.lit("line "), F.col("event")).alias("m")
    )
    markers = by_record.unionByName(by_line).filter(F.col("m").isin(*_MARKERS)).distinct().collect()
    found = {_MARKERS[row["m"]] for row in markers}
    return tuple(k for k in EPOCH_GROUPS if k in found)


def consumer_epochs(
    consumer_group_records: DataFrame, broker_log: DataFrame, kind: EpochGroups = CONSUMER
) -> DataFrame:
    """Every group epoch any source shows, per incarnation, with its start (record or log line). A streams
    group rewrites its metadata record at the same epoch (4.4): the first record of an epoch marks it."""
    null = F.lit(None)
    rec = consumer_group_records.filter(
        (F.col("record_type") == kind.metadata_type) & (F.col("tombstone") | F.col("epoch").isNotNull())
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
    log = broker_log.filter((F.col("event") == kind.bump_event) & F.col("generation").isNotNull()).select(
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


def _member_deltas(consumer_group_records: DataFrame, kind: EpochGroups) -> DataFrame:
    """Member metadata records with +1 (new member), -1 (tombstone of a live one) or 0 (update)."""
    per_member = Window.partitionBy("cluster", "group", "member_id").orderBy("log_partition", "log_offset")
    prev_tomb = F.lag("tombstone").over(per_member)
    delta = (
        F.when(~F.col("tombstone") & (prev_tomb.isNull() | prev_tomb), 1)
        .when(F.col("tombstone") & (prev_tomb == F.lit(False)), -1)
        .otherwise(0)
    )
    return consumer_group_records.filter(F.col("record_type") == kind.member_type).withColumn("delta", delta)


def consumer_rebalances(
    consumer_group_records: DataFrame, broker_log: DataFrame, kind: EpochGroups = CONSUMER
) -> DataFrame:
    """The rebalances of one epoch-based group type, one per group epoch (no vigil attribution yet)."""
    records = consumer_group_records.filter(
        F.col("record_type").isin(kind.metadata_type, kind.member_type, kind.assignment_type)
    )
    epochs = consumer_epochs(records, broker_log, kind).withColumn("start_ts", F.coalesce("bump_ts", "rec_ts"))
    seq = generations.sequence(epochs)
    by_gen = Window.partitionBy("cluster", "group", "incarnation").orderBy("generation")
    seq = (
        seq.withColumn("protocol", F.col("assignor"))
        .withColumn("rebalance_protocol", F.lit(kind.group_type))
        .withColumn("prev_start_ts", F.lag("start_ts").over(by_gen))
        .withColumn("next_start_ts", F.lead("start_ts").over(by_gen))
    )
    gaps = generations.gap_rows(seq, kind.group_type, F.col("prev_start_ts"), F.col("start_ts"), kind.first_epoch)
    rows = seq.filter(F.col("generation") >= 1)
    rows = _with_consumer_members(rows, records, kind)
    rows = _with_consumer_end(rows, records, kind)
    rows = _with_consumer_cause(rows, records, broker_log, kind)
    rows = _with_pending_revocation(rows, records, kind)
    pending_basis = (
        F.lit(kind.pending_basis)
        if kind.pending_field is None
        else F.when(
            F.col("pending_s").isNull(),
            F.lit("unavailable unknown: no member assignment records with anything pending revocation"),
        ).otherwise(F.lit(kind.pending_basis))
    )
    adjacent = F.col("prev_generation") == F.col("generation") - 1
    # the group's first epoch: its first member joined
    first = F.col("prev_generation").isNull() & (F.col("generation") <= kind.first_epoch)
    before = F.when(adjacent, F.lag("members_after").over(by_gen)).when(first, F.lit(0))
    rows = rows.withColumn("members_before", before)
    duration = common.seconds_between(F.col("end_ts"), F.col("start_ts"))
    basis = common.notes(
        F.when(F.col("bump_ts").isNotNull(), F.lit("started: broker log")).otherwise(
            F.lit(f"started: {kind.metadata_name} record")
        ),
        F.when(
            F.col("end_ts").isNull(),
            F.lit(
                f"stabilized unknown: no member assignment record (type {kind.assignment_type}) in state STABLE at"
                " this epoch"
            ),
        ).otherwise(F.lit("stabilized: last member assignment record at this epoch")),
        F.col("cause_basis"),
        F.when(F.col("members_after").isNull(), F.lit(f"members unknown: no member records (type {kind.member_type})")),
        pending_basis,
        F.when(
            F.col("cause") == F.lit("heartbeat-expiry"),
            F.lit(
                f"undetected unknown: {kind.group_type} group records carry no session timeout (the fenced member's"
                " partitions sat idle up to the group's session timeout before this epoch, not counted)"
            ),
        ),
    )
    observed_rows = common.observed_rebalances(
        rows, kind.group_type, started=F.col("start_ts"), stabilized=F.col("end_ts"), duration=duration,
        undetected=F.lit(None), unavailable=F.col("pending_partitions"), unavailable_s=F.col("pending_s"), basis=basis,
    )  # fmt: skip
    return observed_rows.unionByName(gaps)


def _with_consumer_members(rows: DataFrame, records: DataFrame, kind: EpochGroups) -> DataFrame:
    """Live members (member records not tombstoned) as of each epoch record."""
    deltas = _member_deltas(records, kind).select("cluster", "group", "log_partition", "log_offset", "delta")
    # every metadata record marks its place in the member stream; an epoch's first is where `rows` joins back, the
    # rest find no partner. Marked from `rows`, the join's side would copy the whole epoch pipeline (one more time
    # per later self-join: Spark serializes that plan into every task that reads it)
    markers = records.filter(F.col("record_type") == kind.metadata_type).select(
        "cluster", "group", "log_partition", "log_offset", F.lit(None).cast("int").alias("delta")
    )
    stream = Window.partitionBy("cluster", "group").orderBy("log_partition", "log_offset")
    has_members = records.filter(F.col("record_type") == kind.member_type).select("cluster", "group").distinct()
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


def _assignments(records: DataFrame, kind: EpochGroups) -> DataFrame:
    """The member assignment records, their JSON parsed as `j`."""
    return records.filter((F.col("record_type") == kind.assignment_type) & ~F.col("tombstone")).withColumn(
        "j", F.from_json("record_json", kind.assignment_json())
    )


def _with_consumer_end(rows: DataFrame, records: DataFrame, kind: EpochGroups) -> DataFrame:
    """The last member assignment record reaching the epoch in state STABLE, capped by the next bump."""
    reached = (
        _assignments(records, kind)
        .filter(F.col("j.state") == kind.stable_state)
        .groupBy("cluster", "group", F.col("epoch").alias("generation"))
        .agg(F.max("log_ts").alias("reach_ts"))
    )
    joined = rows.join(reached, ["cluster", "group", "generation"], "left")
    capped = F.when(
        F.col("next_start_ts").isNotNull() & (F.col("reach_ts") > F.col("next_start_ts")), F.col("next_start_ts")
    ).otherwise(F.col("reach_ts"))
    return joined.withColumn("end_ts", capped)


def _with_consumer_cause(
    rows: DataFrame, records: DataFrame, broker_log: DataFrame, kind: EpochGroups, window_s: int = 2
) -> DataFrame:
    """The member line just before the bump (log), else the member record appended with the epoch record."""
    events = broker_log.filter(F.col("event").isin(*kind.member_events)).select(
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
    deltas = _member_deltas(records, kind).select(
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
                F.col("e_event").isin(f"{kind.group_type}-member-left", *bl.FENCED_EVENTS), F.col("e_reason")
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


def _with_pending_revocation(rows: DataFrame, records: DataFrame, kind: EpochGroups) -> DataFrame:
    """Partition-seconds pending revocation, attributed to the epoch whose window holds the record."""
    if kind.pending_field is None:
        none = rows.withColumn("pending_partitions", F.lit(None).cast("long"))
        return none.withColumn("pending_s", F.lit(None).cast("double"))
    parsed = _assignments(records, kind)
    per_member = Window.partitionBy("cluster", "group", "member_id").orderBy("log_partition", "log_offset")
    pending_count = F.aggregate(
        F.coalesce(kind.pending(F.col("j")), F.array().cast("array<struct<partitions:array<int>>>")),
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
    # summed over the epoch's matches in place (KEY is unique in `rows`), not aggregated and joined back: a join
    # back would be a self-join copying the whole epoch pipeline
    first = F.col("q_ts").asc_nulls_last()  # the same order as `first_per`'s: one window operator for both
    whole = (
        Window.partitionBy(*generations.KEY)
        .orderBy(first)
        .rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    )
    summed = (
        rows.join(pending, cond, "left")
        .withColumn("pending_partitions", F.sum("q_k").over(whole))
        .withColumn("pending_s", F.sum("q_s").over(whole))
    )
    return common.first_per(summed, generations.KEY, first).drop("q_cluster", "q_group", "q_ts", "q_k", "q_s")
