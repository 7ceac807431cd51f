"""`vigil report` ingests the real `__consumer_offsets` and events topic incrementally, each record exactly once.

A real classic group rebalances (2 → 3 → 2 members → empty) and commits; the report runs, runs again, the group
commits more, the report runs a third time. Ground truth is never the decoder under test: committed offsets come
from the broker's OffsetFetch, generations from the broker's own log, record counts from the broker's log start
and end offsets, events from what the test produced. A KIP-848 group joins and leaves too where the broker serves
the consumer protocol (4.0+); on 3.9 (`make test-spark-39`) the history is classic only.
"""

import contextlib
import io
import json
import os
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import OffsetSpec
from pyspark.sql import Row, SparkSession
from pyspark.sql.types import StringType

from vigil_core import events
from vigil_core.kafka.security import KafkaConnection
from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import broker_log, clients
from vigil_dev.testing.fixtures import release, run_kafka_version
from vigil_dev.testing.waiting import wait_for
from vigil_spark import cli, tables

pytest_plugins = ["vigil_dev.testing.spark_fixtures"]
pytestmark = [pytest.mark.integration, pytest.mark.spark]

# The ingest decodes rare records in Python workers, which must import vigil_spark: Spark starts `python3` from
# PATH unless told otherwise (read when the shared session starts, after collection).

CLUSTER = "itest"
OFFSETS = "__consumer_offsets"
OFFSETS_TABLES = ("offset_commits", "group_metadata", "consumer_group_records")


def broker_offsets(conn: KafkaConnection, group: str) -> dict[tuple[str, int], int]:
    """The group's committed offsets as the broker reports them (OffsetFetch, require_stable)."""
    admin = clients.admin(conn)  # keep the handle alive until the future resolves
    result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], require_stable=True)
    answer = result[group].result(timeout=15)
    return {(tp.topic, tp.partition): tp.offset for tp in answer.topic_partitions if tp.offset >= 0}


def offsets_topic_records(conn: KafkaConnection) -> set[tuple[int, int]]:
    """Every (partition, offset) the broker holds in `__consumer_offsets` (log start to end, no gaps here:
    no transactions, and the cleaner never touches the active segment)."""
    admin = clients.admin(conn)
    meta = admin.list_topics(topic=OFFSETS, timeout=10).topics[OFFSETS]
    found: set[tuple[int, int]] = set()
    for partition in meta.partitions:
        tp = TopicPartition(OFFSETS, partition)
        earliest, latest = OffsetSpec.earliest(), OffsetSpec.latest()  # type: ignore[no-untyped-call]
        start = admin.list_offsets({tp: earliest})[tp].result(timeout=15).offset
        end = admin.list_offsets({tp: latest})[tp].result(timeout=15).offset
        found |= {(partition, o) for o in range(start, end)}
    return found


def group_state(conn: KafkaConnection, group: str) -> str:
    return str(clients.describe_group(conn, group).state).split(".")[-1].upper()


@dataclass
class Run:
    code: int
    lines: list[str]
    rows: dict[str, list[Row]] = field(default_factory=dict)


def report(spark: SparkSession, conn: KafkaConnection, out: Path, *extra: str) -> Run:
    """`vigil report --ingest-only` in this process (it reuses the test session and leaves it running)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = cli.main(
            ["--out", str(out), "--cluster", CLUSTER, "--master", "local[2]", "--ingest-only", *extra], conn.to_env()
        )
    rows = {name: tables.read(spark, out / "tables", name).collect() for name in tables.SCHEMAS}
    return Run(code, err.getvalue().splitlines(), rows)


@dataclass
class History:
    kip848: str | None
    """The KIP-848 group; None on a broker that serves only the classic protocol."""
    kip848_member: str
    kip848_epochs: list[int]
    """Group epochs the broker logged for the KIP-848 group."""
    out: Path
    topic: str
    group: str
    events_topic: str
    checkpoints: list[tuple[int, set[str]]]
    """(generation stabilized per the broker log, client ids of the members) at each point the test waited for."""
    offsets_1: dict[tuple[str, int], int]
    offsets_2: dict[tuple[str, int], int]
    records: list[set[tuple[int, int]]]
    """Every record of `__consumer_offsets` per the broker, right after runs 1, 2 and 3."""
    empty_generations: list[int]
    stabilized: list[int]
    event: events.StallDetected
    run_1: Run
    run_2: Run
    run_2_absent: Run
    run_3: Run


def _wait_stable(conn: KafkaConnection, group: str, size: int) -> None:
    wait_for(lambda: clients.stable_members(conn, group), lambda n: n == size, timeout=60,
             what=f"group {group} Stable with {size} assigned members")  # fmt: skip


def _wait_committed(conn: KafkaConnection, group: str, total: int) -> dict[tuple[str, int], int]:
    return wait_for(lambda: broker_offsets(conn, group), lambda o: sum(o.values()) == total, timeout=60,
                    what=f"group {group} committed {total} records")  # fmt: skip


def _checkpoint(kafka: KafkaCluster, group: str, members: list[clients.Member]) -> tuple[int, set[str]]:
    return max(broker_log.generations(kafka, group)), {m.client_id for m in members}


@pytest.fixture(scope="module")
def history(spark_kafka: SparkSession, kafka: KafkaCluster, tmp_path_factory: pytest.TempPathFactory) -> History:
    conn = kafka.connection()
    out = tmp_path_factory.mktemp("report")
    topic = clients.create_topic(conn, clients.unique("ingest"), partitions=3)
    events_topic = clients.create_topic(conn, clients.unique("vigil.events"), partitions=1)
    group = clients.unique("ingest-grp")
    clients.produce_spread(conn, topic, [f"a{i}" for i in range(60)], 3)

    members = clients.start_group(conn, group, [topic], size=2)
    _wait_committed(conn, group, 60)
    checkpoints = [_checkpoint(kafka, group, members)]
    members.append(clients.Member(conn, group, [topic], client_id=f"{group}-m2").start())
    _wait_stable(conn, group, 3)
    clients.produce_spread(conn, topic, [f"b{i}" for i in range(30)], 3)
    _wait_committed(conn, group, 90)
    checkpoints.append(_checkpoint(kafka, group, members))
    members.pop(0).close()
    _wait_stable(conn, group, 2)
    checkpoints.append(_checkpoint(kafka, group, members))
    for member in members:
        member.close()
    wait_for(lambda: group_state(conn, group), lambda s: s == "EMPTY", timeout=30, what=f"group {group} Empty")
    offsets_1 = broker_offsets(conn, group)

    kip848, kip848_member, kip848_epochs = None, "", []
    if release(run_kafka_version()) >= (4, 0):
        kip848 = clients.unique("ingest-848")
        modern = clients.start_group(conn, kip848, [topic], size=1, extra={"group.protocol": "consumer"})
        kip848_member = wait_for(lambda: modern[0].member_id or "", bool, timeout=30, what=f"{kip848}: member id")
        modern[0].close()
        bumps = wait_for(
            lambda: broker_log.broker_lines(kafka, kip848, r"\[GroupId {g}\] Bumped group epoch to (\d+)"),
            lambda lines: len(lines) >= 2,  # joined, left
            timeout=30,
            what=f"{kip848}: epoch bumps in the broker log",
        )
        kip848_epochs = sorted(int(e) for _, (e,) in bumps)

    event = events.StallDetected(
        time=datetime(2026, 11, 21, 12, 0, 0, 250000, tzinfo=UTC),
        cluster="test-cluster",
        group=group,
        source="sidecar",
        pod="pod-0",
        payload=events.StallPayload(
            member=events.MemberRef(member_id="member-1", instance_id="instance-1"),
            signal="beacon",
            stalled_for_ms=31000,
            stall_timeout_ms=30000,
        ),
    )
    bad = ["not json", json.dumps({"schema_version": 1, "type": "no-such-type", "group": group})]
    clients.produce(conn, events_topic, [events.encode_event(event).decode(), *bad], partition=0)

    run_1 = report(spark_kafka, conn, out, "--events-topic", events_topic)
    records = [offsets_topic_records(conn)]
    run_2 = report(spark_kafka, conn, out, "--events-topic", events_topic)
    records.append(offsets_topic_records(conn))
    run_2_absent = report(spark_kafka, conn, out, "--events-topic", clients.unique("absent"))

    late = clients.start_group(conn, group, [topic], size=1)
    clients.produce_spread(conn, topic, [f"c{i}" for i in range(30)], 3)
    offsets_2 = _wait_committed(conn, group, 120)
    late[0].close()
    wait_for(lambda: group_state(conn, group), lambda s: s == "EMPTY", timeout=30, what=f"group {group} Empty again")
    second = event.model_copy(update={"pod": "pod-1", "event_id": uuid.uuid4()})
    clients.produce(conn, events_topic, [events.encode_event(second).decode()], partition=0)

    run_3 = report(spark_kafka, conn, out, "--events-topic", events_topic)
    records.append(offsets_topic_records(conn))
    empty = broker_log.broker_lines(kafka, group, r"Group {g} with generation (\d+) is now empty")
    return History(
        kip848=kip848,
        kip848_member=kip848_member,
        kip848_epochs=kip848_epochs,
        out=out,
        topic=topic,
        group=group,
        events_topic=events_topic,
        checkpoints=checkpoints,
        offsets_1=offsets_1,
        offsets_2=offsets_2,
        records=records,
        empty_generations=sorted(int(g) for _, (g,) in empty),
        stabilized=broker_log.generations(kafka, group),
        event=event,
        run_1=run_1,
        run_2=run_2,
        run_2_absent=run_2_absent,
        run_3=run_3,
    )


def mine(run: Run, table: str, group: str) -> list[Row]:
    return [r for r in run.rows[table] if r.group == group]


def latest_commits(rows: list[Row]) -> dict[tuple[str, int], int]:
    latest: dict[tuple[str, int], Row] = {}
    for r in sorted(rows, key=lambda r: (r.log_partition, r.log_offset)):
        latest[(r.topic, r.partition)] = r
    return {k: r.committed_offset for k, r in latest.items() if not r.tombstone}


def test_every_run_succeeds_with_a_line_per_stage(history: History) -> None:
    for run in (history.run_1, history.run_2, history.run_2_absent, history.run_3):
        assert run.code == 0, run.lines
        assert all(line.startswith("vigil report: ") for line in run.lines)
        assert sum("ingest __consumer_offsets:" in line for line in run.lines) == 1
    assert any(f"ingest {history.events_topic}: 3 new records" in line for line in history.run_1.lines)
    assert any("ingest __consumer_offsets: 0 new records" in line for line in history.run_2.lines)
    assert any(f"ingest {history.events_topic}: 0 new records" in line for line in history.run_2.lines)
    absent = [line for line in history.run_2_absent.lines if "skipped (topic not found)" in line]
    assert len(absent) == 1, history.run_2_absent.lines


def test_internal_topic_resolves_partitions_in_the_stream(history: History) -> None:
    """The workaround holds for the streaming source too: records from more than 0 partitions."""
    partitions = {r.log_partition for t in OFFSETS_TABLES for r in history.run_1.rows[t]}
    assert 0 < len(partitions) <= 4
    assert len(mine(history.run_1, "offset_commits", history.group)) > 0
    # assign, not subscribe: four runs of the report joined no group, so wrote nothing into the topic it reads
    groups = {r.group for t in OFFSETS_TABLES for r in history.run_3.rows[t]}
    assert not [g for g in groups if g.startswith(("spark-kafka", cli.GROUP_ID_PREFIX))], groups


def test_commits_equal_what_the_broker_returns(history: History) -> None:
    rows = mine(history.run_1, "offset_commits", history.group)
    assert latest_commits(rows) == history.offsets_1
    assert {(t, p) for t, p in history.offsets_1} == {(history.topic, p) for p in range(3)}
    assert all(r.cluster == CLUSTER and r.commit_ts is not None and r.expire_ts is None for r in rows)
    assert all(not r.tombstone and r.metadata == "" for r in rows)
    assert latest_commits(mine(history.run_3, "offset_commits", history.group)) == history.offsets_2


def test_group_metadata_has_every_generation_the_test_waited_for(history: History) -> None:
    rows = mine(history.run_1, "group_metadata", history.group)
    with_members = {r.generation: r for r in rows if not r.tombstone and r.members}
    for generation, client_ids in history.checkpoints:
        row = with_members.get(generation)
        assert row is not None, f"generation {generation} missing; have {sorted(with_members)}"
        assert {m.client_id for m in row.members} == client_ids
        assert row.protocol_type == "consumer"
        assert row.protocol == "range"
        assert row.leader in {m.member_id for m in row.members}
        assert all(m.subscribed_topics == [history.topic] for m in row.members)
        assert all(m.session_timeout_ms == 6000 and m.rebalance_timeout_ms == 300000 for m in row.members)
        assert all(m.instance_id is None for m in row.members)
        assigned = sorted((a.topic, a.partition) for m in row.members for a in m.assigned)
        assert assigned == [(history.topic, p) for p in range(3)]
    # only generations the broker logged as stabilized carry members; the last record is the empty one it logged
    assert set(with_members) <= set(history.stabilized)
    last = max(rows, key=lambda r: r.log_offset)  # one group: one partition
    assert last.members == []
    assert last.generation == history.empty_generations[0]
    assert all(r.state_ts is not None for r in rows)


def test_a_rerun_adds_nothing(history: History) -> None:
    for name in tables.SCHEMAS:
        assert len(history.run_2.rows[name]) == len(history.run_1.rows[name]), name
        assert len(history.run_2_absent.rows[name]) == len(history.run_1.rows[name]), name


def ingested(run: Run) -> list[tuple[int, int]]:
    """(partition, offset) of every `__consumer_offsets` record in any table after `run`."""
    seen = [(r.log_partition, r.log_offset) for t in OFFSETS_TABLES for r in run.rows[t]]
    return seen + [(r.log_partition, r.log_offset) for r in run.rows["problems"] if r.source == OFFSETS]


def test_every_record_is_in_exactly_one_table_once_after_every_run(history: History) -> None:
    """The broker's log start..end of `__consumer_offsets`, record for record, against the tables."""
    for run, records in zip((history.run_1, history.run_2, history.run_3), history.records, strict=True):
        seen = ingested(run)
        assert len(seen) == len(set(seen))
        assert set(seen) == records
    assert history.records[0] < history.records[2]


def test_new_records_are_added_exactly_once(history: History) -> None:
    before = mine(history.run_1, "offset_commits", history.group)
    after = mine(history.run_3, "offset_commits", history.group)
    assert len(after) > len(before)
    assert {(r.log_partition, r.log_offset) for r in before} < {(r.log_partition, r.log_offset) for r in after}
    assert len(mine(history.run_3, "group_metadata", history.group)) > len(
        mine(history.run_1, "group_metadata", history.group)
    )


def test_events_are_ingested_and_bad_records_land_in_problems(history: History) -> None:
    first = history.run_1.rows["vigil_events"]
    assert len(first) == 1
    row = first[0]
    assert (row.cluster, row.group, row.type, row.schema_version) == (
        CLUSTER,
        history.group,
        "stall-detected",
        events.SCHEMA_VERSION,
    )
    assert (row.member_id, row.instance_id, row.pod) == ("member-1", "instance-1", "pod-0")
    assert row.ts.astimezone(UTC) == history.event.time  # collect() gives local naive times
    assert json.loads(row.payload_json) == json.loads(history.event.payload.model_dump_json())
    assert (row.log_partition, row.log_offset) == (0, 0)

    bad = [r for r in history.run_1.rows["problems"] if r.source == history.events_topic]
    assert sorted(r.log_offset for r in bad) == [1, 2]
    assert all(r.problem.startswith("not a vigil event") for r in bad)
    assert [r for r in history.run_1.rows["problems"] if r.source == OFFSETS] == []

    third = history.run_3.rows["vigil_events"]
    assert sorted((r.log_offset, r.pod) for r in third) == [(0, "pod-0"), (3, "pod-1")]
    assert len([r for r in history.run_3.rows["problems"] if r.source == history.events_topic]) == 2


@pytest.mark.kafka_min("4.0")
def test_kip848_records_carry_the_epochs_the_broker_logged(history: History) -> None:
    assert history.kip848 is not None
    rows = mine(history.run_1, "consumer_group_records", history.kip848)
    assert {3, 5, 6, 7, 8} <= {r.record_type for r in rows}
    group_epochs = sorted(r.epoch for r in rows if r.record_type == 3 and not r.tombstone)
    assert group_epochs == history.kip848_epochs
    members = {r.member_id for r in rows if r.record_type in (5, 7, 8)}
    assert members == {history.kip848_member}
    assert all(r.member_id is None for r in rows if r.record_type in (3, 4, 6))
    # the member left: its records 8, 7, 5 were tombstoned
    assert {r.record_type for r in rows if r.tombstone} >= {5, 7, 8}
    assert all((r.record_json is None) == r.tombstone for r in rows)
    member_records = [json.loads(r.record_json) for r in rows if r.record_type == 5 and not r.tombstone]
    assert all(m["subscribed_topic_names"] == [history.topic] for m in member_records)
    assert member_records


def test_tables_on_disk_have_the_contract_columns(spark_kafka: SparkSession, history: History, tmp_path: Path) -> None:
    """A table no record went to (KIP-848 records on 3.9) is not on disk: `tables.read` gives it empty."""
    written = {name for name in tables.SCHEMAS if (history.out / "tables" / name).exists()}
    expected_absent = set() if history.kip848 is not None else {"consumer_group_records"}
    assert set(tables.SCHEMAS) - written == expected_absent
    for name in expected_absent:
        assert tables.read(spark_kafka, history.out / "tables", name).count() == 0
    for name, schema in ((n, s) for n, s in tables.SCHEMAS.items() if n in written):
        on_disk = spark_kafka.read.parquet(str(history.out / "tables" / name)).schema
        expected = [(f.name, f.dataType) for f in schema.fields] + [(tables.BATCH_COLUMN, StringType())]
        assert [(f.name, f.dataType) for f in on_disk.fields] == expected, name
        assert tables.read(spark_kafka, tmp_path, name).schema == schema  # nothing ingested: empty, same columns


def test_report_runs_as_its_own_process(
    spark_kafka: SparkSession, kafka: KafkaCluster, tmp_path: Path, artifacts_dir: Path
) -> None:
    """`python -m vigil_spark` with its own JVM, as a user or a CronJob runs it: exit 0, only vigil's lines."""
    conn = kafka.connection()
    group = clients.unique("ingest-proc")
    topic = clients.create_topic(conn, clients.unique("ingest-proc"), partitions=1)
    clients.produce(conn, topic, [f"p{i}" for i in range(5)])
    members = clients.start_group(conn, group, [topic], size=1)
    expected = _wait_committed(conn, group, 5)
    members[0].close()
    env = {**os.environ, **conn.to_env()}
    env.pop("PYSPARK_PYTHON", None)  # the command picks its own interpreter for local workers
    command = [sys.executable, "-m", "vigil_spark", "--out", str(tmp_path), "--master", "local[2]", "--ingest-only"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, check=False)
    (artifacts_dir / "vigil-report-process.stderr").write_text(done.stderr)
    assert done.returncode == 0, done.stderr
    ours = [line for line in done.stderr.splitlines() if line.startswith("vigil report: ")]
    assert [line.split(":")[1].split()[0] for line in ours] == [
        "cluster",
        "spark",
        "ingest",
        "ingest",
        "tables",
        "model",
    ]
    assert "ingest vigil.events: skipped (topic not found)" in done.stderr
    rows = [r for r in tables.read(spark_kafka, tmp_path / "tables", "offset_commits").collect() if r.group == group]
    assert latest_commits(rows) == expected


def test_missing_kafka_jars_fail_in_one_line(kafka: KafkaCluster, tmp_path: Path) -> None:
    """No jars at all: caught before the JVM starts; jars without Spark's Kafka source: caught at the first read."""
    empty = tmp_path / "empty"
    empty.mkdir()
    unrelated = tmp_path / "unrelated"
    unrelated.mkdir()
    (unrelated / "nothing.jar").write_bytes(b"PK\x05\x06" + bytes(18))  # an empty zip: a valid, empty jar
    conn = kafka.connection()
    env = {**os.environ, **conn.to_env()}
    events_topic = clients.create_topic(conn, clients.unique("vigil.events"), partitions=1)  # a topic to read
    for jars, message in [
        (empty, f"vigil report: VIGIL_SPARK_JARS: no jars in {empty}"),
        (unrelated, "vigil report: Spark's Kafka source is not on the classpath"),
    ]:
        command = [sys.executable, "-m", "vigil_spark", "--out", str(tmp_path / "out"), "--master", "local[1]",
                   "--events-topic", events_topic]  # fmt: skip
        done = subprocess.run([*command, "--jars", str(jars)], env=env, capture_output=True, text=True,
                              timeout=300, check=False)  # fmt: skip
        assert done.returncode == 1, done.stderr
        ours = [line for line in done.stderr.splitlines() if line.startswith("vigil report: ")]
        assert ours[-1].startswith(message), done.stderr
        assert "Traceback" not in done.stderr
