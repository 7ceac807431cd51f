"""vigil's events: what it saw and did, one versioned JSON record each, on a Kafka topic keyed by group.

The sidecar, the operator and the report write and read the same records: the report reconstructs rebalances and
their causes from them, and the operator learns of stalls from them. The record is an envelope (version, type,
id, time, cluster, group, source, pod) with a per-type payload; `type` selects the model.

Evolution is additive only, so a reader never has to know who wrote a record:
- unknown fields are ignored on read (newer writer, older reader);
- a new field must have a default (older writer, newer reader), and no field is removed, renamed or retyped;
- vocabularies (signal, action, cause, outcome, phase, state) are plain strings with documented values, so a new
  value is additive too; an enum would make older readers reject it;
- every version's records are kept as fixtures (tests/unit/fixtures/events/v<N>/) and must keep parsing.
A change that cannot be additive is a new `type`, not a new shape for an old one.

Times are timezone-aware and stored in UTC; a naive time is rejected, never guessed. The caller supplies them
(`now`), so building an event is pure.
"""

from datetime import UTC, datetime
from typing import Annotated, Final, Literal
from uuid import UUID, uuid4

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

SCHEMA_VERSION: Final = 4
"""The version this code writes. Bump it with every additive change, and add that version's fixtures."""

EVENTS_TOPIC_DEFAULT: Final = "vigil.events"
"""The topic vigil writes to unless configured otherwise; created by whoever installs vigil (the chart), not by
the writers, so a typo in a writer's config fails instead of creating a stray topic."""


class EventDecodeError(ValueError):
    """A record on the events topic is not a vigil event this code understands (one line, naming the field)."""


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class MemberRef(_Model):
    """A group member as vigil identified it."""

    member_id: str
    instance_id: str | None = None
    client_id: str | None = None


class TopicPartition(_Model):
    topic: str
    partition: Annotated[int, Field(ge=0)]


class _Envelope(_Model):
    schema_version: Annotated[int, Field(ge=1)] = SCHEMA_VERSION
    """The version of the writer; any version parses (additive evolution)."""
    event_id: UUID = Field(default_factory=uuid4)
    """Unique per event, for de-duplication (the producer may retry)."""
    time: AwareDatetime
    """When it happened (UTC)."""
    cluster: str
    """The Kafka cluster id."""
    group: str
    """The consumer group id; also the record key."""
    source: str
    """The writer: "sidecar", "operator" or "report"."""
    namespace: str | None = None
    pod: str | None = None
    """The pod concerned (or the writer's pod), when there is one."""

    @field_validator("time")
    @classmethod
    def _in_utc(cls, value: datetime) -> datetime:
        return value.astimezone(UTC)


# --- payloads -----------------------------------------------------------------------------------------------------


class StallPayload(_Model):
    member: MemberRef
    signal: str
    """How the stall was seen: "beacon", "progress" or "stats"."""
    stalled_for_ms: Annotated[int, Field(ge=0)]
    stall_timeout_ms: Annotated[int, Field(gt=0)]
    generation: int | None = None
    assigned_partitions: Annotated[int, Field(ge=0)] | None = None
    action: str | None = None
    """What the sidecar does about it: "leave-group", "restart" or "alert" (since version 4; a restart or an alert
    has no eviction event to say so)."""


class StallEndedPayload(_Model):
    member: MemberRef
    stalled_for_ms: Annotated[int, Field(ge=0)]
    """How long the app went without polling, up to the poll that ended the stall."""


class EvictionPayload(_Model):
    member: MemberRef
    action: str
    """"leave-group", "restart" or "alert"."""
    reason: str
    """The reason sent with the LeaveGroup (KIP-800), e.g. "vigil: no poll for 42.1s (stall timeout 30s)"."""


class EvictionDonePayload(_Model):
    member: MemberRef
    action: str
    kafka_error: str = "NONE"
    """Kafka's answer by name (`vigil_core.kafka.outcomes.Outcome.name`), e.g. "UNKNOWN_MEMBER_ID"."""
    already_gone: bool = False
    """The member had left before vigil's request landed."""


class EvictionRefusedPayload(_Model):
    member: MemberRef | None = None
    action: str
    cause: str
    """Why not: "budget", "cooldown", "systemic-stall", "not-stable", "identity", "fenced", "poison-suspected" (v3),
    "app-polled" (the app polled again before the LeaveGroup went out), or why the budget Lease could not be used:
    "no-api", "no-permission", "no-lease", "unreachable", "bad-ledger", "contention" (`BudgetUnavailable`)."""
    message: str
    """One sentence for a human."""


class SystemicStallPayload(_Model):
    stalled_members: Annotated[int, Field(ge=0)]
    members: Annotated[int, Field(ge=0)]
    threshold_percent: Annotated[float, Field(ge=0, le=100)]


class SuspectPartition(_Model):
    topic: str
    partition: Annotated[int, Field(ge=0)]
    committed_offset: int | None = None
    """The group's committed offset when it was marked (where the suspected record is); None: unknown."""


class PoisonSuspectedPayload(_Model):
    """v3: a member stalled on a partition vigil had just handed over from another stalled member; vigil stops
    evicting for these partitions (a record that stalls every consumer would only go round the group)."""

    member: MemberRef
    partitions: tuple[SuspectPartition, ...]
    message: str


class BridgeStartedPayload(_Model):
    member: MemberRef
    generation: int
    proof: str
    """Why the app is known to have ended: "helper-connection-closed", "container-terminated" or "pod-deleted"."""
    deadline: AwareDatetime
    """When bridging gives up (maxBridgeSeconds)."""

    @field_validator("deadline")
    @classmethod
    def _in_utc(cls, value: datetime) -> datetime:
        return value.astimezone(UTC)


class BridgeEndedPayload(_Model):
    member: MemberRef
    outcome: str
    """"rejoined", "deadline", "member-gone", "removed", "crash-loop", "error", "stale-generation" (the generation
    moved on without the member: heartbeats stopped, the session decides), or "stopped" (the sidecar itself was
    stopped: the pod is going away)."""
    heartbeats_sent: Annotated[int, Field(ge=0)]
    bridged_ms: Annotated[int, Field(ge=0)]
    kafka_error: str | None = None
    """The Kafka answer that ended it, by name, if one did."""


class RolloutStepPayload(_Model):
    workload: str
    """e.g. "StatefulSet/orders"."""
    target_revision: str
    step: Annotated[int, Field(ge=0)]
    steps: Annotated[int, Field(ge=0)]
    phase: str
    """"deleting", "bridging", "waiting-ready", "done", "paused"."""
    generation_before: int | None = None
    generation_after: int | None = None
    message: str = ""


class MemberRemovedPayload(_Model):
    member: MemberRef
    cause: str
    """"scale-down", "pod-gone", "container-terminated", "node-lost", "crash-loop" or "subscription-change"."""
    by_instance_id_only: bool = False
    """Removed by instance id alone (departed static members), not by the observed pair."""


class SnapshotMember(_Model):
    member: MemberRef
    host: str
    pod: str | None = None
    """The pod vigil matched it to (`vigil_core.identity`), if any."""
    assignment: tuple[TopicPartition, ...] = ()


class GroupSnapshotPayload(_Model):
    state: str
    """As the broker names it: "Stable", "PreparingRebalance", "CompletingRebalance", "Empty", "Dead", ..."""
    protocol: str
    """"classic" or "consumer" (KIP-848)."""
    generation: int | None = None
    """Classic generation or KIP-848 group epoch, when known."""
    coordinator: int | None = None
    """The coordinator's broker id."""
    members: tuple[SnapshotMember, ...] = ()
    total_lag: Annotated[int, Field(ge=0)] | None = None


# --- events -------------------------------------------------------------------------------------------------------


class StallDetected(_Envelope):
    type: Literal["stall-detected"] = "stall-detected"
    payload: StallPayload


class StallEnded(_Envelope):
    """The app polled again after a reported stall (v2): the report can stop showing it at once."""

    type: Literal["stall-ended"] = "stall-ended"
    payload: StallEndedPayload


class EvictionRequested(_Envelope):
    type: Literal["eviction-requested"] = "eviction-requested"
    payload: EvictionPayload


class EvictionDone(_Envelope):
    type: Literal["eviction-done"] = "eviction-done"
    payload: EvictionDonePayload


class EvictionRefused(_Envelope):
    type: Literal["eviction-refused"] = "eviction-refused"
    payload: EvictionRefusedPayload


class SystemicStall(_Envelope):
    type: Literal["systemic-stall"] = "systemic-stall"
    payload: SystemicStallPayload


class PoisonSuspected(_Envelope):
    type: Literal["poison-suspected"] = "poison-suspected"
    payload: PoisonSuspectedPayload


class BridgeStarted(_Envelope):
    type: Literal["bridge-started"] = "bridge-started"
    payload: BridgeStartedPayload


class BridgeEnded(_Envelope):
    type: Literal["bridge-ended"] = "bridge-ended"
    payload: BridgeEndedPayload


class RolloutStep(_Envelope):
    type: Literal["rollout-step"] = "rollout-step"
    payload: RolloutStepPayload


class MemberRemoved(_Envelope):
    type: Literal["member-removed"] = "member-removed"
    payload: MemberRemovedPayload


class GroupSnapshot(_Envelope):
    type: Literal["group-snapshot"] = "group-snapshot"
    payload: GroupSnapshotPayload


Event = Annotated[
    StallDetected
    | StallEnded
    | EvictionRequested
    | EvictionDone
    | EvictionRefused
    | SystemicStall
    | PoisonSuspected
    | BridgeStarted
    | BridgeEnded
    | RolloutStep
    | MemberRemoved
    | GroupSnapshot,
    Field(discriminator="type"),
]

EVENT_MODELS: Final[tuple[type[_Envelope], ...]] = (
    StallDetected,
    StallEnded,
    EvictionRequested,
    EvictionDone,
    EvictionRefused,
    SystemicStall,
    PoisonSuspected,
    BridgeStarted,
    BridgeEnded,
    RolloutStep,
    MemberRemoved,
    GroupSnapshot,
)

_EVENT: Final[TypeAdapter[Event]] = TypeAdapter(Event)


def encode_event(event: Event) -> bytes:
    """The record value: compact UTF-8 JSON."""
    return event.model_dump_json().encode()


def event_key(event: Event) -> bytes:
    """The record key: the group id, so one group's events stay in order on one partition."""
    return event.group.encode()


def parse_event(data: bytes) -> Event:
    """A record value back into its event; EventDecodeError (one line, naming the field) if it is not one."""
    try:
        return _EVENT.validate_json(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "record"
        raise EventDecodeError(f"not a vigil event: {where}: {first['msg']}") from None
