"""`vigil report` whole (ingest, broker logs, model) on a real group's history: the rebalances table has the
generations the broker logged, each with the cause the test caused. Ground truth from the broker's own log and
from what the test did, never from vigil."""

import contextlib
import io
import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import broker_log, browser, clients
from vigil_spark import cli
from vigil_spark.outputs import html

pytestmark = [pytest.mark.integration, pytest.mark.spark]
pytest_plugins = ["vigil_dev.testing.spark_fixtures"]


def test_the_report_explains_each_rebalance_of_a_real_group(
    spark_kafka: SparkSession, kafka: KafkaCluster, tmp_path: Path, artifacts_dir: Path
) -> None:
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("report"), partitions=4)
    group = clients.unique("g-report")

    def stable(n: int) -> int:
        clients.wait_stable(conn, group, n)
        return max(broker_log.generations(kafka, group))

    first = clients.Member(conn, group, [topic], "report-a").start()
    joined_1 = stable(1)
    second = clients.Member(conn, group, [topic], "report-b").start()
    joined_2 = stable(2)
    second.close()  # a LeaveGroup
    left = stable(1)
    try:
        logs = [str(kafka.server_log(node.node_id)) for node in kafka.nodes]
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            code = cli.main(["--out", str(tmp_path / "out"), "--cluster", "itest-report", "--master", "local[2]",
                             "--broker-logs", *logs], conn.to_env())  # fmt: skip
        lines = err.getvalue().splitlines()
        assert code == 0, lines
        assert any(line.startswith("vigil report: broker logs: ") for line in lines), lines
        assert any(line.startswith("vigil report: model: done") for line in lines), lines

        model = tmp_path / "out" / "model" / "rebalances" / "parquet"
        rows = [r for r in spark_kafka.read.parquet(str(model)).collect() if r["group"] == group and not r["gap"]]
        by_generation = {r["generation"]: r for r in rows}
        assert sorted(by_generation) == broker_log.generations(kafka, group)
        assert by_generation[joined_1]["cause"] == "joined"
        assert by_generation[joined_2]["cause"] == "joined"
        assert by_generation[left]["cause"] == "left"
        assert (by_generation[left]["members_before"], by_generation[left]["members_after"]) == (2, 1)
        assert by_generation[left]["duration_s"] is not None
        assert by_generation[left]["duration_s"] >= 0
        assert (tmp_path / "out" / "model" / "daily" / "json").is_dir()
        page = (tmp_path / "out" / "report.html").read_text()
        assert group in page  # among the worst groups: the only ones with rebalances in the last 24 h here
        summary = json.loads((tmp_path / "out" / "summary.json").read_text())
        mine = next(g for g in summary["groups"] if g["group"] == group)
        assert mine["rebalances_24h"] == len(broker_log.generations(kafka, group))
        # what a browser shows: Chromium renders the page offline, charts and numbers present (screenshot kept)
        shown = browser.render(tmp_path / "out" / "report.html", artifacts_dir / "report" / "report.png")
        assert shown.dom.count("<svg") >= 2, shown.dom[:2000]
        assert 'aria-label="Rebalances per hour"' in shown.dom  # a short history: hourly bins
        # the group's own section (linked from the worst groups) lists each of its rebalances
        section = shown.dom.split(f'<section id="{html.anchor(mine["cluster"], group)}">')[1].split("</section>")[0]
        assert section.count("<tr><td>") == len(broker_log.generations(kafka, group)), section
        assert 'aria-label="Causes"' in shown.dom
        assert group in shown.dom
        assert shown.screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert shown.screenshot.stat().st_size > 10_000  # not a blank page
    finally:
        first.close()
