"""`members`: one row per member id of every group, with its identity's churn and a flapping flag.

A member id is one join: classic and KIP-848 coordinators hand out a new id whenever a consumer (re)joins
without one (a restart, an eviction, a static replacement). So churn is counted per IDENTITY — the static
instance id, else the client id (GroupMetadata), else the member id without its trailing UUID (librdkafka and
Java build ids as `<client.id>-<uuid>`, static ones `<instance.id>-<uuid>`). Sources: members of GroupMetadata
records (classic), member records (type 5, KIP-848; 19, streams; 10, share), and the broker log's join/leave
lines.

- `replaced`: this member id took over its static identity from the previous one without a new join — a
  restart absorbed by static membership (a bridged restart, a coordinated rollout; a streams group on Kafka 4.4.0
  still bumps its epoch for it: `rebalances` has that row). Known from the log (the predecessor's
  `static-member-replaced`, a KIP-848 or streams `*-member-replaced`) or, with GroupMetadata only, from the
  predecessor being in the generation this member id first appears in (no rebalance between them).
- `joins` (of the identity): its member ids that joined afresh (not `replaced`); `replacements`: those that were
  `replaced`; `leaves`: its member ids that ended other than by a static replacement (a leave, expiry or fence in
  the log, or a KIP-848 member tombstone — one per member id, however many sources tell of it); `churn` = joins +
  leaves: the membership changes that cost a rebalance; `flapping`: at least `flap_joins` joins of the identity
  within `flap_window_s` (static replacements are vigil's and static membership's work, not flapping).
- `leave_cause`: how this member id went, in the rebalance vocabulary (null if it did not or no source says).
- `generations`: the classic generations the member id was in (GroupMetadata); null for KIP-848 members.
"""

from typing import Final

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F  # noqa: N812 - the PySpark convention

from vigil_spark.model import common, consumer
from vigil_spark.parse import broker_log as bl

#: Broker log events that start a member id's life, and those that end it.
JOIN_EVENTS: Final = (
    "member-joining",
    "member-joined",
    "static-member-joined",
    "consumer-member-joined",
    "consumer-member-replaced",
    "streams-member-joined",
    "streams-member-replaced",
    "share-member-joined",
)
LEAVE_EVENTS: Final = (
    "member-left",
    "pending-member-left",
    "member-failed",
    "pending-member-expired",
    "static-member-replaced",
    "consumer-member-left",
    "consumer-member-fenced",
    "streams-member-left",
    "streams-member-fenced",
    "share-member-left",
)
_UUID_TAIL: Final = r"-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"

COLUMNS: Final = (
    "cluster",
    "group",
    "member_id",
    "instance_id",
    "client_id",
    "client_host",
    "identity",
    "first_seen",
    "last_seen",
    "generations",
    "left",
    "leave_cause",
    "joins",
    "leaves",
    "churn",
    "flapping",
    "replaced",
    "replacements",
    "basis",
)


def _leave_cause(event: Column, reason: Column) -> Column:
    return (
        F.when(event.isin("member-failed", "pending-member-expired"), F.lit("heartbeat-expiry"))
        .when(event.isin("member-left", "pending-member-left"), common.left_cause(reason))
        .when(event == F.lit("static-member-replaced"), F.lit("static-replacement"))
        .when(event.isin(*bl.EVENT_CAUSES), common.event_cause(event, reason))
    )


def _appearances(group_metadata: DataFrame, consumer_group_records: DataFrame, broker_log: DataFrame) -> DataFrame:
    s = F.lit(None).cast("string")
    no = F.lit(False)
    gm = (
        group_metadata.filter(~F.col("tombstone") & F.col("members").isNotNull())
        .select("cluster", "group", "generation", F.coalesce("state_ts", "log_ts").alias("ts"), F.explode("members"))
        .select(
            "cluster",
            "group",
            F.col("col.member_id").alias("member_id"),
            F.col("col.instance_id").alias("instance_id"),
            F.col("col.client_id").alias("client_id"),
            F.col("col.client_host").alias("client_host"),
            "ts",
            "generation",
            F.lit("gm").alias("kind"),
            s.alias("leave_cause"),
            no.alias("replaced"),
        )
    )
    member_records = F.col("record_type").isin(*(k.member_type for k in consumer.EPOCH_GROUPS))
    rec = consumer_group_records.filter(member_records & F.col("member_id").isNotNull()).select(
        "cluster",
        "group",
        "member_id",
        F.get_json_object("record_json", "$.instance_id").alias("instance_id"),
        F.get_json_object("record_json", "$.client_id").alias("client_id"),
        F.get_json_object("record_json", "$.client_host").alias("client_host"),
        F.col("log_ts").alias("ts"),
        F.lit(None).cast("int").alias("generation"),
        F.when(F.col("tombstone"), F.lit("leave")).otherwise(F.lit("record")).alias("kind"),
        s.alias("leave_cause"),
        no.alias("replaced"),
    )
    log = broker_log.filter(
        F.col("event").isin(*JOIN_EVENTS, *LEAVE_EVENTS) & F.col("member_id").isNotNull() & F.col("group").isNotNull()
    ).select(
        "cluster",
        "group",
        "member_id",
        "instance_id",
        s.alias("client_id"),
        s.alias("client_host"),
        "ts",
        F.lit(None).cast("int").alias("generation"),
        F.when(F.col("event").isin(*LEAVE_EVENTS), F.lit("leave")).otherwise(F.lit("join")).alias("kind"),
        _leave_cause(F.col("event"), F.col("reason")).alias("leave_cause"),
        F.col("event").isin("consumer-member-replaced", "streams-member-replaced").alias("replaced"),
    )
    return gm.unionByName(rec).unionByName(log)


def members(
    group_metadata: DataFrame,
    consumer_group_records: DataFrame,
    broker_log: DataFrame,
    *,
    flap_joins: int = 3,
    flap_window_s: int = 3600,
) -> DataFrame:
    """One row per (cluster, group, member id); identity-level joins, leaves, churn and flapping on each row."""
    seen = _appearances(group_metadata, consumer_group_records, broker_log)
    is_leave = F.col("kind") == F.lit("leave")
    gm_generation = F.when(F.col("kind") == F.lit("gm"), F.col("generation"))
    per_member = seen.groupBy("cluster", "group", "member_id").agg(
        F.max("instance_id").alias("instance_id"),
        F.max("client_id").alias("client_id"),
        F.max("client_host").alias("client_host"),
        F.min("ts").alias("first_seen"),
        F.max("ts").alias("last_seen"),
        F.count_distinct("generation").alias("generations"),
        F.min(gm_generation).alias("_first_generation"),
        F.max(gm_generation).alias("_last_generation"),
        F.max(is_leave).alias("left"),
        # the last leave that names a cause: a KIP-848 member's cause-less tombstone follows the log's line by ~1 ms
        F.max_by("leave_cause", F.when(is_leave & F.col("leave_cause").isNotNull(), F.col("ts"))).alias("leave_cause"),
        # a member id is one join and ends once, however many sources tell of its end (log line and tombstone)
        F.max(F.when(is_leave, 1).otherwise(0)).alias("leave_events"),
        F.max("replaced").alias("_replaced_in_log"),
        F.max(F.col("kind") == F.lit("gm")).alias("in_gm"),
        F.max(F.col("kind") == F.lit("join")).alias("in_log"),
    )
    identity = F.coalesce(
        F.col("instance_id"), F.col("client_id"), F.regexp_replace(F.col("member_id"), _UUID_TAIL, "")
    )
    per_member = per_member.withColumn("identity", identity)
    ident = Window.partitionBy("cluster", "group", "identity")
    in_order = ident.orderBy("first_seen", "member_id")
    replacement = F.lit("static-replacement")
    # came by replacement: the log says so, or (GroupMetadata) the static predecessor shares its first generation
    replaced = (
        F.coalesce(F.col("_replaced_in_log"), F.lit(False))
        | (F.lag("leave_cause").over(in_order) == replacement)
        | (F.col("instance_id").isNotNull() & (F.lag("_last_generation").over(in_order) >= F.col("_first_generation")))
    )
    per_member = per_member.withColumn("replaced", F.coalesce(replaced, F.lit(False)))
    # the predecessor of a replacement went by it, whether or not a source of its own says so (a KIP-848 tombstone)
    succeeded = F.coalesce(F.lead("replaced").over(in_order), F.lit(False))
    per_member = per_member.withColumn("leave_cause", F.when(succeeded, replacement).otherwise(F.col("leave_cause")))
    per_member = per_member.withColumn("left", F.col("left") | succeeded)
    replaced_out = F.coalesce(F.col("leave_cause") == replacement, F.lit(False))
    fresh = F.when(~F.col("replaced"), F.col("first_seen"))
    by_time = ident.orderBy(F.unix_seconds("first_seen")).rangeBetween(-flap_window_s, 0)
    per_member = (
        per_member.withColumn("joins", F.count(fresh).over(ident))
        .withColumn("replacements", F.count(F.when(F.col("replaced"), 1)).over(ident))
        .withColumn("leaves", F.sum(F.when(replaced_out, 0).otherwise(F.col("leave_events"))).over(ident))
        .withColumn("_recent", F.count(fresh).over(by_time))
        .withColumn("flapping", F.max("_recent").over(ident) >= F.lit(flap_joins))
        .withColumn("churn", F.col("joins") + F.col("leaves"))
    )
    basis = common.notes(
        F.when(F.col("in_gm"), F.lit("members of GroupMetadata records")),
        F.when(F.col("in_log"), F.lit("broker log join/leave lines")),
        F.when(~F.col("in_gm") & ~F.col("in_log"), F.lit("KIP-848 member records or log leave lines only")),
        F.when(F.col("instance_id").isNull() & F.col("client_id").isNull(), F.lit("identity: member id prefix")),
    )
    return per_member.select(
        "cluster",
        "group",
        "member_id",
        "instance_id",
        "client_id",
        "client_host",
        "identity",
        "first_seen",
        "last_seen",
        # generations are the classic groups' (GroupMetadata); a KIP-848 member's epochs are not counted here
        F.when(F.col("in_gm"), F.col("generations").cast("int")).alias("generations"),
        F.coalesce(F.col("left"), F.lit(False)).alias("left"),
        "leave_cause",
        F.col("joins").cast("int").alias("joins"),
        F.col("leaves").cast("int").alias("leaves"),
        F.col("churn").cast("int").alias("churn"),
        "flapping",
        "replaced",
        F.col("replacements").cast("int").alias("replacements"),
        basis.alias("basis"),
    )
