"""`vigil report --out <URI>`: every file of the job — Spark's tables and checkpoints, the report page and its
summary — goes through Hadoop's FileSystem API. The test's `--out` is a `viewfs://` mount, a place the driver's
Python cannot open (Hadoop resolves it to a local directory the test then reads)."""

import contextlib
import io
import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import broker_log, clients
from vigil_spark import cli

pytestmark = [pytest.mark.integration, pytest.mark.spark]
pytest_plugins = ["vigil_dev.testing.spark_fixtures"]

MOUNT = "vigil-itest"


def _report(conn_env: dict[str, str], out: str, logs: list[str]) -> list[str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = cli.main(["--out", out, "--cluster", "itest-uri", "--master", "local[2]", "--broker-logs", *logs],
                        conn_env)  # fmt: skip
    lines = err.getvalue().splitlines()
    assert code == 0, lines
    return lines


def _generations(spark: SparkSession, out: str, group: str) -> list[int]:
    rows = spark.read.parquet(f"{out}/model/rebalances/parquet").collect()
    return sorted(r["generation"] for r in rows if r["group"] == group and not r["gap"])


def _new_offsets_records(lines: list[str]) -> int:
    line = next(x for x in lines if x.startswith("vigil report: ingest __consumer_offsets: "))
    return int(line.split(": ")[2].split()[0])


def test_the_report_writes_all_its_files_through_hadoops_filesystem(
    spark_kafka: SparkSession, kafka: KafkaCluster, tmp_path: Path
) -> None:
    disk = tmp_path / "mounted"
    hadoop = spark_kafka.sparkContext._jsc.hadoopConfiguration()  # noqa: SLF001 - the session the CLI reuses
    hadoop.set(f"fs.viewfs.mounttable.{MOUNT}.link./reports", disk.as_uri())
    out = f"viewfs://{MOUNT}/reports/run"

    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("uri"), partitions=2)
    group = clients.unique("g-uri")
    logs = [str(kafka.server_log(node.node_id)) for node in kafka.nodes]
    members = [clients.Member(conn, group, [topic], "uri-a").start()]
    try:
        clients.wait_stable(conn, group, 1)
        members.append(clients.Member(conn, group, [topic], "uri-b").start())
        clients.wait_stable(conn, group, 2)
        members.pop().close()
        clients.wait_stable(conn, group, 1)
        lines = _report(conn.to_env(), out, logs)

        assert f"vigil report: report: {out}/report.html, {out}/summary.json" in "\n".join(lines), lines
        run = disk / "run"
        assert group in (run / "report.html").read_text()
        summary = json.loads((run / "summary.json").read_text())
        mine = next(g for g in summary["groups"] if g["group"] == group)
        generations = broker_log.generations(kafka, group)
        assert mine["rebalances_24h"] == len(generations)
        assert _generations(spark_kafka, out, group) == generations
        assert (run / "checkpoints" / "itest-uri" / "__consumer_offsets").is_dir()
        assert any((run / "tables" / "group_metadata").glob("ingest_batch=*/*.parquet"))

        # incremental through the same layer: a member joins since, and the second run resumes from the checkpoints
        # it wrote there (fewer records than the first) with every generation in its model exactly once
        members.append(clients.Member(conn, group, [topic], "uri-c").start())
        clients.wait_stable(conn, group, 2)
        again = _report(conn.to_env(), out, logs)
        after = broker_log.generations(kafka, group)
        assert len(after) == len(generations) + 1, after
        assert 0 < _new_offsets_records(again) < _new_offsets_records(lines), again  # not the whole topic again
        assert _generations(spark_kafka, out, group) == after
    finally:
        for member in members:
            member.close()
