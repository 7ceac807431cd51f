"""The requests confluent-kafka cannot send, over kafka-python (pinned): FindCoordinator, LeaveGroup v3-v5
(per-member identities with KIP-800 reasons), Heartbeat v3+ (on behalf of a static member), JoinGroup v4+ (a
pending member only), DescribeGroups for the classic consumer protocol metadata (subscriptions), and the two KIP-848
APIs kafka-python 3.0 does not define, from schemas in `vigil_core.kafka.messages`: ConsumerGroupDescribe (the
group's real state: librdkafka reports Assigning and Reconciling as Unknown; the static members whose instance id
is released already) and
ConsumerGroupHeartbeat with epoch -2 (a dead static member's instance id released on its behalf).

A census round (`vigil_core.kafka.census`) sends its batched requests through `Exchange`: ListGroups, DescribeGroups
and ConsumerGroupDescribe for many groups, OffsetFetch v8+, Metadata, ListOffsets, DescribeConfigs of GROUP resources
and FindCoordinator v4, each to one node, many at once on kafka-python's IO loop.

Only this module imports kafka-python. It returns raw error codes; `outcomes.classify` decides what they
mean. Transport failures become `outcomes.TRANSPORT_ERROR`.
"""

from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Generic, TypeVar

import kafka.errors
from kafka import KafkaAdminClient
from kafka.future import Future
from kafka.protocol.admin import DescribeConfigsRequest, DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.consumer import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListOffsetsRequest,
    OffsetFetchRequest,
)
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription
from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest

from vigil_core.kafka import census_plan as plan
from vigil_core.kafka import messages
from vigil_core.kafka.census_plan import (
    Batch,
    Description,
    Failure,
    GroupConfigs,
    Leaders,
    Listing,
    Offsets,
    ShareOffsets,
)
from vigil_core.kafka.model import (
    GROUP_CONFIG_SOURCE,
    GROUP_HEARTBEAT_CONFIG,
    GROUP_SESSION_CONFIG,
    GroupType,
    MemberView,
    TopicPartitionRef,
)
from vigil_core.kafka.outcomes import TRANSPORT_ERROR, Api, code_of
from vigil_core.kafka.security import KafkaConnection

T = TypeVar("T")

# the class names are the schemas' file names in vigil_core/kafka/messages (kafka-python loads them by name)


class ConsumerGroupHeartbeatRequest(ApiMessage, load_json=messages):  # type: ignore[call-arg,misc]
    pass


class ConsumerGroupHeartbeatResponse(ApiMessage, load_json=messages):  # type: ignore[call-arg,misc]
    pass


class ConsumerGroupDescribeRequest(ApiMessage, load_json=messages):  # type: ignore[call-arg,misc]
    pass


class ConsumerGroupDescribeResponse(ApiMessage, load_json=messages):  # type: ignore[call-arg,misc]
    pass


class ShareGroupDescribeRequest(ApiMessage, load_json=messages):  # type: ignore[call-arg,misc]
    pass


class ShareGroupDescribeResponse(ApiMessage, load_json=messages):  # type: ignore[call-arg,misc]
    pass


class StreamsGroupDescribeRequest(ApiMessage, load_json=messages):  # type: ignore[call-arg,misc]
    pass


class StreamsGroupDescribeResponse(ApiMessage, load_json=messages):  # type: ignore[call-arg,misc]
    pass


class DescribeShareGroupOffsetsRequest(ApiMessage, load_json=messages):  # type: ignore[call-arg,misc]
    pass


class DescribeShareGroupOffsetsResponse(ApiMessage, load_json=messages):  # type: ignore[call-arg,misc]
    pass


#: ConsumerGroupHeartbeat's epoch for "a static member leaves for now": its instance id is released, its assignment
#: kept until its session timeout, for the member that rejoins under the instance id to take over.
LEAVE_STATIC_MEMBER_EPOCH = -2

BOOTSTRAP_FLOOR = 5.0
"""Seconds the first connection may take however short the request timeout (a TLS + SASL handshake far away)."""
#: The transport-level failures kafka-python raises instead of returning an error code.
_TRANSPORT = (
    kafka.errors.KafkaConnectionError,
    kafka.errors.NodeNotReadyError,
    kafka.errors.KafkaTimeoutError,
    kafka.errors.RequestTimedOutError,
    kafka.errors.UnknownBrokerIdError,
    kafka.errors.BrokerNotAvailableError,
    ConnectionError,
    TimeoutError,
)


_NO_SUBSCRIPTION = ConsumerProtocolSubscription(topics=[]).encode(version=0)
"""A pending member's metadata: never assigned anything (it never joins), but well-formed all the same."""


@dataclass(frozen=True)
class Coordinator:
    code: int
    node_id: int


@dataclass(frozen=True)
class LeaveIdentity:
    member_id: str
    """Empty string: remove whoever holds `instance_id` now (departed static members only)."""
    instance_id: str | None
    reason: str


@dataclass(frozen=True)
class ConsumerGroupAnswer:
    """A KIP-848 group as ConsumerGroupDescribe shows it (what vigil needs of it), or its error code."""

    code: int
    state: str = ""
    """Empty, Assigning, Reconciling, Stable or Dead."""
    left: frozenset[str] = frozenset()
    """Member ids whose epoch is -2: static members that left for now, their instance id released (by their client
    on a graceful close, or on their behalf), their partitions kept until their session timeout."""
    epochs: Mapping[str, int] = field(default_factory=dict)
    """Every member's epoch, by member id."""


@dataclass(frozen=True)
class LeaveResult:
    """Top-level error code and, per member as the coordinator echoed it, (member id, instance id, code)."""

    code: int
    members: tuple[tuple[str, str | None, int], ...]


class GroupWire:
    """One kafka-python admin connection set; blocking calls, safe from one thread at a time."""

    def __init__(self, connection: KafkaConnection, client_id: str = "vigil", request_timeout: float = 10.0) -> None:
        self._timeout_ms = int(request_timeout * 1000)
        # the first connection waits as long as a request, but at least BOOTSTRAP_FLOOR (kafka-python's default is
        # 30 s: an operator resync queued behind it); a bridge's short request timeout must not abort a slow handshake
        bootstrap_ms = max(self._timeout_ms, int(BOOTSTRAP_FLOOR * 1000))
        try:
            self._admin = KafkaAdminClient(
                **connection.kafka_python_config(), client_id=client_id, bootstrap_timeout_ms=bootstrap_ms
            )
        except _TRANSPORT as exc:
            raise ConnectionError(f"{connection.bootstrap_servers}: no broker answered ({exc})") from exc

    def close(self) -> None:
        self._admin.close()

    def broker_version(self) -> tuple[int, ...]:
        version = self._admin._manager.broker_version_data.broker_version  # noqa: SLF001 - no public accessor
        return tuple(version) if version else (0,)

    def api_versions(self) -> dict[int, tuple[int, int]]:
        """API key -> (min, max) version the bootstrap broker supports (from its ApiVersions response). Read raw:
        kafka-python's `api_versions()` maps keys to its ApiKey enum and raises on a key newer than it (4.4's 93)."""
        data = self._admin._manager.broker_version_data  # noqa: SLF001 - no public accessor for the raw answer
        return {int(key): (int(lo), int(hi)) for key, (lo, hi) in data.api_versions.items()}

    def _send(self, request: Any, node_id: int | None = None) -> Any:
        """One request, answered or failed within the request timeout: the deadline covers a request still queued
        behind a connection being set up (kafka-python's own timer starts only once the bytes are written)."""
        manager = self._admin._manager  # noqa: SLF001 - the connection manager is how kafka-python sends
        timeout_ms = self._timeout_ms

        async def send() -> Any:
            return await manager.wait_for(manager.send(request, node_id, request_timeout_ms=timeout_ms), timeout_ms)

        return manager.run(send)

    def exchange(self, work: Callable[["Exchange"], Awaitable[T]]) -> T:
        """Run `work` (a census round) on kafka-python's IO loop with a fresh Exchange; blocks until it is done."""
        manager = self._admin._manager  # noqa: SLF001 - the connection manager is how kafka-python sends
        exchange = Exchange(manager, self._timeout_ms)

        async def run() -> T:
            return await work(exchange)

        result: T = manager.run(run)
        return result

    def find_coordinator(self, group_id: str) -> Coordinator:
        """Ask any broker which node coordinates `group_id` (never cached here: the caller caches)."""
        try:
            response = self._send(FindCoordinatorRequest(key_type=0, coordinator_keys=[group_id], min_version=4))
        except _TRANSPORT:
            return Coordinator(TRANSPORT_ERROR, -1)
        row = response.coordinators[0]
        if row.error_code == 0:
            self._admin._manager.cluster.add_coordinator(row, 0, group_id, synthesize_node_id=False)  # noqa: SLF001
        return Coordinator(row.error_code, row.node_id)

    def leave_group(self, coordinator: int, group_id: str, members: Sequence[LeaveIdentity]) -> LeaveResult:
        """One batched LeaveGroup (v3+, reasons from v5) to the coordinator."""
        identity = LeaveGroupRequest.MemberIdentity
        request = LeaveGroupRequest(
            group_id=group_id,
            members=[
                identity(member_id=m.member_id, group_instance_id=m.instance_id, reason=m.reason) for m in members
            ],
            min_version=3,
            max_version=5,
        )
        try:
            response = self._send(request, coordinator)
        except _TRANSPORT:
            return LeaveResult(TRANSPORT_ERROR, ())
        return LeaveResult(
            response.error_code,
            tuple((m.member_id, m.group_instance_id, m.error_code) for m in response.members),
        )

    def join_pending(self, coordinator: int, group_id: str, protocol: str, session_ms: int) -> tuple[int, str]:
        """A JoinGroup v4+ with neither member id nor instance id: the coordinator answers MEMBER_ID_REQUIRED with a
        new id and keeps it pending for `session_ms` — no join phase completes while a member is pending. Returns
        (error code, member id); the id is never used to join, only to leave."""
        request = JoinGroupRequest(
            group_id=group_id,
            session_timeout_ms=session_ms,
            rebalance_timeout_ms=session_ms,
            member_id="",
            group_instance_id=None,
            protocol_type="consumer",
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name=protocol, metadata=_NO_SUBSCRIPTION)],
            reason="vigil: holding a deliberate rebalance open for the removed member",
            min_version=4,
        )
        try:
            response = self._send(request, coordinator)
        except _TRANSPORT:
            return TRANSPORT_ERROR, ""
        return int(response.error_code), str(response.member_id or "")

    def heartbeat(
        self, coordinator: int, group_id: str, generation: int, member_id: str, instance_id: str | None
    ) -> int:
        """A classic Heartbeat (v3+: carries the instance id) on behalf of a member; returns the error code."""
        request = HeartbeatRequest(
            group_id=group_id,
            generation_id=generation,
            member_id=member_id,
            group_instance_id=instance_id,
            min_version=3,
        )
        try:
            return int(self._send(request, coordinator).error_code)
        except _TRANSPORT:
            return TRANSPORT_ERROR

    def release_static_member(self, coordinator: int, group_id: str, member_id: str, instance_id: str) -> int:
        """ConsumerGroupHeartbeat with epoch -2 on a KIP-848 static member's behalf, what its client sends when it
        closes: the coordinator releases the instance id (the member's epoch becomes -2, its assignment stays until
        its session timeout), so a replacement under the instance id takes the member over instead of being refused
        with UNRELEASED_INSTANCE_ID. Compare-and-release: a member id that no longer holds the instance id gets
        FENCED_INSTANCE_ID, nothing changes. Returns the error code."""
        request = ConsumerGroupHeartbeatRequest(
            group_id=group_id, member_id=member_id, member_epoch=LEAVE_STATIC_MEMBER_EPOCH, instance_id=instance_id
        )
        try:
            return int(self._send(request, coordinator).error_code)
        except _TRANSPORT:
            return TRANSPORT_ERROR

    def keep_alive(
        self, coordinator: int, group_id: str, member_id: str, epoch: int, instance_id: str
    ) -> tuple[int, int]:
        """A ConsumerGroupHeartbeat on behalf of a KIP-848 static member whose app is away: its current epoch and
        nothing else changed (no subscription, assignor or rack; owned partitions empty, true of a dead app, so a
        revocation completes at once instead of waiting for the rebalance timeout). Its session timer restarts, no
        epoch is bumped. Compare-and-keep: a member id that no longer holds the instance id gets FENCED_INSTANCE_ID.
        Returns the error code and the member's epoch now (the next keep-alive's)."""
        request = ConsumerGroupHeartbeatRequest(
            group_id=group_id, member_id=member_id, member_epoch=epoch, instance_id=instance_id, topic_partitions=[]
        )
        try:
            response = self._send(request, coordinator)
        except _TRANSPORT:
            return TRANSPORT_ERROR, epoch
        return int(response.error_code), int(response.member_epoch)

    def consumer_group(self, coordinator: int, group_id: str) -> ConsumerGroupAnswer:
        """ConsumerGroupDescribe of one KIP-848 group: its state and the static members that left for now."""
        request = ConsumerGroupDescribeRequest(group_ids=[group_id], include_authorized_operations=False)
        try:
            group = self._send(request, coordinator).groups[0]
        except _TRANSPORT:
            return ConsumerGroupAnswer(TRANSPORT_ERROR)
        epochs = {str(m.member_id): int(m.member_epoch) for m in group.members or ()}
        left = frozenset(member for member, epoch in epochs.items() if epoch == LEAVE_STATIC_MEMBER_EPOCH)
        return ConsumerGroupAnswer(int(group.error_code), str(group.group_state or ""), left, epochs)

    def other_type(self, coordinator: int, group_id: str) -> tuple[GroupType, Description] | None:
        """A group librdkafka calls Dead as a share or streams group, as their own describes show it (Kafka 4.1+);
        None when it is neither (or the broker has neither API)."""
        versions = self.api_versions()
        asks = [
            (GroupType.STREAMS, _STREAMS_GROUP_DESCRIBE, StreamsGroupDescribeRequest, _streams_groups),
            (GroupType.SHARE, _SHARE_GROUP_DESCRIBE, ShareGroupDescribeRequest, _share_groups),
        ]
        for kind, (api_key, version), message, read in asks:
            if versions.get(api_key, (0, -1))[1] < version:
                continue
            request = message(group_ids=[group_id], include_authorized_operations=False)
            try:
                answer = read(self._send(request, coordinator))
            except (*_TRANSPORT, kafka.errors.IncompatibleBrokerVersion):
                return None
            described = answer.get(group_id)
            if described is not None and described.code == 0:
                return kind, described
        return None

    def subscriptions(self, coordinator: int, group_id: str) -> dict[str, tuple[str, ...]]:
        """member id -> subscribed topics, decoded from the classic consumer protocol metadata."""
        try:
            response = self._send(DescribeGroupsRequest(groups=[group_id]), coordinator)
        except _TRANSPORT:
            return {}
        result: dict[str, tuple[str, ...]] = {}
        for group in response.groups:
            if group.error_code != 0 or group.protocol_type != "consumer":
                continue
            for member in group.members:
                if not member.member_metadata:
                    continue
                try:
                    subscription = ConsumerProtocolSubscription.decode(member.member_metadata)
                except Exception:  # noqa: BLE001, S112 - a member with unparseable metadata has no known subscription
                    continue
                result[member.member_id] = tuple(sorted(subscription.topics))
        return result


# -- a census round's batched requests ------------------------------------------------------------------------

MAX_IN_FLIGHT: Final = 4
"""Requests of one round in flight to one node at once. kafka-python pipelines up to 5 per connection (its
`max_in_flight_requests_per_connection`) and fails a send beyond that at once ("Node paused",
`KafkaConnection.send_request`) instead of queueing it; one slot stays free for its own metadata refresh. The broker
reads a connection's requests one at a time anyway, so more would gain nothing."""

_UNSUPPORTED_VERSION: Final = code_of("UNSUPPORTED_VERSION")
_SHARE_GROUP_DESCRIBE: Final = (77, 1)
"""ShareGroupDescribe's API key and the one version vigil reads (v0 was 4.0's early access, removed in 4.1)."""
_STREAMS_GROUP_DESCRIBE: Final = (89, 0)
_GROUP_RESOURCE: Final = 32
"""ConfigResource.Type.GROUP (Kafka 4.0+)."""
_LATEST: Final = -1
_READ_COMMITTED: Final = 1
_CONSUMER_PROTOCOL: Final = "consumer"


class _NoAnswerError(Exception):
    """A request that got no answer (or one this client cannot read): its code and why."""

    def __init__(self, code: int, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


class Pending(Generic[T]):
    """Work started on the IO loop (`Exchange.start`), to await later."""

    def __init__(self, future: Any) -> None:
        self._future = future

    def __await__(self) -> Generator[Any, None, T]:
        result: T = yield from self._future.__await__()
        return result


class Exchange:
    """One census round's requests on kafka-python's IO loop, all coroutines of one `GroupWire.exchange` call.

    Each request goes to one node and never raises: a transport failure is an answer with `TRANSPORT_ERROR`. Work
    for different nodes runs concurrently (`start`), so a silent node costs its own requests their timeout and
    nobody else anything. Per node at most MAX_IN_FLIGHT requests are out at once, the rest wait their turn; once a
    request to a node got no answer, the round's later requests to it fail at once (unsent, uncounted): a node
    that let one request time out would let the next ones too, each costing a timeout more."""

    def __init__(self, manager: Any, timeout_ms: int) -> None:
        self._manager = manager
        self._timeout_ms = timeout_ms
        self._busy: dict[int, int] = {}
        self._waiting: dict[int, deque[Any]] = {}
        self._failed: dict[int, str] = {}
        self.sent = 0
        """Requests handed to kafka-python in this round."""

    def start(self, work: Coroutine[Any, Any, T]) -> Pending[T]:
        """Run `work` concurrently with its caller; await the returned Pending for its result."""
        return Pending(self._manager.call_soon(work))

    def brokers(self) -> tuple[int, ...]:
        """The brokers in the client's metadata (kafka-python refreshes it, and on every lost connection)."""
        return tuple(sorted(int(b.node_id) for b in self._manager.cluster.brokers()))

    async def _acquire(self, node: int) -> None:
        if self._busy.get(node, 0) < MAX_IN_FLIGHT:
            self._busy[node] = self._busy.get(node, 0) + 1
            return
        turn = Future()
        self._waiting.setdefault(node, deque()).append(turn)
        await turn  # the slot is handed over by `_release`

    def _release(self, node: int) -> None:
        waiting = self._waiting.get(node)
        if waiting:
            waiting.popleft().success(None)
        else:
            self._busy[node] -= 1

    async def _request(self, node: int, request: Any) -> Any:
        """Send `request` to `node` and await its answer within the request timeout; _NoAnswerError otherwise."""
        await self._acquire(node)
        try:
            failed = self._failed.get(node)
            if failed is not None:
                raise _NoAnswerError(TRANSPORT_ERROR, f"not sent: the broker failed earlier in the round ({failed})")
            self.sent += 1
            sent = self._manager.send(request, node, request_timeout_ms=self._timeout_ms)
            return await self._manager.wait_for(sent, self._timeout_ms)
        except kafka.errors.IncompatibleBrokerVersion as exc:
            raise _NoAnswerError(_UNSUPPORTED_VERSION, f"{type(exc).__name__}: {exc}") from exc
        except (*_TRANSPORT, kafka.errors.KafkaError) as exc:
            detail = f"{type(exc).__name__}: {exc}".rstrip(": ")
            self._failed.setdefault(node, detail)
            raise _NoAnswerError(TRANSPORT_ERROR, detail) from exc
        finally:
            self._release(node)

    async def _batch(self, api: Api, node: int, request: Any, read: Callable[[Any], dict[str, T]]) -> Batch[T]:
        try:
            response = await self._request(node, request)
        except _NoAnswerError as exc:
            return Batch(failure=Failure(api, node, exc.code, exc.detail))
        return Batch(read(response))

    async def list_groups(self, node: int) -> Listing:
        """Every group `node` coordinates, with its state, and its type from a v5 broker (Kafka 3.8+)."""
        request = ListGroupsRequest(states_filter=[], types_filter=[], min_version=4, max_version=5)
        try:
            response = await self._request(node, request)
        except _NoAnswerError as exc:
            return Listing(node, failure=Failure(Api.LIST_GROUPS, node, exc.code, exc.detail))
        if response.error_code != 0:  # a coordinator shard loading: the list is incomplete, so it is no list
            return Listing(node, failure=Failure(Api.LIST_GROUPS, node, int(response.error_code)))
        typed = request.API_VERSION >= 5
        groups = tuple(
            plan.ListedGroup(str(g.group_id), str(g.group_state or ""), str(g.group_type or "") if typed else "")
            for g in response.groups
        )
        return Listing(node, groups)

    async def describe_classic(self, node: int, group_ids: Sequence[str]) -> Batch[Description]:
        """DescribeGroups for many classic groups: members with their decoded assignments (no subscriptions)."""
        request = DescribeGroupsRequest(groups=list(group_ids), include_authorized_operations=False)
        return await self._batch(Api.DESCRIBE_GROUP, node, request, _classic_groups)

    async def describe_consumer(self, node: int, group_ids: Sequence[str]) -> Batch[Description]:
        """ConsumerGroupDescribe for many KIP-848 groups: state, epochs, members and their current assignments."""
        request = ConsumerGroupDescribeRequest(group_ids=list(group_ids), include_authorized_operations=False)
        return await self._batch(Api.DESCRIBE_GROUP, node, request, _consumer_groups)

    async def describe_share(self, node: int, group_ids: Sequence[str]) -> Batch[Description]:
        """ShareGroupDescribe v1 (Kafka 4.1+) for many share groups: state, epoch, members and their assignments."""
        request = ShareGroupDescribeRequest(group_ids=list(group_ids), include_authorized_operations=False)
        return await self._batch(Api.DESCRIBE_GROUP, node, request, _share_groups)

    async def describe_streams(self, node: int, group_ids: Sequence[str]) -> Batch[Description]:
        """StreamsGroupDescribe v0 (Kafka 4.1+) for many streams groups: state, epoch, members and the partitions
        their active tasks read."""
        request = StreamsGroupDescribeRequest(group_ids=list(group_ids), include_authorized_operations=False)
        return await self._batch(Api.DESCRIBE_GROUP, node, request, _streams_groups)

    async def share_offsets(self, node: int, group_ids: Sequence[str]) -> Batch[ShareOffsets]:
        """DescribeShareGroupOffsets v1 (KIP-1226, Kafka 4.4) for many share groups: each share-partition's delivery
        lag, every one of the group's (Topics null)."""
        group = DescribeShareGroupOffsetsRequest.RequestGroup
        request = DescribeShareGroupOffsetsRequest(groups=[group(group_id=g, topics=None) for g in group_ids])
        return await self._batch(Api.SHARE_OFFSETS, node, request, _share_offsets)

    async def committed(self, node: int, group_ids: Sequence[str]) -> Batch[Offsets]:
        """OffsetFetch for many groups (v8+), require_stable, every partition (Topics null). Capped at v9: v10 names
        topics by id only (KIP-848), and a name is what the rest of vigil uses."""
        group = OffsetFetchRequest.OffsetFetchRequestGroup
        request = OffsetFetchRequest(
            groups=[group(group_id=g, topics=None) for g in group_ids],
            require_stable=True,
            min_version=8,
            max_version=9,
        )
        return await self._batch(Api.OFFSET_FETCH, node, request, _offsets)

    async def group_configs(self, node: int, group_ids: Sequence[str]) -> Batch[GroupConfigs]:
        """DescribeConfigs of many GROUP resources: a KIP-848 group's session and heartbeat configs."""
        resource = DescribeConfigsRequest.DescribeConfigsResource
        keys = [GROUP_SESSION_CONFIG, GROUP_HEARTBEAT_CONFIG]
        request = DescribeConfigsRequest(
            resources=[
                resource(resource_type=_GROUP_RESOURCE, resource_name=g, configuration_keys=keys) for g in group_ids
            ],
            include_synonyms=False,
            include_documentation=False,
            min_version=1,
        )
        return await self._batch(Api.DESCRIBE_CONFIGS, node, request, _group_configs)

    async def find_coordinators(self, node: int, group_ids: Sequence[str]) -> Batch[plan.Coordinator]:
        """FindCoordinator v4 for many groups in one request."""
        request = FindCoordinatorRequest(key_type=0, coordinator_keys=list(group_ids), min_version=4)
        return await self._batch(Api.FIND_COORDINATOR, node, request, _coordinators)

    async def leaders(self, node: int, topics: Sequence[str]) -> Leaders | Failure:
        """Metadata of `topics`: each partition's leader (never creating a topic)."""
        topic = MetadataRequest.MetadataRequestTopic
        request = MetadataRequest(
            topics=[topic(name=t) for t in topics], allow_auto_topic_creation=False, min_version=1
        )
        try:
            response = await self._request(node, request)
        except _NoAnswerError as exc:
            return Failure(Api.METADATA, node, exc.code, exc.detail)
        leaders: dict[TopicPartitionRef, int] = {}
        topic_errors: dict[str, int] = {}
        partition_errors: dict[TopicPartitionRef, int] = {}
        for t in response.topics:
            if t.error_code != 0:
                topic_errors[str(t.name)] = int(t.error_code)
                continue
            for p in t.partitions:
                tp = TopicPartitionRef(str(t.name), int(p.partition_index))
                if p.error_code == 0 and p.leader_id >= 0:
                    leaders[tp] = int(p.leader_id)
                else:
                    partition_errors[tp] = int(p.error_code)
        return Leaders(leaders, topic_errors, partition_errors)

    async def end_offsets(
        self, node: int, partitions: Sequence[TopicPartitionRef]
    ) -> dict[TopicPartitionRef, int | Failure]:
        """ListOffsets to a partition leader: the read_committed latest offset (the LSO) of each partition."""
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        topic, partition = ListOffsetsRequest.ListOffsetsTopic, ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition
        request = ListOffsetsRequest(
            replica_id=-1,
            isolation_level=_READ_COMMITTED,
            topics=[
                topic(name=t, partitions=[partition(partition_index=p, timestamp=_LATEST) for p in ps])
                for t, ps in by_topic.items()
            ],
            timeout_ms=self._timeout_ms,
            min_version=2,
        )
        try:
            response = await self._request(node, request)
        except _NoAnswerError as exc:
            failure = Failure(Api.LIST_OFFSETS, node, exc.code, exc.detail)
            return dict.fromkeys(partitions, failure)
        out: dict[TopicPartitionRef, int | Failure] = {}
        for t in response.topics:
            for p in t.partitions:
                tp = TopicPartitionRef(str(t.name), int(p.partition_index))
                out[tp] = (
                    int(p.offset) if p.error_code == 0 else Failure(Api.LIST_OFFSETS, node, int(p.error_code), str(tp))
                )
        return out


def _assignment(raw: bytes | None) -> tuple[TopicPartitionRef, ...]:
    """A classic consumer member's assignment (ConsumerProtocolAssignment), sorted; none when undecodable."""
    if not raw:
        return ()
    try:
        decoded = ConsumerProtocolAssignment.decode(raw)
    except Exception:  # noqa: BLE001 - a member whose assignment cannot be read owns nothing vigil can name
        return ()
    return tuple(
        sorted(TopicPartitionRef(str(t.topic), int(p)) for t in decoded.assigned_partitions for p in t.partitions)
    )


def _member(raw: Any, instance_id: str | None, assignment: tuple[TopicPartitionRef, ...]) -> MemberView:
    """A member as either describe answers it (member id, client id and host are named alike in both)."""
    return MemberView(str(raw.member_id), instance_id or None, str(raw.client_id), str(raw.client_host), assignment)


def _owned(assignment: Any) -> tuple[TopicPartitionRef, ...]:
    """A KIP-848 member's current assignment (not its target: what librdkafka's describe reports), sorted."""
    owned = (TopicPartitionRef(str(t.topic_name), int(p)) for t in assignment.topic_partitions for p in t.partitions)
    return tuple(sorted(owned))


def _classic_groups(response: Any) -> dict[str, Description]:
    out: dict[str, Description] = {}
    for g in response.groups:
        consumer = g.protocol_type == _CONSUMER_PROTOCOL
        members = tuple(
            _member(m, m.group_instance_id, _assignment(m.member_assignment) if consumer else ()) for m in g.members
        )
        message = str(getattr(g, "error_message", None) or "")
        out[str(g.group_id)] = Description(
            int(g.error_code), str(g.group_state or ""), str(g.protocol_data or ""), members, message=message
        )
    return out


def _consumer_groups(response: Any) -> dict[str, Description]:
    out: dict[str, Description] = {}
    for g in response.groups:
        members = tuple(_member(m, m.instance_id, _owned(m.assignment)) for m in g.members or ())
        out[str(g.group_id)] = Description(
            code=int(g.error_code),
            state=str(g.group_state or ""),
            assignor=str(g.assignor_name or ""),
            members=members,
            epoch=int(g.group_epoch),
            member_epochs={str(m.member_id): int(m.member_epoch) for m in g.members or ()},
            message=str(g.error_message or ""),
        )
    return out


def _share_groups(response: Any) -> dict[str, Description]:
    return {
        str(g.group_id): Description(
            code=int(g.error_code),
            state=str(g.group_state or ""),
            assignor=str(g.assignor_name or ""),
            members=tuple(_member(m, None, _owned(m.assignment)) for m in g.members or ()),
            epoch=int(g.group_epoch),
            member_epochs={str(m.member_id): int(m.member_epoch) for m in g.members or ()},
            message=str(g.error_message or ""),
        )
        for g in response.groups
    }


def _streams_groups(response: Any) -> dict[str, Description]:
    out: dict[str, Description] = {}
    for g in response.groups:
        reads = _task_topics(g.topology)
        members = tuple(_member(m, m.instance_id, _active(m.assignment, reads)) for m in g.members or ())
        out[str(g.group_id)] = Description(
            code=int(g.error_code),
            state=str(g.group_state or ""),
            members=members,
            epoch=int(g.group_epoch),
            member_epochs={str(m.member_id): int(m.member_epoch) for m in g.members or ()},
            message=str(g.error_message or ""),
        )
    return out


def _task_topics(topology: Any) -> dict[str, tuple[str, ...]]:
    """subtopology id -> the topics its tasks read (source and repartition-source topics): task (s, p) reads
    partition p of each."""
    return {
        str(s.subtopology_id): tuple(
            sorted({*map(str, s.source_topics), *(str(t.name) for t in s.repartition_source_topics)})
        )
        for s in (topology.subtopologies or () if topology is not None else ())
    }


def _active(assignment: Any, reads: Mapping[str, tuple[str, ...]]) -> tuple[TopicPartitionRef, ...]:
    """The partitions a streams member's active tasks read (standby and warm-up tasks read only changelogs)."""
    owned = {
        TopicPartitionRef(topic, int(p))
        for task in assignment.active_tasks
        for p in task.partitions
        for topic in reads.get(str(task.subtopology_id), ())
    }
    return tuple(sorted(owned))


def _offsets(response: Any) -> dict[str, Offsets]:
    out: dict[str, Offsets] = {}
    for g in response.groups:
        committed: dict[TopicPartitionRef, int] = {}
        unstable: list[TopicPartitionRef] = []
        for t in g.topics or ():
            for p in t.partitions:
                tp = TopicPartitionRef(str(t.name), int(p.partition_index))
                if p.error_code == plan.UNSTABLE_OFFSET_COMMIT:
                    unstable.append(tp)
                elif p.error_code == 0 and p.committed_offset >= 0:
                    committed[tp] = int(p.committed_offset)
        out[str(g.group_id)] = Offsets(int(g.error_code), committed, tuple(sorted(unstable)))
    return out


def _share_offsets(response: Any) -> dict[str, ShareOffsets]:
    out: dict[str, ShareOffsets] = {}
    for g in response.groups:
        lag = {
            TopicPartitionRef(str(t.topic_name), int(p.partition_index)): int(p.lag)
            for t in g.topics or ()
            for p in t.partitions
            if p.error_code == 0 and p.lag >= 0
        }
        out[str(g.group_id)] = ShareOffsets(int(g.error_code), lag, str(g.error_message or ""))
    return out


def _group_configs(response: Any) -> dict[str, GroupConfigs]:
    return {
        str(r.resource_name): GroupConfigs(
            int(r.error_code),
            {str(c.name): (c.value, c.config_source != GROUP_CONFIG_SOURCE) for c in r.configs or ()},
            str(r.error_message or ""),
        )
        for r in response.results
    }


def _coordinators(response: Any) -> dict[str, plan.Coordinator]:
    return {
        str(c.key): plan.Coordinator(int(c.error_code), int(c.node_id), str(c.error_message or ""))
        for c in response.coordinators
    }
