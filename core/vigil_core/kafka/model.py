"""What vigil knows about a consumer group, as plain values (pure: built by the client, used by decisions).

The group's state is named here once for every part of vigil (the sidecar's watchdog and `/v1/status`, the
ConsumerGroup status, conditions and metrics): `group_state` from what librdkafka's describe says and, for a KIP-848
group it cannot name, what ConsumerGroupDescribe says; `rebalancing` whether that state waits on the members.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum, StrEnum
from typing import TypeVar

from vigil_core.rules import BrokerLimits

GROUP_SESSION_CONFIG = "consumer.session.timeout.ms"
GROUP_CONFIG_SOURCE = 8
"""DescribeConfigs' ConfigSource.GROUP_CONFIG: a value set on the group itself. Nothing else is the group's own: 4.1
reports the broker's value as DEFAULT_CONFIG, 4.4 as STATIC_BROKER_CONFIG when server.properties sets it."""
GROUP_HEARTBEAT_CONFIG = "consumer.heartbeat.interval.ms"


class GroupType(StrEnum):
    CLASSIC = "classic"
    CONSUMER = "consumer"  # KIP-848
    SHARE = "share"  # KIP-932: no member-removal API, records return after their acquisition lock
    STREAMS = "streams"  # KIP-1071: no member-removal API
    UNKNOWN = "unknown"


class GroupState(StrEnum):
    """Union of the classic, KIP-848, share and streams groups' states as the broker names them."""

    STABLE = "Stable"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    RECONCILING = "Reconciling"
    ASSIGNING = "Assigning"
    NOT_READY = "NotReady"
    """A streams group whose topology cannot run yet (source topics missing)."""
    EMPTY = "Empty"
    DEAD = "Dead"
    UNKNOWN = "Unknown"


_REBALANCING = frozenset(
    {GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE, GroupState.RECONCILING, GroupState.ASSIGNING}
)

E = TypeVar("E", bound=Enum)


def by_name(kind: type[E], value: object, default: E) -> E:
    """`value` — a library's enum member (confluent-kafka's `ConsumerGroupState.PREPARING_REBALANCING`) or a name as
    the broker spells it (`PreparingRebalance`, `Reconciling`) — as a member of `kind`; `default` when none matches.
    Case and underscores do not count; confluent-kafka's `…_REBALANCING` is the broker's `…Rebalance`."""
    name = getattr(value, "name", str(value)).replace("_", "").lower().replace("rebalancing", "rebalance")
    for member in kind:
        if str(member.value).replace("_", "").lower() == name or member.name.replace("_", "").lower() == name:
            return member
    return default


def removable(group_type: GroupType) -> bool:
    """Whether Kafka has an API that removes one of the group's members: LeaveGroup (classic, KIP-848 from 4.0).
    Share and streams groups have none: their members leave at their session timeout, or when their app restarts."""
    return group_type not in (GroupType.SHARE, GroupType.STREAMS)


def needs_consumer_group_describe(group_type: GroupType, reported: GroupState) -> bool:
    """librdkafka's describe names no KIP-848 state but Stable, Empty and Dead: Assigning and Reconciling come back
    Unknown (librdkafka `rd_kafka_consumer_group_state_code`). Only then is ConsumerGroupDescribe asked."""
    return group_type is GroupType.CONSUMER and reported is GroupState.UNKNOWN


def group_state(group_type: GroupType, reported: GroupState, described: tuple[int, str] | None = None) -> GroupState:
    """The state vigil reports: librdkafka's (`reported`), unless it could not name a KIP-848 group's state; then the
    one ConsumerGroupDescribe named (`described`: its error code and state name, None when not asked), Unknown when
    that failed or named none vigil knows."""
    if not needs_consumer_group_describe(group_type, reported) or described is None:
        return reported
    code, name = described
    return by_name(GroupState, name, GroupState.UNKNOWN) if code == 0 else GroupState.UNKNOWN


def rebalancing(group_type: GroupType, state: GroupState) -> bool:
    """The group is between generations or epochs, waiting on its members: a classic join or sync phase, or a KIP-848
    group reconciling or assigning. Unknown in a KIP-848 group (ConsumerGroupDescribe failed: `group_state`) can
    only be one of the two librdkafka cannot name, so it counts as a rebalance too."""
    return state in _REBALANCING or (group_type is GroupType.CONSUMER and state is GroupState.UNKNOWN)


@dataclass(frozen=True, order=True)
class TopicPartitionRef:
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True)
class MemberView:
    """One member as the coordinator describes it."""

    member_id: str
    instance_id: str | None
    client_id: str
    host: str
    assignment: tuple[TopicPartitionRef, ...]
    subscription: tuple[str, ...] | None = None
    """Subscribed topics from the classic consumer protocol metadata; None when the broker did not say."""

    @property
    def is_static(self) -> bool:
        return self.instance_id is not None


@dataclass(frozen=True)
class GroupView:
    """One observation of a group: everything an eviction must be compared against."""

    group_id: str
    state: GroupState
    type: GroupType
    assignor: str
    coordinator_id: int
    members: tuple[MemberView, ...]

    @property
    def stable(self) -> bool:
        return self.state is GroupState.STABLE

    @property
    def rebalancing(self) -> bool:
        """Waiting on its members (module function `rebalancing`)."""
        return rebalancing(self.type, self.state)

    def member(self, member_id: str) -> MemberView | None:
        return next((m for m in self.members if m.member_id == member_id), None)

    @property
    def not_found(self) -> bool:
        """What librdkafka says of a group its coordinator does not know (Dead, classic, no members) — and of a
        share or streams group, which only their own describes tell apart."""
        return self.state is GroupState.DEAD and self.type is GroupType.CLASSIC and not self.members


@dataclass(frozen=True)
class GroupTimings:
    """A KIP-848 group's timings, as its members get them (ms)."""

    session_ms: int
    heartbeat_ms: int
    session_override_ms: int | None
    """The group's own session timeout, None when it follows the broker's default."""


def group_timings(configs: Mapping[str, tuple[str | None, bool]]) -> GroupTimings:
    """A KIP-848 group's timings from the DescribeConfigs answer for it (config name -> (value, not the group's own:
    any source but GROUP_CONFIG_SOURCE)):
    its own configs, else the broker's (a 4.x broker answers those as the group's defaults), else Kafka's default
    for a config absent from the answer (an older broker). One reading for every client of the answer."""
    kafka = BrokerLimits()

    def ms(name: str, default: int) -> int:
        value = configs.get(name, (None, True))[0]
        return int(value) if value is not None else default

    session, session_is_default = configs.get(GROUP_SESSION_CONFIG, (None, True))
    return GroupTimings(
        session_ms=ms(GROUP_SESSION_CONFIG, kafka.consumer_session_ms),
        heartbeat_ms=ms(GROUP_HEARTBEAT_CONFIG, kafka.consumer_heartbeat_ms),
        session_override_ms=None if session is None or session_is_default else int(session),
    )
