"""The requests confluent-kafka cannot send, over kafka-python (pinned): FindCoordinator, LeaveGroup v3-v5
(per-member identities with KIP-800 reasons), Heartbeat v3+ (on behalf of a static member), JoinGroup v4+ (a
pending member only), DescribeGroups for the classic consumer protocol metadata (subscriptions), and the two KIP-848
APIs kafka-python 3.0 does not define, from schemas in `vigil_core.kafka.messages`: ConsumerGroupDescribe (the
group's real state: librdkafka reports Assigning and Reconciling as Unknown; the static members whose instance id
is released already) and
ConsumerGroupHeartbeat with epoch -2 (a dead static member's instance id released on its behalf).

Only this module imports kafka-python. It returns raw error codes; `outcomes.classify` decides what they
mean. Transport failures become `outcomes.TRANSPORT_ERROR`.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import kafka.errors
from kafka import KafkaAdminClient
from kafka.protocol.admin import DescribeGroupsRequest
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.consumer import HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription
from kafka.protocol.metadata import FindCoordinatorRequest

from vigil_core.kafka import messages
from vigil_core.kafka.outcomes import TRANSPORT_ERROR
from vigil_core.kafka.security import KafkaConnection

# the class names are the schemas' file names in vigil_core/kafka/messages (kafka-python loads them by name)


class ConsumerGroupHeartbeatRequest(ApiMessage, load_json=messages):  # type: ignore[call-arg,misc]
    pass


class ConsumerGroupHeartbeatResponse(ApiMessage, load_json=messages):  # type: ignore[call-arg,misc]
    pass


class ConsumerGroupDescribeRequest(ApiMessage, load_json=messages):  # type: ignore[call-arg,misc]
    pass


class ConsumerGroupDescribeResponse(ApiMessage, load_json=messages):  # type: ignore[call-arg,misc]
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
        """API key -> (min, max) version the bootstrap broker supports (from its ApiVersions response)."""
        return {int(key): (int(lo), int(hi)) for key, (lo, hi) in self._admin.api_versions().items()}

    def _send(self, request: Any, node_id: int | None = None) -> Any:
        """One request, answered or failed within the request timeout: the deadline covers a request still queued
        behind a connection being set up (kafka-python's own timer starts only once the bytes are written)."""
        manager = self._admin._manager  # noqa: SLF001 - the connection manager is how kafka-python sends
        timeout_ms = self._timeout_ms

        async def send() -> Any:
            return await manager.wait_for(manager.send(request, node_id, request_timeout_ms=timeout_ms), timeout_ms)

        return manager.run(send)

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

    def consumer_group(self, coordinator: int, group_id: str) -> ConsumerGroupAnswer:
        """ConsumerGroupDescribe of one KIP-848 group: its state and the static members that left for now."""
        request = ConsumerGroupDescribeRequest(group_ids=[group_id], include_authorized_operations=False)
        try:
            group = self._send(request, coordinator).groups[0]
        except _TRANSPORT:
            return ConsumerGroupAnswer(TRANSPORT_ERROR)
        left = frozenset(m.member_id for m in group.members or () if m.member_epoch == LEAVE_STATIC_MEMBER_EPOCH)
        return ConsumerGroupAnswer(int(group.error_code), str(group.group_state or ""), left)

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
