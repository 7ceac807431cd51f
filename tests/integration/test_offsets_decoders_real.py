"""The pure decoder on REAL `__consumer_offsets` records written by the broker for groups this test drives.

Ground truth is the test's own actions and the broker's answers (committed offsets, live member ids) —
never the decoder itself. The raw records of the run are saved under test-artifacts (the unit fixture
`tests/unit/fixtures/consumer_offsets/real_records.json` is a copy of one such run).
"""

import json
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from vigil_core.consumer_offsets import records as rec
from vigil_core.kafka.security import KafkaConnection
from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import clients
from vigil_dev.testing.waiting import wait_for

pytestmark = pytest.mark.integration


def _committed(conn: KafkaConnection, group: str, topic: str, partitions: int) -> dict[int, int]:
    probe = Consumer(conn.confluent_config() | clients.QUIET | {"group.id": group, "enable.auto.commit": False})
    try:
        tps = probe.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        return {tp.partition: tp.offset for tp in tps if tp.offset >= 0}
    finally:
        probe.close()


def test_real_records_decode_and_match_the_group(kafka: KafkaCluster, artifacts_dir: Path) -> None:
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("oc"), partitions=4)
    clients.produce(conn, topic, (f"v{i}" for i in range(40)))
    group = clients.unique("g-oc")
    members = clients.start_group(conn, group, [topic], size=2)
    try:
        wait_for(lambda: sum(len(m.consumed) for m in members), lambda n: n >= 40, timeout=30, what="all consumed")
        live_ids = {m.member_id for m in members}
        assert None not in live_ids
        # auto-commit (500 ms) commits the final positions: every one of the 40 records counted once
        wait_for(lambda: sum(_committed(conn, group, topic, 4).values()), lambda n: n == 40, timeout=10,
                 what="the final positions committed")  # fmt: skip
    finally:
        for m in members:
            m.close()  # LeaveGroup: one more generation each, and a final commit
    committed = _committed(conn, group, topic, 4)
    assert committed, "the group committed nothing"

    raw = clients.read_offsets_topic(conn)
    decoded = [(p, o, *rec.decode_record(k, v)) for p, o, k, v in raw]
    _save(artifacts_dir / "consumer_offsets_real_records.json", group, raw, decoded)
    bad = [(p, o, k, v) for p, o, k, v in decoded if isinstance(k, rec.Corrupt) or isinstance(v, rec.Corrupt)]
    assert not bad, bad[:5]

    ours = [(p, o, k, v) for p, o, k, v in decoded if getattr(k, "group", None) == group]
    assert len({p for p, *_ in ours}) == 1, "one group lives in one offsets partition"
    ours.sort(key=lambda r: r[1])

    # generations: present, in log order never going back, and more than one (joins and leaves)
    metadata = [v for _, _, k, v in ours if isinstance(v, rec.GroupMetadataValue)]
    generations = [v.generation for v in metadata]
    assert generations == sorted(generations), generations
    assert len(set(generations)) >= 2, generations
    shape = [(v.version, v.generation, v.protocol_type, v.protocol, len(v.members)) for v in metadata]
    assert all(v.protocol_type == "consumer" for v in metadata if v.members), shape
    # the live members as the broker recorded them, with their consumer-protocol subscription/assignment
    full = [v for v in metadata if {m.member_id for m in v.members} == live_ids]
    assert full, [[m.member_id for m in v.members] for v in metadata]
    last_full = full[-1]
    assert last_full.protocol == "range"
    assert last_full.leader in live_ids
    assigned: set[tuple[str, int]] = set()
    for recorded in last_full.members:
        sub = recorded.consumer_subscription()
        assert isinstance(sub, rec.ConsumerProtocolSubscription), sub
        assert sub.topics == (topic,)
        asg = recorded.consumer_assignment()
        assert isinstance(asg, rec.ConsumerProtocolAssignment), asg
        assigned |= {(tp.topic, p) for tp in asg.assigned_partitions for p in tp.partitions}
    assert assigned == {(topic, p) for p in range(4)}

    # offsets: the last commit per partition in log order is what the broker says is committed
    last: dict[int, rec.OffsetCommitValue] = {}
    for _, _, k, v in ours:
        if isinstance(k, rec.OffsetCommitKey) and isinstance(v, rec.OffsetCommitValue):
            assert k.topic == topic
            last[k.partition] = v
    assert {p: v.offset for p, v in last.items()} == committed
    assert all(v.commit_timestamp > 0 for v in last.values())


@pytest.mark.kafka_min("4.0")  # KIP-848 is GA from 4.0; 3.x serves the classic protocol only
def test_real_kip848_records_decode(kafka: KafkaCluster, artifacts_dir: Path) -> None:
    """A `group.protocol=consumer` group writes record types 3-8 (flexible v0, 4.1 tags): all decode."""
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("oc848"), partitions=4)
    group = clients.unique("g-848")
    members = clients.start_group(conn, group, [topic], size=2, extra={"group.protocol": "consumer"})
    try:
        wait_for(lambda: [m.member_id for m in members], all, timeout=30, what="member ids")
        live_ids = {m.member_id for m in members}
    finally:
        for m in members:
            m.close()

    raw = clients.read_offsets_topic(conn)
    decoded = [(p, o, *rec.decode_record(k, v)) for p, o, k, v in raw]
    _save(artifacts_dir / "consumer_offsets_real_records_kip848.json", group, raw, decoded)
    ours = sorted((r for r in decoded if getattr(r[2], "group", None) == group), key=lambda r: r[1])
    assert ours
    bad = [
        r for r in ours if isinstance(r[2], rec.Corrupt | rec.Unknown) or isinstance(r[3], rec.Corrupt | rec.Unknown)
    ]
    assert not bad, bad[:5]
    types = {k.record_type for _, _, k, _ in ours}
    assert {3, 5, 6, 7, 8} <= types, types

    epochs = [v.epoch for _, _, _, v in ours if isinstance(v, rec.ConsumerGroupMetadataValue)]
    assert epochs == sorted(epochs), epochs
    assert len(set(epochs)) >= 2, epochs
    assert {k.member_id for _, _, k, _ in ours if isinstance(k, rec.ConsumerGroupMemberMetadataKey)} == live_ids
    profiles = [v for _, _, _, v in ours if isinstance(v, rec.ConsumerGroupMemberMetadataValue)]
    assert all(v.subscribed_topic_names == (topic,) for v in profiles)
    # every live member's last current assignment, together, covers the topic; leaving tombstones them
    current: dict[str, Any] = {}
    for _, _, k, v in ours:
        if isinstance(k, rec.ConsumerGroupCurrentMemberAssignmentKey):
            current[k.member_id] = v
    assert all(isinstance(v, rec.Tombstone) for v in current.values()), current
    assignments = [v for _, _, _, v in ours if isinstance(v, rec.ConsumerGroupCurrentMemberAssignmentValue)]
    assert {p for v in assignments for tp in v.assigned_partitions for p in tp.partitions} == set(range(4))
    assert len({tp.topic_id for v in assignments for tp in v.assigned_partitions}) == 1


def _save(path: Path, group: str, raw: list[Any], decoded: list[Any]) -> None:
    """Our group's raw records (hex) and what they decoded to: the unit test's real-record fixture."""
    rows = []
    for (_p, o, k, v), (_, _, dk, dv) in zip(raw, decoded, strict=True):
        if getattr(dk, "group", None) != group:
            continue
        what = f"{type(dv).__name__}-v{getattr(dv, 'version', '-')}-o{o}"
        rows.append({"what": what, "key": k.hex(), "value": v.hex() if v is not None else None,
                     "key_type": type(dk).__name__, "value_type": type(dv).__name__})  # fmt: skip
    path.write_text(json.dumps({"records": rows}, indent=1))
