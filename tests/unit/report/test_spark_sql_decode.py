"""The Spark SQL OffsetCommit decoder agrees with the pure-Python one, record for record, under ANSI mode,
with either set of integer readers (vigil's JVM byte readers and the pure-SQL `conv` fallback).

Records come from the test-only encoder of test_offsets_decoders.py (written from Kafka's JSON schemas, not
from either decoder). Spark costs ~0.1-1 s per query, so each hypothesis example is a whole batch of records
decoded in one DataFrame, and examples are few.
"""

import dataclasses
import datetime as dt
import importlib.util
import struct
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import types as T  # noqa: N812 - the PySpark convention
from pyspark.testing import assertDataFrameEqual

from vigil_core.consumer_offsets import records as rec
from vigil_spark.decode import sql

pytest_plugins = ["vigil_dev.testing.spark_fixtures"]
pytestmark = pytest.mark.spark


def _encoder() -> ModuleType:
    """The schema encoder of test_offsets_decoders.py, shared rather than copied (tests/ has no packages)."""
    path = Path(__file__).with_name("test_offsets_decoders.py")
    spec = importlib.util.spec_from_file_location("_vigil_offsets_encoder", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


enc = _encoder()

INPUT = T.StructType(
    [
        T.StructField("key", T.BinaryType()),
        T.StructField("value", T.BinaryType()),
        T.StructField("partition", T.IntegerType()),
        T.StructField("offset", T.LongType()),
        T.StructField("timestamp", T.TimestampType()),
    ]
)
WHEN = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
SETTINGS = settings(
    max_examples=6,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],  # shrinking through Spark queries takes many minutes
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
        HealthCheck.function_scoped_fixture,  # `readers` is a constant per parameter, never state
    ],
)


@pytest.fixture(params=["jvm", "conv"])
def readers(request: pytest.FixtureRequest, spark: SparkSession) -> sql.Readers:
    """Both reader sets; the JVM one fails the test in one line when its jar is not in the session."""
    if request.param == "jvm":
        request.getfixturevalue("spark_jvm_readers")
        return sql.JVM
    return sql.CONV


def frame(spark: SparkSession, records: Sequence[tuple[bytes | None, bytes | None]]) -> DataFrame:
    rows = [(k, v, 0, i, WHEN) for i, (k, v) in enumerate(records)]
    return spark.createDataFrame(rows, INPUT)


def expected_row(key: bytes | None, value: bytes | None, offset: int) -> tuple[Any, ...] | None:
    """What `sql.offset_commits` must return for one record, per `vigil_core.consumer_offsets.records` (None: not
    its job)."""
    if key is None or len(key) < 2 or struct.unpack(">h", key[:2])[0] not in sql.OFFSET_COMMIT_TYPES:
        return None
    record_type = struct.unpack(">h", key[:2])[0]
    k, v = rec.decode_record(key, value)
    tail = (0, offset, WHEN)
    if not isinstance(k, rec.OffsetCommitKey):
        assert isinstance(k, rec.Corrupt)
        return (record_type, None, None, None, None, None, None, None, None, None, None, False, "key", True, *tail)
    head = (record_type, k.group, k.topic, k.partition)
    if isinstance(v, rec.Tombstone):
        return (*head, None, None, None, None, None, None, None, True, None, False, *tail)
    if isinstance(v, rec.OffsetCommitValue):
        fields = (v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp, v.topic_id)
        return (*head, v.version, *fields, False, None, False, *tail)
    assert value is not None
    version = struct.unpack(">h", value[:2])[0] if len(value) >= 2 else None
    problem = "value_version" if isinstance(v, rec.Unknown) else "value"
    return (*head, version, None, None, None, None, None, None, False, problem, True, *tail)


def assert_agrees(
    spark: SparkSession, records: Sequence[tuple[bytes | None, bytes | None]], readers: sql.Readers
) -> DataFrame:
    """Decode every record in one query; the whole frame must equal the Python decoder's answers."""
    actual = sql.offset_commits(frame(spark, records), readers)
    nullable = T.StructType([T.StructField(f.name, f.dataType, True) for f in actual.schema.fields])
    rows = [row for i, (k, v) in enumerate(records) if (row := expected_row(k, v, i)) is not None]
    assertDataFrameEqual(actual, spark.createDataFrame(rows, nullable))
    return actual


# -- strategies --------------------------------------------------------------------------------------------

text = enc.text  # unicode without surrogates, ≤ 12 characters
long_text = st.text(st.characters(exclude_categories=["Cs"]), min_size=40, max_size=200)  # multi-byte varints
keys = st.builds(rec.OffsetCommitKey, text | long_text, text, enc.i32, st.sampled_from([0, 1]))
tags = st.dictionaries(st.integers(0, 300), st.binary(max_size=20), max_size=3)


@st.composite
def offset_values(draw: st.DrawFn) -> bytes | None:
    """Every version; null metadata (corrupt: not nullable); v4 with the topic id and unknown tags."""
    kind = draw(st.sampled_from(["value", "value", "value", "tombstone", "unknown_version"]))
    if kind == "tombstone":
        return None
    if kind == "unknown_version":
        return struct.pack(">h", draw(st.sampled_from([-1, 5, 99]))) + draw(st.binary(max_size=30))
    value: rec.OffsetCommitValue = draw(enc.offset_values())
    metadata = draw(st.none() | text | long_text | st.just(value.metadata))
    if value.version < 4:
        encoded: bytes = enc.encode_value(dataclasses.replace(value, metadata=metadata))
        return encoded
    extra = draw(tags)
    if value.topic_id is not None:
        extra[0] = value.topic_id
    w = enc.W(True).i16(4).i64(value.offset).i32(value.leader_epoch).str(metadata).i64(value.commit_timestamp)
    return bytes(w.tags(extra).out)


other_keys = st.one_of(
    st.builds(rec.GroupMetadataKey, text).map(enc.encode_key),
    st.builds(rec.ConsumerGroupMemberMetadataKey, text, text).map(enc.encode_key),
    st.binary(max_size=1) | st.none(),
)
records = st.lists(st.tuples(keys.map(enc.encode_key), offset_values()), min_size=20, max_size=60)
"""Bounded by Hypothesis's 8192 choices a test case: larger batches overran it, and each test ran its one simplest
example, then spent ~45 s failing to generate others."""


@st.composite
def damaged(draw: st.DrawFn) -> list[tuple[bytes | None, bytes | None]]:
    """Valid records truncated, bit-flipped or extended, plus pure garbage behind an offset-commit type."""
    out: list[tuple[bytes | None, bytes | None]] = []
    for key, value in draw(st.lists(st.tuples(keys.map(enc.encode_key), offset_values()), min_size=4, max_size=10)):
        raw = bytearray(value or b"")
        for at, byte in draw(st.lists(st.tuples(st.integers(0, 80), st.integers(0, 255)), max_size=2)):
            if at < len(raw):
                raw[at] = byte
        cut = draw(st.integers(0, 12))
        out += [(key, bytes(raw)), (key, bytes(raw[: max(len(raw) - cut, 0)])), (key, bytes(raw) + b"\x00")]
        out.append((key[: max(len(key) - draw(st.integers(1, 6)), 2)], value))
        out.append((key[:2] + draw(st.binary(max_size=24)), value))
        out.append((key, struct.pack(">h", 4) + draw(st.binary(max_size=40))))
    return out


# -- tests -------------------------------------------------------------------------------------------------


def test_session_runs_ansi_mode(spark: SparkSession) -> None:
    """The trap the decoder avoids: an unsigned conv string cast to bigint throws under ANSI (Spark 4)."""
    assert spark.conf.get("spark.sql.ansi.enabled") == "true"
    with pytest.raises(PySparkException, match=r"CAST_OVERFLOW|NUMERIC_VALUE_OUT_OF_RANGE|CAST_INVALID_INPUT"):
        spark.sql("SELECT CAST(conv('FFFFFFFFFFFFFFFF', 16, 10) AS BIGINT)").collect()
    assert spark.sql("SELECT CAST(conv('FFFFFFFFFFFFFFFF', 16, -10) AS BIGINT) AS v").first() == Row(v=-1)


@SETTINGS
@given(records)
def test_sql_decoder_equals_python_decoder(
    spark: SparkSession, readers: sql.Readers, batch: list[tuple[bytes, bytes | None]]
) -> None:
    assert_agrees(spark, batch, readers)


@SETTINGS
@given(damaged())
def test_damaged_records_are_flagged_like_python_never_raise(
    spark: SparkSession, readers: sql.Readers, batch: list[tuple[bytes | None, bytes | None]]
) -> None:
    actual = assert_agrees(spark, batch, readers)
    assert actual.where("corrupt").count() > 0


def test_hand_checked_vectors(spark: SparkSession, readers: sql.Readers) -> None:
    """Bytes written out by hand in test_offsets_decoders.py, plus the extremes of every integer field."""
    key = bytes.fromhex("00010001670002743100000005")  # type 1, "g", "t1", partition 5
    extremes = rec.OffsetCommitValue(3, -(2**63), "", 2**63 - 1, leader_epoch=-(2**31))
    batch = [
        (key, bytes.fromhex("0003000000000000002a00000007000000000000000003e8")),
        (key, bytes.fromhex("0001000000000000002a00026d6400000000000003e800000000000007d0")),
        (key, enc.encode_value(extremes)),
        (key, enc.encode_value(rec.OffsetCommitValue(4, 2**62, "ü" * 70, -1, 2**31 - 1, topic_id=bytes(16)))),
        (key, None),
        (b"\x00\x01\xff\xff", b""),
        (key, b"\x00"),
    ]
    rows = assert_agrees(spark, batch, readers).orderBy("log_offset").collect()
    assert [r.committed_offset for r in rows[:4]] == [42, 42, -(2**63), 2**62]
    assert [r.problem for r in rows] == [None, None, None, None, None, "key", "value"]
    assert rows[4].tombstone


@SETTINGS
@given(st.lists(st.tuples(other_keys, st.binary(max_size=8) | st.none()), min_size=5, max_size=40), records)
def test_key_type_splits_the_paths(
    spark: SparkSession,
    readers: sql.Readers,
    others: list[tuple[bytes | None, bytes | None]],
    commits: list[tuple[bytes | None, bytes | None]],
) -> None:
    """Offset commits (types 0/1) go to SQL; every other record, keyless ones included, to the Python path."""
    df = frame(spark, [*commits, *others])
    assert sql.offset_commits(df, readers).count() == len(commits)
    rest = sql.non_offset_records(df, readers).select("offset").collect()
    assert sorted(r.offset for r in rest) == list(range(len(commits), len(commits) + len(others)))


def test_the_session_reads_integers_with_the_jvm_readers(spark_jvm_readers: SparkSession) -> None:
    """`session.build` registered them, so the decoder picks them unasked; a missing class is a False, not an error."""
    assert sql.readers_for(spark_jvm_readers) is sql.JVM
    row = spark_jvm_readers.sql(
        "SELECT vigil_int16(X'FFFE', 1L) AS a, vigil_int32(X'00FFFFFFFF', 2L) AS b, vigil_int64(X'01', 1L) AS c,"
        " vigil_uvarint(X'00AC02', 2L) AS d, vigil_uvarint(X'8080808080', 1L) AS e, vigil_int16(X'0001', 0L) AS f"
    ).first()
    assert row == Row(a=-2, b=-1, c=None, d=(300 << 3) | 2, e=None, f=None)
    absent = {"vigil_absent": ("dev.vigil.spark.NoSuchReader", T.IntegerType())}
    assert sql.register_jvm_readers(spark_jvm_readers, absent) is False
    assert not spark_jvm_readers.catalog.functionExists("vigil_absent")
