"""`prevented`: what vigil spared the groups, one row per save, priced against what stock Kafka would have done.

Kinds:
- `bridged-restart`: a `bridge-ended` event with outcome "rejoined" — the app was away `away_s` while vigil
  heartbeated for its static member, and took the member back. Stock: a static member away longer than its session
  timeout (`stock_s`) is expired, then rejoins — 2 rebalances, priced at the group's median partition-seconds per
  observed rebalance. The price of keeping the member instead: its partitions stay idle beyond the session
  timeout (stock would have moved them on expiry). `partition_s_saved` = the rebalances' price − that idle time
  (negative when the group's rebalances are cheaper than the member's idle partitions: then the bridge cost more
  than it saved, and the row says so in numbers).
  Away for less than the session timeout, static membership alone keeps the member: 0 avoided.
- `static-restart`: a member id that took over its static identity without a rebalance (`members.replaced`) and
  no bridge: static membership's work, listed so the restarts absorbed are all counted; 0 avoided by vigil. A
  replacement that did cost a rebalance (a `static-replacement` rebalance within `REPLACEMENT_WINDOW_S`: every
  streams group's on Kafka 4.4.0) absorbed nothing and is not listed.
- `stall-evicted`: a stall vigil ended by removing the member (`stalls.outcome` "evicted") `away_s` after the app
  last polled. Stock: the client leaves only when max.poll.interval expires (`stock_s`: the member's rebalance
  timeout, which Java and librdkafka set to max.poll.interval.ms); its partitions were idle until then.
  `partition_s_saved` = partitions × (stock_s − away_s); the rebalance happens either way (0 avoided).

A figure a source cannot give is null, and `basis` says which one and why.
"""

from typing import Final

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F  # noqa: N812 - the PySpark convention

from vigil_spark.model import common, consumer

COLUMNS: Final = (
    "cluster",
    "group",
    "kind",
    "at",
    "member_id",
    "instance_id",
    "pod",
    "away_s",
    "stock_s",
    "partitions",
    "rebalances_avoided",
    "partition_s_saved",
    "basis",
)
#: Rebalances a static member's expiry costs stock Kafka: one to drop it, one to take it back.
EXPIRY_REBALANCES: Final = 2
#: How far a replaced member's last sign may lie from the rebalance its replacement caused (the same batch).
REPLACEMENT_WINDOW_S: Final = 2.0


def member_timeouts(group_metadata: DataFrame, consumer_group_records: DataFrame) -> DataFrame:
    """(cluster, group, member_id) → session and rebalance timeouts (ms) and partitions held, from the latest
    GroupMetadata that lists the member, else (rebalance timeout only) its KIP-848 or streams member record."""
    gm = (
        group_metadata.filter(~F.col("tombstone") & F.col("members").isNotNull())
        .select("cluster", "group", "log_partition", "log_offset", F.explode("members").alias("m"))
        .select(
            "cluster",
            "group",
            "log_partition",
            "log_offset",
            F.col("m.member_id").alias("member_id"),
            F.col("m.session_timeout_ms").alias("session_ms"),
            F.col("m.rebalance_timeout_ms").alias("rebalance_ms"),
            F.when(F.col("m.assigned").isNull(), 0).otherwise(F.size("m.assigned")).alias("held"),
        )
    )
    member_types = (consumer.CONSUMER.member_type, consumer.STREAMS.member_type)
    records = consumer_group_records.filter(
        F.col("record_type").isin(*member_types) & ~F.col("tombstone") & F.col("member_id").isNotNull()
    ).select(
        "cluster", "group", "log_partition", "log_offset", "member_id", F.lit(None).cast("int").alias("session_ms"),
        F.get_json_object("record_json", "$.rebalance_timeout_ms").try_cast("int").alias("rebalance_ms"),
        F.lit(None).cast("int").alias("held"),
    )  # fmt: skip
    latest = common.first_per(
        gm.unionByName(records),
        ["cluster", "group", "member_id"],
        F.col("log_partition").desc(),
        F.col("log_offset").desc(),
    )
    return latest.select("cluster", "group", "member_id", "session_ms", "rebalance_ms", "held")


def rebalance_price(rebalances: DataFrame) -> DataFrame:
    """(cluster, group) → the median partition-seconds unavailable per observed rebalance with a figure, among
    those of a group that had members (a first join moves no partition: it would price every rebalance at 0)."""
    priced = rebalances.filter(
        ~F.col("gap") & F.col("unavailable_partition_s").isNotNull() & (F.col("members_before") > 0)
    )
    return priced.groupBy("cluster", "group").agg(
        F.median("unavailable_partition_s").alias("price"), F.count("*").alias("priced")
    )


def prevented(
    vigil_events: DataFrame,
    *,
    members: DataFrame,
    stalls: DataFrame,
    rebalances: DataFrame,
    group_metadata: DataFrame,
    consumer_group_records: DataFrame,
) -> DataFrame:
    """Every save (see the module doc); columns as `COLUMNS`."""
    timeouts = member_timeouts(group_metadata, consumer_group_records)
    key = ["cluster", "group", "member_id"]
    bridged = vigil_events.filter(
        (F.col("type") == F.lit("bridge-ended"))
        & (F.get_json_object("payload_json", "$.outcome") == F.lit("rejoined"))
        & F.col("member_id").isNotNull()
    ).select(
        *key,
        "instance_id",
        "pod",
        F.col("ts").alias("at"),
        (F.get_json_object("payload_json", "$.bridged_ms").try_cast("bigint") / F.lit(1000.0)).alias("away_s"),
    )
    restarts = _bridged_rows(
        bridged.join(timeouts, key, "left").join(rebalance_price(rebalances), ["cluster", "group"], "left")
    )
    static = (
        members.filter(F.col("leave_cause") == F.lit("static-replacement"))
        .join(bridged.select(*key), key, "left_anti")
        .join(_costly_replacements(rebalances), _near_a_costly_replacement(), "left_anti")
        .select(
            *key,
            "instance_id",
            F.lit(None).cast("string").alias("pod"),
            F.col("last_seen").alias("at"),
            F.lit(None).cast("double").alias("away_s"),
            F.lit(None).cast("double").alias("stock_s"),
            F.lit(None).cast("int").alias("partitions"),
            F.lit(0).alias("rebalances_avoided"),
            F.lit(0.0).alias("partition_s_saved"),
            F.lit(
                "static membership kept the member (its restart stayed within the session timeout): no vigil"
                " action needed"
            ).alias("basis"),
        )
        .withColumn("kind", F.lit("static-restart"))
    )
    evicted = _evicted_rows(stalls.filter(F.col("outcome") == F.lit("evicted")).join(timeouts, key, "left"))
    return restarts.unionByName(static).unionByName(evicted).select(*COLUMNS)


def _costly_replacements(rebalances: DataFrame) -> DataFrame:
    """Rebalances a static replacement caused: a streams group's returning static member bumps the epoch (Kafka
    4.4.0, tests/integration/test_spark_epoch_groups.py), as does a classic one whose metadata changed."""
    return rebalances.filter(~F.col("gap") & (F.col("cause") == F.lit("static-replacement"))).select(
        F.col("cluster").alias("r_cluster"), F.col("group").alias("r_group"), F.col("started").alias("r_started")
    )


def _near_a_costly_replacement(window_s: float = REPLACEMENT_WINDOW_S) -> Column:
    """The replaced member's last sign (its replacement) within `window_s` of a rebalance a replacement caused."""
    return (
        (F.col("r_cluster") == F.col("cluster"))
        & (F.col("r_group") == F.col("group"))
        & (F.abs(common.seconds_between(F.col("last_seen"), F.col("r_started"))) <= F.lit(window_s))
    )


def _bridged_rows(rows: DataFrame) -> DataFrame:
    stock = F.col("session_ms") / F.lit(1000.0)
    expired = F.col("away_s") >= stock
    avoided = F.when(expired, F.lit(EXPIRY_REBALANCES)).when(stock.isNotNull(), F.lit(0))
    kept_idle = F.greatest(F.col("away_s") - stock, F.lit(0.0)) * F.col("held")
    saved = F.when(~expired, F.lit(0.0)).otherwise(avoided * F.col("price") - kept_idle)
    basis = common.notes(
        F.when(stock.isNull(), F.lit("session timeout unknown: the member is in no GroupMetadata record")),
        F.when(
            expired,
            F.lit("stock: expired after its session timeout, then rejoined (2 rebalances at the group's median"
                  " partition-seconds, less the member's partitions kept idle beyond the session)"),
        ).when(~expired, F.lit("stock: back within its session timeout, static membership alone keeps it")),
        F.when(expired & F.col("price").isNull(), F.lit("no observed rebalance of the group to price it")),
        F.when(expired & F.col("held").isNull(), F.lit("partitions held unknown")),
    )  # fmt: skip
    return rows.select(
        "cluster", "group", F.lit("bridged-restart").alias("kind"), "at", "member_id", "instance_id", "pod",
        "away_s", stock.alias("stock_s"), F.col("held").alias("partitions"), avoided.alias("rebalances_avoided"),
        saved.alias("partition_s_saved"), basis.alias("basis"),
    )  # fmt: skip


def _evicted_rows(rows: DataFrame) -> DataFrame:
    away = common.seconds_between(F.coalesce("acted", "detected"), F.col("started"))
    stock = F.col("rebalance_ms") / F.lit(1000.0)
    partitions = F.coalesce(F.col("partitions"), F.col("held"))
    saved: Column = partitions * F.greatest(stock - away, F.lit(0.0))
    basis = common.notes(
        F.lit("stock: the client leaves when max.poll.interval (its rebalance timeout) expires; the rebalance"
              " happens either way"),
        F.when(stock.isNull(), F.lit("max.poll.interval unknown: the member is in no GroupMetadata or member record")),
        F.when(partitions.isNull(), F.lit("partitions unknown: no beacon count and no GroupMetadata assignment")),
    )  # fmt: skip
    return rows.select(
        "cluster", "group", F.lit("stall-evicted").alias("kind"), F.coalesce("acted", "detected").alias("at"),
        "member_id", "instance_id", "pod", away.alias("away_s"), stock.alias("stock_s"),
        partitions.cast("int").alias("partitions"), F.lit(0).alias("rebalances_avoided"),
        saved.alias("partition_s_saved"), basis.alias("basis"),
    )  # fmt: skip
