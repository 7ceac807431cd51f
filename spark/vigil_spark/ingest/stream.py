"""Run the incremental ingest: one Structured Streaming query per source topic, `availableNow`, checkpointed.

Each query reads what is new since its checkpoint and, per micro-batch, writes every table its records feed
(`foreachBatch`). Exactly once: a micro-batch's offset range is logged before it runs and replayed unchanged
after a failure, and its rows go to the partition `ingest_batch=<cluster>.<topic>.<batch id>` of each table with
dynamic partition overwrite, so a replay replaces what the failed attempt wrote instead of adding to it. One
query per topic (rather than one file sink per table) reads the topic once per run and lets both topics feed
the one `problems` table. A re-run with nothing new runs no batch and writes nothing.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812 - the PySpark convention

from vigil_core.kafka.security import KafkaConnection
from vigil_spark import failure, tables
from vigil_spark.ingest import events, offsets
from vigil_spark.location import Location
from vigil_spark.sources import kafka

#: Tables each source feeds, in the order they are written.
OFFSETS_TABLES: Final = ("offset_commits", "group_metadata", "consumer_group_records", "problems")
EVENTS_TABLES: Final = ("vigil_events", "problems")

Keep = Callable[[DataFrame], DataFrame]
#: A batch's tables by name, given the batch and what to apply to intermediates several tables share.
Splitter = Callable[[DataFrame, Keep], dict[str, DataFrame]]


class IngestError(Exception):
    """A source could not be ingested; the message is one line naming the topic."""


@dataclass
class Stage:
    """What one source's run did."""

    topic: str
    records: int = 0
    """Records read this run (new since the checkpoint)."""
    added: dict[str, int] = field(default_factory=dict)
    """Rows added per table."""
    batches: int = 0
    seconds: float = 0.0
    skipped: str | None = None
    """Why the source was not read (e.g. the topic does not exist), else None."""


def batch_tag(cluster: str, topic: str, batch_id: int) -> str:
    """The `ingest_batch` partition value of one micro-batch of one topic of one cluster."""
    return f"{cluster}.{topic}.{batch_id:010d}"


def checkpoint_dir(checkpoints: Location | Path, cluster: str, topic: str) -> Location:
    """Where the query for `topic` of `cluster` keeps its offsets (one checkpoint per cluster and topic)."""
    return Location.of(checkpoints) / cluster / topic


def write_batch(frames: dict[str, DataFrame], tables_dir: Location | Path, tag: str) -> dict[str, int]:
    """Write each table's rows of one micro-batch into its `ingest_batch=<tag>` partition; rows per table."""
    added: dict[str, int] = {}
    for name, frame in frames.items():
        out = frame.select(*tables.SCHEMAS[name].fieldNames()).withColumn(tables.BATCH_COLUMN, F.lit(tag))
        count = out.count()
        if count:
            (
                out.write.mode("overwrite")
                .option("partitionOverwriteMode", "dynamic")
                .partitionBy(tables.BATCH_COLUMN)
                .parquet(str(tables.path(tables_dir, name)))
            )
        added[name] = count
    return added


def run_source(
    spark: SparkSession,
    conn: KafkaConnection,
    *,
    topic: str,
    partitions: list[int],
    split: Splitter,
    table_names: tuple[str, ...],
    tables_dir: Location | Path,
    checkpoints: Location | Path,
    cluster: str,
    group_id: str | None = None,
    max_records_per_batch: int | None = None,
) -> Stage:
    """Ingest what is new on `topic` into its tables and wait until caught up (availableNow)."""
    stage = Stage(topic, added=dict.fromkeys(table_names, 0))
    started = time.monotonic()

    failures: list[BaseException] = []

    def each_batch(batch: DataFrame, batch_id: int) -> None:
        kept = [batch.persist()]

        def keep(frame: DataFrame) -> DataFrame:
            kept.append(frame.persist())  # decoded once, then counted and written per table from the cache
            return kept[-1]

        try:
            stage.records += kept[0].count()
            added = write_batch(split(kept[0], keep), tables_dir, batch_tag(cluster, topic, batch_id))
        except Exception as exc:
            failures.append(exc)  # the query's own error holds only the traceback's text: keep the exception
            raise
        finally:
            for frame in kept:
                frame.unpersist()
        for name, count in added.items():
            stage.added[name] = stage.added.get(name, 0) + count
        stage.batches += 1

    source = kafka.stream_topic(
        spark, conn, topic, partitions, group_id=group_id, max_records_per_batch=max_records_per_batch
    )
    query = (
        source.writeStream.queryName(f"vigil-ingest-{cluster}-{topic}")
        .option("checkpointLocation", str(checkpoint_dir(checkpoints, cluster, topic)))
        .trigger(availableNow=True)
        .foreachBatch(each_batch)
        .start()
    )
    try:
        query.awaitTermination()
    except StreamingQueryException as exc:
        cause = failures[-1] if failures else exc
        raise IngestError(f"ingest {topic}: {failure.one_line(cause)}") from exc
    finally:
        if query.isActive:
            query.stop()
    stage.seconds = time.monotonic() - started
    return stage


def ingest_offsets(
    spark: SparkSession,
    conn: KafkaConnection,
    *,
    partitions: list[int],
    tables_dir: Location | Path,
    checkpoints: Location | Path,
    cluster: str,
    group_id: str | None = None,
    max_records_per_batch: int | None = None,
    topic: str = offsets.SOURCE,
) -> Stage:
    """`__consumer_offsets` → offset_commits, group_metadata, consumer_group_records, problems.

    `topic` reads another topic holding records in the same format instead (a copy: the broker refuses
    producing into `__consumer_offsets`, so tests and benchmarks write damaged or bulk records elsewhere).
    """
    return run_source(
        spark,
        conn,
        topic=topic,
        partitions=partitions,
        split=lambda batch, keep: offsets.split(batch, cluster, topic, keep),
        table_names=OFFSETS_TABLES,
        tables_dir=tables_dir,
        checkpoints=checkpoints,
        cluster=cluster,
        group_id=group_id,
        max_records_per_batch=max_records_per_batch,
    )


def ingest_events(
    spark: SparkSession,
    conn: KafkaConnection,
    *,
    topic: str,
    partitions: list[int],
    tables_dir: Location | Path,
    checkpoints: Location | Path,
    cluster: str,
    group_id: str | None = None,
    max_records_per_batch: int | None = None,
) -> Stage:
    """vigil's events topic → vigil_events, problems; skipped (not an error) when the topic does not exist."""
    if not partitions:
        return Stage(topic, added=dict.fromkeys(EVENTS_TABLES, 0), skipped="topic not found")
    return run_source(
        spark,
        conn,
        topic=topic,
        partitions=partitions,
        split=lambda batch, keep: events.split(batch, cluster, topic, keep),
        table_names=EVENTS_TABLES,
        tables_dir=tables_dir,
        checkpoints=checkpoints,
        cluster=cluster,
        group_id=group_id,
        max_records_per_batch=max_records_per_batch,
    )


def describe(stage: Stage) -> str:
    """The stage's progress line (after "vigil report: ")."""
    if stage.skipped is not None:
        return f"ingest {stage.topic}: skipped ({stage.skipped})"
    added = ", ".join(f"{name} +{count}" for name, count in stage.added.items())
    return f"ingest {stage.topic}: {stage.records} new records in {stage.seconds:.1f}s ({added})"
