"""OffsetCommit records of `__consumer_offsets` decoded with Spark SQL byte functions (no Python UDF).

Offset commits are the bulk of the topic, so they stay in the JVM, never in Python workers (10M records: 1.5–1.8 M/s
with the JVM readers below, 2.1–2.6× a single-process `struct` decoder; bench/RESULTS.md). Lengths, positions, checks
and strings are SQL (`substring`, `length`, `make_valid_utf8`); integers come from one of two sets of `Readers`:

- `JVM`: vigil's byte readers (`vigil_spark/jvm/KafkaBytes.java`, registered as `vigil_int16` … by
  `register_jvm_readers` when their jar is on the classpath) — about four times cheaper per integer.
- `CONV`: pure SQL, the fallback without the jar: `conv(hex(substring(...)), 16, …)`; int64 through
  `conv(…, 16, -10)`, which yields the signed two's-complement value; int16/int32 through the unsigned value,
  sign-fixed by modular arithmetic. `cast(conv(hex(x), 16, 10) as bigint)` would throw on negatives under
  ANSI mode (Spark 4's default), and so would casting a garbage length to int.

Positions go through `try_cast` (null, not an error), and a record is accepted only if its lengths add up to
exactly its size, so a damaged record yields nulls and `problem`, never an error, with either set.

The semantics are those of `vigil_core.consumer_offsets.records` (the differential tests hold both sets and it
together): non-nullable strings with a null length are corrupt, flexible v4 reads compact strings (unsigned
varint length + 1, at most 5 bytes) and a tagged-field section whose tag 0 is the 16-byte topic id, and a
record must end exactly where its schema does. Strings are UTF-8 with malformed bytes replaced, as Java and
the Python decoder do.
"""

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812 - the PySpark convention
from pyspark.sql import types as T  # noqa: N812 - the PySpark convention

#: Key types that take this path (0 legacy, 1 current OffsetCommitKey); everything else goes to Python.
OFFSET_COMMIT_TYPES = (0, 1)
#: Highest OffsetCommitValue version known (same as `records._VALUES`).
MAX_VALUE_VERSION = 4
#: Kafka's readUnsignedVarint refuses longer encodings.
_MAX_VARINT_BYTES = 5

#: Passthrough columns of the Kafka source, renamed so they cannot be confused with the committed partition.
PASSTHROUGH = {"partition": "log_partition", "offset": "log_offset", "timestamp": "log_timestamp"}

PROBLEM_KEY = "key"
PROBLEM_VALUE = "value"
PROBLEM_VERSION = "value_version"


# -- byte readers -----------------------------------------------------------------------------------------
# Each reader mentions its position once: positions are built from earlier reads, and an expression used twice
# is copied twice by the optimizer, so repeated mentions grow the plan exponentially (a first version made a
# 1 MB plan and ran the driver out of heap). Values used more than once are bound with `_let` or staged.
# Reads past the end give null (substring of nothing, conv('') is null) or a short value; either way the
# length checks of `offset_commits` reject the record. Positions go through `try_cast` (null, not an error).


def _let(value: Column, body: Callable[[Column], Column]) -> Column:
    """Evaluate `value` once and use it in `body` as often as needed (`transform` over a one-element array)."""
    return F.transform(F.array(value), body).getItem(0)


def _sub(b: Column, pos: Column, size: Column) -> Column:
    return b.substr(pos.try_cast("int"), size.try_cast("int"))


Reader = Callable[[Column, Column], Column]
"""(binary, 1-based position) -> the integer there; null (or a value the length checks reject) past the end."""


@dataclass(frozen=True)
class Readers:
    """How the decoder reads integers; `uvarint` gives struct(value, used bytes), nulls when truncated."""

    name: str
    int16: Reader
    int32: Reader
    int64: Reader
    uvarint: Reader


def _unsigned(b: Column, pos: Column, size: int) -> Column:
    """Big-endian unsigned integer of `size` ≤ 4 bytes as bigint (fits: at most 2^32 − 1)."""
    return F.conv(F.hex(_sub(b, pos, F.lit(size))), 16, 10).cast("bigint")


def _conv_int16(b: Column, pos: Column) -> Column:
    """Sign-fixed by modular arithmetic, so the unsigned value is mentioned once."""
    return ((_unsigned(b, pos, 2) + (1 << 15)) % (1 << 16) - (1 << 15)).cast("int")


def _conv_int32(b: Column, pos: Column) -> Column:
    return ((_unsigned(b, pos, 4) + (1 << 31)) % (1 << 32) - (1 << 31)).cast("int")


def _conv_int64(b: Column, pos: Column) -> Column:
    """Signed int64: `conv(…, 16, -10)` reads 16 hex digits as two's complement, so no sign fix is needed."""
    return F.conv(F.hex(_sub(b, pos, F.lit(8))), 16, -10).cast("bigint")


def _varint_of_hex(h: Column) -> Column:
    octets = [F.conv(F.substring(h, 2 * i + 1, 2), 16, 10).cast("bigint") for i in range(_MAX_VARINT_BYTES)]
    value = F.when(octets[0] < 0x80, octets[0])
    used = F.when(octets[0] < 0x80, F.lit(1))
    low = F.lit(0).cast("bigint")
    for i in range(1, _MAX_VARINT_BYTES):
        low = low + (octets[i - 1] - 0x80) * (1 << (7 * (i - 1)))  # earlier octets all have the high bit
        last = octets[i] < 0x80
        value = value.when(last, low + octets[i] * (1 << (7 * i)))
        used = used.when(last, F.lit(i + 1))
    return F.struct(value.cast("bigint").alias("value"), used.cast("bigint").alias("used"))


def _conv_uvarint(b: Column, pos: Column) -> Column:
    return _let(F.hex(_sub(b, pos, F.lit(_MAX_VARINT_BYTES))), _varint_of_hex)


CONV = Readers("conv", _conv_int16, _conv_int32, _conv_int64, _conv_uvarint)

#: The JVM readers' SQL names, classes (in the jar `python -m vigil_spark.jvm` builds) and types.
JVM_FUNCTIONS: dict[str, tuple[str, T.DataType]] = {
    "vigil_int16": ("dev.vigil.spark.KafkaBytes$Int16", T.IntegerType()),
    "vigil_int32": ("dev.vigil.spark.KafkaBytes$Int32", T.IntegerType()),
    "vigil_int64": ("dev.vigil.spark.KafkaBytes$Int64", T.LongType()),
    "vigil_uvarint": ("dev.vigil.spark.KafkaBytes$Uvarint", T.LongType()),
}


def _jvm(name: str) -> Reader:
    def read(b: Column, pos: Column) -> Column:
        return F.call_function(name, b, pos.try_cast("bigint"))

    return read


def _jvm_uvarint(b: Column, pos: Column) -> Column:
    """`vigil_uvarint` packs `value << 3 | used` into one bigint: one call gives both (staged by the caller)."""
    packed = _jvm("vigil_uvarint")(b, pos)
    return F.struct(F.shiftright(packed, 3).alias("value"), packed.bitwiseAND(F.lit(7)).cast("bigint").alias("used"))


JVM = Readers("jvm", _jvm("vigil_int16"), _jvm("vigil_int32"), _jvm("vigil_int64"), _jvm_uvarint)


def register_jvm_readers(spark: SparkSession, functions: dict[str, tuple[str, T.DataType]] | None = None) -> bool:
    """Register the JVM readers as SQL functions of `spark`; False when their jar is not on its classpath."""
    try:
        for name, (cls, data_type) in (functions or JVM_FUNCTIONS).items():
            spark.udf.registerJavaFunction(name, cls, data_type)
    except AnalysisException as exc:
        if "CANNOT_LOAD_FUNCTION_CLASS" in str(exc) or "Can not load class" in str(exc):
            return False
        raise
    return True


def readers_for(spark: SparkSession) -> Readers:
    """`JVM` when `register_jvm_readers` succeeded on this session, else `CONV`."""
    return JVM if all(spark.catalog.functionExists(name) for name in JVM_FUNCTIONS) else CONV


def _text(b: Column, pos: Column, size: Column) -> Column:
    """UTF-8 with malformed sequences replaced by U+FFFD (like Java's `new String` and `decode("replace")`)."""
    return F.make_valid_utf8(_sub(b, pos, size).cast("string"))


def _tag_struct(pos: Column, ok: Column, topic_id: Column, tid_size: Column) -> Column:
    return F.struct(
        pos.cast("bigint").alias("pos"),
        ok.alias("ok"),
        topic_id.cast("binary").alias("topic_id"),
        tid_size.cast("bigint").alias("tid_size"),
    )


def _tagged_fields(r: Readers, v: Column, start: Column, count: Column) -> Column:
    """Walk `count` tagged fields from `start`: struct(pos after them, ok, topic_id, tag-0 size).

    A higher-order `aggregate` keeps this in SQL for any number of tags. Each tag needs at least two bytes,
    so a count larger than half the rest is corrupt before any array is built (garbage counts reach 2^35).
    """
    init = _tag_struct(start, F.lit(True), F.lit(None), F.lit(-1))

    def step(acc: Column, _i: Column) -> Column:
        p = acc["pos"]

        def with_tag(tag: Column) -> Column:
            def with_size(size: Column) -> Column:
                payload = p + tag["used"] + size["used"]
                end = payload + size["value"]
                good = F.coalesce(acc["ok"] & (end <= F.length(v) + 1), F.lit(False))
                is_id = good & (tag["value"] == 0)
                return _tag_struct(
                    F.when(good, end).otherwise(p),
                    good,
                    F.when(is_id, _sub(v, payload, size["value"])).otherwise(acc["topic_id"]),
                    F.when(is_id, size["value"]).otherwise(acc["tid_size"]),
                )

            return _let(r.uvarint(v, p + tag["used"]), with_size)

        return _let(r.uvarint(v, p), with_tag)

    fits = (count >= 1) & (count * 2 <= F.length(v) + 1 - start)
    walked = F.aggregate(F.sequence(F.lit(1).cast("bigint"), count), init, step)
    return (
        F.when(count == 0, init).when(fits, walked).otherwise(_tag_struct(start, F.lit(False), F.lit(None), F.lit(-1)))
    )


# -- the transforms ---------------------------------------------------------------------------------------


def with_record_type(df: DataFrame, readers: Readers | None = None) -> DataFrame:
    """Add `record_type`: the key's leading int16 (null for a null or one-byte key)."""
    r = readers or readers_for(df.sparkSession)
    key = F.col("key")
    return df.withColumn("record_type", F.when(F.length(key) >= 2, r.int16(key, F.lit(1))))


def non_offset_records(df: DataFrame, readers: Readers | None = None) -> DataFrame:
    """Records this module does not decode (group metadata, KIP-848, unknown or keyless): the Python path."""
    typed = df if "record_type" in df.columns else with_record_type(df, readers)
    return typed.where(~F.coalesce(F.col("record_type").isin(*OFFSET_COMMIT_TYPES), F.lit(False)))


def offset_commits(df: DataFrame, readers: Readers | None = None) -> DataFrame:
    """Decode the OffsetCommit records (key types 0/1) of a frame with binary `key` and `value`.

    Returns `record_type, group, topic, partition, value_version, committed_offset, leader_epoch, metadata,
    commit_timestamp, expire_timestamp, topic_id, tombstone, problem, corrupt` plus `log_partition`,
    `log_offset`, `log_timestamp` when the input has Kafka's `partition`, `offset`, `timestamp`. A tombstone
    (null value: the offset was deleted) keeps its key. `problem` says what could not be decoded — "key",
    "value" or "value_version" (a version newer than 4) — and then the fields it would have given are null;
    `corrupt` is `problem is not null`. `readers` defaults to `readers_for` the frame's session.
    """
    r = readers or readers_for(df.sparkSession)
    k, v = F.col("key"), F.col("value")
    one = F.lit(1).cast("bigint")
    typed = df if "record_type" in df.columns else with_record_type(df, r)
    rows = typed.where(F.col("record_type").isin(*OFFSET_COMMIT_TYPES))

    # Stages are separate projections so each costly expression (a varint, the tag walk) is computed once.
    # key: int16 type, string group, string topic, int32 partition — and nothing after
    glen = r.int16(k, one + 2).cast("bigint")
    version = F.when(F.length(v) >= 2, r.int16(v, one))  # a one-byte value has no version
    rows = rows.select("*", glen.alias("_glen"), version.alias("_version"))
    glen, version = F.col("_glen"), F.col("_version")
    tpos = one + 4 + glen
    tlen = r.int16(k, tpos).cast("bigint")
    ppos = tpos + 2 + tlen
    key_ok = F.coalesce((glen >= 0) & (tlen >= 0) & (ppos + 3 == F.length(k)), F.lit(False))
    # value: int16 version, int64 offset, [int32 leader epoch v3+], metadata, int64 commit ts, ...
    head = F.when(version >= 3, one + 14).otherwise(one + 10)  # where the metadata length starts
    rows = rows.select(
        "*",
        tlen.alias("_tlen"),
        key_ok.alias("_key_ok"),
        head.alias("_head"),
        F.when(version == 4, r.uvarint(v, head)).alias("_mv"),
    )
    key_ok, head = F.col("_key_ok"), F.col("_head")
    mvar, mused = F.col("_mv")["value"], F.col("_mv")["used"]
    # v4: compact metadata, int64 commit ts, tagged fields
    cts_flex = head + mused + mvar - 1
    rows = rows.select("*", F.when(key_ok & (mvar >= 1), r.uvarint(v, cts_flex + 8)).alias("_tc"))
    tag_count, tag_used = F.col("_tc")["value"], F.col("_tc")["used"]
    tags = _tagged_fields(r, v, cts_flex + 8 + tag_used, tag_count)
    rows = rows.select("*", F.when(tag_count.isNotNull(), tags).alias("_tags"))
    tags = F.col("_tags")

    vend = F.length(v) + 1  # the position just past the record
    flex_ok = (mvar >= 1) & tags["ok"] & (tags["pos"] == vend) & tags["tid_size"].isin(-1, 16)
    # v0–v3: int16 metadata length (−1 = null: corrupt, the field is not nullable), [int64 expire ts v1]
    mlen = r.int16(v, head).cast("bigint")
    classic_ok = (mlen >= 0) & (head + 2 + mlen + 8 + F.when(version == 1, 8).otherwise(0) == vend)
    known = version.between(0, MAX_VALUE_VERSION)
    value_ok = F.coalesce(known & F.when(version == 4, flex_ok).otherwise(classic_ok), F.lit(False))
    problem = (
        F.when(~key_ok, F.lit(PROBLEM_KEY))
        .when(v.isNull(), F.lit(None))
        .when(F.coalesce(~known, F.lit(False)), F.lit(PROBLEM_VERSION))
        .when(~value_ok, F.lit(PROBLEM_VALUE))
    )
    rows = rows.select("*", problem.alias("problem"), (key_ok & value_ok & v.isNotNull()).alias("_ok"))

    ok, tlen = F.col("_ok"), F.col("_tlen")
    flex = version == 4
    meta_pos = F.when(flex, head + mused).otherwise(head + 2)
    meta_len = F.when(flex, mvar - 1).otherwise(mlen)
    cts = meta_pos + meta_len
    columns = [
        F.col("record_type"),
        F.when(key_ok, _text(k, one + 4, glen)).alias("group"),
        F.when(key_ok, _text(k, tpos + 2, tlen)).alias("topic"),
        F.when(key_ok, r.int32(k, tpos + 2 + tlen)).alias("partition"),
        F.when(key_ok & v.isNotNull(), version).alias("value_version"),
        F.when(ok, r.int64(v, one + 2)).alias("committed_offset"),
        F.when(ok, F.when(version >= 3, r.int32(v, one + 10)).otherwise(F.lit(-1))).alias("leader_epoch"),
        F.when(ok, _text(v, meta_pos, meta_len)).alias("metadata"),
        F.when(ok, r.int64(v, cts)).alias("commit_timestamp"),
        F.when(ok, F.when(version == 1, r.int64(v, cts + 8)).otherwise(F.lit(-1).cast("bigint"))).alias(
            "expire_timestamp"
        ),
        F.when(ok & flex, tags["topic_id"]).alias("topic_id"),
        (key_ok & v.isNull()).alias("tombstone"),
        F.col("problem"),
        F.col("problem").isNotNull().alias("corrupt"),
    ]
    columns += [F.col(src).alias(dst) for src, dst in PASSTHROUGH.items() if src in df.columns]
    return rows.select(*columns)
