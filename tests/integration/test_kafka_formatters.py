"""Differential test: our `__consumer_offsets` decoders against Kafka's own renderings of the same real records.

The decoders are hand-written from Kafka's schemas; the only independent reference is Kafka itself. The test
drives real groups on the real broker — a classic group with commits, a join, a leave and a static member
(`group.instance.id`) that expires; a KIP-848 group with commits and members by name, by regex and by the
classic protocol; commits with metadata, a leader epoch and a retention time (the only way to get an
`expireTimestamp`, OffsetCommitValue v1); every group then deleted (tombstones) — and reads one
`__consumer_offsets` partition both ways, comparing every field Kafka prints, for every record read:
- `OffsetsMessageFormatter` / `GroupMetadataMessageFormatter` through the console consumer (kafka-tools 4.1.1);
- `DumpLogSegments --offsets-decoder` (kafka core), the only Kafka rendering of the KIP-848 records in 4.1.1.

What Kafka skips or prints differently by design, and how it is handled here:
- a formatter prints only its record types (0-1, resp. 2) and skips null keys, without offsets: ours are
  filtered the same way and paired by order (no null key occurs: asserted); types 3-8 and 16 are compared
  through DumpLogSegments only, which prints offsets (pairing by offset);
- JSON holds only the fields of the record's version, and a tagged field only when it is not its default:
  ours are rendered per version, and an absent tagged field must be the default on our side;
- bytes are base64, Uuids URL-safe base64 without padding (`Uuid.toString`);
- DumpLogSegments (not the formatter) replaces a "consumer" group member's subscription and assignment with
  their decoded JSON, keeping the base64 bytes when it cannot read them (the empty assignment of a member not
  yet synced): so our consumer-protocol decoders are compared too.
"""

import base64
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from kafka.protocol.consumer import OffsetCommitRequest

from vigil_core.consumer_offsets import records as rec
from vigil_core.kafka.security import ClientConfig, KafkaConnection
from vigil_core.kafka.wire import GroupWire
from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import clients
from vigil_dev.testing import formatters as fmt
from vigil_dev.testing.waiting import bound, wait_for

pytestmark = pytest.mark.integration

OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_PARTITIONS = 4  # offsets.topic.num.partitions in tests
SESSION_S = int(clients.CONSUMER_DEFAULTS["session.timeout.ms"]) / 1000
META = "vigil-méta ✓"  # non-ASCII: strings are decoded as UTF-8 on both sides
RETENTION_MS = 3_600_000


@dataclass(frozen=True)
class Raw:
    """One record of the partition as our reader (confluent-kafka) got it, and what our decoder made of it."""

    offset: int
    key: bytes | None
    value: bytes | None
    dkey: Any
    dvalue: Any

    def where(self) -> str:
        return (
            f"offset {self.offset} key={self.key.hex() if self.key else None} value={self.value and self.value.hex()}"
        )


# -- driving real groups ------------------------------------------------------------------------------


def _names_on_one_partition(*prefixes: str) -> tuple[int, list[str]]:
    """Unique group names that all live in one offsets partition: one console-consumer run per formatter."""
    names = [clients.unique(prefixes[0])]
    partition = fmt.offsets_partition(names[0], OFFSETS_PARTITIONS)
    for prefix in prefixes[1:]:
        name = clients.unique(prefix)
        while fmt.offsets_partition(name, OFFSETS_PARTITIONS) != partition:
            name = clients.unique(prefix)
        names.append(name)
    return partition, names


def _state(conn: KafkaConnection, group: str) -> str:
    try:
        return str(clients.describe_group(conn, group).state).split(".")[-1].upper()
    except KafkaException as exc:
        return f"error: {exc}"


def _wait_committed(conn: KafkaConnection, group: str, expected: dict[int, int]) -> None:
    wait_for(lambda: clients.committed(conn, group), lambda c: c == expected, timeout=30, what=f"{group} commits")


def _classic_group(conn: KafkaConnection, group: str, topic: str) -> str:
    """Two dynamic members commit; a static member joins; a dynamic one leaves; the rest stop, the static
    member without LeaveGroup (KIP-345), so it expires after its session. Returns the static instance id."""
    clients.produce_spread(conn, topic, [f"a{i}" for i in range(30)], 3)
    dynamic = clients.start_group(conn, group, [topic], size=2)
    instance = f"{group}-static"
    static = clients.Member(conn, group, [topic], f"{group}-s", extra={"group.instance.id": instance})
    try:
        _wait_committed(conn, group, dict.fromkeys(range(3), 10))
        static.start()
        wait_for(lambda: clients.stable_members(conn, group), lambda n: n == 3, timeout=60, what="static joined")
        dynamic[1].close()
        wait_for(lambda: clients.stable_members(conn, group), lambda n: n == 2, timeout=60, what="dynamic left")
        clients.produce_spread(conn, topic, [f"b{i}" for i in range(30)], 3)
        _wait_committed(conn, group, dict.fromkeys(range(3), 20))
    finally:
        static.close()
        dynamic[0].close()
    wait_for(lambda: _state(conn, group), lambda s: s == "EMPTY", timeout=bound(SESSION_S, 10), what="empty")
    return instance


def _kip848_group(conn: KafkaConnection, group: str, topic: str) -> None:
    """Three members of one KIP-848 group: by topic name, by regex (the broker resolves it: record type 16), and a
    classic-protocol member (its JoinGroup metadata is kept in the member record's tagged field)."""
    consumer: ClientConfig = {"group.protocol": "consumer"}
    members = [
        clients.Member(conn, group, [topic], f"{group}-name", extra=consumer).start(),
        clients.Member(conn, group, [f"^{topic}$"], f"{group}-regex", extra=consumer).start(),
        clients.Member(conn, group, [topic], f"{group}-classic").start(),
    ]
    try:
        wait_for(lambda: clients.stable_members(conn, group), lambda n: n == 3, timeout=60, what=f"{group} Stable")
        _wait_committed(conn, group, dict.fromkeys(range(3), 20))
    finally:
        for m in members:
            m.close()
    wait_for(lambda: _state(conn, group), lambda s: s == "EMPTY", timeout=bound(SESSION_S, 10), what="empty")


def _standalone_commits(conn: KafkaConnection, group: str, topic: str) -> None:
    """Commits outside any generation: one with metadata and a leader epoch (OffsetCommit v9+ from
    librdkafka), one with a retention time (OffsetCommit v2, kafka-python) — written as OffsetCommitValue v1."""
    committer = Consumer(conn.confluent_config() | clients.QUIET | {"group.id": group, "enable.auto.commit": False})
    try:
        committer.commit(offsets=[TopicPartition(topic, 1, 7, META, 0)], asynchronous=False)
    finally:
        committer.close()
    wire = GroupWire(conn, client_id="fmt-test")
    try:
        coordinator = wire.find_coordinator(group)
        assert coordinator.code == 0, coordinator
        topic_cls = OffsetCommitRequest.OffsetCommitRequestTopic
        request = OffsetCommitRequest(
            group_id=group, generation_id_or_member_epoch=-1, member_id="", retention_time_ms=RETENTION_MS,
            topics=[topic_cls(name=topic, partitions=[
                topic_cls.OffsetCommitRequestPartition(partition_index=0, committed_offset=5, committed_metadata=META)
            ])],
            min_version=2, max_version=2,
        )  # fmt: skip
        response = wire._send(request, coordinator.node_id)  # noqa: SLF001 - no public call sends a raw request
        assert [p.error_code for t in response.topics for p in t.partitions] == [0], response
    finally:
        wire.close()


def _delete_groups(conn: KafkaConnection, groups: list[str]) -> None:
    client = clients.admin(conn)  # referenced until the futures resolve
    for future in client.delete_consumer_groups(groups, request_timeout=15).values():
        future.result(timeout=30)


# -- reading the partition ourselves --------------------------------------------------------------------


def _end_offset(conn: KafkaConnection, partition: int) -> int:
    """The partition's end; 0 on a fresh broker, where the first group use has not created the topic yet."""
    if OFFSETS_TOPIC not in clients.admin(conn).list_topics(timeout=10).topics:
        return 0
    reader = Consumer(conn.confluent_config() | clients.QUIET | {"group.id": clients.unique("fmt-end")})
    try:
        return int(reader.get_watermark_offsets(TopicPartition(OFFSETS_TOPIC, partition), timeout=10)[1])
    finally:
        reader.close()


def _read(conn: KafkaConnection, partition: int, start: int, end: int) -> list[Raw]:
    """Records [start, end) of one offsets partition, raw and decoded (as in test_offsets_decoders_real)."""
    reader = Consumer(
        conn.confluent_config()
        | clients.QUIET
        | {"group.id": clients.unique("fmt-reader"), "enable.auto.commit": False}
    )
    out: list[Raw] = []
    try:
        reader.assign([TopicPartition(OFFSETS_TOPIC, partition, start)])

        def step() -> int:
            msg = reader.poll(0.5)
            if msg is not None:
                assert msg.error() is None, msg.error()
                key, value, offset = msg.key(), msg.value(), msg.offset()
                assert offset is not None
                out.append(Raw(offset, key, value, *rec.decode_record(key, value)))
            return out[-1].offset if out else start - 1

        wait_for(step, lambda last: last + 1 >= end, timeout=60, interval=0, what=f"{OFFSETS_TOPIC}-{partition} read")
    finally:
        reader.close()
    return out


# -- our records in Kafka's JSON shape ------------------------------------------------------------------


def _b64(data: bytes | None) -> str | None:
    """Jackson's rendering of a `bytes` field: standard base64 with padding."""
    return None if data is None else base64.b64encode(data).decode()


def _uuid(data: bytes) -> str:
    """Kafka's `Uuid.toString()`: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _key_json(key: Any) -> dict[str, Any]:
    if isinstance(key, rec.OffsetCommitKey):
        return {"group": key.group, "topic": key.topic, "partition": key.partition}
    if isinstance(key, rec.GroupMetadataKey):
        return {"group": key.group}
    if isinstance(key, rec.ConsumerGroupRegularExpressionKey):
        return {"groupId": key.group, "regularExpression": key.regex}
    if hasattr(key, "member_id"):
        return {"groupId": key.group, "memberId": key.member_id}
    return {"groupId": key.group}


def _tps(tps: tuple[rec.TopicIdPartitions, ...]) -> list[dict[str, Any]]:
    """A nested struct's tagged field is left out of Kafka's JSON at its default (KIP-1251's epochs: null)."""
    return [
        {"topicId": _uuid(tp.topic_id), "partitions": list(tp.partitions)}
        | ({} if tp.assignment_epochs is None else {"assignmentEpochs": list(tp.assignment_epochs)})
        for tp in tps
    ]


#: Tagged fields: Kafka's JSON leaves one out when it holds its default, so "absent" means "ours is the default".
Tagged = dict[str, tuple[Any, Any]]


def _offset_value_json(v: rec.OffsetCommitValue) -> tuple[dict[str, Any], Tagged]:
    out: dict[str, Any] = {"offset": v.offset, "metadata": v.metadata, "commitTimestamp": v.commit_timestamp}
    if v.version >= 3:
        out["leaderEpoch"] = v.leader_epoch
    if v.version == 1:
        out["expireTimestamp"] = v.expire_timestamp
    tagged = {"topicId": (None if v.topic_id is None else _uuid(v.topic_id), None)} if v.version >= 4 else {}
    return out, tagged


def _partitions_json(tps: tuple[rec.TopicPartitions, ...]) -> list[dict[str, Any]]:
    return [{"topic": tp.topic, "partitions": list(tp.partitions)} for tp in tps]


def _subscription_json(data: bytes) -> Any:
    """`ConsumerProtocolSubscriptionJsonConverter`'s shape; bytes Kafka cannot read stay base64 (as ours)."""
    sub = rec.decode_subscription(data)
    if isinstance(sub, rec.Corrupt):
        return _b64(data)
    out: dict[str, Any] = {"topics": list(sub.topics), "userData": _b64(sub.user_data)}
    if sub.version >= 1:
        out["ownedPartitions"] = _partitions_json(sub.owned_partitions)
    if sub.version >= 2:
        out["generationId"] = sub.generation_id
    if sub.version >= 3:
        out["rackId"] = sub.rack_id
    return out


def _assignment_json(data: bytes) -> Any:
    asg = rec.decode_assignment(data)
    if asg is None or isinstance(asg, rec.Corrupt):  # empty (not yet synced) or unreadable: the bytes stay
        return _b64(data)
    return {"assignedPartitions": _partitions_json(asg.assigned_partitions), "userData": _b64(asg.user_data)}


def _member_json(m: rec.MemberMetadata, version: int, embedded: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "memberId": m.member_id, "clientId": m.client_id, "clientHost": m.client_host,
        "sessionTimeout": m.session_timeout,
        "subscription": _subscription_json(m.subscription) if embedded else _b64(m.subscription),
        "assignment": _assignment_json(m.assignment) if embedded else _b64(m.assignment),
    }  # fmt: skip
    if version >= 1:
        out["rebalanceTimeout"] = m.rebalance_timeout
    if version >= 3:
        out["groupInstanceId"] = m.group_instance_id
    return out


def _group_value_json(v: rec.GroupMetadataValue, embedded: bool) -> dict[str, Any]:
    """`embedded`: render members' subscription/assignment decoded, as DumpLogSegments does for protocol type
    "consumer" (the console formatter prints the raw bytes)."""
    embedded = embedded and v.protocol_type == "consumer"
    out: dict[str, Any] = {
        "protocolType": v.protocol_type, "generation": v.generation, "protocol": v.protocol, "leader": v.leader,
        "members": [_member_json(m, v.version, embedded) for m in v.members],
    }  # fmt: skip
    if v.version >= 2:
        out["currentStateTimestamp"] = v.current_state_timestamp
    return out


def _classic_json(c: rec.ClassicMemberMetadata | None) -> dict[str, Any] | None:
    if c is None:
        return None
    protocols = [{"name": p.name, "metadata": _b64(p.metadata)} for p in c.supported_protocols]
    return {"sessionTimeoutMs": c.session_timeout_ms, "supportedProtocols": protocols}


def _member_metadata_json(v: rec.ConsumerGroupMemberMetadataValue) -> tuple[dict[str, Any], Tagged]:
    out = {
        "instanceId": v.instance_id, "rackId": v.rack_id, "clientId": v.client_id, "clientHost": v.client_host,
        "subscribedTopicNames": list(v.subscribed_topic_names), "subscribedTopicRegex": v.subscribed_topic_regex,
        "rebalanceTimeoutMs": v.rebalance_timeout_ms, "serverAssignor": v.server_assignor,
    }  # fmt: skip
    return out, {"classicMemberMetadata": (_classic_json(v.classic_member_metadata), None)}


def _partition_metadata_json(v: rec.ConsumerGroupPartitionMetadataValue) -> tuple[dict[str, Any], Tagged]:
    topics = [
        {"topicId": _uuid(t.topic_id), "topicName": t.topic_name, "numPartitions": t.num_partitions,
         "partitionMetadata": [{"partition": p.partition, "racks": list(p.racks)} for p in t.partition_metadata]}
        for t in v.topics
    ]  # fmt: skip
    return {"topics": topics}, {}


def _current_assignment_json(v: rec.ConsumerGroupCurrentMemberAssignmentValue) -> dict[str, Any]:
    return {
        "memberEpoch": v.member_epoch,
        "previousMemberEpoch": v.previous_member_epoch,
        "state": v.state,
        "assignedPartitions": _tps(v.assigned_partitions),
        "partitionsPendingRevocation": _tps(v.partitions_pending_revocation),
    }


_VALUE_JSON: dict[type, Callable[[Any], tuple[dict[str, Any], Tagged]]] = {
    rec.OffsetCommitValue: _offset_value_json,
    rec.ConsumerGroupMetadataValue: lambda v: ({"epoch": v.epoch}, {"metadataHash": (v.metadata_hash, 0)}),
    rec.ConsumerGroupPartitionMetadataValue: _partition_metadata_json,
    rec.ConsumerGroupMemberMetadataValue: _member_metadata_json,
    rec.ConsumerGroupTargetAssignmentMetadataValue: lambda v: (
        {"assignmentEpoch": v.assignment_epoch},
        {"assignmentTimestamp": (v.assignment_timestamp, 0)},
    ),
    rec.ConsumerGroupTargetAssignmentMemberValue: lambda v: ({"topicPartitions": _tps(v.topic_partitions)}, {}),
    rec.ConsumerGroupCurrentMemberAssignmentValue: lambda v: (_current_assignment_json(v), {}),
    rec.ConsumerGroupRegularExpressionValue: lambda v: (
        {"topics": list(v.topics), "version": v.regex_version, "timestamp": v.timestamp},
        {},
    ),
}


ABSENT = "<absent>"


def _diff(path: str, theirs: Any, ours: Any) -> list[str]:
    """Leaf-by-leaf differences of two JSON-shaped values, each named by its path."""
    if isinstance(theirs, dict) and isinstance(ours, dict):
        keys = sorted(theirs.keys() | ours.keys())
        return [d for k in keys for d in _diff(f"{path}.{k}", theirs.get(k, ABSENT), ours.get(k, ABSENT))]
    if isinstance(theirs, list) and isinstance(ours, list) and len(theirs) == len(ours):
        return [d for i, (t, o) in enumerate(zip(theirs, ours, strict=True)) for d in _diff(f"{path}[{i}]", t, o)]
    return [] if theirs == ours else [f"{path}: kafka {theirs!r:.300}, ours {ours!r:.300}"]


def _differences(
    raw: Raw, key_type: int, key: dict[str, Any], value: dict[str, Any] | None, *, embedded: bool
) -> list[str]:
    """Field-by-field differences between our decoding of `raw` and Kafka's rendering (type, key, value)."""
    out = _diff("type", key_type, raw.dkey.record_type) + _diff("key", key, _key_json(raw.dkey))
    if value is None or isinstance(raw.dvalue, rec.Tombstone):
        return out + _diff("tombstone", value is None, isinstance(raw.dvalue, rec.Tombstone))
    out += _diff("value.version", int(value["version"]), raw.dvalue.version)
    tagged: Tagged
    if isinstance(raw.dvalue, rec.GroupMetadataValue):
        fields, tagged = _group_value_json(raw.dvalue, embedded), {}
    else:
        fields, tagged = _VALUE_JSON[type(raw.dvalue)](raw.dvalue)
    theirs = {name: default for name, (_, default) in tagged.items()} | value["data"]
    return out + _diff("value", theirs, fields | {name: ours for name, (ours, _) in tagged.items()})


# -- the test -----------------------------------------------------------------------------------------


def test_decoders_equal_kafkas_formatters_on_real_records(
    kafka: KafkaCluster, artifacts_dir: Path, tmp_path: Path
) -> None:
    conn = kafka.connection()
    partition, (classic, kip848, standalone) = _names_on_one_partition("g-fmt", "g-fmt848", "g-fmtc")
    start = _end_offset(conn, partition)
    topic = clients.create_topic(conn, clients.unique("fmt"), partitions=3)

    instance = _classic_group(conn, classic, topic)
    _kip848_group(conn, kip848, topic)
    _standalone_commits(conn, standalone, topic)
    _delete_groups(conn, [classic, kip848, standalone])
    end = _end_offset(conn, partition)

    ours = _read(conn, partition, start, end)
    ours_groups = {getattr(r.dkey, "group", None) for r in ours}
    assert {classic, kip848, standalone} <= ours_groups, f"not all in partition {partition}: {ours_groups}"
    unreadable = [r.where() for r in ours if isinstance(r.dkey, rec.Corrupt | rec.Unknown)
                  or isinstance(r.dvalue, rec.Corrupt | rec.Unknown)]  # fmt: skip
    assert not unreadable, unreadable[:5]
    # The formatters skip a record with a null key (none here: the coordinator always writes a key)
    assert all(r.key is not None for r in ours)

    # 1. the console-consumer formatters, paired by order after applying their own filter (record type)
    printed: dict[str, list[dict[str, Any]]] = {}
    compared: Counter[str] = Counter()
    problems: list[str] = []
    for formatter, types in ((fmt.OFFSETS_FORMATTER, {0, 1}), (fmt.GROUP_METADATA_FORMATTER, {2})):
        name = formatter.rsplit(".", 1)[1]
        kafka_side = fmt.formatted_records(
            kafka.libs, kafka.bootstrap, formatter,
            partition=partition, offset=ours[0].offset, count=len(ours), work_dir=tmp_path,
        )  # fmt: skip
        printed[name] = kafka_side
        ours_side = [r for r in ours if r.dkey.record_type in types]  # shouldPrint(record type)
        assert len(kafka_side) == len(ours_side), (name, len(kafka_side), len(ours_side))
        for raw, theirs in zip(ours_side, kafka_side, strict=True):
            diff = _differences(raw, theirs["key"]["type"], theirs["key"]["data"], theirs["value"], embedded=False)
            problems += [f"{name} {raw.where()}: {d}" for d in diff]
            compared[f"{name}:{_kind(raw)}"] += 1

    # 2. DumpLogSegments: every record type, matched by offset (the broker may have written more since)
    segments = sorted((kafka.node_dir(1) / "data" / f"{OFFSETS_TOPIC}-{partition}").glob("*.log"))
    dumped = {d.offset: d for d in fmt.dumped_records(kafka.libs, segments, tmp_path)}
    missing = [r.offset for r in ours if r.offset not in dumped]
    assert not missing, f"DumpLogSegments lacks offsets {missing[:10]}"
    for raw in ours:
        d = dumped[raw.offset]
        problems += [f"DumpLogSegments {raw.where()}: {x}" for x in
                     _differences(raw, int(d.key["type"]), d.key["data"], d.value, embedded=True)]  # fmt: skip
        compared[f"DumpLogSegments:{_kind(raw)}"] += 1

    _save(artifacts_dir / "kafka_formatters.json", ours, printed, compared, problems)
    assert not problems, "\n".join(problems[:30])

    # every record kind this test drives was compared at least once, by the tool that renders it
    wanted = [
        "OffsetsMessageFormatter:offset-commit v4", "OffsetsMessageFormatter:offset-commit v1",
        "OffsetsMessageFormatter:offset-commit tombstone",
        "GroupMetadataMessageFormatter:group-metadata v3", "GroupMetadataMessageFormatter:group-metadata tombstone",
        *(f"DumpLogSegments:{kind} v0" for kind in ("cg-metadata", "cg-member", "cg-target", "cg-target-member",
                                                     "cg-current-assignment", "cg-regex")),
        *(f"DumpLogSegments:{kind} tombstone" for kind in ("cg-metadata", "cg-partition-metadata", "cg-member",
                                                           "cg-target", "cg-target-member", "cg-current-assignment",
                                                           "cg-regex")),
    ]  # fmt: skip
    assert all(compared[w] > 0 for w in wanted), {w: compared[w] for w in wanted}

    # ... and the records carry what the test did (so the comparison was over the interesting fields)
    group_values = [r.dvalue for r in ours if isinstance(r.dvalue, rec.GroupMetadataValue)
                    and r.dkey.group == classic]  # fmt: skip
    sizes = [len(v.members) for v in group_values]
    assert 3 in sizes, sizes  # the static member joined the two dynamic ones ...
    assert 2 in sizes[sizes.index(3) :], sizes  # ... and then a dynamic one left
    assert any(m.group_instance_id == instance for v in group_values for m in v.members)
    profiles = {v.client_id: v for v in (r.dvalue for r in ours)
                if isinstance(v, rec.ConsumerGroupMemberMetadataValue)}  # fmt: skip
    assert profiles[f"{kip848}-regex"].subscribed_topic_regex == f"(^{topic}$)", profiles  # librdkafka adds ()
    classic_member = profiles[f"{kip848}-classic"].classic_member_metadata
    assert classic_member is not None, profiles
    assert [p.name for p in classic_member.supported_protocols] == ["range"], classic_member
    assert profiles[f"{kip848}-name"].classic_member_metadata is None, profiles
    commits = {r.dkey.partition: r.dvalue for r in ours
               if r.dkey.group == standalone and isinstance(r.dvalue, rec.OffsetCommitValue)}  # fmt: skip
    retained, librdkafka = commits[0], commits[1]
    assert (retained.version, retained.offset, retained.metadata) == (1, 5, META), retained
    assert retained.expire_timestamp - retained.commit_timestamp == RETENTION_MS, retained
    assert (librdkafka.offset, librdkafka.leader_epoch) == (7, 0), librdkafka
    # a commit through confluent-kafka 2.16.1 carries the metadata with its C terminator: the broker stores it
    # (Kafka's formatters print "...\u0000" too), so the NUL is in the record, not an artefact of our decoder
    assert librdkafka.metadata.rstrip("\x00") == META, librdkafka


def _kind(raw: Raw) -> str:
    kind = {0: "offset-commit", 1: "offset-commit", 2: "group-metadata", 3: "cg-metadata", 4: "cg-partition-metadata",
            5: "cg-member", 6: "cg-target", 7: "cg-target-member", 8: "cg-current-assignment",
            16: "cg-regex"}[raw.dkey.record_type]  # fmt: skip
    return f"{kind} tombstone" if isinstance(raw.dvalue, rec.Tombstone) else f"{kind} v{raw.dvalue.version}"


def _save(path: Path, ours: list[Raw], printed: Any, compared: Counter[str], problems: list[str]) -> None:
    """The raw records (hex), Kafka's renderings and the outcome: the artifact to read when this fails."""
    rows = [{"offset": r.offset, "key": r.key and r.key.hex(), "value": r.value and r.value.hex()} for r in ours]
    data = {"records": rows, "formatters": printed, "compared": compared, "problems": problems}
    path.write_text(json.dumps(data, indent=1, default=str))
