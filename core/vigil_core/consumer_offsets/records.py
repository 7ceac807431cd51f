"""`__consumer_offsets` keys and values as frozen dataclasses (schemas of Kafka 3.9–4.4).

Key = int16 record type (Kafka calls it the key "version") + a non-flexible key struct. Value = int16 value version
+ the value struct (flexible from OffsetCommitValue/GroupMetadataValue v4 and for every KIP-848, share and streams
record); a null value is a tombstone. Field defaults are Kafka's own for fields a version lacks, so a decoded record
compares equal whatever version carried it.

Nothing here raises on input: record types or versions this module does not know become `Unknown` (4.0's
early-access share type 9, named with its group; future types and versions) and bytes that do not fit the schema
become `Corrupt` naming the field — the report counts both.
"""

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, Final, TypeVar

from vigil_core.consumer_offsets.wire import INT16, INT32, DecodeError, Reader

T = TypeVar("T")

# -- results that are not records ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Unknown:
    """A record type or version this decoder does not know (not an error: newer brokers add them)."""

    record_type: int
    version: int | None
    reason: str


@dataclass(frozen=True, slots=True)
class Corrupt:
    """Bytes that do not match the schema; `reason` names the record and field that failed."""

    reason: str


@dataclass(frozen=True, slots=True)
class Tombstone:
    """A null value: the key's group, member or offset was deleted (compaction later drops both)."""

    record_type: int


# -- shared structs -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopicPartitions:
    """Partitions of one topic by name (consumer protocol)."""

    topic: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class TopicIdPartitions:
    """Partitions of one topic by 16-byte topic id (KIP-848 records)."""

    topic_id: bytes
    partitions: tuple[int, ...]
    assignment_epochs: tuple[int, ...] | None = None
    """KIP-1251 (4.3+, a member's current assignment): the epoch each partition was assigned at, aligned with
    `partitions`; None when not written (tagged field 0)."""


_INT16 = INT16.unpack_from
_INT32 = INT32.unpack_from
_V3_HEAD = struct.Struct(">hqih")  # version, offset, leader epoch, metadata length
_V4_HEAD = struct.Struct(">hqiB")  # version, offset, leader epoch, first byte of the metadata length varint
_INT64 = struct.Struct(">q").unpack_from

# -- keys ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    """Types 0 (legacy) and 1: a committed offset of one partition."""

    group: str
    topic: str
    partition: int
    record_type: int = 1


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    """Type 2: a classic group's metadata."""

    group: str
    record_type: ClassVar[int] = 2


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataKey:
    """Type 3: a KIP-848 group's epoch."""

    group: str
    record_type: ClassVar[int] = 3


@dataclass(frozen=True, slots=True)
class ConsumerGroupPartitionMetadataKey:
    """Type 4: subscribed topics' metadata (deprecated by KIP-1101 in 4.1: tombstoned)."""

    group: str
    record_type: ClassVar[int] = 4


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataKey:
    """Type 5: one KIP-848 member's identity and subscription."""

    group: str
    member_id: str
    record_type: ClassVar[int] = 5


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataKey:
    """Type 6: the epoch of the group's target assignment."""

    group: str
    record_type: ClassVar[int] = 6


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberKey:
    """Type 7: one member's target assignment."""

    group: str
    member_id: str
    record_type: ClassVar[int] = 7


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentKey:
    """Type 8: one member's current assignment and epoch."""

    group: str
    member_id: str
    record_type: ClassVar[int] = 8


@dataclass(frozen=True, slots=True)
class ConsumerGroupRegularExpressionKey:
    """Type 16: a resolved subscription regex (4.0+)."""

    group: str
    regex: str
    record_type: ClassVar[int] = 16


@dataclass(frozen=True, slots=True)
class GroupRecordKey:
    """A share-group (11, 12, 15) or streams-group (17, 20, 23) record of the whole group: the group id only."""

    group: str
    record_type: int


@dataclass(frozen=True, slots=True)
class MemberRecordKey:
    """A share-group (10, 13, 14) or streams-group (19, 21, 22) record of one member: group and member id."""

    group: str
    member_id: str
    record_type: int


Key = (
    OffsetCommitKey
    | GroupMetadataKey
    | ConsumerGroupMetadataKey
    | ConsumerGroupPartitionMetadataKey
    | ConsumerGroupMemberMetadataKey
    | ConsumerGroupTargetAssignmentMetadataKey
    | ConsumerGroupTargetAssignmentMemberKey
    | ConsumerGroupCurrentMemberAssignmentKey
    | ConsumerGroupRegularExpressionKey
    | GroupRecordKey
    | MemberRecordKey
)

# -- consumer protocol (the bytes inside GroupMetadataValue members) ----------------------------------


@dataclass(frozen=True, slots=True)
class ConsumerProtocolSubscription:
    """What a classic consumer asked for (v0–v3): its topics, and since v1 what it owned before the rebalance."""

    version: int
    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartitions, ...] = ()
    generation_id: int = -1
    rack_id: str | None = None


@dataclass(frozen=True, slots=True)
class ConsumerProtocolAssignment:
    """What the leader gave a classic consumer for this generation."""

    version: int
    assigned_partitions: tuple[TopicPartitions, ...]
    user_data: bytes | None = None


# -- values -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    """v0–v4: 3.9/4.0 brokers write v3, 4.1.1 writes v4 (flexible; seen on a real broker), v1 with an expiry."""

    version: int
    offset: int
    metadata: str
    commit_timestamp: int
    leader_epoch: int = -1
    expire_timestamp: int = -1
    topic_id: bytes | None = None
    """Tagged field 0 of v4+ when present (16 bytes); 4.1.1 wrote no tags for librdkafka commits."""


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    """One classic member as of a GroupMetadataValue; subscription/assignment are consumer-protocol bytes."""

    member_id: str
    client_id: str
    client_host: str
    session_timeout: int
    subscription: bytes
    assignment: bytes
    group_instance_id: str | None = None
    rebalance_timeout: int = 0
    """Absent before v1; Kafka then uses the session timeout."""

    def consumer_subscription(self) -> ConsumerProtocolSubscription | Corrupt:
        """Decoded `subscription` (meaningful when the group's protocol type is "consumer")."""
        return decode_subscription(self.subscription)

    def consumer_assignment(self) -> ConsumerProtocolAssignment | Corrupt | None:
        """Decoded `assignment`; None while empty (joined, not yet synced)."""
        return decode_assignment(self.assignment)


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    """v0–v4 classic group state: one full record per completed generation, so generations are countable."""

    version: int
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    members: tuple[MemberMetadata, ...]
    current_state_timestamp: int = -1


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataValue:
    """KIP-848 group epoch; every epoch bump is a new record."""

    version: int
    epoch: int
    metadata_hash: int = 0
    """Tagged field 0, added in 4.1 (KIP-1101)."""


@dataclass(frozen=True, slots=True)
class PartitionRacks:
    partition: int
    racks: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    topic_id: bytes
    topic_name: str
    num_partitions: int
    partition_metadata: tuple[PartitionRacks, ...] = ()


@dataclass(frozen=True, slots=True)
class ConsumerGroupPartitionMetadataValue:
    """Subscribed topics' metadata (no epoch field since 3.8; racks unused since 4.0)."""

    version: int
    topics: tuple[TopicMetadata, ...]


@dataclass(frozen=True, slots=True)
class ClassicProtocol:
    name: str
    metadata: bytes


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """Set for a classic-protocol member inside a KIP-848 group (online upgrade)."""

    session_timeout_ms: int
    supported_protocols: tuple[ClassicProtocol, ...]


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataValue:
    version: int
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    classic_member_metadata: ClassicMemberMetadata | None = None


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataValue:
    version: int
    assignment_epoch: int
    assignment_timestamp: int = 0
    """KIP-1263 (4.3+): when the target assignment's computation finished, epoch ms; 0 when not written."""


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberValue:
    version: int
    topic_partitions: tuple[TopicIdPartitions, ...]


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentValue:
    """A member's epoch and partitions; partitions pending revocation are what a KIP-848 rebalance waits on."""

    version: int
    member_epoch: int
    previous_member_epoch: int
    state: int
    """0 STABLE, 1 UNREVOKED_PARTITIONS, 2 UNRELEASED_PARTITIONS (3 UNKNOWN)."""
    assigned_partitions: tuple[TopicIdPartitions, ...]
    partitions_pending_revocation: tuple[TopicIdPartitions, ...]


@dataclass(frozen=True, slots=True)
class ConsumerGroupRegularExpressionValue:
    version: int
    topics: tuple[str, ...]
    regex_version: int
    timestamp: int


# -- share groups (KIP-932): types 10-15 as Kafka 4.1+ writes them (4.0's early-access types 9, 11, 15 differ) --


@dataclass(frozen=True, slots=True)
class ShareGroupMemberMetadataValue:
    """Type 10: a share member joined or changed its subscription (share groups have no static members)."""

    version: int
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ShareGroupMetadataValue:
    """Type 11: the share group's epoch; every epoch bump is a new record."""

    version: int
    epoch: int
    metadata_hash: int
    """Untagged, since 4.1 (type 3 carries it in tag 0; 4.0's early-access layout lacks it)."""


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMetadataValue:
    """Type 12: the epoch of the share group's target assignment."""

    version: int
    assignment_epoch: int
    assignment_timestamp: int = 0
    """KIP-1263 (4.3+), tagged field 0; 0 when not written."""


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMemberValue:
    """Type 13: one share member's target partitions."""

    version: int
    topic_partitions: tuple[TopicIdPartitions, ...]


@dataclass(frozen=True, slots=True)
class ShareGroupCurrentMemberAssignmentValue:
    """Type 14: a share member's epoch and partitions (shared, so nothing is ever pending revocation)."""

    version: int
    member_epoch: int
    previous_member_epoch: int
    state: int
    """0 STABLE, 1 UNREVOKED_PARTITIONS, 2 UNRELEASED_PARTITIONS (127 UNKNOWN)."""
    assigned_partitions: tuple[TopicIdPartitions, ...]


@dataclass(frozen=True, slots=True)
class TopicPartitionsInfo:
    topic_id: bytes
    topic_name: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class TopicIdName:
    topic_id: bytes
    topic_name: str


@dataclass(frozen=True, slots=True)
class ShareGroupStatePartitionMetadataValue:
    """Type 15: which topics' share state is initializing, initialized or being deleted (no membership)."""

    version: int
    initializing_topics: tuple[TopicPartitionsInfo, ...]
    """Since 4.1, untagged (4.0's early-access layout lacks it)."""
    initialized_topics: tuple[TopicPartitionsInfo, ...]
    deleting_topics: tuple[TopicIdName, ...]


# -- streams groups (KIP-1071): types 17 and 19-23, Kafka 4.1+ --------------------------------------------


@dataclass(frozen=True, slots=True)
class KeyValue:
    key: str
    value: str


@dataclass(frozen=True, slots=True)
class StreamsGroupMetadataValue:
    """Type 17: the streams group's epoch. In 4.4 it is also rewritten at the same epoch (KIP-1331's topology
    description bookkeeping), so a rebalance is an increase of `epoch`, not a record."""

    version: int
    epoch: int
    metadata_hash: int
    """Untagged (type 3 carries it in tag 0)."""
    validated_topology_epoch: int = -1
    """Tag 0, 4.2+."""
    last_assignment_configs: tuple[KeyValue, ...] | None = None
    """Tag 1, 4.2+."""
    stored_description_topology_epoch: int = -1
    """Tag 2, 4.4+ (-2: uncertain)."""
    failed_description_topology_epoch: int = -1
    """Tag 3, 4.4+."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class StreamsGroupMemberMetadataValue:
    """Type 19: a streams member joined or changed; static members (an instance id) since 4.4."""

    version: int
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    topology_epoch: int
    process_id: str
    user_endpoint: Endpoint | None
    client_tags: tuple[KeyValue, ...]


@dataclass(frozen=True, slots=True)
class StreamsGroupTargetAssignmentMetadataValue:
    """Type 20: the epoch of the streams group's target assignment."""

    version: int
    assignment_epoch: int
    assignment_timestamp: int = 0
    """KIP-1263 (4.3+), tagged field 0; 0 when not written."""


@dataclass(frozen=True, slots=True)
class TaskIds:
    """The tasks of one subtopology, by partition."""

    subtopology_id: str
    partitions: tuple[int, ...]
    assignment_epochs: tuple[int, ...] | None = None
    """4.2+, a member's current active tasks only (tag 0): the epoch each was assigned at; None when not written."""


@dataclass(frozen=True, slots=True)
class StreamsGroupTargetAssignmentMemberValue:
    """Type 21: one streams member's target tasks."""

    version: int
    active_tasks: tuple[TaskIds, ...]
    standby_tasks: tuple[TaskIds, ...]
    warmup_tasks: tuple[TaskIds, ...]


@dataclass(frozen=True, slots=True)
class StreamsGroupCurrentMemberAssignmentValue:
    """Type 22: a streams member's epoch, state and tasks; epoch -2 is a static member's temporary leave (4.4)."""

    version: int
    member_epoch: int
    previous_member_epoch: int
    state: int
    """1 STABLE, 2 UNREVOKED_TASKS, 3 UNRELEASED_TASKS, 127 UNKNOWN (not the consumer numbering)."""
    active_tasks: tuple[TaskIds, ...]
    standby_tasks: tuple[TaskIds, ...]
    warmup_tasks: tuple[TaskIds, ...]
    active_tasks_pending_revocation: tuple[TaskIds, ...]
    standby_tasks_pending_revocation: tuple[TaskIds, ...]
    warmup_tasks_pending_revocation: tuple[TaskIds, ...]


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    partitions: int
    replication_factor: int
    topic_configs: tuple[KeyValue, ...]


@dataclass(frozen=True, slots=True)
class CopartitionGroup:
    """Indexes into the subtopology's source topics, source regexes and repartition source topics."""

    source_topics: tuple[int, ...]
    source_topic_regex: tuple[int, ...]
    repartition_source_topics: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Subtopology:
    subtopology_id: str
    source_topics: tuple[str, ...]
    source_topic_regex: tuple[str, ...]
    state_changelog_topics: tuple[TopicInfo, ...]
    repartition_sink_topics: tuple[str, ...]
    repartition_source_topics: tuple[TopicInfo, ...]
    copartition_groups: tuple[CopartitionGroup, ...]


@dataclass(frozen=True, slots=True)
class StreamsGroupTopologyValue:
    """Type 23: the topology a streams group runs, written when it is initialized or its epoch changes."""

    version: int
    epoch: int
    subtopologies: tuple[Subtopology, ...]


Value = (
    OffsetCommitValue
    | GroupMetadataValue
    | ConsumerGroupMetadataValue
    | ConsumerGroupPartitionMetadataValue
    | ConsumerGroupMemberMetadataValue
    | ConsumerGroupTargetAssignmentMetadataValue
    | ConsumerGroupTargetAssignmentMemberValue
    | ConsumerGroupCurrentMemberAssignmentValue
    | ConsumerGroupRegularExpressionValue
    | ShareGroupMemberMetadataValue
    | ShareGroupMetadataValue
    | ShareGroupTargetAssignmentMetadataValue
    | ShareGroupTargetAssignmentMemberValue
    | ShareGroupCurrentMemberAssignmentValue
    | ShareGroupStatePartitionMetadataValue
    | StreamsGroupMetadataValue
    | StreamsGroupMemberMetadataValue
    | StreamsGroupTargetAssignmentMetadataValue
    | StreamsGroupTargetAssignmentMemberValue
    | StreamsGroupCurrentMemberAssignmentValue
    | StreamsGroupTopologyValue
)

# -- key decoding -------------------------------------------------------------------------------------


def _offset_key(r: Reader, record_type: int) -> Key:
    return OffsetCommitKey(r.string("group"), r.string("topic"), r.int32("partition"), record_type)


def _group_key(
    cls: type[
        GroupMetadataKey
        | ConsumerGroupMetadataKey
        | ConsumerGroupPartitionMetadataKey
        | ConsumerGroupTargetAssignmentMetadataKey
    ],
) -> Callable[[Reader, int], Key]:
    return lambda r, _t: cls(r.string("group"))


def _member_key(
    cls: type[
        ConsumerGroupMemberMetadataKey
        | ConsumerGroupTargetAssignmentMemberKey
        | ConsumerGroupCurrentMemberAssignmentKey
    ],
) -> Callable[[Reader, int], Key]:
    return lambda r, _t: cls(r.string("group"), r.string("member_id"))


_KEYS: dict[int, Callable[[Reader, int], Key]] = {
    0: _offset_key,
    1: _offset_key,
    2: _group_key(GroupMetadataKey),
    3: _group_key(ConsumerGroupMetadataKey),
    4: _group_key(ConsumerGroupPartitionMetadataKey),
    5: _member_key(ConsumerGroupMemberMetadataKey),
    6: _group_key(ConsumerGroupTargetAssignmentMetadataKey),
    7: _member_key(ConsumerGroupTargetAssignmentMemberKey),
    8: _member_key(ConsumerGroupCurrentMemberAssignmentKey),
    16: lambda r, _t: ConsumerGroupRegularExpressionKey(r.string("group"), r.string("regex")),
    **dict.fromkeys((11, 12, 15, 17, 20, 23), lambda r, t: GroupRecordKey(r.string("group"), t)),
    **dict.fromkeys(
        (10, 13, 14, 19, 21, 22), lambda r, t: MemberRecordKey(r.string("group"), r.string("member_id"), t)
    ),
}

SHARE_GROUP_RECORDS: Final[dict[int, str]] = {
    10: "ShareGroupMemberMetadata",
    11: "ShareGroupMetadata",
    12: "ShareGroupTargetAssignmentMetadata",
    13: "ShareGroupTargetAssignmentMember",
    14: "ShareGroupCurrentMemberAssignment",
    15: "ShareGroupStatePartitionMetadata",
}
STREAMS_GROUP_RECORDS: Final[dict[int, str]] = {
    17: "StreamsGroupMetadata",
    19: "StreamsGroupMemberMetadata",
    20: "StreamsGroupTargetAssignmentMetadata",
    21: "StreamsGroupTargetAssignmentMember",
    22: "StreamsGroupCurrentMemberAssignment",
    23: "StreamsGroupTopology",
}
"""Record types of share groups (KIP-932) and streams groups (KIP-1071), from `CoordinatorRecordType` of the 4.0.0,
4.1.0 and 4.4.0 group-coordinator jars (type 18 was never in a release)."""

NOT_DECODED: Final[dict[int, str]] = {9: "ShareGroupPartitionMetadata"}
"""Named but not decoded: type 9 existed only in 4.0, whose share groups were early access (4.1 replaced it)."""


def _not_decoded(record_type: int, group: str | None) -> Unknown:
    name = NOT_DECODED[record_type]
    whose = f" of group {group!r}" if group is not None else ""
    return Unknown(record_type, None, f"{name}, an early-access (Kafka 4.0) share group's record{whose}: not decoded")


def decode_key(key: bytes | None) -> Key | Unknown | Corrupt:
    """Decode a `__consumer_offsets` key; never raises.

    Offset-commit keys (the bulk of the topic) take a straight-line path; anything it does not fully
    accept goes through the field-by-field reader, which alone decides what is corrupt.
    """
    if key is not None and len(key) > 8 and key[0] == 0 and key[1] <= 1:
        try:
            glen = _INT16(key, 2)[0]
            tpos = 4 + glen
            tlen = _INT16(key, tpos)[0]
            ppos = tpos + 2 + tlen
            if glen >= 0 and tlen >= 0 and ppos + 4 == len(key):
                return OffsetCommitKey(
                    key[4:tpos].decode("utf-8", "replace"),
                    key[tpos + 2 : ppos].decode("utf-8", "replace"),
                    _INT32(key, ppos)[0],
                    key[1],
                )
        except struct.error:
            pass
    return _decode_key(key)


def _decode_key(key: bytes | None) -> Key | Unknown | Corrupt:
    if key is None:
        return Corrupt("key: null")
    r = Reader(key)
    try:
        record_type = r.int16("key.type")
        decoder = _KEYS.get(record_type)
        if decoder is None and record_type in NOT_DECODED:
            return _not_decoded(record_type, r.string("group"))
        if decoder is None:
            return Unknown(record_type, None, "unknown record type")
        out = decoder(r, record_type)
        r.expect_end("key")
    except DecodeError as exc:
        return Corrupt(f"key: {exc}")
    return out


# -- value decoding -----------------------------------------------------------------------------------


def _offset_value(r: Reader, v: int) -> OffsetCommitValue:
    offset = r.int64("offset")
    leader_epoch = r.int32("leader_epoch") if v >= 3 else -1
    if v >= 4:
        metadata = r.compact_string("metadata")
        commit_ts = r.int64("commit_timestamp")
        topic_id = None
        tags = r.tagged_fields("OffsetCommitValue")
        if 0 in tags:
            if len(tags[0]) != 16:
                raise DecodeError(f"topic_id: {len(tags[0])} bytes, expected 16")
            topic_id = tags[0]
        return OffsetCommitValue(v, offset, metadata, commit_ts, leader_epoch, -1, topic_id)
    metadata = r.string("metadata")
    commit_ts = r.int64("commit_timestamp")
    expire_ts = r.int64("expire_timestamp") if v == 1 else -1
    return OffsetCommitValue(v, offset, metadata, commit_ts, leader_epoch, expire_ts)


def _group_value(r: Reader, v: int) -> GroupMetadataValue:
    flex = v >= 4
    string = r.compact_string if flex else r.string
    nstring = r.compact_nullable_string if flex else r.nullable_string
    protocol_type = string("protocol_type")
    generation = r.int32("generation")
    protocol = nstring("protocol")
    leader = nstring("leader")
    state_ts = r.int64("current_state_timestamp") if v >= 2 else -1

    def member(r: Reader) -> MemberMetadata:
        member_id = string("members.member_id")
        instance_id = nstring("members.group_instance_id") if v >= 3 else None
        client_id = string("members.client_id")
        client_host = string("members.client_host")
        rebalance_timeout = r.int32("members.rebalance_timeout") if v >= 1 else 0
        session_timeout = r.int32("members.session_timeout")
        if flex:
            subscription = r.compact_bytes("members.subscription")
            assignment = r.compact_bytes("members.assignment")
            r.tagged_fields("members")
        else:
            subscription = r.bytes_("members.subscription")
            assignment = r.bytes_("members.assignment")
        return MemberMetadata(
            member_id,
            client_id,
            client_host,
            session_timeout,
            subscription,
            assignment,
            instance_id,
            rebalance_timeout,
        )

    members = r.compact_array(member, "members") if flex else r.array(member, "members")
    if flex:
        r.tagged_fields("GroupMetadataValue")
    return GroupMetadataValue(v, protocol_type, generation, protocol, leader, members, state_ts)


def _int64_tag(payload: bytes, name: str) -> int:
    t = Reader(payload)
    value = t.int64(name)
    t.expect_end(name)
    return value


def _cg_metadata_value(r: Reader, v: int) -> ConsumerGroupMetadataValue:
    epoch = r.int32("epoch")
    tags = r.tagged_fields("ConsumerGroupMetadataValue")
    metadata_hash = _int64_tag(tags[0], "metadata_hash") if 0 in tags else 0
    return ConsumerGroupMetadataValue(v, epoch, metadata_hash)


def _strings(r: Reader, name: str) -> tuple[str, ...]:
    return r.compact_array(lambda r: r.compact_string(f"{name}[]"), name)


def _partition_racks(r: Reader) -> PartitionRacks:
    partition = r.int32("partition_metadata.partition")
    racks = _strings(r, "partition_metadata.racks")
    r.tagged_fields("partition_metadata")
    return PartitionRacks(partition, racks)


def _topic_metadata(r: Reader) -> TopicMetadata:
    topic_id = r.uuid("topics.topic_id")
    name = r.compact_string("topics.topic_name")
    num = r.int32("topics.num_partitions")
    racks = r.compact_array(_partition_racks, "topics.partition_metadata", 6)
    r.tagged_fields("topics")
    return TopicMetadata(topic_id, name, num, racks)


def _cg_partition_metadata_value(r: Reader, v: int) -> ConsumerGroupPartitionMetadataValue:
    topics = r.compact_array(_topic_metadata, "topics", 23)
    r.tagged_fields("ConsumerGroupPartitionMetadataValue")
    return ConsumerGroupPartitionMetadataValue(v, topics)


def _classic_protocol(r: Reader) -> ClassicProtocol:
    name = r.compact_string("supported_protocols.name")
    metadata = r.compact_bytes("supported_protocols.metadata")
    r.tagged_fields("supported_protocols")
    return ClassicProtocol(name, metadata)


def _classic_member_metadata(payload: bytes) -> ClassicMemberMetadata | None:
    # a nullable struct in a tagged field starts with an unsigned-varint marker: 0 null, 1 present (Kafka
    # 4.1 writes the null one too: tag 0, size 1, payload 00)
    t = Reader(payload)
    if t.uvarint("classic_member_metadata.marker") == 0:
        t.expect_end("classic_member_metadata")
        return None
    session = t.int32("classic_member_metadata.session_timeout_ms")
    protocols = t.compact_array(_classic_protocol, "classic_member_metadata.supported_protocols", 3)
    t.tagged_fields("classic_member_metadata")
    t.expect_end("classic_member_metadata")
    return ClassicMemberMetadata(session, protocols)


def _cg_member_metadata_value(r: Reader, v: int) -> ConsumerGroupMemberMetadataValue:
    instance_id = r.compact_nullable_string("instance_id")
    rack_id = r.compact_nullable_string("rack_id")
    client_id = r.compact_string("client_id")
    client_host = r.compact_string("client_host")
    topics = _strings(r, "subscribed_topic_names")
    regex = r.compact_nullable_string("subscribed_topic_regex")
    rebalance_timeout = r.int32("rebalance_timeout_ms")
    assignor = r.compact_nullable_string("server_assignor")
    tags = r.tagged_fields("ConsumerGroupMemberMetadataValue")
    classic = _classic_member_metadata(tags[0]) if 0 in tags else None
    return ConsumerGroupMemberMetadataValue(
        v, instance_id, rack_id, client_id, client_host, topics, regex, rebalance_timeout, assignor, classic
    )


def _assignment_metadata(r: Reader, name: str) -> tuple[int, int]:
    """The target assignment's epoch and KIP-1263 timestamp (types 6, 12 and 20 share the layout)."""
    epoch = r.int32("assignment_epoch")
    tags = r.tagged_fields(name)
    return epoch, _tagged(tags, 0, lambda t: t.int64("assignment_timestamp"), 0)


def _cg_target_metadata_value(r: Reader, v: int) -> ConsumerGroupTargetAssignmentMetadataValue:
    return ConsumerGroupTargetAssignmentMetadataValue(
        v, *_assignment_metadata(r, "ConsumerGroupTargetAssignmentMetadataValue")
    )


def _topic_id_partitions(r: Reader) -> TopicIdPartitions:
    topic_id = r.uuid("topic_id")
    partitions = r.compact_int32_array("partitions")
    tags = r.tagged_fields("topic_partitions")
    epochs = _tagged(tags, 0, lambda t: t.compact_nullable_int32_array("assignment_epochs"), None)
    return TopicIdPartitions(topic_id, partitions, epochs)


def _tagged(tags: dict[int, bytes], tag: int, read: Callable[[Reader], T], default: T) -> T:
    """Tagged field `tag` read whole from its payload, or `default` when the writer left it out."""
    if tag not in tags:
        return default
    t = Reader(tags[tag])
    value = read(t)
    t.expect_end(f"tag {tag}")
    return value


def _cg_target_member_value(r: Reader, v: int) -> ConsumerGroupTargetAssignmentMemberValue:
    tps = r.compact_array(_topic_id_partitions, "topic_partitions", 18)
    r.tagged_fields("ConsumerGroupTargetAssignmentMemberValue")
    return ConsumerGroupTargetAssignmentMemberValue(v, tps)


def _cg_current_assignment_value(r: Reader, v: int) -> ConsumerGroupCurrentMemberAssignmentValue:
    epoch = r.int32("member_epoch")
    previous = r.int32("previous_member_epoch")
    state = r.int8("state")
    assigned = r.compact_array(_topic_id_partitions, "assigned_partitions", 18)
    pending = r.compact_array(_topic_id_partitions, "partitions_pending_revocation", 18)
    r.tagged_fields("ConsumerGroupCurrentMemberAssignmentValue")
    return ConsumerGroupCurrentMemberAssignmentValue(v, epoch, previous, state, assigned, pending)


def _cg_regex_value(r: Reader, v: int) -> ConsumerGroupRegularExpressionValue:
    topics = _strings(r, "topics")
    regex_version = r.int64("version")
    timestamp = r.int64("timestamp")
    r.tagged_fields("ConsumerGroupRegularExpressionValue")
    return ConsumerGroupRegularExpressionValue(v, topics, regex_version, timestamp)


# -- share groups ---------------------------------------------------------------------------------------


def _share_member_value(r: Reader, v: int) -> ShareGroupMemberMetadataValue:
    rack_id = r.compact_nullable_string("rack_id")
    client_id = r.compact_string("client_id")
    client_host = r.compact_string("client_host")
    topics = _strings(r, "subscribed_topic_names")
    r.tagged_fields("ShareGroupMemberMetadataValue")
    return ShareGroupMemberMetadataValue(v, rack_id, client_id, client_host, topics)


def _share_metadata_value(r: Reader, v: int) -> ShareGroupMetadataValue:
    epoch = r.int32("epoch")
    metadata_hash = _share_layout_since_4_1(lambda: r.int64("metadata_hash"))
    r.tagged_fields("ShareGroupMetadataValue")
    return ShareGroupMetadataValue(v, epoch, metadata_hash)


def _share_layout_since_4_1(read: Callable[[], T]) -> T:
    """4.1 added untagged fields at the same version 0 (share groups were early access in 4.0): bytes that do not
    fit are damaged or 4.0's, which cannot be told apart, so the counted problem says both."""
    try:
        return read()
    except DecodeError as exc:
        raise DecodeError(f"{exc} (damaged, or Kafka 4.0's early-access share layout: not decoded)") from None


def _share_target_metadata_value(r: Reader, v: int) -> ShareGroupTargetAssignmentMetadataValue:
    return ShareGroupTargetAssignmentMetadataValue(
        v, *_assignment_metadata(r, "ShareGroupTargetAssignmentMetadataValue")
    )


def _share_target_member_value(r: Reader, v: int) -> ShareGroupTargetAssignmentMemberValue:
    tps = r.compact_array(_topic_id_partitions, "topic_partitions", 18)
    r.tagged_fields("ShareGroupTargetAssignmentMemberValue")
    return ShareGroupTargetAssignmentMemberValue(v, tps)


def _share_current_assignment_value(r: Reader, v: int) -> ShareGroupCurrentMemberAssignmentValue:
    epoch = r.int32("member_epoch")
    previous = r.int32("previous_member_epoch")
    state = r.int8("state")
    assigned = r.compact_array(_topic_id_partitions, "assigned_partitions", 18)
    r.tagged_fields("ShareGroupCurrentMemberAssignmentValue")
    return ShareGroupCurrentMemberAssignmentValue(v, epoch, previous, state, assigned)


def _topic_partitions_info(r: Reader) -> TopicPartitionsInfo:
    topic_id = r.uuid("topic_id")
    name = r.compact_string("topic_name")
    partitions = r.compact_int32_array("partitions")
    r.tagged_fields("topic_partitions_info")
    return TopicPartitionsInfo(topic_id, name, partitions)


def _topic_id_name(r: Reader) -> TopicIdName:
    topic_id = r.uuid("topic_id")
    name = r.compact_string("topic_name")
    r.tagged_fields("topic_info")
    return TopicIdName(topic_id, name)


def _share_state_value(r: Reader, v: int) -> ShareGroupStatePartitionMetadataValue:
    def read() -> ShareGroupStatePartitionMetadataValue:
        starting = r.compact_array(_topic_partitions_info, "initializing_topics", 19)
        initialized = r.compact_array(_topic_partitions_info, "initialized_topics", 19)
        deleting = r.compact_array(_topic_id_name, "deleting_topics", 18)
        r.tagged_fields("ShareGroupStatePartitionMetadataValue")
        r.expect_end("ShareGroupStatePartitionMetadataValue")
        return ShareGroupStatePartitionMetadataValue(v, starting, initialized, deleting)

    return _share_layout_since_4_1(read)


# -- streams groups -------------------------------------------------------------------------------------


def _key_value(r: Reader) -> KeyValue:
    key = r.compact_string("key")
    value = r.compact_string("value")
    r.tagged_fields("key_value")
    return KeyValue(key, value)


def _streams_metadata_value(r: Reader, v: int) -> StreamsGroupMetadataValue:
    epoch = r.int32("epoch")
    metadata_hash = r.int64("metadata_hash")
    tags = r.tagged_fields("StreamsGroupMetadataValue")
    return StreamsGroupMetadataValue(
        v,
        epoch,
        metadata_hash,
        _tagged(tags, 0, lambda t: t.int32("validated_topology_epoch"), -1),
        _tagged(tags, 1, lambda t: t.compact_nullable_array(_key_value, "last_assignment_configs", 3), None),
        _tagged(tags, 2, lambda t: t.int32("stored_description_topology_epoch"), -1),
        _tagged(tags, 3, lambda t: t.int32("failed_description_topology_epoch"), -1),
    )


def _user_endpoint(r: Reader) -> Endpoint | None:
    # a nullable struct outside a tagged field: an int8 marker, -1 null, 1 present
    if r.int8("user_endpoint") < 0:
        return None
    host = r.compact_string("user_endpoint.host")
    port = r.uint16("user_endpoint.port")
    r.tagged_fields("user_endpoint")
    return Endpoint(host, port)


def _streams_member_value(r: Reader, v: int) -> StreamsGroupMemberMetadataValue:
    instance_id = r.compact_nullable_string("instance_id")
    rack_id = r.compact_nullable_string("rack_id")
    client_id = r.compact_string("client_id")
    client_host = r.compact_string("client_host")
    rebalance_timeout = r.int32("rebalance_timeout_ms")
    topology_epoch = r.int32("topology_epoch")
    process_id = r.compact_string("process_id")
    endpoint = _user_endpoint(r)
    client_tags = r.compact_array(_key_value, "client_tags", 3)
    r.tagged_fields("StreamsGroupMemberMetadataValue")
    return StreamsGroupMemberMetadataValue(
        v, instance_id, rack_id, client_id, client_host, rebalance_timeout, topology_epoch, process_id, endpoint,
        client_tags,
    )  # fmt: skip


def _streams_target_metadata_value(r: Reader, v: int) -> StreamsGroupTargetAssignmentMetadataValue:
    return StreamsGroupTargetAssignmentMetadataValue(
        v, *_assignment_metadata(r, "StreamsGroupTargetAssignmentMetadataValue")
    )


def _task_ids(r: Reader) -> TaskIds:
    subtopology = r.compact_string("subtopology_id")
    partitions = r.compact_int32_array("partitions")
    tags = r.tagged_fields("task_ids")
    epochs = _tagged(tags, 0, lambda t: t.compact_nullable_int32_array("assignment_epochs"), None)
    return TaskIds(subtopology, partitions, epochs)


def _tasks(r: Reader, name: str) -> tuple[TaskIds, ...]:
    return r.compact_array(_task_ids, name, 3)


def _streams_target_member_value(r: Reader, v: int) -> StreamsGroupTargetAssignmentMemberValue:
    active, standby, warmup = (_tasks(r, f"{kind}_tasks") for kind in ("active", "standby", "warmup"))
    r.tagged_fields("StreamsGroupTargetAssignmentMemberValue")
    return StreamsGroupTargetAssignmentMemberValue(v, active, standby, warmup)


def _streams_current_assignment_value(r: Reader, v: int) -> StreamsGroupCurrentMemberAssignmentValue:
    epoch = r.int32("member_epoch")
    previous = r.int32("previous_member_epoch")
    state = r.int8("state")
    owned = [_tasks(r, f"{kind}_tasks") for kind in ("active", "standby", "warmup")]
    pending = [_tasks(r, f"{kind}_tasks_pending_revocation") for kind in ("active", "standby", "warmup")]
    r.tagged_fields("StreamsGroupCurrentMemberAssignmentValue")
    return StreamsGroupCurrentMemberAssignmentValue(v, epoch, previous, state, *owned, *pending)


def _topic_info(r: Reader) -> TopicInfo:
    name = r.compact_string("topic_info.name")
    partitions = r.int32("topic_info.partitions")
    replication = r.int16("topic_info.replication_factor")
    configs = r.compact_array(_key_value, "topic_info.topic_configs", 3)
    r.tagged_fields("topic_info")
    return TopicInfo(name, partitions, replication, configs)


def _copartition_group(r: Reader) -> CopartitionGroup:
    sources = r.compact_int16_array("copartition_groups.source_topics")
    regexes = r.compact_int16_array("copartition_groups.source_topic_regex")
    repartition = r.compact_int16_array("copartition_groups.repartition_source_topics")
    r.tagged_fields("copartition_groups")
    return CopartitionGroup(sources, regexes, repartition)


def _subtopology(r: Reader) -> Subtopology:
    subtopology_id = r.compact_string("subtopology_id")
    sources = _strings(r, "source_topics")
    regexes = _strings(r, "source_topic_regex")
    changelogs = r.compact_array(_topic_info, "state_changelog_topics", 9)
    sinks = _strings(r, "repartition_sink_topics")
    repartition_sources = r.compact_array(_topic_info, "repartition_source_topics", 9)
    copartition = r.compact_array(_copartition_group, "copartition_groups", 4)
    r.tagged_fields("subtopologies")
    return Subtopology(subtopology_id, sources, regexes, changelogs, sinks, repartition_sources, copartition)


def _streams_topology_value(r: Reader, v: int) -> StreamsGroupTopologyValue:
    epoch = r.int32("epoch")
    subtopologies = r.compact_array(_subtopology, "subtopologies", 8)
    r.tagged_fields("StreamsGroupTopologyValue")
    return StreamsGroupTopologyValue(v, epoch, subtopologies)


def _fast_offset_value(value: bytes) -> OffsetCommitValue | None:
    """OffsetCommitValue v3 (3.9/4.0) and v4 without tags (4.1) in one unpack; None means "use the reader"."""
    try:
        if value[1] == 4 and value[0] == 0:
            _, offset, epoch, mlen = _V4_HEAD.unpack_from(value)
            end = 14 + mlen  # metadata at 15, varint length + 1 in one byte (shorter than 127 bytes)
            if 0 < mlen < 0x80 and end + 9 == len(value) and value[end + 8] == 0:
                return OffsetCommitValue(
                    4, offset, value[15:end].decode("utf-8", "replace"), _INT64(value, end)[0], epoch
                )
        elif value[1] == 3 and value[0] == 0:
            _, offset, epoch, mlen = _V3_HEAD.unpack_from(value)
            end = 16 + mlen
            if mlen >= 0 and end + 8 == len(value):
                return OffsetCommitValue(
                    3, offset, value[16:end].decode("utf-8", "replace"), _INT64(value, end)[0], epoch
                )
    except (struct.error, IndexError):
        pass
    return None


#: record type -> (record name, highest value version known, decoder); every lowest version is 0
_VALUES: dict[int, tuple[str, int, Callable[[Reader, int], Value]]] = {
    0: ("OffsetCommitValue", 4, _offset_value),
    1: ("OffsetCommitValue", 4, _offset_value),
    2: ("GroupMetadataValue", 4, _group_value),
    3: ("ConsumerGroupMetadataValue", 0, _cg_metadata_value),
    4: ("ConsumerGroupPartitionMetadataValue", 0, _cg_partition_metadata_value),
    5: ("ConsumerGroupMemberMetadataValue", 0, _cg_member_metadata_value),
    6: ("ConsumerGroupTargetAssignmentMetadataValue", 0, _cg_target_metadata_value),
    7: ("ConsumerGroupTargetAssignmentMemberValue", 0, _cg_target_member_value),
    8: ("ConsumerGroupCurrentMemberAssignmentValue", 0, _cg_current_assignment_value),
    16: ("ConsumerGroupRegularExpressionValue", 0, _cg_regex_value),
    10: ("ShareGroupMemberMetadataValue", 0, _share_member_value),
    11: ("ShareGroupMetadataValue", 0, _share_metadata_value),
    12: ("ShareGroupTargetAssignmentMetadataValue", 0, _share_target_metadata_value),
    13: ("ShareGroupTargetAssignmentMemberValue", 0, _share_target_member_value),
    14: ("ShareGroupCurrentMemberAssignmentValue", 0, _share_current_assignment_value),
    15: ("ShareGroupStatePartitionMetadataValue", 0, _share_state_value),
    17: ("StreamsGroupMetadataValue", 0, _streams_metadata_value),
    19: ("StreamsGroupMemberMetadataValue", 0, _streams_member_value),
    20: ("StreamsGroupTargetAssignmentMetadataValue", 0, _streams_target_metadata_value),
    21: ("StreamsGroupTargetAssignmentMemberValue", 0, _streams_target_member_value),
    22: ("StreamsGroupCurrentMemberAssignmentValue", 0, _streams_current_assignment_value),
    23: ("StreamsGroupTopologyValue", 0, _streams_topology_value),
}


def decode_value(key: Key | Unknown | Corrupt | int, value: bytes | None) -> Value | Tombstone | Unknown | Corrupt:
    """Decode a value given its decoded key (or bare record type); never raises."""
    if isinstance(key, Corrupt):
        return Corrupt(f"value not decoded, {key.reason}")
    record_type = key if isinstance(key, int) else key.record_type
    if value is None:
        return Tombstone(record_type)
    fast = _fast_offset_value(value) if 0 <= record_type <= 1 else None
    return fast if fast is not None else _decode_value(record_type, value)


def _decode_value(record_type: int, value: bytes) -> Value | Unknown | Corrupt:
    spec = _VALUES.get(record_type)
    if spec is None and record_type in NOT_DECODED:
        return _not_decoded(record_type, None)
    if spec is None:
        return Unknown(record_type, None, "unknown record type")
    name, highest, decoder = spec
    r = Reader(value)
    version = None
    try:
        version = r.int16("version")
        if not 0 <= version <= highest:
            return Unknown(record_type, version, f"{name} version {version} not known (0-{highest})")
        out = decoder(r, version)
        r.expect_end(name)
    except DecodeError as exc:
        return Corrupt(f"{name} v{version}: {exc}")
    return out


def decode_record(
    key: bytes | None, value: bytes | None
) -> tuple[Key | Unknown | Corrupt, Value | Tombstone | Unknown | Corrupt]:
    """Both halves of one `__consumer_offsets` record."""
    k = decode_key(key)
    return k, decode_value(k, value)


# -- consumer protocol --------------------------------------------------------------------------------


def _topic_partitions(r: Reader) -> TopicPartitions:
    return TopicPartitions(r.string("topic"), r.int32_array("partitions"))


def decode_subscription(data: bytes) -> ConsumerProtocolSubscription | Corrupt:
    """ConsumerProtocolSubscription v0–v3; like Kafka, a newer version is read as v3 and the rest ignored."""
    r = Reader(data)
    try:
        version = r.int16("version")
        if version < 0:
            raise DecodeError(f"version: {version}")
        topics = r.array(lambda r: r.string("topics[]"), "topics", 2)
        user_data = r.nullable_bytes("user_data")
        owned = r.array(_topic_partitions, "owned_partitions", 6) if version >= 1 else ()
        generation = r.int32("generation_id") if version >= 2 else -1
        rack = r.nullable_string("rack_id") if version >= 3 else None
        if version <= 3:
            r.expect_end("ConsumerProtocolSubscription")
    except DecodeError as exc:
        return Corrupt(f"ConsumerProtocolSubscription: {exc}")
    return ConsumerProtocolSubscription(version, topics, user_data, owned, generation, rack)


def decode_assignment(data: bytes) -> ConsumerProtocolAssignment | Corrupt | None:
    """ConsumerProtocolAssignment v0–v2 (same layout); None for the empty bytes of a not-yet-synced member."""
    if not data:
        return None
    r = Reader(data)
    try:
        version = r.int16("version")
        if version < 0:
            raise DecodeError(f"version: {version}")
        assigned = r.array(_topic_partitions, "assigned_partitions", 6)
        user_data = r.nullable_bytes("user_data")
        if version <= 2:
            r.expect_end("ConsumerProtocolAssignment")
    except DecodeError as exc:
        return Corrupt(f"ConsumerProtocolAssignment: {exc}")
    return ConsumerProtocolAssignment(version, assigned, user_data)
