"""`--out` and `--checkpoint`: a local path or a Hadoop URI, kept as Spark and Hadoop take it."""

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vigil_spark import cli
from vigil_spark.location import Location


@pytest.mark.parametrize(
    ("given_", "where"),
    [
        ("out", "out"),
        ("./out/", "out"),
        ("/tmp/report/", "/tmp/report"),
        ("/tmp//report/./x", "/tmp/report/x"),
        ("hdfs://namenode:8020/reports/", "hdfs://namenode:8020/reports"),
        ("s3a://bucket/vigil", "s3a://bucket/vigil"),
        ("viewfs://cluster/report", "viewfs://cluster/report"),
        ("file:///", "file:///"),
        ("file:///tmp/out/", "file:///tmp/out"),
    ],
)
def test_a_flag_becomes_the_location_spark_is_given(given_: str, where: str) -> None:
    assert str(Location.of(given_)) == where


def test_children_join_with_one_slash() -> None:
    assert str(Location.of("file:///") / "model" / "daily") == "file:///model/daily"
    assert str(Location.of("hdfs://nn/r") / "tables") == "hdfs://nn/r/tables"
    assert str(Location.of(Path("/tmp/x")) / "report.html") == "/tmp/x/report.html"
    assert Location.of(Location.of("out")) == Location("out")


@given(st.lists(st.from_regex(r"[a-z0-9_=.-]{1,12}", fullmatch=True).filter(lambda s: s not in {".", ".."}),
                min_size=1, max_size=5))  # fmt: skip
def test_a_joined_local_location_is_the_path_python_would_join(parts: list[str]) -> None:
    joined = Location.of("/base")
    for part in parts:
        joined = joined / part
    assert str(joined) == str(Path("/base", *parts))


def test_an_empty_out_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.build_parser().parse_args(["--out", ""])
    assert exited.value.code == 2
    assert "--out: expected a path or a URI, got an empty string" in capsys.readouterr().err
