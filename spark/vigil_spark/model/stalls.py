"""`stalls`: one row per stall vigil detected (from vigil's events), with what vigil did and how it ended.

- `detected`: the `stall-detected` event; `started` = detected − `stalled_for_ms` (when the app last polled);
- `ended`: the member's next `stall-ended` before its next `stall-detected` (null while open or when the member
  was removed and never reported again); `duration_s`: the `stall-ended` payload's `stalled_for_ms` (how long
  the app went without polling), else `ended − started`;
- `action`: the eviction request/answer for the member in [detected, end of the stall): its payload's `action`;
  with none, the `stall-detected` payload's `action` (schema 4: "leave-group", "restart" — the sidecar fails the
  app's probe — or "alert"; null from older sidecars); `outcome`: "evicted", "already-gone", "eviction-failed:<error>",
  "refused:<cause>", "requested" (no answer seen), "recovered" (ended with no action) or "open"; `acted`: when that
  request or answer was written;
- `partitions`: how many partitions the member held when the stall was detected (the app's beacon; null unknown).
"""

from typing import Final

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F  # noqa: N812 - the PySpark convention

from vigil_spark.model import common

COLUMNS: Final = (
    "cluster",
    "group",
    "member_id",
    "instance_id",
    "pod",
    "detected",
    "started",
    "ended",
    "duration_s",
    "signal",
    "stall_timeout_s",
    "partitions",
    "action",
    "acted",
    "outcome",
    "basis",
)
_ACTIONS: Final = ("eviction-requested", "eviction-done", "eviction-refused")


def _long(payload: Column, path: str) -> Column:
    return F.get_json_object(payload, path).try_cast("bigint")


def stalls(vigil_events: DataFrame) -> DataFrame:
    """Stalls with their end, action and outcome."""
    member = ["cluster", "group", "member_id"]
    detected = (
        vigil_events.filter(F.col("type") == "stall-detected")
        .select(
            *member,
            "instance_id",
            "pod",
            F.col("ts").alias("detected"),
            _long(F.col("payload_json"), "$.stalled_for_ms").alias("d_ms"),
            _long(F.col("payload_json"), "$.stall_timeout_ms").alias("timeout_ms"),
            F.get_json_object("payload_json", "$.signal").alias("signal"),
            F.get_json_object("payload_json", "$.action").alias("d_action"),
            _long(F.col("payload_json"), "$.assigned_partitions").cast("int").alias("partitions"),
        )
        .withColumn("next_detected", F.lead("detected").over(Window.partitionBy(*member).orderBy("detected")))
    )
    stall_key = [*member, "detected"]
    ended = vigil_events.filter(F.col("type") == "stall-ended").select(
        *[F.col(c).alias(f"e_{c}") for c in member],
        F.col("ts").alias("e_ts"),
        _long(F.col("payload_json"), "$.stalled_for_ms").alias("e_ms"),
    )
    in_stall = [(F.col(f"e_{c}") == F.col(c)) for c in member]
    cond = in_stall[0] & in_stall[1] & in_stall[2] & (F.col("e_ts") >= F.col("detected"))
    cond = cond & (F.col("next_detected").isNull() | (F.col("e_ts") < F.col("next_detected")))
    rows = common.first_per(detected.join(ended, cond, "left"), stall_key, F.col("e_ts").asc_nulls_last())
    acts = vigil_events.filter(F.col("type").isin(*_ACTIONS)).select(
        *[F.col(c).alias(f"a_{c}") for c in member],
        F.col("ts").alias("a_ts"),
        F.col("type").alias("a_type"),
        F.get_json_object("payload_json", "$.action").alias("a_action"),
        F.get_json_object("payload_json", "$.kafka_error").alias("a_error"),
        F.get_json_object("payload_json", "$.already_gone").alias("a_gone"),
        F.get_json_object("payload_json", "$.cause").alias("a_cause"),
    )
    until = F.coalesce(F.col("e_ts"), F.col("next_detected"))
    same = [(F.col(f"a_{c}") == F.col(c)) for c in member]
    acond = same[0] & same[1] & same[2] & (F.col("a_ts") >= F.col("detected"))
    acond = acond & (until.isNull() | (F.col("a_ts") <= until))
    # the answer (done/refused) wins over the request; among answers the last one
    rank = F.when(F.col("a_type") == "eviction-requested", 0).otherwise(1)
    rows = common.first_per(rows.join(acts, acond, "left"), stall_key, rank.desc(), F.col("a_ts").desc_nulls_last())
    outcome = (
        F.when(
            F.col("a_type") == "eviction-done",
            F.when(F.col("a_gone") == F.lit("true"), F.lit("already-gone"))
            .when(F.coalesce(F.col("a_error"), F.lit("NONE")) == F.lit("NONE"), F.lit("evicted"))
            .otherwise(F.concat(F.lit("eviction-failed:"), F.col("a_error"))),
        )
        .when(F.col("a_type") == "eviction-refused", F.concat(F.lit("refused:"), F.coalesce("a_cause", F.lit("?"))))
        .when(F.col("a_type") == "eviction-requested", F.lit("requested"))
        .when(F.col("e_ts").isNotNull(), F.lit("recovered"))
        .otherwise(F.lit("open"))
    )
    started = F.timestamp_micros(F.unix_micros("detected") - F.coalesce(F.col("d_ms"), F.lit(0)) * F.lit(1000))
    duration = F.coalesce(F.col("e_ms") / F.lit(1000.0), common.seconds_between(F.col("e_ts"), started))
    basis = common.notes(
        F.when(F.col("d_ms").isNull(), F.lit("started = detected: no stalled_for_ms in the event")),
        F.when(F.col("e_ts").isNull(), F.lit("no stall-ended event: duration unknown")),
        F.when(F.col("e_ms").isNull() & F.col("e_ts").isNotNull(), F.lit("duration from event times")),
    )
    return rows.select(
        *member,
        "instance_id",
        "pod",
        "detected",
        started.alias("started"),
        F.col("e_ts").alias("ended"),
        duration.alias("duration_s"),
        "signal",
        (F.col("timeout_ms") / F.lit(1000.0)).alias("stall_timeout_s"),
        "partitions",
        F.coalesce(F.col("a_action"), F.col("d_action")).alias("action"),
        F.col("a_ts").alias("acted"),
        outcome.alias("outcome"),
        basis.alias("basis"),
    )
