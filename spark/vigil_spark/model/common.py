"""Column helpers the model's transforms share (pure: expressions only, no I/O)."""

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F  # noqa: N812 - the PySpark convention

from vigil_spark.parse import broker_log as bl


def seconds_between(later: Column, earlier: Column) -> Column:
    """`later - earlier` in seconds (double), null when either is null."""
    return (F.unix_micros(later) - F.unix_micros(earlier)) / F.lit(1_000_000.0)


def first_match(text: Column, rules: Sequence[tuple[str, str]], default: str | None) -> Column:
    """The value of the first (value, regex) rule whose regex finds a match in `text`, else `default`."""
    result: Column = F.lit(default)
    for value, pattern in reversed(rules):
        result = F.when(text.rlike(pattern), F.lit(value)).otherwise(result)
    return result


def client_reason(reason: Column) -> Column:
    """The KIP-800 client reason inside a broker reason text (null when it has none)."""
    found = F.regexp_extract(reason, bl.CLIENT_REASON_PATTERN, 1)
    return F.when(reason.rlike(bl.CLIENT_REASON_PATTERN), found)


def trigger_members(reason: Column) -> Column:
    """The member ids a `rebalance-prepared` reason names as its trigger, as `broker_log.trigger_members` reads
    them (an empty array when none)."""
    result: Column = F.array().cast("array<string>")
    for pattern in reversed(bl.TRIGGER_PATTERNS):
        found = F.split(F.regexp_extract(reason, pattern, 1), ", ")
        result = F.when(reason.rlike(pattern), found).otherwise(result)
    return F.when(reason.isNull(), F.array().cast("array<string>")).otherwise(result)


def left_cause(client: Column) -> Column:
    """ "left", refined by the client's reason exactly as `broker_log.left_cause` does."""
    return first_match(client, bl.CLIENT_REASON_RULES, "left")


def reason_detail(reason: Column) -> Column:
    """The `REASON_RULES` detail of a `rebalance-prepared` reason ("unrecognized" / "no-reason")."""
    detail = first_match(reason, [(d, p) for d, _, p in bl.REASON_RULES], "unrecognized")
    return F.when(reason.isNull(), F.lit("no-reason")).otherwise(detail)


def detail_cause(detail: Column, client: Column) -> Column:
    """The cause of a `REASON_RULES` detail, "left" refined by the client reason (as `broker_log.reason_cause`)."""
    result: Column = F.lit("unknown")
    for d, cause, _ in reversed(bl.REASON_RULES):
        value = left_cause(client) if cause == "left" else F.lit(cause)
        result = F.when(detail == F.lit(d), value).otherwise(result)
    return result


def event_cause(event: Column, reason: Column) -> Column:
    """The cause of a KIP-848 or streams member event, as `broker_log.event_cause` decides it."""
    fenced = first_match(reason, bl.FENCE_RULES, "unknown")
    result: Column = F.lit("unknown")
    for name, cause in bl.EVENT_CAUSES.items():
        value = left_cause(reason) if cause == "left" else F.lit(cause)
        result = F.when(event == F.lit(name), value).otherwise(result)
    return F.when(event.isin(*bl.FENCED_EVENTS), fenced).otherwise(result)


def notes(*parts: Column) -> Column:
    """The non-null notes joined with "; " (null when there is none)."""
    joined = F.concat_ws("; ", *parts)
    return F.when(joined == F.lit(""), F.lit(None).cast("string")).otherwise(joined)


def observed_rebalances(
    rows: DataFrame, group_type: str, *, started: Column, stabilized: Column, duration: Column, undetected: Column,
    unavailable: Column, unavailable_s: Column, basis: Column,
) -> DataFrame:  # fmt: skip
    """One `rebalances` row per observed generation or epoch (not a gap), in the table's column order: what the
    classic and the KIP-848 transforms share; they differ in the expressions passed."""
    return rows.select(
        "cluster",
        "group",
        F.lit(group_type).alias("group_type"),
        "generation",
        F.lit(1).alias("rebalances"),
        F.lit(False).alias("gap"),
        started.alias("started"),
        stabilized.alias("stabilized"),
        duration.alias("duration_s"),
        undetected.cast("double").alias("undetected_s"),
        "cause",
        "cause_detail",
        "client_reason",
        "trigger_members",
        F.col("members_before").cast("int").alias("members_before"),
        F.col("members_after").cast("int").alias("members_after"),
        "protocol",
        "rebalance_protocol",
        unavailable.cast("int").alias("partitions_unavailable"),
        unavailable_s.alias("unavailable_partition_s"),
        basis.alias("basis"),
    )


def first_per(frame: DataFrame, key: Sequence[str], *order: Column) -> DataFrame:
    """One row per `key`: the first by `order` — how a left join keeps its best match (or the row alone)."""
    window = Window.partitionBy(*key).orderBy(*order)
    return frame.withColumn("_n", F.row_number().over(window)).filter(F.col("_n") == 1).drop("_n")
