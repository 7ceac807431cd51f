"""`sources.broker_logs`: globs of plain and gzip files into the `broker_log` frame, node from the path, unparsed
relevant lines counted, not fatal. The lines are real Kafka 4.1.1 lines (see test_broker_log_parse.py)."""

import datetime as dt
import gzip
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from vigil_spark.parse import broker_log as bl
from vigil_spark.sources import broker_logs

pytest_plugins = ["vigil_dev.testing.spark_fixtures"]

P1 = "[GroupCoordinator id=1 topic=__consumer_offsets partition=1] "
GMM = " (org.apache.kafka.coordinator.group.GroupMetadataManager)"
LINES = [
    f"[2026-11-21 08:12:32,955] INFO {P1}Preparing to rebalance group g1 in state PreparingRebalance with old "
    f"generation 0 (reason: Adding new member m-1 with group instance id null; client reason: not provided).{GMM}",
    "[2026-11-21 08:12:32,956] INFO [Broker id=1] something else entirely (kafka.server.BrokerServer)",
    f"[2026-11-21 08:12:32,960] INFO {P1}Stabilized group g1 generation 1 with 1 members.{GMM}",
    "\tat org.apache.kafka.SomeClass.method(SomeClass.java:1)",
    f"[2026-11-21 08:12:33,000] INFO {P1}Stabilised the group g1 at generation 2 somehow.{GMM}",
]


def _write(tmp_path: Path) -> list[Path]:
    plain = tmp_path / "logs" / "kafka-1" / "server.log"
    zipped = tmp_path / "logs" / "kafka-2" / "server.log.1.gz"
    plain.parent.mkdir(parents=True)
    zipped.parent.mkdir(parents=True)
    plain.write_text("\n".join(LINES) + "\n")
    with gzip.open(zipped, "wt") as out:
        out.write("\n".join(LINES[:3]) + "\n")
    return [plain, zipped]


def test_parse_file_reads_plain_and_gzip_in_order_with_the_node_from_the_path(tmp_path: Path) -> None:
    plain, zipped = _write(tmp_path)
    rows = list(broker_logs.parse_file(str(plain), "c1", bl.LogFormat()))
    assert [r[4] for r in rows] == ["rebalance-prepared", "stabilized", broker_logs.UNPARSED]
    assert {r[1] for r in rows} == {"1"}
    assert rows[1][10] == LINES[2]  # the event keeps its own line
    assert rows[2][10] == LINES[4]
    gz = list(broker_logs.parse_file(str(zipped), "c1", bl.LogFormat()))
    assert [(r[1], r[4], r[5]) for r in gz] == [("2", "rebalance-prepared", 0), ("2", "stabilized", 1)]
    elsewhere = list(broker_logs.parse_file(str(plain), "c1", bl.LogFormat(), node_pattern=r"nowhere-(\d+)"))
    assert {r[1] for r in elsewhere if r[4] != broker_logs.UNPARSED} == {"1"}  # the line's coordinator id


@pytest.mark.spark
def test_read_builds_the_broker_log_frame_and_counts_unparsed(spark: SparkSession, tmp_path: Path) -> None:
    _write(tmp_path)
    frame = broker_logs.read(spark, [str(tmp_path / "logs" / "**" / "server.log*")], cluster="c1")
    assert frame.schema == broker_logs.SCHEMA
    rows = frame.orderBy("file", "ts").collect()
    parsed = [r for r in rows if r["event"] != broker_logs.UNPARSED]
    assert [(r["node"], r["event"], r["generation"]) for r in parsed] == [
        ("1", "rebalance-prepared", 0),
        ("1", "stabilized", 1),
        ("2", "rebalance-prepared", 0),
        ("2", "stabilized", 1),
    ]
    assert parsed[1]["ts"] == dt.datetime(2026, 11, 21, 8, 12, 32, 960000)  # naive UTC as collected here
    assert {r["cluster"] for r in rows} == {"c1"}
    assert broker_logs.unparsed_count(frame) == 1
    assert broker_logs.read(spark, [str(tmp_path / "none" / "*.log")]).count() == 0
