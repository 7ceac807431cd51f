"""Differential test: our `__consumer_offsets` decoders against Kafka's own renderings of the same real records.

The decoders are hand-written from Kafka's schemas; the only independent reference is Kafka itself. The test
drives real groups on the real broker — a classic group with commits, a join, a leave and a static member
(`group.instance.id`) that expires; a KIP-848 group with commits and members by name, by regex and by the
classic protocol (4.0+); commits with metadata, a leader epoch and a retention time (the only way to get an
`expireTimestamp`, OffsetCommitValue v1); a share group's member (4.2+); a Kafka Streams app on the streams protocol,
with a user endpoint (4.2+); every group then deleted (tombstones) — and reads one `__consumer_offsets` partition both
ways, comparing every field Kafka prints, for every record read. It runs on the default broker and on 3.9.1
(`make test-kafka-39`), each with that release's own tools:
- `OffsetsMessageFormatter` / `GroupMetadataMessageFormatter` through the console consumer (kafka-tools);
- `DumpLogSegments --offsets-decoder`, the only Kafka rendering of the KIP-848, share and streams records.

What Kafka skips or prints differently by design, and how it is handled here:
- a formatter prints only its record types (0-1, resp. 2) and skips null keys, without offsets: ours are
  filtered the same way and paired by order (no null key occurs: asserted); types 3-23 are compared
  through DumpLogSegments only, which prints offsets (pairing by offset); 3.9's formatters name the key's record
  type "version", later ones "type";
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
from confluent_kafka import Consumer, KafkaException, ShareConsumer, TopicPartition
from kafka.protocol.consumer import OffsetCommitRequest

from vigil_core.consumer_offsets import records as rec
from vigil_core.kafka.group_client import GroupClient
from vigil_core.kafka.model import GroupState
from vigil_core.kafka.security import ClientConfig, KafkaConnection
from vigil_core.kafka.wire import GroupWire
from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import clients, streams_app
from vigil_dev.testing import formatters as fmt
from vigil_dev.testing.fixtures import release, run_kafka_version
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


def _share_group(conn: KafkaConnection, group: str, topic: str) -> None:
    """One share member (4.2+) reads the topic until it has acquired records, then leaves: types 10-15."""
    member = ShareConsumer(conn.confluent_config() | clients.QUIET | {"group.id": group})
    try:
        member.subscribe([topic])

        def acquired() -> int:  # a new share group starts at the end (share.auto.offset.reset=latest)
            clients.produce_spread(conn, topic, ["s"], 3)
            return len(member.poll(1.0))

        wait_for(acquired, lambda n: n > 0, timeout=60, what=f"{group} records acquired")
    finally:
        member.close()
    _wait_empty(conn, group)


def _wait_empty(conn: KafkaConnection, group: str) -> None:
    """A share or streams group (described by its own API) without members."""
    client = GroupClient(conn)
    try:
        wait_for(lambda: client.describe(group, subscriptions=False).state, lambda s: s is GroupState.EMPTY,
                 timeout=30, what=f"{group} Empty")  # fmt: skip
    finally:
        client.close()


#: a Kafka Streams member's user endpoint (`application.server`): its port above 32767 shows a uint16 is read
STREAMS_ENDPOINT = ("127.0.0.1", 65000)


def _streams_group(kafka: KafkaCluster, group: str, topic: str, artifacts_dir: Path) -> None:
    """A Kafka Streams app (streams protocol, 4.2+) joins, runs and leaves: types 17 and 19-23."""
    conn = kafka.connection()
    out = clients.create_topic(conn, clients.unique("fmt-out"), partitions=3)
    state_dir = artifacts_dir / "streams" / group
    state_dir.mkdir(parents=True)
    app = streams_app.start(
        kafka.libs, conn, application_id=group, input_topic=topic, output_topic=out, name=f"{group}-app",
        state_dir=state_dir, protocol="streams",
        properties={"application.server": ":".join(map(str, STREAMS_ENDPOINT))},
    )  # fmt: skip
    try:
        app.wait_state("RUNNING", timeout=90)
        wait_for(lambda: clients.committed(conn, group), lambda c: len(c) == 3, timeout=60, what=f"{group} commits")
    finally:
        app.stop()
    _wait_empty(conn, group)


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


def _kvs(kvs: tuple[rec.KeyValue, ...]) -> list[dict[str, str]]:
    return [{"key": kv.key, "value": kv.value} for kv in kvs]


def _tasks(tasks: tuple[rec.TaskIds, ...]) -> list[dict[str, Any]]:
    return [
        {"subtopologyId": t.subtopology_id, "partitions": list(t.partitions)}
        | ({} if t.assignment_epochs is None else {"assignmentEpochs": list(t.assignment_epochs)})
        for t in tasks
    ]


def _streams_metadata_json(v: rec.StreamsGroupMetadataValue) -> tuple[dict[str, Any], Tagged]:
    configs = None if v.last_assignment_configs is None else _kvs(v.last_assignment_configs)
    return {"epoch": v.epoch, "metadataHash": v.metadata_hash}, {
        "validatedTopologyEpoch": (v.validated_topology_epoch, -1), "lastAssignmentConfigs": (configs, None),
        "storedDescriptionTopologyEpoch": (v.stored_description_topology_epoch, -1),
        "failedDescriptionTopologyEpoch": (v.failed_description_topology_epoch, -1),
    }  # fmt: skip


def _streams_member_json(v: rec.StreamsGroupMemberMetadataValue) -> dict[str, Any]:
    endpoint = v.user_endpoint and {"host": v.user_endpoint.host, "port": v.user_endpoint.port}
    return {
        "instanceId": v.instance_id, "rackId": v.rack_id, "clientId": v.client_id, "clientHost": v.client_host,
        "rebalanceTimeoutMs": v.rebalance_timeout_ms, "topologyEpoch": v.topology_epoch, "processId": v.process_id,
        "userEndpoint": endpoint, "clientTags": _kvs(v.client_tags),
    }  # fmt: skip


def _streams_assignment_json(v: rec.StreamsGroupCurrentMemberAssignmentValue) -> dict[str, Any]:
    return {
        "memberEpoch": v.member_epoch, "previousMemberEpoch": v.previous_member_epoch, "state": v.state,
        "activeTasks": _tasks(v.active_tasks), "standbyTasks": _tasks(v.standby_tasks),
        "warmupTasks": _tasks(v.warmup_tasks),
        "activeTasksPendingRevocation": _tasks(v.active_tasks_pending_revocation),
        "standbyTasksPendingRevocation": _tasks(v.standby_tasks_pending_revocation),
        "warmupTasksPendingRevocation": _tasks(v.warmup_tasks_pending_revocation),
    }  # fmt: skip


def _topic_info_json(t: rec.TopicInfo) -> dict[str, Any]:
    return {"name": t.name, "partitions": t.partitions, "replicationFactor": t.replication_factor,
            "topicConfigs": _kvs(t.topic_configs)}  # fmt: skip


def _topology_json(v: rec.StreamsGroupTopologyValue) -> dict[str, Any]:
    subtopologies = [
        {"subtopologyId": s.subtopology_id, "sourceTopics": list(s.source_topics),
         "sourceTopicRegex": list(s.source_topic_regex),
         "stateChangelogTopics": [_topic_info_json(t) for t in s.state_changelog_topics],
         "repartitionSinkTopics": list(s.repartition_sink_topics),
         "repartitionSourceTopics": [_topic_info_json(t) for t in s.repartition_source_topics],
         "copartitionGroups": [{"sourceTopics": list(g.source_topics), "sourceTopicRegex": list(g.source_topic_regex),
                                "repartitionSourceTopics": list(g.repartition_source_topics)}
                               for g in s.copartition_groups]}
        for s in v.subtopologies
    ]  # fmt: skip
    return {"epoch": v.epoch, "subtopologies": subtopologies}


def _share_state_json(v: rec.ShareGroupStatePartitionMetadataValue) -> dict[str, Any]:
    def infos(topics: tuple[rec.TopicPartitionsInfo, ...]) -> list[dict[str, Any]]:
        return [{"topicId": _uuid(t.topic_id), "topicName": t.topic_name, "partitions": list(t.partitions)}
                for t in topics]  # fmt: skip

    return {
        "initializingTopics": infos(v.initializing_topics), "initializedTopics": infos(v.initialized_topics),
        "deletingTopics": [{"topicId": _uuid(t.topic_id), "topicName": t.topic_name} for t in v.deleting_topics],
    }  # fmt: skip


def _assignment_metadata_json(v: Any) -> tuple[dict[str, Any], Tagged]:
    return {"assignmentEpoch": v.assignment_epoch}, {"assignmentTimestamp": (v.assignment_timestamp, 0)}


_VALUE_JSON: dict[type, Callable[[Any], tuple[dict[str, Any], Tagged]]] = {
    rec.OffsetCommitValue: _offset_value_json,
    rec.ConsumerGroupMetadataValue: lambda v: ({"epoch": v.epoch}, {"metadataHash": (v.metadata_hash, 0)}),
    rec.ConsumerGroupPartitionMetadataValue: _partition_metadata_json,
    rec.ConsumerGroupMemberMetadataValue: _member_metadata_json,
    rec.ConsumerGroupTargetAssignmentMetadataValue: _assignment_metadata_json,
    rec.ConsumerGroupTargetAssignmentMemberValue: lambda v: ({"topicPartitions": _tps(v.topic_partitions)}, {}),
    rec.ConsumerGroupCurrentMemberAssignmentValue: lambda v: (_current_assignment_json(v), {}),
    rec.ConsumerGroupRegularExpressionValue: lambda v: (
        {"topics": list(v.topics), "version": v.regex_version, "timestamp": v.timestamp},
        {},
    ),
    rec.ShareGroupMemberMetadataValue: lambda v: (
        {"rackId": v.rack_id, "clientId": v.client_id, "clientHost": v.client_host,
         "subscribedTopicNames": list(v.subscribed_topic_names)}, {},
    ),
    rec.ShareGroupMetadataValue: lambda v: ({"epoch": v.epoch, "metadataHash": v.metadata_hash}, {}),
    rec.ShareGroupTargetAssignmentMetadataValue: _assignment_metadata_json,
    rec.ShareGroupTargetAssignmentMemberValue: lambda v: ({"topicPartitions": _tps(v.topic_partitions)}, {}),
    rec.ShareGroupCurrentMemberAssignmentValue: lambda v: (
        {"memberEpoch": v.member_epoch, "previousMemberEpoch": v.previous_member_epoch, "state": v.state,
         "assignedPartitions": _tps(v.assigned_partitions)}, {},
    ),
    rec.ShareGroupStatePartitionMetadataValue: lambda v: (_share_state_json(v), {}),
    rec.StreamsGroupMetadataValue: _streams_metadata_json,
    rec.StreamsGroupMemberMetadataValue: lambda v: (_streams_member_json(v), {}),
    rec.StreamsGroupTargetAssignmentMetadataValue: _assignment_metadata_json,
    rec.StreamsGroupTargetAssignmentMemberValue: lambda v: (
        {"activeTasks": _tasks(v.active_tasks), "standbyTasks": _tasks(v.standby_tasks),
         "warmupTasks": _tasks(v.warmup_tasks)}, {},
    ),
    rec.StreamsGroupCurrentMemberAssignmentValue: lambda v: (_streams_assignment_json(v), {}),
    rec.StreamsGroupTopologyValue: lambda v: (_topology_json(v), {}),
}  # fmt: skip


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
    running = release(run_kafka_version())
    partition, (classic, kip848, standalone, share, streams) = _names_on_one_partition(
        "g-fmt", "g-fmt848", "g-fmtc", "g-fmtshare", "g-fmtstreams"
    )
    groups = [classic, standalone, *([kip848] if running >= KIP848 else []),
              *([share, streams] if running >= SHARE_AND_STREAMS else [])]  # fmt: skip
    start = _end_offset(conn, partition)
    topic = clients.create_topic(conn, clients.unique("fmt"), partitions=3)

    instance = _classic_group(conn, classic, topic)
    if kip848 in groups:
        _kip848_group(conn, kip848, topic)
    _standalone_commits(conn, standalone, topic)
    if share in groups:
        _share_group(conn, share, topic)
        _streams_group(kafka, streams, topic, artifacts_dir)
    _delete_groups(conn, groups)
    end = _end_offset(conn, partition)

    ours = _read(conn, partition, start, end)
    ours_groups = {getattr(r.dkey, "group", None) for r in ours}
    assert set(groups) <= ours_groups, f"not all in partition {partition}: {ours_groups}"
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
            key_type = int(theirs["key"]["type" if "type" in theirs["key"] else "version"])  # 3.9: "version"
            diff = _differences(raw, key_type, theirs["key"]["data"], theirs["value"], embedded=False)
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
        f"OffsetsMessageFormatter:offset-commit v{3 if running < (4, 1) else 4}",
        "OffsetsMessageFormatter:offset-commit v1", "OffsetsMessageFormatter:offset-commit tombstone",
        "GroupMetadataMessageFormatter:group-metadata v3", "GroupMetadataMessageFormatter:group-metadata tombstone",
    ]  # fmt: skip
    if kip848 in groups:
        wanted += [
            f"DumpLogSegments:{kind} v0"
            for kind in (
                "cg-metadata",
                "cg-member",
                "cg-target",
                "cg-target-member",
                "cg-current-assignment",
                "cg-regex",
            )
        ]
        wanted += [f"DumpLogSegments:{kind} tombstone" for kind in (
            "cg-metadata", "cg-partition-metadata", "cg-member", "cg-target", "cg-target-member",
            "cg-current-assignment", "cg-regex")]  # fmt: skip
    if share in groups:
        wanted += [f"DumpLogSegments:{_KINDS[t]} {how}" for t in (*range(10, 16), 17, *range(19, 24))
                   for how in ("v0", "tombstone")]  # fmt: skip
    assert all(compared[w] > 0 for w in wanted), {w: compared[w] for w in wanted}

    # ... and the records carry what the test did (so the comparison was over the interesting fields)
    group_values = [r.dvalue for r in ours if isinstance(r.dvalue, rec.GroupMetadataValue)
                    and r.dkey.group == classic]  # fmt: skip
    sizes = [len(v.members) for v in group_values]
    assert 3 in sizes, sizes  # the static member joined the two dynamic ones ...
    assert 2 in sizes[sizes.index(3) :], sizes  # ... and then a dynamic one left
    assert any(m.group_instance_id == instance for v in group_values for m in v.members)
    if kip848 in groups:
        profiles = {v.client_id: v for v in (r.dvalue for r in ours)
                    if isinstance(v, rec.ConsumerGroupMemberMetadataValue)}  # fmt: skip
        assert profiles[f"{kip848}-regex"].subscribed_topic_regex == f"(^{topic}$)", profiles  # librdkafka adds ()
        classic_member = profiles[f"{kip848}-classic"].classic_member_metadata
        assert classic_member is not None, profiles
        assert [p.name for p in classic_member.supported_protocols] == ["range"], classic_member
        assert profiles[f"{kip848}-name"].classic_member_metadata is None, profiles
    if share in groups:
        endpoints = {v.user_endpoint for r in ours if isinstance(v := r.dvalue, rec.StreamsGroupMemberMetadataValue)}
        assert endpoints == {rec.Endpoint(*STREAMS_ENDPOINT)}, endpoints
        sharers = {v.client_id for r in ours if isinstance(v := r.dvalue, rec.ShareGroupMemberMetadataValue)}
        assert sharers, "no share member record"
    commits = {r.dkey.partition: r.dvalue for r in ours
               if r.dkey.group == standalone and isinstance(r.dvalue, rec.OffsetCommitValue)}  # fmt: skip
    retained, librdkafka = commits[0], commits[1]
    assert (retained.version, retained.offset, retained.metadata) == (1, 5, META), retained
    assert retained.expire_timestamp - retained.commit_timestamp == RETENTION_MS, retained
    assert (librdkafka.offset, librdkafka.leader_epoch) == (7, 0), librdkafka
    # a commit through confluent-kafka 2.16.1 carries the metadata with its C terminator: the broker stores it
    # (Kafka's formatters print "...\u0000" too), so the NUL is in the record, not an artefact of our decoder
    assert librdkafka.metadata.rstrip("\x00") == META, librdkafka


KIP848 = (4, 0)  # GA; 3.9 has it off
SHARE_AND_STREAMS = (4, 2)  # both on by default from 4.2's metadata version, and their records stable
_KINDS = {0: "offset-commit", 1: "offset-commit", 2: "group-metadata", 3: "cg-metadata", 4: "cg-partition-metadata",
          5: "cg-member", 6: "cg-target", 7: "cg-target-member", 8: "cg-current-assignment", 16: "cg-regex",
          **{t: f"share-{name}" for t, name in rec.SHARE_GROUP_RECORDS.items()},
          **{t: f"streams-{name}" for t, name in rec.STREAMS_GROUP_RECORDS.items()}}  # fmt: skip


def _kind(raw: Raw) -> str:
    kind = _KINDS[raw.dkey.record_type]
    return f"{kind} tombstone" if isinstance(raw.dvalue, rec.Tombstone) else f"{kind} v{raw.dvalue.version}"


def _save(path: Path, ours: list[Raw], printed: Any, compared: Counter[str], problems: list[str]) -> None:
    """The raw records (hex), Kafka's renderings and the outcome: the artifact to read when this fails."""
    rows = [{"offset": r.offset, "key": r.key and r.key.hex(), "value": r.value and r.value.hex()} for r in ours]
    data = {"records": rows, "formatters": printed, "compared": compared, "problems": problems}
    path.write_text(json.dumps(data, indent=1, default=str))
