"""What vigil knows about a consumer group, as plain values (pure: built by the client, used by decisions)."""

from dataclasses import dataclass
from enum import StrEnum


class GroupType(StrEnum):
    CLASSIC = "classic"
    CONSUMER = "consumer"  # KIP-848
    UNKNOWN = "unknown"


class GroupState(StrEnum):
    """Union of classic and KIP-848 states as the broker names them."""

    STABLE = "Stable"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    RECONCILING = "Reconciling"
    ASSIGNING = "Assigning"
    EMPTY = "Empty"
    DEAD = "Dead"
    UNKNOWN = "Unknown"


_REBALANCING = frozenset(
    {GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE, GroupState.RECONCILING, GroupState.ASSIGNING}
)


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
        """The group is between generations or epochs, waiting on its members: a classic join or sync phase, or a
        KIP-848 group reconciling or assigning. `GroupClient.describe` names the KIP-848 states (librdkafka's
        describe knows none but Stable, Empty and Dead: `rd_kafka_consumer_group_state_code`); should that fail,
        Unknown in a KIP-848 group can only be one of the two, so it counts as a rebalance too."""
        return self.state in _REBALANCING or (self.type is GroupType.CONSUMER and self.state is GroupState.UNKNOWN)

    def member(self, member_id: str) -> MemberView | None:
        return next((m for m in self.members if m.member_id == member_id), None)
