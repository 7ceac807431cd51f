"""Kafka's own renderings of `__consumer_offsets` records, as plain dicts: the other side of a differential test.

Two tools from the broker jars, each run as a small JVM (`java -cp "<libs>/*"`):
- the console consumer with `OffsetsMessageFormatter` / `GroupMetadataMessageFormatter` (kafka-tools): record
  types 0-1 and 2 only, one JSON object per printed record (4.1.1 and 4.4.0 write them with no separator), without
  offsets — so the caller reads an exact record range and pairs by order;
- `DumpLogSegments --offsets-decoder` (kafka core) over a partition's segment files: every record type the
  broker knows, with its offset — the only Kafka rendering of the KIP-848 records (types 3-8) in 4.1.1 and 4.4.0.

Nothing here interprets a field; the test decides what equal means.
"""

import json
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

OFFSETS_FORMATTER = "org.apache.kafka.tools.consumer.OffsetsMessageFormatter"
GROUP_METADATA_FORMATTER = "org.apache.kafka.tools.consumer.GroupMetadataMessageFormatter"
_CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
_DUMP_LOG_SEGMENTS = {(3, 9): "kafka.tools.DumpLogSegments", (4, 4): "org.apache.kafka.tools.DumpLogSegments"}
"""By the release that has it there: 4.4 rewrote it in Java, in kafka-tools (4.1.1 and 3.9.1: Scala, kafka core)."""
#: A small client JVM on a shared 2-core machine: the tools read a few hundred records.
_JVM_OPTS = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
#: Every log line to stderr, so stdout holds only what the formatter printed (log4j2 defaults to stdout).
_LOG4J = """status = warn
appender.err.type = Console
appender.err.name = ERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = %d %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.err.ref = ERR
"""
_PROCESSED = re.compile(r"Processed a total of (\d+) messages")
_DUMP_LINE = re.compile(r"^\| offset: (\d+) .*? key: ")


class FormatterError(AssertionError):
    """A Kafka tool failed or printed something this module cannot parse; the message quotes it."""


@dataclass(frozen=True)
class DumpedRecord:
    """One record as `DumpLogSegments --offsets-decoder` printed it; `value` None is a tombstone (`<DELETE>`)."""

    offset: int
    key: dict[str, Any]
    value: dict[str, Any] | None


def offsets_partition(group: str, partitions: int) -> int:
    """The `__consumer_offsets` partition of `group`: Java's `String.hashCode` (UTF-16 units), abs, modulo."""
    h = 0
    data = group.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i : i + 2], "big")) & 0xFFFFFFFF
    signed = h - (1 << 32) if h >= 1 << 31 else h
    return (0 if signed == -(1 << 31) else abs(signed)) % partitions


def _java(libs: Path, work_dir: Path, main: str, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    log4j = work_dir / "log4j2-stderr.properties"
    log4j.write_text(_LOG4J)
    cmd = ["java", *_JVM_OPTS, f"-Dlog4j2.configurationFile={log4j}", "-cp", f"{libs}/*", main, *args]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        raise FormatterError(f"{main} did not finish within {timeout:.0f}s: {exc.stderr!r:.1000}") from exc


def formatted_records(
    libs: Path,
    bootstrap: str,
    formatter: str,
    *,
    partition: int,
    offset: int,
    count: int,
    work_dir: Path,
    timeout: float = 90.0,
) -> list[dict[str, Any]]:
    """What `formatter` prints for exactly the `count` records of `__consumer_offsets` from `offset` on
    (a PLAINTEXT listener: the `kafka` fixture).

    The console consumer assigns the partition (no group, so it writes nothing to the topic it reads) and
    stops after `count` records; a shorter read (its own timeout) is an error, not a smaller comparison.
    """
    done = _java(
        libs, work_dir, _CONSOLE_CONSUMER,
        "--bootstrap-server", bootstrap, "--topic", "__consumer_offsets",
        "--partition", str(partition), "--offset", str(offset), "--max-messages", str(count),
        "--timeout-ms", str(int(timeout * 1000 * 2 / 3)), "--formatter", formatter,
        *_consumer_properties(libs, "exclude.internal.topics=false", "isolation.level=read_committed"),
        timeout=timeout,
    )  # fmt: skip
    processed = _PROCESSED.search(done.stderr)
    if done.returncode != 0 or processed is None or int(processed.group(1)) != count:
        raise FormatterError(
            f"{formatter} over partition {partition} from {offset}: exit {done.returncode}, "
            f"{processed.group(0) if processed else 'no count'} (wanted {count}); stderr: {done.stderr[-1500:]}"
        )
    return _json_objects(done.stdout, formatter)


_COMMAND_PROPERTY_SINCE = (4, 4)
"""4.4's console consumer deprecates `--consumer-property` for `--command-property`, printing the warning on stdout
among the records; 3.9.1 and 4.1.1 know only `--consumer-property` (read in their kafka-tools jars)."""


def _release(libs: Path) -> tuple[int, int]:
    """The (major, minor) release of the broker jars in `libs`, from its kafka-tools jar's name."""
    jars = sorted(libs.glob("kafka-tools-[0-9]*.jar"))
    found = re.fullmatch(r"kafka-tools-(\d+)\.(\d+)\..*\.jar", jars[0].name) if len(jars) == 1 else None
    if found is None:
        raise FormatterError(f"expected one kafka-tools-<version>.jar in {libs}, found {[j.name for j in jars]}")
    return int(found.group(1)), int(found.group(2))


def _consumer_properties(libs: Path, *properties: str) -> list[str]:
    option = "--command-property" if _release(libs) >= _COMMAND_PROPERTY_SINCE else "--consumer-property"
    return [arg for prop in properties for arg in (option, prop)]


def _dump_log_segments(libs: Path) -> str:
    release = _release(libs)
    return _DUMP_LOG_SEGMENTS[max(since for since in _DUMP_LOG_SEGMENTS if since <= release)]


def _json_objects(text: str, what: str) -> list[dict[str, Any]]:
    decoder = json.JSONDecoder()
    out: list[dict[str, Any]] = []
    pos = 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos == len(text):
            return out
        try:
            obj, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise FormatterError(f"{what}: not JSON at {pos}: {text[pos : pos + 300]!r}") from exc
        if not isinstance(obj, dict):
            raise FormatterError(f"{what}: expected a JSON object, got {obj!r:.300}")
        out.append(obj)


def dumped_records(libs: Path, segments: Sequence[Path], work_dir: Path, timeout: float = 90.0) -> list[DumpedRecord]:
    """Every record of the given `__consumer_offsets` segment files as `DumpLogSegments --offsets-decoder`
    renders it (the broker keeps running: a segment read while it is written ends at the last whole batch)."""
    files = ",".join(str(s) for s in segments)
    done = _java(
        libs,
        work_dir,
        _dump_log_segments(libs),
        "--offsets-decoder",
        "--deep-iteration",
        "--files",
        files,
        timeout=timeout,
    )
    if done.returncode != 0:
        raise FormatterError(f"DumpLogSegments {files}: exit {done.returncode}: {done.stderr[-1500:]}")
    out: list[DumpedRecord] = []
    decoder = json.JSONDecoder()
    for line in done.stdout.splitlines():
        head = _DUMP_LINE.match(line)
        if head is None:
            continue  # file and batch headers
        try:
            key, end = decoder.raw_decode(line, head.end())
            rest = line[end:]
            if not rest.startswith(" payload: "):
                raise FormatterError(f"DumpLogSegments: no payload after the key: {line[:500]}")
            payload = rest[len(" payload: ") :]
            value = None if payload == "<DELETE>" else decoder.decode(payload)
        except json.JSONDecodeError as exc:
            raise FormatterError(f"DumpLogSegments: unparsed record line: {line[:500]}") from exc
        out.append(DumpedRecord(int(head.group(1)), key, value))
    return out
