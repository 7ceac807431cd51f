"""The pure `__consumer_offsets` decoder: hand-checked byte vectors, round trips through a test-only encoder
written from Kafka's message JSON schemas, truncation at every offset and garbage input (never raises)."""

import dataclasses
import json
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vigil_core.consumer_offsets import records as rec
from vigil_core.consumer_offsets.generations import Generations
from vigil_core.consumer_offsets.wire import DecodeError, Reader

FIXTURES = Path(__file__).parents[1] / "fixtures" / "consumer_offsets"

# -- a tiny encoder mirroring the schemas (test-only: the decoder must not be checked against itself) --


class W:
    def __init__(self, flexible: bool = False) -> None:
        self.out = bytearray()
        self.flex = flexible

    def i8(self, v: int) -> "W":
        self.out += struct.pack(">b", v)
        return self

    def i16(self, v: int) -> "W":
        self.out += struct.pack(">h", v)
        return self

    def i32(self, v: int) -> "W":
        self.out += struct.pack(">i", v)
        return self

    def i64(self, v: int) -> "W":
        self.out += struct.pack(">q", v)
        return self

    def uvarint(self, v: int) -> "W":
        while v >= 0x80:
            self.out.append((v & 0x7F) | 0x80)
            v >>= 7
        self.out.append(v)
        return self

    def raw(self, b: bytes) -> "W":
        self.out += b
        return self

    def _len(self, n: int, classic: Callable[[int], "W"]) -> "W":
        return self.uvarint(n + 1) if self.flex else classic(n)

    def str(self, s: str | None) -> "W":
        if s is None:
            return self._len(-1, self.i16) if not self.flex else self.uvarint(0)
        b = s.encode()
        return self._len(len(b), self.i16).raw(b)

    def bytes(self, b: bytes | None) -> "W":
        if b is None:
            return self.i32(-1) if not self.flex else self.uvarint(0)
        return self._len(len(b), self.i32).raw(b)

    def array(self, items: Any, each: Callable[["W", Any], Any]) -> "W":
        items = list(items)
        self._len(len(items), self.i32)
        for item in items:
            each(self, item)
        return self

    def tags(self, tags: dict[int, bytes] | None = None) -> "W":
        if self.flex:
            tags = tags or {}
            self.uvarint(len(tags))
            for tag in sorted(tags):
                self.uvarint(tag).uvarint(len(tags[tag])).raw(tags[tag])
        return self


def encode_key(k: rec.Key) -> bytes:
    w = W().i16(k.record_type).str(k.group)
    if isinstance(k, rec.OffsetCommitKey):
        w.str(k.topic).i32(k.partition)
    elif isinstance(k, rec.ConsumerGroupRegularExpressionKey):
        w.str(k.regex)
    elif hasattr(k, "member_id"):
        w.str(k.member_id)
    return bytes(w.out)


def _kv(w: W, kv: rec.KeyValue) -> None:
    w.str(kv.key).str(kv.value).tags()


def _task(w: W, t: rec.TaskIds) -> None:
    epochs = None
    if t.assignment_epochs is not None:  # 4.2+: a nullable []int32 in tag 0 (a member's active tasks)
        epochs = {0: bytes(W(True).array(t.assignment_epochs, W.i32).out)}
    w.str(t.subtopology_id).array(t.partitions, W.i32).tags(epochs)


def _topic_info(w: W, t: rec.TopicInfo) -> None:
    w.str(t.name).i32(t.partitions).i16(t.replication_factor).array(t.topic_configs, _kv).tags()


def _subtopology(w: W, s: rec.Subtopology) -> None:
    w.str(s.subtopology_id).array(s.source_topics, W.str).array(s.source_topic_regex, W.str)
    w.array(s.state_changelog_topics, _topic_info).array(s.repartition_sink_topics, W.str)
    w.array(s.repartition_source_topics, _topic_info)
    w.array(s.copartition_groups, lambda w, g: w.array(g.source_topics, W.i16).array(g.source_topic_regex, W.i16)
            .array(g.repartition_source_topics, W.i16).tags())  # fmt: skip
    w.tags()


def _int32_tag(value: int, default: int) -> bytes | None:
    return None if value == default else struct.pack(">i", value)


def encode_share_or_streams_value(v: Any) -> W | None:  # noqa: PLR0911, PLR0912 - one branch per schema, on purpose
    """Types 10-15 and 17, 19-23 (all flexible, version 0); None for another value."""
    if isinstance(v, rec.ShareGroupMemberMetadataValue):
        w = W(True).i16(v.version).str(v.rack_id).str(v.client_id).str(v.client_host)
        return w.array(v.subscribed_topic_names, W.str).tags()
    if isinstance(v, rec.ShareGroupMetadataValue):
        w = W(True).i16(v.version).i32(v.epoch)
        return w.i64(v.metadata_hash).tags()
    if isinstance(v, rec.ShareGroupTargetAssignmentMetadataValue | rec.StreamsGroupTargetAssignmentMetadataValue):
        stamp = {0: struct.pack(">q", v.assignment_timestamp)} if v.assignment_timestamp else None
        return W(True).i16(v.version).i32(v.assignment_epoch).tags(stamp)
    if isinstance(v, rec.ShareGroupTargetAssignmentMemberValue):
        return W(True).i16(v.version).array(v.topic_partitions, _tip).tags()
    if isinstance(v, rec.ShareGroupCurrentMemberAssignmentValue):
        w = W(True).i16(v.version).i32(v.member_epoch).i32(v.previous_member_epoch).i8(v.state)
        return w.array(v.assigned_partitions, _tip).tags()
    if isinstance(v, rec.ShareGroupStatePartitionMetadataValue):

        def info(w: W, t: rec.TopicPartitionsInfo) -> None:
            w.raw(t.topic_id).str(t.topic_name).array(t.partitions, W.i32).tags()

        w = W(True).i16(v.version).array(v.initializing_topics, info).array(v.initialized_topics, info)
        return w.array(v.deleting_topics, lambda w, t: w.raw(t.topic_id).str(t.topic_name).tags()).tags()
    if isinstance(v, rec.StreamsGroupMetadataValue):
        tags = {
            0: _int32_tag(v.validated_topology_epoch, -1),
            1: None if v.last_assignment_configs is None else bytes(W(True).array(v.last_assignment_configs, _kv).out),
            2: _int32_tag(v.stored_description_topology_epoch, -1),
            3: _int32_tag(v.failed_description_topology_epoch, -1),
        }
        present = {tag: payload for tag, payload in tags.items() if payload is not None}
        return W(True).i16(v.version).i32(v.epoch).i64(v.metadata_hash).tags(present)
    if isinstance(v, rec.StreamsGroupMemberMetadataValue):
        w = W(True).i16(v.version).str(v.instance_id).str(v.rack_id).str(v.client_id).str(v.client_host)
        w.i32(v.rebalance_timeout_ms).i32(v.topology_epoch).str(v.process_id)
        if v.user_endpoint is None:
            w.i8(-1)
        else:
            w.i8(1).str(v.user_endpoint.host).raw(struct.pack(">H", v.user_endpoint.port)).tags()
        return w.array(v.client_tags, _kv).tags()
    if isinstance(v, rec.StreamsGroupTargetAssignmentMemberValue):
        w = W(True).i16(v.version)
        return w.array(v.active_tasks, _task).array(v.standby_tasks, _task).array(v.warmup_tasks, _task).tags()
    if isinstance(v, rec.StreamsGroupCurrentMemberAssignmentValue):
        w = W(True).i16(v.version).i32(v.member_epoch).i32(v.previous_member_epoch).i8(v.state)
        for tasks in (v.active_tasks, v.standby_tasks, v.warmup_tasks, v.active_tasks_pending_revocation,
                      v.standby_tasks_pending_revocation, v.warmup_tasks_pending_revocation):  # fmt: skip
            w.array(tasks, _task)
        return w.tags()
    if isinstance(v, rec.StreamsGroupTopologyValue):
        return W(True).i16(v.version).i32(v.epoch).array(v.subtopologies, _subtopology).tags()
    return None


def _tip(w: W, tp: rec.TopicIdPartitions) -> None:
    epochs = None
    if tp.assignment_epochs is not None:  # KIP-1251, 4.4: a nullable []int32 in tag 0
        epochs = {0: bytes(W(True).array(tp.assignment_epochs, W.i32).out)}
    w.raw(tp.topic_id).array(tp.partitions, W.i32).tags(epochs)


def encode_value(v: rec.Value) -> bytes:  # noqa: PLR0912 - one branch per schema, on purpose
    if (other := encode_share_or_streams_value(v)) is not None:
        return bytes(other.out)
    if isinstance(v, rec.OffsetCommitValue):
        w = W(v.version >= 4).i16(v.version).i64(v.offset)
        if v.version >= 3:
            w.i32(v.leader_epoch)
        w.str(v.metadata).i64(v.commit_timestamp)
        if v.version == 1:
            w.i64(v.expire_timestamp)
        w.tags({0: v.topic_id} if v.topic_id is not None else None)
    elif isinstance(v, rec.GroupMetadataValue):
        w = W(v.version >= 4).i16(v.version).str(v.protocol_type).i32(v.generation).str(v.protocol).str(v.leader)
        if v.version >= 2:
            w.i64(v.current_state_timestamp)

        def member(w: W, m: rec.MemberMetadata) -> None:
            w.str(m.member_id)
            if v.version >= 3:
                w.str(m.group_instance_id)
            w.str(m.client_id).str(m.client_host)
            if v.version >= 1:
                w.i32(m.rebalance_timeout)
            w.i32(m.session_timeout).bytes(m.subscription).bytes(m.assignment).tags()

        w.array(v.members, member).tags()
    elif isinstance(v, rec.ConsumerGroupMetadataValue):
        hash_tag = {0: struct.pack(">q", v.metadata_hash)} if v.metadata_hash else None
        w = W(True).i16(v.version).i32(v.epoch).tags(hash_tag)
    elif isinstance(v, rec.ConsumerGroupPartitionMetadataValue):

        def racks(w: W, p: rec.PartitionRacks) -> None:
            w.i32(p.partition).array(p.racks, W.str).tags()

        def topic(w: W, t: rec.TopicMetadata) -> None:
            w.raw(t.topic_id).str(t.topic_name).i32(t.num_partitions).array(t.partition_metadata, racks).tags()

        w = W(True).i16(v.version).array(v.topics, topic).tags()
    elif isinstance(v, rec.ConsumerGroupMemberMetadataValue):
        w = W(True).i16(v.version).str(v.instance_id).str(v.rack_id).str(v.client_id).str(v.client_host)
        w.array(v.subscribed_topic_names, W.str).str(v.subscribed_topic_regex).i32(v.rebalance_timeout_ms)
        w.str(v.server_assignor)
        tags = None
        if v.classic_member_metadata is not None:
            c = v.classic_member_metadata
            cw = W(True).uvarint(1).i32(c.session_timeout_ms)
            cw.array(c.supported_protocols, lambda w, p: w.str(p.name).bytes(p.metadata).tags()).tags()
            tags = {0: bytes(cw.out)}
        w.tags(tags)
    elif isinstance(v, rec.ConsumerGroupTargetAssignmentMetadataValue):
        stamp = {0: struct.pack(">q", v.assignment_timestamp)} if v.assignment_timestamp else None  # KIP-1263
        w = W(True).i16(v.version).i32(v.assignment_epoch).tags(stamp)
    elif isinstance(v, rec.ConsumerGroupTargetAssignmentMemberValue):
        w = W(True).i16(v.version).array(v.topic_partitions, _tip).tags()
    elif isinstance(v, rec.ConsumerGroupCurrentMemberAssignmentValue):
        w = W(True).i16(v.version).i32(v.member_epoch).i32(v.previous_member_epoch).i8(v.state)
        w.array(v.assigned_partitions, _tip).array(v.partitions_pending_revocation, _tip).tags()
    else:
        assert isinstance(v, rec.ConsumerGroupRegularExpressionValue)
        w = W(True).i16(v.version).array(v.topics, W.str).i64(v.regex_version).i64(v.timestamp).tags()
    return bytes(w.out)


def _tp(w: W, tp: rec.TopicPartitions) -> None:
    w.str(tp.topic).array(tp.partitions, W.i32)


def encode_subscription(s: rec.ConsumerProtocolSubscription) -> bytes:
    w = W().i16(s.version).array(s.topics, W.str).bytes(s.user_data)
    if s.version >= 1:
        w.array(s.owned_partitions, _tp)
    if s.version >= 2:
        w.i32(s.generation_id)
    if s.version >= 3:
        w.str(s.rack_id)
    return bytes(w.out)


def encode_assignment(a: rec.ConsumerProtocolAssignment) -> bytes:
    return bytes(W().i16(a.version).array(a.assigned_partitions, _tp).bytes(a.user_data).out)


# -- hand-checked vectors: the encoder above agrees with bytes written out by hand from the schemas ----

TOPIC_ID = bytes(range(16))


def test_offset_commit_key_bytes() -> None:
    key = bytes.fromhex("00010001670002743100000005")  # type 1, "g", "t1", partition 5
    assert rec.decode_key(key) == rec.OffsetCommitKey("g", "t1", 5, 1)
    assert encode_key(rec.OffsetCommitKey("g", "t1", 5, 1)) == key
    assert rec.decode_key(bytes.fromhex("00000001670002743100000005")) == rec.OffsetCommitKey("g", "t1", 5, 0)


def test_offset_commit_value_v3_bytes() -> None:
    # version 3, offset 42, leader epoch 7, metadata "", commit ts 1000
    value = bytes.fromhex("0003000000000000002a00000007000000000000000003e8")
    assert rec.decode_value(1, value) == rec.OffsetCommitValue(3, 42, "", 1000, leader_epoch=7)


def test_offset_commit_value_v1_bytes() -> None:
    value = bytes.fromhex("0001000000000000002a00026d6400000000000003e800000000000007d0")
    assert rec.decode_value(1, value) == rec.OffsetCommitValue(1, 42, "md", 1000, expire_timestamp=2000)


def test_offset_commit_value_v4_flexible_with_tagged_topic_id() -> None:
    # v4: offset, epoch, compact "md" (len+1 = 3), commit ts, 1 tagged field: tag 0, size 16, the uuid
    value = bytes.fromhex("0004000000000000002affffffff036d6400000000000003e8010010")
    value += TOPIC_ID
    assert rec.decode_value(1, value) == rec.OffsetCommitValue(4, 42, "md", 1000, topic_id=TOPIC_ID)
    no_tags = bytes.fromhex("0004000000000000002affffffff0100000000000003e800")
    assert rec.decode_value(1, no_tags) == rec.OffsetCommitValue(4, 42, "", 1000)


def test_unknown_tags_are_skipped() -> None:
    # ConsumerGroupMetadataValue: epoch 9, tags {0: hash 5, 1: creation time (unknown here), 7: junk}
    value = bytes.fromhex("0000000000090300080000000000000005010800000000000000010702abcd")
    assert rec.decode_value(3, value) == rec.ConsumerGroupMetadataValue(0, 9, metadata_hash=5)


def test_group_metadata_value_v3_bytes_and_member_protocol() -> None:
    sub = encode_subscription(
        rec.ConsumerProtocolSubscription(3, ("t",), None, (rec.TopicPartitions("t", (0,)),), 4, "r1")
    )
    assert sub == bytes.fromhex("000300000001000174ffffffff0000000100017400000001000000000000000400027231")
    asg = bytes.fromhex("000000000001000174000000020000000000000001ffffffff")
    value = (
        bytes.fromhex("00030008636f6e73756d657200000004000572616e676500016d")
        + bytes.fromhex("00000000000000640000000100016dffff000163000168")
        + bytes.fromhex("0000ea6000001770")
        + struct.pack(">i", len(sub))
        + sub
        + struct.pack(">i", len(asg))
        + asg
    )
    got = rec.decode_value(2, value)
    assert isinstance(got, rec.GroupMetadataValue)
    assert (got.protocol_type, got.generation, got.protocol, got.leader, got.current_state_timestamp) == (
        "consumer",
        4,
        "range",
        "m",
        100,
    )
    (m,) = got.members
    assert (m.member_id, m.group_instance_id, m.client_id, m.client_host) == ("m", None, "c", "h")
    assert (m.rebalance_timeout, m.session_timeout) == (60000, 6000)
    assert m.consumer_subscription() == rec.ConsumerProtocolSubscription(
        3, ("t",), None, (rec.TopicPartitions("t", (0,)),), 4, "r1"
    )
    assert m.consumer_assignment() == rec.ConsumerProtocolAssignment(0, (rec.TopicPartitions("t", (0, 1)),), None)
    assert encode_value(got) == value


def test_classic_member_metadata_is_a_nullable_tagged_struct() -> None:
    v = rec.ConsumerGroupMemberMetadataValue(
        0, None, None, "c", "h", ("t",), None, 30000, "uniform",
        rec.ClassicMemberMetadata(45000, (rec.ClassicProtocol("range", b"\x00\x01"),)),
    )  # fmt: skip
    raw = encode_value(v)
    # tag 0, size 17: varint marker 1, session timeout, 1 protocol ("range", 2 bytes), struct's own empty tags
    assert raw.endswith(bytes.fromhex("010011010000afc8020672616e67650300010000"))
    assert rec.decode_value(5, raw) == v
    # what Kafka 4.1.1 writes for a consumer-protocol member: tag 0 present, size 1, marker 0 = null
    null_tag = raw[: raw.index(bytes.fromhex("0100110100"))] + bytes.fromhex("01000100")
    got = rec.decode_value(5, null_tag)
    assert isinstance(got, rec.ConsumerGroupMemberMetadataValue)
    assert got.classic_member_metadata is None


# -- every record type and version ------------------------------------------------------------------------

SUB = encode_subscription(rec.ConsumerProtocolSubscription(1, ("a", "b"), b"u", (rec.TopicPartitions("a", (1, 2)),)))
ASG = encode_assignment(rec.ConsumerProtocolAssignment(1, (rec.TopicPartitions("a", (1, 2)),), None))


def _gm(version: int) -> rec.GroupMetadataValue:
    members = (
        rec.MemberMetadata(
            "m-1", "c", "/10.0.0.1", 6000, SUB, ASG,
            "inst" if version >= 3 else None, 30000 if version >= 1 else 0,
        ),
        rec.MemberMetadata("m-2", "c", "/10.0.0.2", 6000, SUB, b"", None, 30000 if version >= 1 else 0),
    )  # fmt: skip
    return rec.GroupMetadataValue(version, "consumer", 3, "range", "m-1", members, 5 if version >= 2 else -1)


TASKS = (rec.TaskIds("0", (0, 1), (4, 5)), rec.TaskIds("1", (2,)))
TOPIC_INFO = rec.TopicInfo("app-store-changelog", 2, 3, (rec.KeyValue("cleanup.policy", "compact"),))
HASH = -6_010_383_914_487_409_408
SHARE_AND_STREAMS_SAMPLES: list[tuple[rec.Key, rec.Value]] = [
    (rec.MemberRecordKey("s", "m", 10), rec.ShareGroupMemberMetadataValue(0, None, "c", "h", ("t1", "t2"))),
    (rec.GroupRecordKey("s", 11), rec.ShareGroupMetadataValue(0, 3, HASH)),
    (rec.GroupRecordKey("s", 12), rec.ShareGroupTargetAssignmentMetadataValue(0, 3, 1795721708535)),
    (
        rec.MemberRecordKey("s", "m", 13),
        rec.ShareGroupTargetAssignmentMemberValue(0, (rec.TopicIdPartitions(TOPIC_ID, (0, 1)),)),
    ),
    (
        rec.MemberRecordKey("s", "m", 14),
        rec.ShareGroupCurrentMemberAssignmentValue(0, 3, 2, 0, (rec.TopicIdPartitions(TOPIC_ID, (0,)),)),
    ),
    (
        rec.GroupRecordKey("s", 15),
        rec.ShareGroupStatePartitionMetadataValue(
            0,
            (rec.TopicPartitionsInfo(TOPIC_ID, "t1", (0,)),),
            (rec.TopicPartitionsInfo(TOPIC_ID, "t2", (0, 1)),),
            (rec.TopicIdName(TOPIC_ID, "t3"),),
        ),
    ),
    (rec.GroupRecordKey("a", 17), rec.StreamsGroupMetadataValue(0, 4, HASH)),  # 4.1
    (
        rec.GroupRecordKey("a", 17),
        rec.StreamsGroupMetadataValue(0, 4, HASH, 2, (rec.KeyValue("num.standby.replicas", "0"),), -2, 1),  # 4.4
    ),
    (
        rec.MemberRecordKey("a", "m", 19),
        rec.StreamsGroupMemberMetadataValue(
            0,
            "app-1",
            None,
            "c",
            "/127.0.0.1",
            300000,
            1,
            "p-1",
            rec.Endpoint("app-1.app", 65535),
            (rec.KeyValue("az", "a"),),
        ),
    ),
    (
        rec.MemberRecordKey("a", "m", 19),
        rec.StreamsGroupMemberMetadataValue(0, None, "r", "c", "h", -1, 1, "p", None, ()),
    ),
    (rec.GroupRecordKey("a", 20), rec.StreamsGroupTargetAssignmentMetadataValue(0, 4)),
    (rec.MemberRecordKey("a", "m", 21), rec.StreamsGroupTargetAssignmentMemberValue(0, TASKS[1:], TASKS[1:], ())),
    (
        rec.MemberRecordKey("a", "m", 22),
        rec.StreamsGroupCurrentMemberAssignmentValue(0, 4, 3, 1, TASKS, (), TASKS[1:], (), TASKS[1:], ()),
    ),
    (
        rec.MemberRecordKey("a", "m", 22),  # a static member's temporary leave (4.4)
        rec.StreamsGroupCurrentMemberAssignmentValue(0, -2, 4, 1, TASKS, (), (), (), (), ()),
    ),
    (
        rec.GroupRecordKey("a", 23),
        rec.StreamsGroupTopologyValue(
            0,
            1,
            (
                rec.Subtopology(
                    "0", ("in",), (), (TOPIC_INFO,), ("app-repartition",), (), (rec.CopartitionGroup((0,), (), (1, 2)),)
                ),
            ),
        ),
    ),
]

SAMPLES: list[tuple[rec.Key, rec.Value]] = [
    (rec.OffsetCommitKey("g", "t", 0, 0), rec.OffsetCommitValue(0, 1, "", 10)),
    (rec.OffsetCommitKey("g", "t", 0), rec.OffsetCommitValue(1, 1, "m", 10, expire_timestamp=20)),
    (rec.OffsetCommitKey("g", "t", 0), rec.OffsetCommitValue(2, 1, "m", 10)),
    (rec.OffsetCommitKey("g", "t", 0), rec.OffsetCommitValue(3, 1, "m", 10, leader_epoch=3)),
    (rec.OffsetCommitKey("g", "t", 0), rec.OffsetCommitValue(4, 1, "m", 10, leader_epoch=3, topic_id=TOPIC_ID)),
    *[(rec.GroupMetadataKey("g"), _gm(v)) for v in range(5)],
    (rec.ConsumerGroupMetadataKey("g"), rec.ConsumerGroupMetadataValue(0, 4, 99)),
    (
        rec.ConsumerGroupPartitionMetadataKey("g"),
        rec.ConsumerGroupPartitionMetadataValue(
            0, (rec.TopicMetadata(TOPIC_ID, "t", 2, (rec.PartitionRacks(0, ("r1", "r2")),)),)
        ),
    ),
    (
        rec.ConsumerGroupMemberMetadataKey("g", "m"),
        rec.ConsumerGroupMemberMetadataValue(0, "i", "r", "c", "h", ("t",), None, 30000, "uniform"),
    ),
    (rec.ConsumerGroupTargetAssignmentMetadataKey("g"), rec.ConsumerGroupTargetAssignmentMetadataValue(0, 4)),
    (
        rec.ConsumerGroupTargetAssignmentMetadataKey("g"),
        rec.ConsumerGroupTargetAssignmentMetadataValue(0, 4, 1795721708535),  # 4.3+: the assignment's timestamp
    ),
    (
        rec.ConsumerGroupTargetAssignmentMemberKey("g", "m"),
        rec.ConsumerGroupTargetAssignmentMemberValue(0, (rec.TopicIdPartitions(TOPIC_ID, (0, 1)),)),
    ),
    (
        rec.ConsumerGroupCurrentMemberAssignmentKey("g", "m"),
        rec.ConsumerGroupCurrentMemberAssignmentValue(
            0, 5, 4, 1, (rec.TopicIdPartitions(TOPIC_ID, (0,)),), (rec.TopicIdPartitions(TOPIC_ID, (1,)),)
        ),
    ),
    (
        rec.ConsumerGroupCurrentMemberAssignmentKey("g", "m"),
        rec.ConsumerGroupCurrentMemberAssignmentValue(  # 4.4+: each partition's assignment epoch
            0, 5, 4, 1, (rec.TopicIdPartitions(TOPIC_ID, (0, 2), (3, 5)),), (rec.TopicIdPartitions(TOPIC_ID, (1,), ()),)
        ),
    ),
    (rec.ConsumerGroupRegularExpressionKey("g", "t.*"), rec.ConsumerGroupRegularExpressionValue(0, ("t1",), 3, 77)),
    *SHARE_AND_STREAMS_SAMPLES,
]
IDS = [f"{type(v).__name__}-v{v.version}-{i}" for i, (_, v) in enumerate(SAMPLES)]


@pytest.mark.parametrize(("key", "value"), SAMPLES, ids=IDS)
def test_every_type_and_version_decodes(key: rec.Key, value: rec.Value) -> None:
    k, v = rec.decode_record(encode_key(key), encode_value(value))
    assert k == key
    assert v == value
    assert rec.decode_value(k, None) == rec.Tombstone(key.record_type)


@pytest.mark.parametrize(("key", "value"), SAMPLES, ids=IDS)
def test_truncation_at_every_offset_is_corrupt_never_raises(key: rec.Key, value: rec.Value) -> None:
    kb, vb = encode_key(key), encode_value(value)
    for n in range(len(kb)):
        assert isinstance(rec.decode_key(kb[:n]), rec.Corrupt), n
    for n in range(len(vb)):
        assert isinstance(rec.decode_value(key, vb[:n]), rec.Corrupt), n
    assert isinstance(rec.decode_value(key, vb + b"\x00"), rec.Corrupt)  # trailing bytes are not ignored


def test_truncated_consumer_protocol_is_corrupt() -> None:
    sub = encode_subscription(
        rec.ConsumerProtocolSubscription(3, ("a",), b"x", (rec.TopicPartitions("a", (1,)),), 2, "r")
    )
    for n in range(len(sub)):
        assert isinstance(rec.decode_subscription(sub[:n]), rec.Corrupt), n
    for n in range(1, len(ASG)):
        assert isinstance(rec.decode_assignment(ASG[:n]), rec.Corrupt), n
    assert rec.decode_assignment(b"") is None


def test_corrupt_names_the_field() -> None:
    value = encode_value(rec.OffsetCommitValue(3, 1, "metadata!", 10, leader_epoch=3))
    got = rec.decode_value(1, value[:18])
    assert isinstance(got, rec.Corrupt)
    assert "OffsetCommitValue v3" in got.reason
    assert "metadata" in got.reason
    bad_len = bytearray(encode_value(_gm(3)))
    bad_len[2:4] = b"\xff\xff"  # protocol_type null: non-nullable
    got = rec.decode_value(2, bytes(bad_len))
    assert isinstance(got, rec.Corrupt)
    assert "protocol_type" in got.reason
    huge = encode_value(rec.ConsumerGroupTargetAssignmentMemberValue(0, ()))[:2] + b"\xff\xff\xff\x0f"
    got = rec.decode_value(7, huge)
    assert isinstance(got, rec.Corrupt)
    assert "topic_partitions" in got.reason


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        (b"\x00\x12\x00\x01g", b"\x00\x00", rec.Unknown(18, None, "unknown record type")),  # never released
        (b"\x00\x18\x00\x01g", b"\x00\x00", rec.Unknown(24, None, "unknown record type")),  # newer than 4.4
        (b"\xff\xff", b"", rec.Unknown(-1, None, "unknown record type")),
    ],
)
def test_unknown_record_types(key: bytes, value: bytes | None, expected: rec.Unknown) -> None:
    k, v = rec.decode_record(key, value)
    assert k == expected
    assert v == expected
    assert rec.decode_value(k, None) == rec.Tombstone(expected.record_type)  # a tombstone needs no schema


def test_an_early_access_share_record_of_kafka_4_0_is_named_with_its_group() -> None:
    k, v = rec.decode_record(b"\x00\x09\x00\x05share", b"\x00\x00\x01")
    assert k == rec.Unknown(9, None, "ShareGroupPartitionMetadata, an early-access (Kafka 4.0) share group's record of "
                                     "group 'share': not decoded")  # fmt: skip
    assert isinstance(v, rec.Unknown)
    assert v.reason.startswith("ShareGroupPartitionMetadata, an early-access (Kafka 4.0) share group's record: not")
    assert rec.decode_value(k, None) == rec.Tombstone(9)


@pytest.mark.parametrize("record_type", sorted(rec.SHARE_GROUP_RECORDS | rec.STREAMS_GROUP_RECORDS))
def test_a_share_or_streams_key_whose_group_is_cut_is_corrupt(record_type: int) -> None:
    key = record_type.to_bytes(2, "big") + b"\x00\x09g"
    assert rec.decode_key(key) == rec.Corrupt("key: group: needs 9 bytes at offset 4, 1 left")


@given(st.sampled_from(sorted(rec.NOT_DECODED)), st.text(max_size=40), st.binary(max_size=64))
def test_an_undecoded_record_never_raises_and_names_its_group(record_type: int, group: str, rest: bytes) -> None:
    encoded = group.encode()
    key = record_type.to_bytes(2, "big") + len(encoded).to_bytes(2, "big") + encoded + rest
    k, _ = rec.decode_record(key, rest or None)
    assert isinstance(k, rec.Unknown)
    assert rec.NOT_DECODED[record_type] in k.reason
    assert repr(group) in k.reason


def test_a_share_record_in_kafka_4_0s_early_access_layout_is_counted_as_such() -> None:
    """4.1 added untagged fields to two share records at the same version 0: 4.0's bytes do not fit, and say so."""
    assert rec.decode_value(11, bytes(W(True).i16(0).i32(3).tags().out)) == rec.Corrupt(
        "ShareGroupMetadataValue v0: metadata_hash: needs 8 bytes at offset 6, 1 left (damaged, or Kafka 4.0's "
        "early-access share layout: not decoded)"
    )
    v40 = W(True).i16(0).array([(TOPIC_ID, "t", (0,))], lambda w, t: w.raw(t[0]).str(t[1]).array(t[2], W.i32).tags())
    got = rec.decode_value(15, bytes(v40.uvarint(1).tags().out))  # [initialized][deleting]
    assert isinstance(got, rec.Corrupt)
    assert got.reason.endswith("(damaged, or Kafka 4.0's early-access share layout: not decoded)")


def test_unknown_value_versions() -> None:
    got = rec.decode_value(rec.OffsetCommitKey("g", "t", 0), b"\x00\x05" + b"\x00" * 30)
    assert isinstance(got, rec.Unknown)
    assert (got.record_type, got.version) == (1, 5)
    got = rec.decode_value(3, b"\xff\xfe\x00")
    assert isinstance(got, rec.Unknown)
    assert got.version == -2
    got = rec.decode_value(8, b"\x00\x01")
    assert isinstance(got, rec.Unknown)
    assert got.version == 1


def test_null_key_and_corrupt_key_values() -> None:
    k, v = rec.decode_record(None, b"\x00\x00")
    assert isinstance(k, rec.Corrupt)
    assert isinstance(v, rec.Corrupt)


def test_wire_reader_limits() -> None:
    with pytest.raises(DecodeError, match="longer than 5"):
        Reader(b"\xff\xff\xff\xff\xff\x01").uvarint("x")
    assert Reader(b"\xff\xff\xff\xff\x0f").uvarint("x") == 0xFFFFFFFF
    r = Reader(b"\x00\x02\xc3\x28")  # invalid UTF-8 is replaced, like Java's String(bytes, UTF_8)
    assert r.string("s") == "\ufffd("


# -- properties -------------------------------------------------------------------------------------------

text = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
ntext = st.none() | text
i8 = st.integers(-(2**7), 2**7 - 1)
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
uuid16 = st.binary(min_size=16, max_size=16)
small = {"max_size": 3}
tps = st.builds(rec.TopicPartitions, text, st.lists(i32, **small).map(tuple))
tips = st.builds(rec.TopicIdPartitions, uuid16, st.lists(i32, **small).map(tuple))


def tup(s: st.SearchStrategy[Any]) -> st.SearchStrategy[tuple[Any, ...]]:
    return st.lists(s, **small).map(tuple)


@st.composite
def offset_values(draw: st.DrawFn) -> rec.OffsetCommitValue:
    v = draw(st.integers(0, 4))
    return rec.OffsetCommitValue(
        v,
        draw(i64),
        draw(text),
        draw(i64),
        draw(i32) if v >= 3 else -1,
        draw(i64) if v == 1 else -1,
        draw(st.none() | uuid16) if v >= 4 else None,
    )


@st.composite
def group_values(draw: st.DrawFn) -> rec.GroupMetadataValue:
    v = draw(st.integers(0, 4))
    member = st.builds(
        rec.MemberMetadata,
        text,
        text,
        text,
        i32,
        st.binary(max_size=8),
        st.binary(max_size=8),
        ntext if v >= 3 else st.none(),
        i32 if v >= 1 else st.just(0),
    )
    return rec.GroupMetadataValue(
        v, draw(text), draw(i32), draw(ntext), draw(ntext), draw(tup(member)), draw(i64) if v >= 2 else -1
    )


@st.composite
def subscriptions(draw: st.DrawFn) -> rec.ConsumerProtocolSubscription:
    v = draw(st.integers(0, 3))
    return rec.ConsumerProtocolSubscription(
        v,
        draw(tup(text)),
        draw(st.none() | st.binary(max_size=8)),
        draw(tup(tps)) if v >= 1 else (),
        draw(i32) if v >= 2 else -1,
        draw(ntext) if v >= 3 else None,
    )


v0 = st.just(0)
kvs = tup(st.builds(rec.KeyValue, text, text))
i16s = tup(st.integers(-(2**15), 2**15 - 1))
share_values = st.one_of(
    st.builds(rec.ShareGroupMemberMetadataValue, v0, ntext, text, text, tup(text)),
    st.builds(rec.ShareGroupMetadataValue, v0, i32, i64),
    st.builds(rec.ShareGroupTargetAssignmentMetadataValue, v0, i32, i64),
    st.builds(rec.ShareGroupTargetAssignmentMemberValue, v0, tup(tips)),
    st.builds(rec.ShareGroupCurrentMemberAssignmentValue, v0, i32, i32, i8, tup(tips)),
    st.builds(
        rec.ShareGroupStatePartitionMetadataValue,
        v0,
        tup(st.builds(rec.TopicPartitionsInfo, uuid16, text, tup(i32))),
        tup(st.builds(rec.TopicPartitionsInfo, uuid16, text, tup(i32))),
        tup(st.builds(rec.TopicIdName, uuid16, text)),
    ),
)
tasks = tup(st.builds(rec.TaskIds, text, tup(i32), st.none() | tup(i32)))
streams_values = st.one_of(
    st.builds(rec.StreamsGroupMetadataValue, v0, i32, i64, i32, st.none() | kvs, i32, i32),
    st.builds(
        rec.StreamsGroupMemberMetadataValue,
        v0,
        ntext,
        ntext,
        text,
        text,
        i32,
        i32,
        text,
        st.none() | st.builds(rec.Endpoint, text, st.integers(0, 2**16 - 1)),
        kvs,
    ),
    st.builds(rec.StreamsGroupTargetAssignmentMetadataValue, v0, i32, i64),
    st.builds(rec.StreamsGroupTargetAssignmentMemberValue, v0, tasks, tasks, tasks),
    st.builds(rec.StreamsGroupCurrentMemberAssignmentValue, v0, i32, i32, i8, tasks, tasks, tasks, tasks, tasks, tasks),
    st.builds(
        rec.StreamsGroupTopologyValue,
        v0,
        i32,
        tup(
            st.builds(
                rec.Subtopology,
                text,
                tup(text),
                tup(text),
                tup(st.builds(rec.TopicInfo, text, i32, st.integers(-(2**15), 2**15 - 1), kvs)),
                tup(text),
                tup(st.builds(rec.TopicInfo, text, i32, st.integers(-(2**15), 2**15 - 1), kvs)),
                tup(st.builds(rec.CopartitionGroup, i16s, i16s, i16s)),
            )
        ),
    ),
)
values = st.one_of(
    offset_values(),
    group_values(),
    st.builds(rec.ConsumerGroupMetadataValue, v0, i32, i64),
    st.builds(
        rec.ConsumerGroupPartitionMetadataValue,
        v0,
        tup(st.builds(rec.TopicMetadata, uuid16, text, i32, tup(st.builds(rec.PartitionRacks, i32, tup(text))))),
    ),
    st.builds(
        rec.ConsumerGroupMemberMetadataValue,
        v0,
        ntext,
        ntext,
        text,
        text,
        tup(text),
        ntext,
        i32,
        ntext,
        st.none()
        | st.builds(rec.ClassicMemberMetadata, i32, tup(st.builds(rec.ClassicProtocol, text, st.binary(max_size=8)))),
    ),
    st.builds(rec.ConsumerGroupTargetAssignmentMetadataValue, v0, i32),
    st.builds(rec.ConsumerGroupTargetAssignmentMemberValue, v0, tup(tips)),
    st.builds(rec.ConsumerGroupCurrentMemberAssignmentValue, v0, i32, i32, i8, tup(tips), tup(tips)),
    st.builds(rec.ConsumerGroupRegularExpressionValue, v0, tup(text), i64, i64),
    share_values,
    streams_values,
)
VALUE_TYPE = {type(v): k.record_type for k, v in SAMPLES}
keys = st.one_of(
    st.builds(rec.OffsetCommitKey, text, text, i32, st.sampled_from([0, 1])),
    *[st.builds(cls, text) for cls in (rec.GroupMetadataKey, rec.ConsumerGroupMetadataKey)],
    *[
        st.builds(c, text)
        for c in (rec.ConsumerGroupPartitionMetadataKey, rec.ConsumerGroupTargetAssignmentMetadataKey)
    ],
    *[
        st.builds(c, text, text)
        for c in (
            rec.ConsumerGroupMemberMetadataKey,
            rec.ConsumerGroupTargetAssignmentMemberKey,
            rec.ConsumerGroupCurrentMemberAssignmentKey,
            rec.ConsumerGroupRegularExpressionKey,
        )
    ],
    st.builds(rec.GroupRecordKey, text, st.sampled_from([11, 12, 15, 17, 20, 23])),
    st.builds(rec.MemberRecordKey, text, text, st.sampled_from([10, 13, 14, 19, 21, 22])),
)


@given(keys)
def test_key_round_trip(key: rec.Key) -> None:
    assert rec.decode_key(encode_key(key)) == key


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(values)
def test_value_round_trip(value: rec.Value) -> None:
    assert rec.decode_value(VALUE_TYPE[type(value)], encode_value(value)) == value


@given(subscriptions(), st.builds(rec.ConsumerProtocolAssignment, st.integers(0, 2), tup(tps), st.none() | st.binary()))
def test_consumer_protocol_round_trip(
    sub: rec.ConsumerProtocolSubscription, asg: rec.ConsumerProtocolAssignment
) -> None:
    assert rec.decode_subscription(encode_subscription(sub)) == sub
    assert rec.decode_assignment(encode_assignment(asg)) == asg


@given(st.sampled_from([*range(9), *range(10, 18), *range(19, 24)]), st.binary(max_size=64), st.binary(max_size=64))
def test_garbage_never_raises(record_type: int, key: bytes, value: bytes) -> None:
    k = rec.decode_key(struct.pack(">h", record_type) + key)
    assert isinstance(k, rec.Corrupt | rec.Unknown) or k.record_type == record_type
    got = rec.decode_value(record_type, value)
    assert got is not None
    rec.decode_subscription(value)
    rec.decode_assignment(value)


# -- real records captured from a Kafka 4.1 broker by tests/integration/test_offsets_decoders_real.py -----


def _real_records() -> list[dict[str, Any]]:
    path = FIXTURES / "real_records.json"
    return json.loads(path.read_text())["records"] if path.exists() else []


@pytest.mark.parametrize("row", _real_records(), ids=lambda r: r["what"])
def test_real_broker_records_decode(row: dict[str, Any]) -> None:
    value = bytes.fromhex(row["value"]) if row["value"] is not None else None
    k, v = rec.decode_record(bytes.fromhex(row["key"]), value)
    assert type(k).__name__ == row["key_type"]
    assert type(v).__name__ == row["value_type"]
    assert not isinstance(v, rec.Corrupt | rec.Unknown)
    if isinstance(v, rec.GroupMetadataValue) and v.protocol_type == "consumer":
        for m in v.members:
            assert isinstance(m.consumer_subscription(), rec.ConsumerProtocolSubscription)
            assert not isinstance(m.consumer_assignment(), rec.Corrupt)


# -- the straight-line offset-commit path agrees with the field-by-field reader --------------------------


@given(offset_values(), st.lists(st.tuples(st.integers(0, 63), st.integers(0, 255)), max_size=3), st.integers(0, 40))
def test_fast_offset_path_equals_reader(value: rec.OffsetCommitValue, flips: list[tuple[int, int]], cut: int) -> None:
    raw = bytearray(encode_value(value))
    for at, byte in flips:
        if at < len(raw):
            raw[at] = byte
    for b in (bytes(raw), bytes(raw[: len(raw) - cut])):
        assert rec.decode_value(1, b) == rec._decode_value(1, b)  # noqa: SLF001


@given(
    st.builds(rec.OffsetCommitKey, text, text, i32, st.sampled_from([0, 1])), st.binary(max_size=4), st.integers(0, 9)
)
def test_fast_key_path_equals_reader(key: rec.OffsetCommitKey, tail: bytes, cut: int) -> None:
    raw = encode_key(key)
    for b in (raw, raw + tail, raw[: len(raw) - cut], raw[:2] + b"\xff\xff" + raw[4:]):
        assert rec.decode_key(b) == rec._decode_key(b)  # noqa: SLF001


# -- classic groups' generations, as the operator reads them (vigil_core.consumer_offsets.generations) ----------


def _metadata(group: str, generation: int | None) -> tuple[bytes, bytes | None]:
    value = None if generation is None else encode_value(dataclasses.replace(_gm(3), generation=generation))
    return encode_key(rec.GroupMetadataKey(group)), value


GENERATION_RECORDS = [
    # (case, records, group, expected generation)
    ("a group's metadata gives its generation", [_metadata("g", 4)], "g", 4),
    ("the last record wins (compaction keeps it)", [_metadata("g", 4), _metadata("g", 7)], "g", 7),
    ("a tombstone deletes the group", [_metadata("g", 4), _metadata("g", None)], "g", None),
    ("made again after its deletion", [_metadata("g", 9), _metadata("g", None), _metadata("g", 1)], "g", 1),
    ("offset commits say nothing of it",
     [(encode_key(rec.OffsetCommitKey("g", "t", 0, 1)), encode_value(rec.OffsetCommitValue(3, 5, "", 1)))], "g",
     None),
    ("a KIP-848 group's epoch record is not a classic generation",
     [(encode_key(rec.ConsumerGroupMetadataKey("g")), encode_value(rec.ConsumerGroupMetadataValue(0, 4, 99)))], "g",
     None),
    ("another group's record", [_metadata("other", 3)], "g", None),
    ("bytes that do not decode are skipped", [(b"\x00\x02\x00", b"\x00")], "g", None),
    ("a null key is skipped", [(None, b"x")], "g", None),
]  # fmt: skip


@pytest.mark.parametrize(("case", "records", "group", "expected"), GENERATION_RECORDS,
                         ids=[c[0] for c in GENERATION_RECORDS])  # fmt: skip
def test_a_classic_groups_generation_is_its_last_metadata_record(
    case: str, records: list[tuple[bytes | None, bytes | None]], group: str, expected: int | None
) -> None:
    read = Generations()
    read.begin(1)
    for key, value in records:
        read.read(key, value)
    read.reached_end(0)
    assert read.generation(group) == expected


def test_no_generation_until_every_partition_was_read_to_its_end() -> None:
    read = Generations()
    key, value = _metadata("g", 4)
    read.read(key, value)
    assert read.generation("g") is None  # the number of partitions is not known yet
    read.begin(3)
    read.reached_end(0)
    read.reached_end(2)
    assert read.generation("g") is None  # partition 1 may hold a later record of it
    read.reached_end(1)
    assert read.generation("g") == 4


@given(st.lists(st.tuples(st.sampled_from(["a", "b"]), st.none() | st.integers(0, 2**31 - 1)), max_size=20))
def test_the_generation_is_the_last_record_written_for_the_group(writes: list[tuple[str, int | None]]) -> None:
    read = Generations()
    read.begin(1)
    for group, generation in writes:
        read.read(*_metadata(group, generation))
    read.reached_end(0)
    for group in ("a", "b"):
        last = [g for name, g in writes if name == group]
        assert read.generation(group) == (last[-1] if last else None)
