"""`__consumer_offsets` keys and values as frozen dataclasses (schemas of Kafka 3.9–4.4).

Key = int16 record type (Kafka calls it the key "version") + a non-flexible key struct. Value = int16
value version + the value struct (flexible from OffsetCommitValue/GroupMetadataValue v4 and for every KIP-848
record); a null value is a tombstone. Field defaults are Kafka's own for fields a version lacks, so a
decoded record compares equal whatever version carried it.

Nothing here raises on input: record types or versions this module does not know become `Unknown`
(share and streams groups, named with their group; future types and versions) and bytes that do not fit the
schema become `Corrupt` naming the field — the report counts both.
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
}


NOT_DECODED: Final[dict[int, str]] = {
    9: "ShareGroupPartitionMetadata",  # 4.0 only
    10: "ShareGroupMemberMetadata",
    11: "ShareGroupMetadata",
    12: "ShareGroupTargetAssignmentMetadata",
    13: "ShareGroupTargetAssignmentMember",
    14: "ShareGroupCurrentMemberAssignment",
    15: "ShareGroupStatePartitionMetadata",
    17: "StreamsGroupMetadata",
    19: "StreamsGroupMemberMetadata",
    20: "StreamsGroupTargetAssignmentMetadata",
    21: "StreamsGroupTargetAssignmentMember",
    22: "StreamsGroupCurrentMemberAssignment",
    23: "StreamsGroupTopology",
}
"""Record types Kafka writes for share groups (KIP-932) and streams groups (KIP-1071), named but not decoded: the
report's rebalance model is about consumer groups. Read from `CoordinatorRecordType` of the 4.0.0, 4.1.0 and 4.4.0
group-coordinator jars (type 18 was never in a release). Each key begins with the group id."""


def _not_decoded(record_type: int, group: str | None) -> Unknown:
    name = NOT_DECODED[record_type]
    kind = "a share group's" if name.startswith("Share") else "a streams group's"
    whose = f" of group {group!r}" if group is not None else ""
    return Unknown(record_type, None, f"{name}, {kind} record{whose}: not decoded (the report models consumer groups)")


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


def _partition_racks(r: Reader) -> PartitionRacks:
    partition = r.int32("partition_metadata.partition")
    racks = r.compact_array(lambda r: r.compact_string("racks[]"), "partition_metadata.racks")
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
    topics = r.compact_array(lambda r: r.compact_string("subscribed_topic_names[]"), "subscribed_topic_names")
    regex = r.compact_nullable_string("subscribed_topic_regex")
    rebalance_timeout = r.int32("rebalance_timeout_ms")
    assignor = r.compact_nullable_string("server_assignor")
    tags = r.tagged_fields("ConsumerGroupMemberMetadataValue")
    classic = _classic_member_metadata(tags[0]) if 0 in tags else None
    return ConsumerGroupMemberMetadataValue(
        v, instance_id, rack_id, client_id, client_host, topics, regex, rebalance_timeout, assignor, classic
    )


def _cg_target_metadata_value(r: Reader, v: int) -> ConsumerGroupTargetAssignmentMetadataValue:
    epoch = r.int32("assignment_epoch")
    tags = r.tagged_fields("ConsumerGroupTargetAssignmentMetadataValue")
    timestamp = _tagged(tags, 0, lambda t: t.int64("assignment_timestamp"), 0)
    return ConsumerGroupTargetAssignmentMetadataValue(v, epoch, timestamp)


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
    topics = r.compact_array(lambda r: r.compact_string("topics[]"), "topics")
    regex_version = r.int64("version")
    timestamp = r.int64("timestamp")
    r.tagged_fields("ConsumerGroupRegularExpressionValue")
    return ConsumerGroupRegularExpressionValue(v, topics, regex_version, timestamp)


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
