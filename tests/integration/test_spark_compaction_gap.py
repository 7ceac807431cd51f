"""Compaction removes old generations of a group from `__consumer_offsets` (they share one key); the report must
count them anyway, from the difference of generation numbers, and show the hole as a gap row, never hide it.

Real GroupMetadata records of a real group are copied (the same bytes) to a regular topic — the broker refuses
producing into `__consumer_offsets` and compacts on its own schedule — first the early generations, then, for the
second run, only the last one: what a report run finds after the log cleaner kept just the latest record per key.
Ground truth is the broker's own log (`Stabilized group … generation N`), never the job's decoder.
"""

from pathlib import Path

import pytest
from confluent_kafka import Producer
from pyspark.sql import SparkSession

from vigil_core.consumer_offsets import records as rec
from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import broker_log, clients
from vigil_dev.testing.waiting import wait_for
from vigil_spark import model, tables
from vigil_spark.ingest import stream

pytest_plugins = ["vigil_dev.testing.spark_fixtures"]
pytestmark = [pytest.mark.integration, pytest.mark.spark]


def test_generations_lost_to_compaction_are_counted_and_shown_as_a_gap(
    spark_kafka: SparkSession, kafka: KafkaCluster, tmp_path: Path
) -> None:
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("gap"), partitions=2)
    group = clients.unique("g-gap")

    first = clients.Member(conn, group, [topic], "gap-a").start()
    try:
        clients.wait_stable(conn, group, 1)
        for name in ("gap-b", "gap-c"):  # each: a join, then a LeaveGroup
            other = clients.Member(conn, group, [topic], name).start()
            clients.wait_stable(conn, group, 2)
            other.close()
            clients.wait_stable(conn, group, 1)
        logged = wait_for(lambda: broker_log.generations(kafka, group), lambda g: len(g) >= 5, timeout=10,
                          what="five stabilized generations in the broker log")  # fmt: skip
        raw = clients.read_offsets_topic(conn)
    finally:
        first.close()

    key = b"\x00\x02" + len(group).to_bytes(2, "big") + group.encode()
    by_generation: dict[int, tuple[bytes, bytes]] = {}
    for _, _, k, v in raw:
        if k != key or v is None:
            continue
        _, value = rec.decode_record(k, v)
        assert isinstance(value, rec.GroupMetadataValue), value
        by_generation.setdefault(value.generation, (k, v))  # the first record of each generation
    # generation 0: the group's creation (Empty, no member); then one record per stabilized generation
    assert sorted(by_generation) == [0, *logged]
    last = max(by_generation)
    early = [g for g in sorted(by_generation) if g <= 2]
    copy = clients.create_topic(conn, clients.unique("offsets-copy"), partitions=1)

    def produce(generations: list[int]) -> None:
        producer = Producer(conn.confluent_config() | clients.QUIET | {"enable.idempotence": True})
        for g in generations:
            k, v = by_generation[g]
            producer.produce(copy, key=k, value=v, partition=0)
        assert producer.flush(30) == 0

    def run() -> list[tuple[int, int, bool, str]]:
        stream.ingest_offsets(spark_kafka, conn, partitions=[0], tables_dir=tmp_path / "tables",
                              checkpoints=tmp_path / "ckpt", cluster="gap", topic=copy)  # fmt: skip
        frames = model.compute(
            tables.read(spark_kafka, tmp_path / "tables", "group_metadata"),
            tables.read(spark_kafka, tmp_path / "tables", "consumer_group_records"),
            tables.read(spark_kafka, tmp_path / "tables", "vigil_events"),
            model.read_broker_log(spark_kafka, tmp_path / "tables"),
        )
        rows = frames["rebalances"].filter(f"`group` = '{group}'").collect()
        return sorted((r["generation"], r["rebalances"], r["gap"], r["basis"]) for r in rows)

    produce(early)  # 0, 1, 2: generation 0 is the group's creation, not a rebalance
    assert [(g, n, gap) for g, n, gap, _ in run()] == [(1, 1, False), (2, 1, False)]

    produce([last])  # the log cleaner kept only the newest record of the key: generations 3..last-1 are gone
    after = run()
    seen = [(g, n) for g, n, gap, _ in after if not gap]
    gaps = [(g, n, basis) for g, n, gap, basis in after if gap]
    assert seen == [(1, 1), (2, 1), (last, 1)]
    missing = last - 1 - max(early)
    assert [(g, n) for g, n, _ in gaps] == [(last - 1, missing)]
    assert f"generations {max(early) + 1}..{last - 1} are in no source" in gaps[0][2]
    # exact across the gap: every generation the broker logged is counted once, seen or not
    assert sum(n for _, n, _, _ in after) == len(logged) == last
