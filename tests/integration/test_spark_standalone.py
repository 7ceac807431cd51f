"""`vigil report --master spark://…` on a Spark standalone cluster (a master and a 1-core worker started from the
pyspark distribution): the job runs its tasks on the worker's executor, sizes its shuffles to the cluster's cores
(not Spark's 200), and builds the same model as a local run over the same history."""

import contextlib
import io
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


def _rebalances(spark: SparkSession, out: Path, group: str) -> list[tuple[object, ...]]:
    rows = spark.read.parquet(str(out / "model" / "rebalances" / "parquet")).collect()
    return sorted(tuple(r) for r in rows if r["group"] == group)


def test_the_report_on_a_standalone_cluster_builds_the_local_model(
    spark_kafka: SparkSession, kafka: KafkaCluster, tmp_path: Path
) -> None:
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("standalone"), partitions=3)
    group = clients.unique("g-standalone")
    first = clients.Member(conn, group, [topic], "standalone-a").start()
    clients.wait_stable(conn, group, 1)
    second = clients.Member(conn, group, [topic], "standalone-b").start()
    clients.wait_stable(conn, group, 2)
    second.close()
    clients.wait_stable(conn, group, 1)
    try:
        _reports(spark_kafka, kafka, tmp_path, group)
    finally:
        first.close()


def _reports(spark_kafka: SparkSession, kafka: KafkaCluster, tmp_path: Path, group: str) -> None:
    """The report over the group's history, locally and on the cluster: the same model."""
    conn = kafka.connection()
    logs = [str(kafka.server_log(node.node_id)) for node in kafka.nodes]
    args = ["--cluster", "itest-standalone", "--broker-logs", *logs]

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = cli.main(["--out", str(tmp_path / "local"), "--master", "local[2]", *args], conn.to_env())
    assert code == 0, err.getvalue()

    with standalone.cluster(tmp_path / "spark", cores=1) as spark_cluster:
        env = {**os.environ, **conn.to_env(), "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": standalone.HOST}
        done = subprocess.run(
            [sys.executable, "-m", "vigil_spark", "--out", str(tmp_path / "cluster"), "--master",
             spark_cluster.master_url, *args],
            capture_output=True, text=True, timeout=600, check=False, env=env,
        )  # fmt: skip
        state = spark_cluster.state()
        apps = state.get("completedapps", []) + state.get("activeapps", [])
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"on {spark_cluster.master_url} started" in done.stderr, done.stderr
    # one worker core: Spark's defaultParallelism floor of 2, not its default 200
    assert "vigil report: model: 2 shuffle partitions (the cluster's cores)" in done.stderr, done.stderr
    assert [a["name"] for a in apps] == ["vigil-report"], apps

    local = _rebalances(spark_kafka, tmp_path / "local", group)
    assert len(local) == len(broker_log.generations(kafka, group)), local
    assert _rebalances(spark_kafka, tmp_path / "cluster", group) == local
