"""`vigil report`: flags and settings are checked before any JVM starts; every failure is one line, no traceback."""

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from vigil_cli import cli as core_cli
from vigil_spark import cli
from vigil_spark.ingest import stream
from vigil_spark.location import Location


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def test_unreachable_bootstrap_exits_1_with_one_line(tmp_path: Path) -> None:
    """As a user runs it (a process, so librdkafka's own stderr would show): one line naming the address."""
    bootstrap = f"127.0.0.1:{closed_port()}"
    env = {"VIGIL_KAFKA_BOOTSTRAP_SERVERS": bootstrap, "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-m", "vigil_cli", "report", "--out", str(tmp_path / "out"), "--connect-timeout", "2"],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"vigil report: __consumer_offsets: cannot list partitions from {bootstrap} within 2s")
    assert not (tmp_path / "out").exists()  # nothing is written before the cluster answered


def test_python_dash_m_vigil_spark_is_the_same_entry(tmp_path: Path) -> None:
    env = {"VIGIL_KAFKA_BOOTSTRAP_SERVERS": "not-an-address", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-m", "vigil_spark", "--out", str(tmp_path)], env=env,
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode == 2
    assert done.stderr == "vigil report: VIGIL_KAFKA_BOOTSTRAP_SERVERS: expected host:port[,host:port...], " \
        "got 'not-an-address'\n"  # fmt: skip


def test_missing_bootstrap_names_the_variable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("VIGIL_KAFKA_BOOTSTRAP_SERVERS", raising=False)
    assert core_cli.main(["report", "--out", str(tmp_path)]) == 2  # through `vigil`, reading the environment
    assert capsys.readouterr().err == "vigil report: VIGIL_KAFKA_BOOTSTRAP_SERVERS: required, not set\n"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--cluster", "a/b"], "--cluster: expected letters, digits, '.', '_' or '-' (at most 100), got 'a/b'"),
        (["--cluster", ""], "--cluster: expected letters"),
        (["--max-records-per-batch", "0"], "--max-records-per-batch: expected a positive number, got 0"),
        (["--connect-timeout", "-1"], "--connect-timeout: expected a positive number of seconds, got -1.0"),
    ],
)
def test_bad_flags_exit_2_with_one_line(
    flags: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = {"VIGIL_KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:9"}
    assert cli.main(["--out", str(tmp_path), *flags], env=env) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"vigil report: {message}")
    assert err.count("\n") == 1


def test_out_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main([], env={})
    assert exit_info.value.code == 2
    assert "--out" in capsys.readouterr().err


def test_report_is_wired_into_the_vigil_command() -> None:
    assert core_cli.EXTRAS["report"][:2] == ("vigil_spark.cli", "report")


def test_spark_errors_are_cut_to_their_first_line() -> None:
    long = RuntimeError("\n  [STREAM_FAILED] Query terminated with exception: boom\n\tat org.apache.spark...\n")
    assert cli.describe_error(long) == "[STREAM_FAILED] Query terminated with exception: boom"
    assert cli.describe_error(RuntimeError("x" * 1000)).endswith("...")
    assert len(cli.describe_error(RuntimeError("x" * 1000))) == 400


def test_progress_lines_name_the_topic_the_count_and_each_table() -> None:
    stage = stream.Stage("__consumer_offsets", records=12, added={"offset_commits": 10, "problems": 0}, seconds=3.21)
    assert (
        stream.describe(stage) == "ingest __consumer_offsets: 12 new records in 3.2s (offset_commits +10, problems +0)"
    )
    assert stream.describe(stream.Stage("vigil.events", skipped="topic not found")) == (
        "ingest vigil.events: skipped (topic not found)"
    )


def test_batch_partitions_and_checkpoints_are_per_cluster_and_topic(tmp_path: Path) -> None:
    assert stream.batch_tag("prod-eu", "__consumer_offsets", 7) == "prod-eu.__consumer_offsets.0000000007"
    expected = Location.of(tmp_path / "prod-eu" / "vigil.events")
    assert stream.checkpoint_dir(tmp_path, "prod-eu", "vigil.events") == expected


def test_secrets_in_spark_errors_are_masked() -> None:
    """Spark quotes the Kafka client's parameters, JAAS line and password included, in some errors."""
    error = RuntimeError(
        "requirement failed: old parameters: {sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule "
        'required username="app" password="s3cr\\"et";, bootstrap.servers=b:1} other password=plain,x'
    )
    line = cli.describe_error(error)
    assert "s3cr" not in line
    assert "plain" not in line
    assert 'username="app" password=***;' in line


def test_the_group_id_is_per_cluster_unless_given() -> None:
    args = cli.build_parser().parse_args(["--out", "o", "--cluster", "prod-eu"])
    assert cli.group_id(args) == "vigil-report-prod-eu"
    args = cli.build_parser().parse_args(["--out", "o", "--group-id", "mine"])
    assert cli.group_id(args) == "mine"


def test_conf_flags_are_spark_properties_in_order(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = cli.build_parser().parse_args(["--out", str(tmp_path), "--conf", "spark.a=b=c", "--conf", "spark.k="])
    assert args.conf == [("spark.a", "b=c"), ("spark.k", "")]
    for bad in ("spark.a", "=v", " spark.a=v"):
        with pytest.raises(SystemExit) as exit_info:
            cli.build_parser().parse_args(["--out", str(tmp_path), "--conf", bad])
        assert exit_info.value.code == 2
        assert f"--conf: expected KEY=VALUE (a Spark property), got {bad!r}" in capsys.readouterr().err
