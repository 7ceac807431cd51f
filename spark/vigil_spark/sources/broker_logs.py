"""Broker logs (plain or gzip files matched by globs) as the `broker_log` DataFrame.

Each file is read line by line in order (so context between lines survives) with the pure parser
`vigil_spark.parse.broker_log` — on the driver, or one Spark task per file (`read(distributed=True)`).
Paths are local or mounted filesystem paths (the same on the driver and the executors), as a CronJob sees a
log volume. Relevant lines no template understands become rows with
`event = "unparsed"` (the `reason` says why): counted with `unparsed_count`, never fatal.
"""

import glob
import gzip
import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Final

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812 - the PySpark convention
from pyspark.sql.types import DataType, IntegerType, StringType, StructField, StructType, TimestampType

from vigil_spark.parse import broker_log

#: The event of a relevant line no template matched (not one of `broker_log.EVENTS`).
UNPARSED: Final = "unparsed"

#: The node from the path: `.../kafka-1/server.log`, `.../broker-3/server.log.2.gz`.
DEFAULT_NODE_PATTERN: Final = r"(?:^|/)(?:kafka|broker)-(?P<node>[^/]+)/[^/]*$"


def _field(name: str, kind: DataType, doc: str) -> StructField:
    return StructField(name, kind, True, {"comment": doc})


SCHEMA: Final = StructType(
    [
        _field("cluster", StringType(), "The cluster name the report was given."),
        _field("node", StringType(), "Broker node: from the path, else the line's coordinator id; null if unknown."),
        _field("ts", TimestampType(), "When the line was logged (UTC); null for unparsed lines."),
        _field("group", StringType(), "The consumer group the line is about."),
        _field("event", StringType(), 'One of vigil_spark.parse.broker_log.EVENTS, or "unparsed".'),
        _field("generation", IntegerType(), "Generation or group epoch (see EVENTS)."),
        _field("members", IntegerType(), "Member count, when the line says."),
        _field("member_id", StringType(), "The member the line names."),
        _field("instance_id", StringType(), "The static member's instance id."),
        _field("reason", StringType(), "Broker/client reason text (see EVENTS); why, for unparsed lines."),
        _field("line", StringType(), "The line as logged."),
        _field("file", StringType(), "The file it came from."),
    ]
)

_Row = tuple[
    str,
    str | None,
    object,
    str | None,
    str,
    int | None,
    int | None,
    str | None,
    str | None,
    str | None,
    str | None,
    str,
]


def expand(globs: Sequence[str]) -> list[str]:
    """Every file the globs match (`**` recurses), sorted, without duplicates."""
    found = {str(Path(p)) for pattern in globs for p in glob.glob(pattern, recursive=True) if Path(p).is_file()}
    return sorted(found)


def _open_lines(path: str) -> Iterator[str]:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as handle:
        yield from handle


def read(
    spark: SparkSession,
    globs: Sequence[str],
    *,
    cluster: str = "default",
    fmt: broker_log.LogFormat | None = None,
    node_pattern: str | None = DEFAULT_NODE_PATTERN,
    keep_lines: bool = True,
    distributed: bool | None = None,
) -> DataFrame:
    """The `broker_log` frame of every file the globs match (an empty frame when none does).

    `keep_lines=False` leaves `line` null for parsed events (unparsed lines always keep theirs).
    `distributed`: parse each file in a Spark task (the package must be importable by the executors' Python,
    as in the report's image); default: only when the master is not `local` — locally the driver parses (a
    broker log has few relevant lines, and local Python workers may run another interpreter).
    """
    fmt = fmt or broker_log.LogFormat()
    broker_log.check_format(fmt)
    if node_pattern is not None:
        re.compile(node_pattern)
    files = expand(globs)
    if not files:
        return spark.createDataFrame([], SCHEMA)
    if distributed is None:
        distributed = not (spark.sparkContext.master or "local").startswith("local")
    if not distributed:
        rows = [row for path in files for row in parse_file(path, cluster, fmt, node_pattern, keep_lines)]
        return spark.createDataFrame(rows, SCHEMA)

    def parse(paths: Iterable[str]) -> Iterator[_Row]:
        for path in paths:
            yield from parse_file(path, cluster, fmt, node_pattern, keep_lines)

    rdd = spark.sparkContext.parallelize(files, len(files)).mapPartitions(parse)
    return spark.createDataFrame(rdd, SCHEMA)


def parse_file(
    path: str,
    cluster: str,
    fmt: broker_log.LogFormat,
    node_pattern: str | None = DEFAULT_NODE_PATTERN,
    keep_lines: bool = True,
) -> Iterator[_Row]:
    """The `broker_log` rows of one file, in file order (pure apart from reading it)."""
    last = [""]  # the line the parser consumed last: an event's own line

    def tap() -> Iterator[str]:
        for line in _open_lines(path):
            last[0] = line.rstrip("\r\n")
            yield line

    node_from_path = _node(path, node_pattern)
    for item in broker_log.parse_lines(tap(), fmt):
        if isinstance(item, broker_log.Unparsed):
            yield (cluster, node_from_path, None, None, UNPARSED, None, None, None, None, item.why, item.line, path)
            continue
        node = node_from_path if node_from_path is not None else _str(item.node_id)
        line = last[0] if keep_lines else None
        yield (
            cluster,
            node,
            item.ts,
            item.group,
            item.event,
            item.generation,
            item.members,
            item.member_id,
            item.instance_id,
            item.reason,
            line,
            path,
        )


def _str(value: int | None) -> str | None:
    return str(value) if value is not None else None


def _node(path: str, node_pattern: str | None) -> str | None:
    if not node_pattern:
        return None
    match = re.search(node_pattern, path)
    if match is None:
        return None
    named = match.groupdict().get("node")
    if named is not None:
        return named
    return match.group(1) if match.groups() else None


def unparsed_count(frame: DataFrame) -> int:
    """How many relevant lines no template understood."""
    return frame.filter(F.col("event") == UNPARSED).count()
