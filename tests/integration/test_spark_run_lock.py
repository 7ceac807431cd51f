"""One `vigil report` run at a time per `--out`: a run that finds another run's fresh lock skips (exit 0, one line
saying who holds it, nothing written); a lock older than `--lock-stale-after` (a killed run's) is taken over; a
finished run leaves no lock. The lock goes through Hadoop's FileSystem like every other file of the output."""

import contextlib
import io
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from vigil_dev.kafka.cluster import KafkaCluster
from vigil_spark import cli, run_lock

pytest_plugins = ["vigil_dev.testing.spark_fixtures"]
pytestmark = [pytest.mark.integration, pytest.mark.spark]


CLUSTER = "itest-lock"  # its own consumer group id: Spark caches Kafka consumers per group id, across tests


def _run(kafka: KafkaCluster, out: Path, *args: str) -> tuple[int, list[str]]:
    """`vigil report --ingest-only` in this process (the shared session): its exit code and stderr lines."""
    err = io.StringIO()
    argv = ["--out", str(out), "--master", "local[2]", "--cluster", CLUSTER, "--ingest-only", *args]
    with contextlib.redirect_stderr(err):
        code = cli.main(argv, kafka.connection().to_env())
    return code, err.getvalue().splitlines()


def _held_by(out: Path, who: str, age: timedelta) -> run_lock.Holder:
    """An output whose lock another run wrote `age` ago."""
    out.mkdir()
    holder = run_lock.Holder(who, datetime.now(UTC) - age)
    (out / run_lock.LOCK_NAME).write_text(holder.encode())
    return holder


def test_a_run_skips_while_another_run_holds_the_output(
    spark_kafka: SparkSession, kafka: KafkaCluster, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    other = _held_by(out, "report-now-x7 pid 7", timedelta(minutes=5))
    code, lines = _run(kafka, out)
    assert code == 0, lines
    assert lines[-1].startswith("vigil report: skipped: another run (report-now-x7 pid 7, started "), lines
    assert "taken over in 54 min (--lock-stale-after)" in lines[-1], lines  # 60 min after it started
    assert not any("ingest" in line for line in lines), lines
    assert sorted(p.name for p in out.iterdir()) == [run_lock.LOCK_NAME]  # nothing else written
    assert run_lock.decode((out / run_lock.LOCK_NAME).read_text()) == other  # still the other run's


def test_a_killed_runs_lock_is_taken_over_and_a_finished_run_leaves_none(
    spark_kafka: SparkSession, kafka: KafkaCluster, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    _held_by(out, "report-28301-abc pid 1", timedelta(minutes=61))
    code, lines = _run(kafka, out, "--lock-stale-after", "3600")
    assert code == 0, lines
    taken = [line for line in lines if line.startswith("vigil report: lock: taking over ")]
    assert len(taken) == 1, lines
    assert "report-28301-abc pid 1" in taken[0], lines
    assert any(line.startswith("vigil report: tables: ") for line in lines), lines
    assert not (out / run_lock.LOCK_NAME).exists()
    code, lines = _run(kafka, out)  # and the next run finds the output free
    assert code == 0, lines
    assert not any(line.startswith(("vigil report: lock:", "vigil report: skipped:")) for line in lines), lines
    assert not (out / run_lock.LOCK_NAME).exists()
