"""The `ConsumerGroup` status the operator owns (field manager `vigil-operator`), as pydantic models.

`status.report` is owned by the report job (field manager `vigil-report`): the operator never writes it, so
server-side apply keeps both. Conditions are a map list keyed on `type`, each with `observedGeneration`.

It holds state, not readings: what changes only when the group changes (members, state, counts, conditions). Lag
and the time of the last resync change every resync; they are on the operator's `/metrics` (per group), so a
resync that finds nothing new writes nothing (an etcd write and a watch fan-out per group per resync saved).
"""

from enum import StrEnum
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema, model_validator
from pydantic.alias_generators import to_camel

#: RFC 3339, as the schema's `format: date-time` admits it (the apiserver rejects a status patch otherwise).
RFC3339_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})$"
Timestamp = Annotated[str, Field(pattern=RFC3339_PATTERN)]


class _Status(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True)


class ConditionType(StrEnum):
    READY = "Ready"
    """The group is observed (broker reachable, config accepted) and Stable with no stalled member."""
    CONFIG_VALID = "ConfigValid"
    """The spec's client timings pass the broker's limits and vigil's rules; reasons carry the advice."""
    STALLED = "Stalled"
    """At least one member is stalled (a sidecar said so and the member is still in the group)."""
    REBALANCING = "Rebalancing"
    RESTART_IN_PROGRESS = "RestartInProgress"
    SIDECAR_MISSING = "SidecarMissing"
    """A pod labelled for injection runs without the sidecar: admitted while the webhook was down or failed open,
    or not injected by it (the pod's creation warnings say why). Its member has no liveness enforcement."""


#: The order conditions are written in (stable output; `kubectl describe` reads well).
CONDITION_ORDER = tuple(ConditionType)

#: The CRD's schema of `conditions[].type`: a string, not an enum, so a newer operator may add types (Kubernetes'
#: own condition type rules).
CONDITION_TYPE_SCHEMA = {"type": "string", "maxLength": 316, "pattern": r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"}


def _known_conditions(conditions: Any) -> Any:
    """A newer operator's condition types are left out (its successor in charge owns them), not a parse failure
    that would lose the whole stored status, a rollout's state with it."""
    if not isinstance(conditions, list | tuple):
        return conditions
    known = {str(t) for t in ConditionType}
    return [c for c in conditions if not isinstance(c, dict) or c.get("type") in known]


#: The apiserver's bound on a condition's message.
MESSAGE_LIMIT: Final = 32768


class Condition(_Status):
    type: Annotated[ConditionType, WithJsonSchema(CONDITION_TYPE_SCHEMA)]
    status: Literal["True", "False", "Unknown"]
    reason: Annotated[str, Field(pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$", max_length=1024)]
    """CamelCase, as Kubernetes conditions spell reasons."""
    message: Annotated[str, Field(max_length=MESSAGE_LIMIT)] = ""
    last_transition_time: Timestamp
    """RFC 3339 UTC, seconds precision; changes only when `status` changes."""
    observed_generation: Annotated[int, Field(ge=0)] = 0


class MemberStatus(_Status):
    member_id: str
    instance_id: str | None = None
    client_id: str = ""
    host: str = ""
    pod: str | None = None
    """The pod this member provably belongs to (`vigil_core.identity`), or none."""
    partitions: Annotated[int, Field(ge=0)] = 0
    stalled: bool = False


class StalledMember(_Status):
    member_id: str
    pod: str | None = None
    since: Timestamp
    """When the sidecar first reported the stall (RFC 3339)."""
    action: str = ""
    """What the sidecar does about it: leave-group, restart or alert."""


class RolloutPhase(StrEnum):
    ROLLING = "Rolling"
    """Outdated pods are being restarted one at a time (`currentPod` is the one in its step, if any)."""
    PAUSED = "Paused"
    """A step failed (its reason in `message`); resumes on a new revision or restart request."""
    COMPLETE = "Complete"


class RolloutStatus(_Status):
    """A coordinated restart of a static group's StatefulSet, persisted so an operator restart resumes it."""

    target_revision: str
    """The StatefulSet's updateRevision being rolled out (or `restart@<time>` for a restart request)."""
    phase: Annotated[RolloutPhase, WithJsonSchema({"type": "string", "maxLength": 64})]
    """Not an enum in the CRD: a newer operator may add phases; one this operator does not know reads as Paused."""
    total: Annotated[int, Field(ge=0)] = 0
    """Pods that needed a restart when the rollout began."""
    done: Annotated[int, Field(ge=0)] = 0
    current_pod: str | None = None
    old_pod_uid: str | None = None
    """The uid of the pod deleted in the current step: its replacement has another."""
    old_member_id: str | None = None
    step_started_at: Timestamp | None = None
    bridge: str | None = None
    """The operator's heartbeat bridge for the current pod's member (`bridge.engine` JSON), resumed after a restart."""
    subscribed_before: tuple[str, ...] | None = None
    """The topics the members subscribed to when the rollout began (classic groups): a static rejoin in a Stable
    group does not reassign, so a change is followed by one deliberate rebalance at the end."""
    session_restore: str | None = None
    """KIP-848 groups: the group's `consumer.session.timeout.ms` override to restore after the rollout (ms, or ""
    for none: back to the broker's default); set while the rollout has it raised."""
    message: str = ""

    @model_validator(mode="before")
    @classmethod
    def _unknown_phase_pauses(cls, data: Any) -> Any:
        """A phase written by a newer operator: this one neither resumes nor restarts what it cannot follow; the
        rollout waits, as a paused one does, for a new revision or restart request."""
        if not isinstance(data, dict) or data.get("phase") in {str(p) for p in RolloutPhase}:
            return data
        if not isinstance(data.get("phase"), str):
            return data
        note = f"phase {data['phase']!r} was written by a newer vigil operator; this one does not know it"
        return {**data, "phase": RolloutPhase.PAUSED.value, "message": note}


class ConsumerGroupStatus(_Status):
    observed_generation: Annotated[int, Field(ge=0)] = 0
    cluster_id: str | None = None
    state: str | None = None
    """As the broker names it (Stable, PreparingRebalance, …), or Unknown when it cannot be described."""
    protocol: str | None = None
    """classic or consumer (KIP-848)."""
    generation: int | None = None
    coordinator: int | None = None
    member_count: Annotated[int, Field(ge=0)] = 0
    stalled_count: Annotated[int, Field(ge=0)] = 0
    members: tuple[MemberStatus, ...] = ()
    stalled_members: tuple[StalledMember, ...] = ()
    last_rebalance: Timestamp | None = None
    """When the operator last saw the group change generation, membership or assignment (RFC 3339)."""
    conditions: Annotated[tuple[Condition, ...], BeforeValidator(_known_conditions)] = ()
    rollout: RolloutStatus | None = None
    report: dict[str, Any] | None = None
    """Owned by the report job (field manager `vigil-report`): kept here so a status read back parses."""
