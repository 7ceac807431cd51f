"""Damaged `__consumer_offsets` records are counted in `problems`, never fatal, never dropped silently.

The broker refuses producing into `__consumer_offsets`, so the same bytes — real records captured from a 4.1
broker (tests/unit/fixtures/consumer_offsets/real_records.json), then cut, re-versioned or re-keyed by the test —
go to a regular topic that the ingest reads in the offsets format. The expected outcome of each record is the
test's own construction, not the decoder's opinion.
"""

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from confluent_kafka import Producer
from pyspark.sql import SparkSession

from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import clients
from vigil_spark import tables
from vigil_spark.ingest import stream

pytest_plugins = ["vigil_dev.testing.spark_fixtures"]
pytestmark = [pytest.mark.integration, pytest.mark.spark]

# Python workers decode the rare records and must import vigil_spark (see test_spark_ingest.py).

FIXTURE = Path(__file__).parents[1] / "unit" / "fixtures" / "consumer_offsets" / "real_records.json"
REAL = {r["what"]: r for r in json.loads(FIXTURE.read_text())["records"]}
COMMIT_KEY = bytes.fromhex(REAL["classic-OffsetCommitValue-v4-o2"]["key"])
COMMIT_VALUE = bytes.fromhex(REAL["classic-OffsetCommitValue-v4-o2"]["value"])
GROUP_KEY = bytes.fromhex(REAL["classic-GroupMetadataValue-v3-o1"]["key"])
GROUP_VALUE = bytes.fromhex(REAL["classic-GroupMetadataValue-v3-o1"]["value"])

#: (key, value, what the ingest must make of it): a table name, or the start of the problem it reports.
RECORDS: list[tuple[bytes | None, bytes | None, str]] = [
    (COMMIT_KEY, COMMIT_VALUE, "offset_commits"),
    (COMMIT_KEY, COMMIT_VALUE[:-3], "OffsetCommitValue: does not match the schema"),
    (COMMIT_KEY, b"\x00\x09" + COMMIT_VALUE[2:], "OffsetCommitValue version 9 not known (0-4)"),
    (
        b"\x00\x09\x00\x01g",
        b"\x00\x00",
        "record type 9: ShareGroupPartitionMetadata, an early-access (Kafka 4.0) share",
    ),
    (None, b"x", "key: null"),
    (GROUP_KEY, GROUP_VALUE[:-10], "GroupMetadataValue v3: "),
    (GROUP_KEY, GROUP_VALUE, "group_metadata"),
    (COMMIT_KEY[:2] + b"\x7f\xff" + COMMIT_KEY[4:], COMMIT_VALUE, "OffsetCommitKey: does not match the schema"),
    (COMMIT_KEY, None, "offset_commits"),
    (b"\x00\x18\x00\x01g", b"\x00\x00", "record type 24: unknown record type"),
]


def produce_raw(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes | None, str]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "log_level": 3})
    for key, value, _ in records:
        producer.produce(topic, key=key, value=value, partition=0)
    assert producer.flush(30) == 0


def test_damaged_records_are_problems_and_the_rest_is_ingested(
    spark_kafka: SparkSession, kafka: KafkaCluster, tmp_path: Path
) -> None:
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("offsets-copy"), partitions=1)
    produce_raw(conn.bootstrap_servers, topic, RECORDS)

    def ingest() -> stream.Stage:
        return stream.ingest_offsets(spark_kafka, conn, partitions=[0], tables_dir=tmp_path / "tables",
                                     checkpoints=tmp_path / "ckpt", cluster="corrupt", topic=topic,
                                     max_records_per_batch=4)  # fmt: skip

    stage = ingest()

    assert (stage.records, stage.batches) == (len(RECORDS), 3)  # 4 + 4 + 2: a backlog in several batches
    rows = {name: tables.read(spark_kafka, tmp_path / "tables", name).collect() for name in tables.SCHEMAS}
    problems = sorted(rows["problems"], key=lambda r: r.log_offset)
    expected = [(offset, what) for offset, (_, _, what) in enumerate(RECORDS) if what not in tables.SCHEMAS]
    assert [r.log_offset for r in problems] == [offset for offset, _ in expected]
    for row, (_, what) in zip(problems, expected, strict=True):
        assert row.problem.startswith(what), (row.log_offset, row.problem)
        assert (row.cluster, row.source, row.log_partition) == ("corrupt", topic, 0)

    commits = sorted(rows["offset_commits"], key=lambda r: r.log_offset)
    assert [r.log_offset for r in commits] == [o for o, (_, _, w) in enumerate(RECORDS) if w == "offset_commits"]
    commit, tombstone = commits
    # o2: group g-oc-888d4de5f5, topic oc-426626a8de, partition 0, v4: offset 6, epoch 0, metadata "", ts 0x1a1fd4fa4ae
    assert (commit.group, commit.topic, commit.partition) == ("g-oc-888d4de5f5", "oc-426626a8de", 0)
    assert (commit.committed_offset, commit.leader_epoch, commit.metadata, commit.tombstone) == (6, 0, "", False)
    assert commit.commit_ts.astimezone(UTC) == datetime.fromtimestamp(0x1A1FD4FA4AE / 1000, UTC)
    assert commit.expire_ts is None
    assert (tombstone.group, tombstone.tombstone, tombstone.committed_offset) == ("g-oc-888d4de5f5", True, None)

    assert [(r.log_offset, r.generation, len(r.members)) for r in rows["group_metadata"]] == [(6, 1, 1)]
    assert rows["consumer_group_records"] == []
    assert stage.added == {"offset_commits": 2, "group_metadata": 1, "consumer_group_records": 0, "problems": 7}

    again = ingest()
    assert (again.records, again.batches) == (0, 0)
    assert len(tables.read(spark_kafka, tmp_path / "tables", "problems").collect()) == len(problems)
