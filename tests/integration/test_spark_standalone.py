"""`vigil report --master spark://…` on a Spark standalone cluster (a master and a worker started from the pyspark
distribution), with `--out` a place only Hadoop's FileSystem API reaches: a `viewfs://` mount, given to the job as
a `--conf spark.hadoop.…` property, that the driver's Python cannot open (Hadoop resolves it to a local directory the
test then reads). The job runs its tasks on the worker's executor, sizes its shuffles to the cluster's cores (not
Spark's 200), writes every file — tables, checkpoints, the report page and its summary — through that layer, and
builds the same model as a local run over the same history; a later local run resumes from the checkpoints the
cluster's run wrote there."""

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.spark import standalone
from vigil_dev.testing import broker_log, clients
from vigil_spark import cli

pytestmark = [pytest.mark.integration, pytest.mark.spark]
pytest_plugins = ["vigil_dev.testing.spark_fixtures"]

MOUNT = "vigil-itest"
CLUSTER = "itest-standalone"


def _rebalances(spark: SparkSession, out: str, group: str) -> list[tuple[object, ...]]:
    rows = spark.read.parquet(f"{out}/model/rebalances/parquet").collect()
    return sorted(tuple(r) for r in rows if r["group"] == group)


def _generations(spark: SparkSession, out: str, group: str) -> list[int]:
    rows = spark.read.parquet(f"{out}/model/rebalances/parquet").collect()
    return sorted(r["generation"] for r in rows if r["group"] == group and not r["gap"])


def _local(conn_env: dict[str, str], out: str, args: list[str]) -> list[str]:
    """`vigil report` in this process (its session, `spark_kafka`, reused): its stderr lines."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = cli.main(["--out", out, "--master", "local[2]", *args], conn_env)
    lines = err.getvalue().splitlines()
    assert code == 0, lines
    return lines


def _new_offsets_records(lines: list[str]) -> int:
    line = next(x for x in lines if x.startswith("vigil report: ingest __consumer_offsets: "))
    return int(line.split(": ")[2].split()[0])


def test_the_report_on_a_standalone_cluster_writes_through_hadoop_and_builds_the_local_model(
    spark_kafka: SparkSession, kafka: KafkaCluster, tmp_path: Path
) -> None:
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("standalone"), partitions=3)
    group = clients.unique("g-standalone")
    logs = [str(kafka.server_log(node.node_id)) for node in kafka.nodes]
    args = ["--cluster", CLUSTER, "--broker-logs", *logs]
    members = [clients.Member(conn, group, [topic], "standalone-a").start()]
    try:
        clients.wait_stable(conn, group, 1)
        members.append(clients.Member(conn, group, [topic], "standalone-b").start())
        clients.wait_stable(conn, group, 2)
        members.pop().close()
        clients.wait_stable(conn, group, 1)
        generations = broker_log.generations(kafka, group)
        local = str(tmp_path / "local")
        _local(conn.to_env(), local, args)

        disk = tmp_path / "mounted"
        link = f"fs.viewfs.mounttable.{MOUNT}.link./reports"
        out = f"viewfs://{MOUNT}/reports/run"
        with standalone.cluster(tmp_path / "spark", cores=2) as spark_cluster:
            env = {**os.environ, **conn.to_env(), "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": standalone.HOST}
            done = subprocess.run(
                [sys.executable, "-m", "vigil_spark", "--out", out, "--master", spark_cluster.master_url,
                 "--conf", f"spark.hadoop.{link}={disk.as_uri()}", *args],
                capture_output=True, text=True, timeout=600, check=False, env=env,
            )  # fmt: skip
            state = spark_cluster.state()
            apps = state.get("completedapps", []) + state.get("activeapps", [])
        assert done.returncode == 0, done.stderr[-3000:]
        assert f"on {spark_cluster.master_url} started" in done.stderr, done.stderr
        # the worker's two cores, not Spark's default 200
        assert "vigil report: model: 2 shuffle partitions (the cluster's cores)" in done.stderr, done.stderr
        assert [a["name"] for a in apps] == ["vigil-report"], apps
        assert f"vigil report: report: {out}/report.html, {out}/summary.json" in done.stderr, done.stderr

        run = disk / "run"
        assert group in (run / "report.html").read_text()
        summary = json.loads((run / "summary.json").read_text())
        mine = next(g for g in summary["groups"] if g["group"] == group)
        assert mine["rebalances_24h"] == len(generations)
        assert (run / "checkpoints" / CLUSTER / "__consumer_offsets").is_dir()
        assert any((run / "tables" / "group_metadata").glob("ingest_batch=*/*.parquet"))
        expected = _rebalances(spark_kafka, local, group)
        assert len(expected) == len(generations), expected
        assert _rebalances(spark_kafka, run.as_uri(), group) == expected

        # incremental through the same layer: a member joins since, and a local run on the same `--out` (the mount in
        # this session's Hadoop configuration) resumes from the checkpoints the cluster's run wrote there: fewer
        # records than that run read, every generation in its model exactly once
        spark_kafka.sparkContext._jsc.hadoopConfiguration().set(link, disk.as_uri())  # noqa: SLF001 - the CLI's session
        members.append(clients.Member(conn, group, [topic], "standalone-c").start())
        clients.wait_stable(conn, group, 2)
        again = _local(conn.to_env(), out, args)
        after = broker_log.generations(kafka, group)
        assert len(after) == len(generations) + 1, after
        assert 0 < _new_offsets_records(again) < _new_offsets_records(done.stderr.splitlines()), again
        assert _generations(spark_kafka, out, group) == after
    finally:
        for member in members:
            member.close()
