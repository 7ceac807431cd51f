"""The group control-plane client every vigil component uses: one adapter over two libraries.

confluent-kafka's AdminClient describes groups (classic and KIP-848), committed offsets, end offsets and
broker configs; `wire.GroupWire` (kafka-python) sends what confluent-kafka cannot: LeaveGroup v3-v5 with the
observed (member id, instance id) pair, and Heartbeat v3+; kafka-python is imported with the first `GroupWire` made
(`wire_on_demand`: at the first request that needs it, not at start — the sidecar's footprint). Every error code goes
through the one table in `outcomes`: the coordinator is looked up again on NOT_COORDINATOR /
COORDINATOR_NOT_AVAILABLE, load-in-progress and transport failures are retried with backoff, everything else is
returned to the caller as an Outcome.
"""

import dataclasses
import random
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from confluent_kafka import ConsumerGroupTopicPartitions, IsolationLevel, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    OffsetSpec,
    ResourceType,
)

from vigil_core.kafka import model, retry
from vigil_core.kafka.census_plan import CensusRound
from vigil_core.kafka.model import GroupState, GroupType, GroupView, MemberView, TopicPartitionRef
from vigil_core.kafka.outcomes import APP_POLLED, TRANSPORT_ERROR, Api, Outcome, Reaction, classify
from vigil_core.kafka.security import KafkaConnection
from vigil_core.rules import BrokerLimits

if TYPE_CHECKING:  # kafka-python's adapter is imported when a request needs it (`GroupClient._wire`)
    from vigil_core.kafka import wire

REASON_PREFIX = "vigil: "
GROUP_SESSION_CONFIG = model.GROUP_SESSION_CONFIG
GROUP_HEARTBEAT_CONFIG = model.GROUP_HEARTBEAT_CONFIG
GroupTimings = model.GroupTimings  # defined with the model (the census reads timings too); callers import it here
REJOIN_POLL_SECONDS = 0.25


_UNSUPPORTED_VERSION = 35
#: KIP-848 groups can have members removed by a third party only from Kafka 4.0 on (KAFKA-18188).
KIP848_REMOVAL_SINCE = (4, 0)


@dataclasses.dataclass(frozen=True)
class DeliberateRebalance:
    removal: Outcome
    """The compare-and-remove of the chosen member."""
    hold: Outcome
    """The pending member's JoinGroup: DONE when the join phase was held open for the member's return."""
    rejoined: bool
    """The member was back before the hold ended (one rebalance, the member in it)."""


class GroupClientError(Exception):
    """A request failed for a reason the caller should report, not retry: carries the classified Outcome."""

    def __init__(self, outcome: Outcome, context: str) -> None:
        super().__init__(f"{context}: {outcome.name}: {outcome.message}")
        self.outcome = outcome


class GroupClient:
    """Blocking; use from one thread (the sidecar runs it in an executor)."""

    def __init__(
        self,
        connection: KafkaConnection,
        *,
        client_id: str = "vigil",
        max_attempts: int = 6,
        request_timeout: float = 10.0,
        sleep: Callable[[float], None] = time.sleep,
        jitter: random.Random | None = None,
        transport: "tuple[AdminClient, wire.GroupWire] | None" = None,
        wire_on_demand: bool = False,
    ) -> None:
        """`request_timeout` bounds each request (seconds); the bridge keeps it below its heartbeat interval so a
        request to a coordinator that went away cannot outlast the member's session. `jitter` draws the retry waits
        (`retry.jittered`; seeded from the OS by default, so no two clients retry in lockstep). `transport`, the
        (AdminClient, GroupWire) pair, is made from `connection` unless given (a unit test's fake).
        `wire_on_demand`: the GroupWire (kafka-python, its import and its bootstrap connection) is made at the first
        request that needs it — a LeaveGroup, a Heartbeat, a KIP-848 describe — instead of now; until then an
        unreachable cluster raises ConnectionError from that request, not from here."""
        self._connection = connection
        self._client_id = client_id
        self._timeout = request_timeout
        self._made_wire: wire.GroupWire | None = None
        if transport is None:
            if not wire_on_demand:
                # kafka-python's bootstrap first: an unreachable cluster raises before an AdminClient exists (one
                # made already would live on in the traceback's frame, librdkafka reconnecting in the background)
                self._made_wire = self._wire
            self._admin = self._new_admin()
        else:
            self._admin, self._made_wire = transport
        self._renewable = transport is None
        self._coordinators: dict[str, int] = {}
        self._max_attempts = max_attempts
        self._sleep = sleep
        self._jitter = jitter if jitter is not None else random.Random()  # noqa: S311 - pacing, not secrecy

    def close(self) -> None:
        if self._made_wire is not None:
            self._made_wire.close()

    def _new_admin(self) -> AdminClient:
        return AdminClient(self._connection.confluent_config() | {"client.id": self._client_id, "log_level": 3})

    @property
    def _wire(self) -> "wire.GroupWire":
        """The kafka-python adapter, made (imported, bootstrapped) at its first use when made on demand."""
        if self._made_wire is None:
            from vigil_core.kafka import wire  # noqa: PLC0415 - kafka-python (~9 MB of RSS) when first needed

            self._made_wire = wire.GroupWire(self._connection, self._client_id, self._timeout)
        return self._made_wire

    def open_wire(self) -> None:
        """Make kafka-python's adapter now (its import, its bootstrap connection), ahead of a request that will need
        it: that request then waits for neither (~0.1 s). Raises ConnectionError if no broker answers."""
        self._wire  # noqa: B018 - made on first access

    @property
    def wire_made(self) -> bool:
        """Whether kafka-python's adapter exists yet (`wire_on_demand`: not before a request needed it)."""
        return self._made_wire is not None

    # -- coordinator --------------------------------------------------------------------------------------
    def coordinator(self, group_id: str) -> int:
        """The coordinator's node id, cached until a request says it moved."""
        cached = self._coordinators.get(group_id)
        if cached is not None:
            return cached
        outcome = classify(Api.FIND_COORDINATOR, TRANSPORT_ERROR)
        for attempt in range(self._max_attempts):
            found = self._wire.find_coordinator(group_id)
            outcome = classify(Api.FIND_COORDINATOR, found.code)
            if outcome.reaction is Reaction.DONE:
                self._coordinators[group_id] = found.node_id
                return found.node_id
            if not _retry(outcome):
                break
            self._sleep(retry.jittered(attempt, self._jitter.random()))
        raise GroupClientError(outcome, f"FindCoordinator for group {group_id!r}")

    def survey(self, group_ids: Iterable[str]) -> CensusRound:
        """Many groups observed in one census round (`census`): broker requests grow with the brokers and the
        coordinators, not with the groups; each observation is what `describe`, `committed_offsets` and
        `end_offsets` say of its group."""
        from vigil_core.kafka.census import Census  # noqa: PLC0415 - it imports kafka-python's adapter: on demand

        return Census(self._wire).round(group_ids)

    def connect(self, group_id: str) -> None:
        """Open this client's connection to the group's coordinator ahead of need (one DescribeGroups through it): a
        later request to the coordinator — a bridge's heartbeat — then waits for no TLS/SASL handshake."""
        self._wire.subscriptions(self.coordinator(group_id), group_id)

    def locate(self, group_id: str) -> int:
        """The coordinator's node id as the AdminClient finds it (librdkafka's FindCoordinator, then one
        DescribeGroups), cached like `coordinator`'s: for a caller that needs kafka-python for nothing else yet."""
        desc = self._admin_call(
            Api.FIND_COORDINATOR,
            f"FindCoordinator for group {group_id!r}",
            lambda: self._admin.describe_consumer_groups([group_id], request_timeout=self._timeout)[group_id],
        )
        self._coordinators[group_id] = desc.coordinator.id
        return int(desc.coordinator.id)

    def forget_coordinator(self, group_id: str) -> None:
        self._coordinators.pop(group_id, None)

    def _at_coordinator(self, api: Api, group_id: str, send: Callable[[int], int]) -> Outcome:
        """Send to the coordinator, re-looking it up or backing off as the error table says."""
        outcome = classify(api, TRANSPORT_ERROR)
        for attempt in range(self._max_attempts):
            outcome = classify(api, send(self.coordinator(group_id)))
            if outcome.reaction is Reaction.REDISCOVER_COORDINATOR or outcome.code == TRANSPORT_ERROR:
                self.forget_coordinator(group_id)
            if not _retry(outcome) or attempt + 1 == self._max_attempts:
                return outcome
            self._sleep(retry.jittered(attempt, self._jitter.random()))
        return outcome

    # -- describe -----------------------------------------------------------------------------------------
    def describe(self, group_id: str, *, subscriptions: bool = True) -> GroupView:
        """The group as its coordinator sees it now; subscriptions decoded for classic consumer groups (one more
        request: `subscriptions=False` skips it where only membership and assignment matter)."""
        desc = self._admin_call(
            Api.DESCRIBE_GROUP,
            f"describe group {group_id!r}",
            lambda: self._admin.describe_consumer_groups([group_id], request_timeout=self._timeout)[group_id],
        )
        group_type = model.by_name(GroupType, desc.type, GroupType.UNKNOWN)
        subscribed: dict[str, tuple[str, ...]] = {}
        if subscriptions and group_type is GroupType.CLASSIC and desc.members:
            subscribed = self._wire.subscriptions(desc.coordinator.id, group_id)
        self._coordinators[group_id] = desc.coordinator.id
        members = tuple(
            MemberView(
                member_id=m.member_id,
                instance_id=m.group_instance_id or None,
                client_id=m.client_id,
                host=m.host,
                assignment=tuple(
                    sorted(TopicPartitionRef(t.topic, t.partition) for t in m.assignment.topic_partitions)
                ),
                subscription=subscribed.get(m.member_id),
            )
            for m in desc.members
        )
        reported = model.by_name(GroupState, desc.state, GroupState.UNKNOWN)
        if group_type is GroupType.CLASSIC and reported is GroupState.DEAD and not members and self.wire_made:
            # librdkafka describes share and streams groups as not found: their own describes say what they are. A
            # client with its wire on demand (the sidecar) asks them once the wire is made — the sidecar makes it
            # once its group has been not found for half a stall timeout (`KafkaWorker.describe`), or ahead of an
            # eviction — not to load kafka-python for every group not yet there
            other = self._wire.other_type(desc.coordinator.id, group_id)
            if other is not None:
                kind, typed = other
                state = model.by_name(GroupState, typed.state, GroupState.UNKNOWN)
                return GroupView(group_id, state, kind, typed.assignor, desc.coordinator.id, typed.members)
        described = None  # ConsumerGroupDescribe names the KIP-848 states librdkafka reports as Unknown
        if model.needs_consumer_group_describe(group_type, reported):
            answer = self._wire.consumer_group(desc.coordinator.id, group_id)
            described = (answer.code, answer.state)
        return GroupView(
            group_id=group_id,
            state=model.group_state(group_type, reported, described),
            type=group_type,
            assignor=desc.partition_assignor or "",
            coordinator_id=desc.coordinator.id,
            members=members,
        )

    def committed_offsets(self, group_id: str) -> dict[TopicPartitionRef, int]:
        """Committed offset per partition the group has committed for (partitions without a commit left out)."""
        request = [ConsumerGroupTopicPartitions(group_id)]
        result = self._admin_call(
            Api.OFFSET_FETCH,
            f"committed offsets of {group_id!r}",
            lambda: self._admin.list_consumer_group_offsets(
                request, require_stable=True, request_timeout=self._timeout
            )[group_id],
        )
        return {
            TopicPartitionRef(tp.topic, tp.partition): tp.offset
            for tp in result.topic_partitions
            if tp.error is None and tp.offset >= 0
        }

    def end_offsets(
        self, partitions: Iterable[TopicPartitionRef], *, read_committed: bool = True
    ) -> dict[TopicPartitionRef, int]:
        """Latest offsets; with `read_committed` the last stable offset (open transactions excluded)."""
        latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
        wanted = {TopicPartition(p.topic, p.partition): latest for p in partitions}
        if not wanted:
            return {}
        isolation = IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED

        def request() -> Any:  # one ListOffsets per leader for all partitions, not one per partition
            return _AllOf(self._admin.list_offsets(wanted, isolation_level=isolation, request_timeout=self._timeout))

        infos = self._admin_call(Api.LIST_OFFSETS, f"end offsets of {len(wanted)} partitions", request)
        return {TopicPartitionRef(tp.topic, tp.partition): info.offset for tp, info in infos.items()}

    def cluster_id(self) -> str:
        """The Kafka cluster id (identifies the cluster whatever address it is reached by)."""
        describe = lambda: self._admin.describe_cluster(request_timeout=self._timeout)  # noqa: E731
        description = self._admin_call(Api.DESCRIBE_CLUSTER, "describe cluster", describe)
        return str(description.cluster_id)

    def broker_limits(self) -> BrokerLimits:
        """The session/heartbeat bounds the broker enforces; Kafka's defaults (and says so) when denied."""
        node = next(iter(self._admin.list_topics(timeout=self._timeout).brokers))
        resource = ConfigResource(ResourceType.BROKER, str(node))
        try:
            configs = self._admin.describe_configs([resource], request_timeout=self._timeout)[resource].result()
        except KafkaException:
            return BrokerLimits(from_defaults=True)

        def value(name: str, default: int) -> int:
            entry = configs.get(name)
            return int(entry.value) if entry is not None and entry.value is not None else default

        defaults = BrokerLimits()
        return BrokerLimits(
            min_session_ms=value("group.min.session.timeout.ms", defaults.min_session_ms),
            max_session_ms=value("group.max.session.timeout.ms", defaults.max_session_ms),
            consumer_min_session_ms=value("group.consumer.min.session.timeout.ms", defaults.consumer_min_session_ms),
            consumer_max_session_ms=value("group.consumer.max.session.timeout.ms", defaults.consumer_max_session_ms),
            consumer_min_heartbeat_ms=value(
                "group.consumer.min.heartbeat.interval.ms", defaults.consumer_min_heartbeat_ms
            ),
            consumer_max_heartbeat_ms=value(
                "group.consumer.max.heartbeat.interval.ms", defaults.consumer_max_heartbeat_ms
            ),
            consumer_session_ms=value("group.consumer.session.timeout.ms", defaults.consumer_session_ms),
            consumer_heartbeat_ms=value("group.consumer.heartbeat.interval.ms", defaults.consumer_heartbeat_ms),
            protocols=_protocols(configs.get("group.coordinator.rebalance.protocols")),
            from_defaults=False,
        )

    # -- KIP-848 group configuration --------------------------------------------------------------------------
    def group_timings(self, group_id: str) -> GroupTimings:
        """A KIP-848 group's session and heartbeat as its members get them (its own configs, else the broker's)."""
        resource = ConfigResource(ResourceType.GROUP, group_id)
        configs = self._admin_call(
            Api.DESCRIBE_CONFIGS, f"configuration of group {group_id!r}",
            lambda: self._admin.describe_configs([resource], request_timeout=self._timeout)[resource],
        )  # fmt: skip

        return model.group_timings(
            {name: (entry.value, _source(entry) != model.GROUP_CONFIG_SOURCE) for name, entry in configs.items()}
        )

    def set_group_session(self, group_id: str, session_ms: int | None) -> None:
        """Set the KIP-848 group's `consumer.session.timeout.ms` (None: remove the override, back to the broker's
        default). Members' session timers take it at their next heartbeat."""
        op = AlterConfigOpType.SET if session_ms is not None else AlterConfigOpType.DELETE
        entry = ConfigEntry(GROUP_SESSION_CONFIG, None if session_ms is None else str(session_ms),
                            incremental_operation=op)  # fmt: skip
        resource = ConfigResource(ResourceType.GROUP, group_id, incremental_configs=[entry])
        self._admin_call(
            Api.ALTER_CONFIGS, f"set {GROUP_SESSION_CONFIG} of group {group_id!r}",
            lambda: self._admin.incremental_alter_configs([resource], request_timeout=self._timeout)[resource],
        )  # fmt: skip

    # -- acting on members --------------------------------------------------------------------------------
    def remove_member(
        self,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        reason: str,
        *,
        group_type: GroupType = GroupType.CLASSIC,
        proceed: Callable[[], bool] | None = None,
    ) -> Outcome:
        """Compare-and-remove: LeaveGroup for exactly the observed (member id, instance id) pair.

        If the instance id now maps to a newer member, the coordinator answers FENCED_INSTANCE_ID and removes
        nothing; if the member already left, UNKNOWN_MEMBER_ID (already gone). `proceed` is asked right before every
        attempt (retries included): False → nothing is sent, APP_POLLED. An eviction for a stall passes the
        member's liveness check: LeaveGroup carries no generation or epoch, and a KIP-848 member keeps its member id
        across fencing, so a retry could otherwise remove a member that is polling again.
        """
        if not member_id:
            raise ValueError("remove_member needs the observed member id (remove_departed_static is for scale-down)")
        if not model.removable(group_type):
            return dataclasses.replace(
                classify(Api.LEAVE_GROUP, _UNSUPPORTED_VERSION),
                message=f"no Kafka API removes a member of a {group_type.value} group: restart its app instead",
            )
        if group_type is GroupType.CONSUMER and self._wire.broker_version() < KIP848_REMOVAL_SINCE:
            return dataclasses.replace(
                classify(Api.LEAVE_GROUP, _UNSUPPORTED_VERSION),
                message=f"removing a KIP-848 member needs a Kafka 4.0+ broker; this one is "
                f"{'.'.join(map(str, self._wire.broker_version()))}",
            )
        return self._leave(group_id, _leave_identity(member_id, instance_id, _reason(reason)), proceed)

    def rebalance_removing(
        self, group_id: str, member: MemberView, reason: str, *, protocol: str, hold_seconds: float
    ) -> DeliberateRebalance:
        """One deliberate rebalance with the removed member back in it: compare-and-remove `member` while a pending
        member (JoinGroup v4+ without an id, answered MEMBER_ID_REQUIRED) holds the join phase open, until the
        member has rejoined — a static one under its instance id with a new member id, a dynamic one as one more
        member — or `hold_seconds` pass; then the pending member leaves and the join completes. Without the
        hold the others can finish the join first and the member's return starts a second rebalance."""
        before = len(self.describe(group_id, subscriptions=False).members)
        pending: list[str] = []

        def pend(node: int) -> int:
            code, member_id = self._wire.join_pending(node, group_id, protocol, int(hold_seconds * 1000))
            pending[:] = [member_id]
            return code

        held = self._at_coordinator(Api.JOIN_GROUP, group_id, pend)
        door = pending[0] if held.reaction is Reaction.DONE and pending else ""
        removal = self.remove_member(group_id, member.member_id, member.instance_id, reason)
        rejoined = False
        try:
            if door and removal.reaction is Reaction.DONE:
                rejoined = self._await_rejoin(group_id, member, before, time.monotonic() + hold_seconds)
        finally:
            if door:
                self._leave(group_id, _leave_identity(door, None, _reason("the removed member is back")))
        return DeliberateRebalance(removal, held, rejoined)

    def _await_rejoin(self, group_id: str, member: MemberView, before: int, deadline: float) -> bool:
        while time.monotonic() < deadline:
            view = self.describe(group_id, subscriptions=False)
            if member.instance_id is not None:
                now_held = {m.instance_id: m.member_id for m in view.members}.get(member.instance_id)
                if now_held not in (None, member.member_id):
                    return True
            elif len(view.members) >= before:
                return True
            self._sleep(REJOIN_POLL_SECONDS)
        return False

    def remove_departed_static(self, group_id: str, instance_id: str, reason: str) -> Outcome:
        """Remove whoever holds `instance_id` now: only for static members that are gone for good (scale-down)."""
        return self._leave(group_id, _leave_identity("", instance_id, _reason(reason)))

    def _leave(
        self, group_id: str, identity: "wire.LeaveIdentity", proceed: Callable[[], bool] | None = None
    ) -> Outcome:
        member_codes: list[int] = []

        def send(node: int) -> int:
            if proceed is not None and not proceed():
                return APP_POLLED
            result = self._wire.leave_group(node, group_id, [identity])
            member_codes[:] = [code for _, _, code in result.members]
            return result.code

        outcome = self._at_coordinator(Api.LEAVE_GROUP, group_id, send)
        if outcome.reaction is not Reaction.DONE or not member_codes:
            return outcome
        return classify(Api.LEAVE_GROUP, member_codes[0])

    def release_static_member(self, group_id: str, member_id: str, instance_id: str) -> Outcome:
        """Release a dead KIP-848 static member's instance id (ConsumerGroupHeartbeat, epoch -2, on its behalf): its
        replacement takes the member and its assignment over instead of failing with UNRELEASED_INSTANCE_ID (fatal
        in the Java client and librdkafka) until the session timeout fences it. Compare-and-release: only while
        `member_id` holds `instance_id`."""
        return self._at_coordinator(
            Api.CONSUMER_GROUP_HEARTBEAT,
            group_id,
            lambda node: self._wire.release_static_member(node, group_id, member_id, instance_id),
        )

    def keep_alive(self, group_id: str, member_id: str, epoch: int, instance_id: str) -> tuple[Outcome, int]:
        """One keep-alive on behalf of a KIP-848 static member whose app is away (`wire.GroupWire.keep_alive`): the
        outcome, and the member's epoch the answer gives (`epoch` when there was none)."""
        now: list[int] = [epoch]

        def send(node: int) -> int:
            code, now[0] = self._wire.keep_alive(node, group_id, member_id, now[0], instance_id)
            return code

        return self._at_coordinator(Api.CONSUMER_GROUP_HEARTBEAT, group_id, send), now[0]

    def static_members_left(self, group_id: str) -> frozenset[str]:
        """The member ids of a KIP-848 group's static members that left for now (ConsumerGroupDescribe, epoch -2):
        their instance id is released already — by their own client on a graceful close, or on their behalf — so
        there is nothing to release for them. Raises GroupClientError."""
        return self._consumer_group(group_id).left

    def member_epochs(self, group_id: str) -> Mapping[str, int]:
        """A KIP-848 group's members' epochs by member id (ConsumerGroupDescribe): a keep-alive must carry the
        member's current one. Raises GroupClientError."""
        return self._consumer_group(group_id).epochs

    def _consumer_group(self, group_id: str) -> "wire.ConsumerGroupAnswer":
        answers: list[wire.ConsumerGroupAnswer] = []

        def send(node: int) -> int:
            answers[:] = [self._wire.consumer_group(node, group_id)]
            return answers[0].code

        outcome = self._at_coordinator(Api.DESCRIBE_GROUP, group_id, send)
        if outcome.reaction is not Reaction.DONE or not answers:
            raise GroupClientError(outcome, f"ConsumerGroupDescribe of group {group_id!r}")
        return answers[0]

    def heartbeat(self, group_id: str, generation: int, member_id: str, instance_id: str | None) -> Outcome:
        """One Heartbeat on behalf of a member (bridging a static member whose app is restarting)."""
        return self._at_coordinator(
            Api.HEARTBEAT,
            group_id,
            lambda node: self._wire.heartbeat(node, group_id, generation, member_id, instance_id),
        )

    # -- helpers ------------------------------------------------------------------------------------------
    def _admin_call(self, api: Api, context: str, request: Callable[[], Any]) -> Any:
        """An AdminClient request (which finds coordinators itself), retried as the error table says."""
        for attempt in range(self._max_attempts):
            try:
                return request().result(timeout=self._timeout * 2)
            except KafkaException as exc:
                outcome = classify(api, _kafka_code(exc))
                if not _retry(outcome) or attempt + 1 == self._max_attempts:
                    raise GroupClientError(outcome, context) from exc
                if self._renewable and _timed_out(exc):
                    # librdkafka keeps a group's coordinator cached while requests use it, and a request for a
                    # coordinator whose broker died waits for that broker to come up: without a broker state change
                    # elsewhere, every later request times out the same way (measured: minutes after a kill -9, where
                    # a fresh client found the new coordinator at once). A new client starts with no such cache.
                    self._admin = self._new_admin()
            self._sleep(retry.jittered(attempt, self._jitter.random()))
        raise AssertionError("unreachable: the last attempt returns or raises")


class _AllOf:
    """Futures per key seen as one future: `result()` waits for each (the first failure raises)."""

    def __init__(self, futures: dict[Any, Any]) -> None:
        self._futures = futures

    def result(self, timeout: float) -> dict[Any, Any]:
        return {key: future.result(timeout=timeout) for key, future in self._futures.items()}


def _leave_identity(member_id: str, instance_id: str | None, reason: str) -> "wire.LeaveIdentity":
    from vigil_core.kafka import wire  # noqa: PLC0415 - with the adapter that sends it (see `GroupClient._wire`)

    return wire.LeaveIdentity(member_id, instance_id, reason)


def _retry(outcome: Outcome) -> bool:
    return outcome.reaction in (Reaction.REDISCOVER_COORDINATOR, Reaction.RETRY_BACKOFF)


def _source(entry: ConfigEntry) -> int:
    """The entry's ConfigSource as Kafka numbers it (confluent-kafka 2.16 gives an int, typed as its enum)."""
    source: object = entry.source
    return int(source.value) if isinstance(source, ConfigSource) else int(str(source))


def _protocols(entry: ConfigEntry | None) -> tuple[str, ...] | None:
    """group.coordinator.rebalance.protocols as the broker reports a list config ("classic,consumer")."""
    if entry is None or entry.value is None:
        return None
    return tuple(part.strip() for part in str(entry.value).split(",") if part.strip())


def _reason(reason: str) -> str:
    return reason if reason.startswith(REASON_PREFIX) else REASON_PREFIX + reason


def _timed_out(exc: KafkaException) -> bool:
    error = exc.args[0] if exc.args else None
    return isinstance(error, KafkaError) and error.code() == KafkaError._TIMED_OUT  # noqa: SLF001 - confluent-kafka's name for it


def _kafka_code(exc: KafkaException) -> int:
    """The Kafka protocol error code in a confluent-kafka exception; librdkafka's local errors are transport."""
    error = exc.args[0] if exc.args else None
    code = error.code() if error is not None and hasattr(error, "code") else TRANSPORT_ERROR
    return int(code) if code >= -1 else TRANSPORT_ERROR
