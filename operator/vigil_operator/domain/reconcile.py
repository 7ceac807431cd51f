"""One resync of a ConsumerGroup: (previous status, what was observed, now) → (new status, notices). Pure.

The handler gathers the observation (one describe, one OffsetFetch and one ListOffsets per group — never a
broker call per pod), the stall reports the sidecars published, the pods of the workload and the claims of
other CRs; this module decides what the status says and which transitions deserve a Kubernetes Event.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from vigil_core import identity, rules
from vigil_core.kafka.model import GroupState, GroupType, GroupView, TopicPartitionRef
from vigil_operator.domain import conditions as cond
from vigil_operator.domain.spec import TIMING_FIELDS, ConsumerGroupSpec
from vigil_operator.domain.stalls import StallReport
from vigil_operator.domain.status import Condition, ConditionType, ConsumerGroupStatus, MemberStatus, StalledMember


@dataclass(frozen=True)
class GroupFacts:
    """What the broker said in this resync."""

    cluster_id: str
    view: GroupView
    committed: Mapping[TopicPartitionRef, int]
    end_offsets: Mapping[TopicPartitionRef, int]
    limits: rules.BrokerLimits
    """The broker's limits; for a KIP-848 group read with `group_configs`, with the group's own session and heartbeat
    in effect (`BrokerLimits.for_group`)."""
    group_configs: bool = False
    """The KIP-848 group's own timings were read (its group configs) and are the ones in `limits`."""
    generation: int | None = None
    """The group's generation (classic) or group epoch (KIP-848) when the broker said it; None otherwise (a classic
    DescribeGroups answer carries none)."""
    share_lag: Mapping[TopicPartitionRef, int] = field(default_factory=dict)
    """A share group's lag per share-partition, as the broker counts it (KIP-1226); empty for the other types."""


@dataclass(frozen=True)
class Unreachable:
    """The broker could not be asked; `message` is one line naming the source (bootstrap, Secret, …)."""

    reason: str
    """CamelCase: BrokerUnreachable, SecretMissing, InvalidSpec, …"""
    message: str


@dataclass(frozen=True)
class PodFacts:
    name: str
    instance_id: str | None = None
    """The group.instance.id the pod's app uses, when known (static groups)."""
    ordinal: int | None = None
    """The StatefulSet ordinal (the pod is owned by a StatefulSet and named `<set>-<n>`), else None."""
    app_ended_at: datetime | None = None
    """When an app container (not the sidecar) last terminated, from the kubelet's container statuses."""
    deleting: bool = False
    """A deletion is under way (deletionTimestamp set): the app is being stopped and may still leave by itself."""
    created_at: datetime | None = None
    """metadata.creationTimestamp: a member seen before it cannot be this pod's (a StatefulSet reuses names)."""
    uid: str = ""
    revision: str = ""
    """The `controller-revision-hash` label (StatefulSet pods): which template revision it runs."""
    ready: bool = False
    crash_looping: bool = False
    """An app container waits in CrashLoopBackOff after its second end (restartCount ≥ 2)."""
    node: str | None = None
    """spec.nodeName: where a lost node's members are judged by their progress (domain.node_loss)."""
    sidecar_url: str | None = None
    """`http://<pod IP>:<health port>` of its injected sidecar (`/v1/status` names the member and its generation);
    None without a sidecar or an IP."""
    sidecar_missing: bool = False
    """Labelled for injection (`vigil.dev/inject: "true"`) yet without the sidecar (ConditionType.SIDECAR_MISSING)."""


@dataclass(frozen=True)
class Observation:
    generation: int
    """metadata.generation of the CR."""
    spec: ConsumerGroupSpec
    broker: GroupFacts | Unreachable
    pods: Sequence[PodFacts] = ()
    stalls: Sequence[StallReport] = ()
    """Reports the sidecars published, still current; re-checked here against the described members."""
    owner: str | None = None
    """namespace/name of the CR that owns this (cluster, group) when it is another one: this CR is refused."""
    config_problem: tuple[str, str] | None = None
    """(reason, message) of a configuration the workload makes impossible (e.g. a Coordinated restart of a
    StatefulSet that is not OnDelete): ConfigValid=False with it."""


@dataclass(frozen=True)
class Notice:
    """A Kubernetes Event to post on the CR."""

    type: str  # "Normal" | "Warning"
    reason: str
    message: str


def reconcile(
    previous: ConsumerGroupStatus, obs: Observation, now: datetime
) -> tuple[ConsumerGroupStatus, list[Notice]]:
    status = _observe(previous, obs, now)
    status = status.model_copy(update={"conditions": _conditions(previous, status, obs, now)})
    return status, _notices(previous, status)


def _observe(previous: ConsumerGroupStatus, obs: Observation, now: datetime) -> ConsumerGroupStatus:
    facts = obs.broker
    if isinstance(facts, Unreachable):  # keep what was last seen, but say it is not current
        update = {"observed_generation": obs.generation, "state": GroupState.UNKNOWN.value}
        return previous.model_copy(update=update)
    view = facts.view
    owners = _pods_of(view, obs.pods)
    present = {m.member_id for m in view.members}
    stalled = list(
        {s.member_id: s for s in sorted(obs.stalls, key=lambda s: s.last) if s.member_id in present}.values()
    )
    stalled_ids = {s.member_id for s in stalled}
    members = tuple(
        MemberStatus(
            member_id=m.member_id,
            instance_id=m.instance_id,
            client_id=m.client_id,
            host=m.host,
            pod=owners.get(m.member_id),
            partitions=len(m.assignment),
            stalled=m.member_id in stalled_ids,
        )
        for m in sorted(view.members, key=lambda m: (owners.get(m.member_id) or "~", m.member_id))
    )
    changed = _membership(previous.members) != _membership(members) or (
        view.rebalancing and previous.state != view.state.value
    )
    return ConsumerGroupStatus(
        observed_generation=obs.generation,
        cluster_id=facts.cluster_id,
        state=view.state.value,
        protocol=view.type.value,
        generation=facts.generation if facts.generation is not None else previous.generation,
        coordinator=view.coordinator_id,
        member_count=len(view.members),
        stalled_count=len(stalled),
        members=members,
        rollout=previous.rollout,  # the rollout planner's (domain.rollout), carried as it was
        stalled_members=tuple(
            StalledMember(
                member_id=s.member_id,
                pod=owners.get(s.member_id) or s.pod,
                since=cond.rfc3339(s.since),
                action=obs.spec.liveness.effective_action.value,
            )
            for s in stalled
        ),
        # the first description of the group is not a change: there was nothing to compare with
        last_rebalance=cond.rfc3339(now) if changed and previous.cluster_id else previous.last_rebalance,
        conditions=previous.conditions,
    )


def _pods_of(view: GroupView, pods: Sequence[PodFacts]) -> dict[str, str]:
    """member id → pod, by Core's identity rules (instance id, then client.id == pod name; never the host)."""
    observed = [identity.ObservedMember(m.member_id, m.instance_id, m.client_id, m.host) for m in view.members]
    found: dict[str, str] = {}
    for pod in pods:
        match = identity.find_member(observed, identity.PodIdentity(pod.name, pod.instance_id))
        if isinstance(match, identity.Match):
            found[match.member.member_id] = pod.name
    return found


def lag(facts: GroupFacts) -> int | None:
    """The group's committed lag: over its members' assigned partitions, the read_committed end offset minus the
    committed offset, summed; None when no assigned partition has both. A share group has no committed offsets: its
    lag is the broker's, the records not yet delivered and acknowledged over all its share-partitions. A reading for
    `/metrics` and the events topic's snapshot, not state: it is not in the status."""
    if facts.view.type is GroupType.SHARE:
        return sum(facts.share_lag.values()) if facts.share_lag else None
    lags = [
        max(0, facts.end_offsets[tp] - facts.committed[tp])
        for m in facts.view.members
        for tp in m.assignment
        if tp in facts.end_offsets and tp in facts.committed
    ]
    return sum(lags) if lags else None


def _membership(members: Sequence[MemberStatus]) -> frozenset[tuple[str, int]]:
    return frozenset((m.member_id, m.partitions) for m in members)


def _conditions(
    previous: ConsumerGroupStatus, status: ConsumerGroupStatus, obs: Observation, now: datetime
) -> tuple[Condition, ...]:
    def put(
        conditions: tuple[Condition, ...], kind: ConditionType, truth: cond.Truth, reason: str, message: str
    ) -> tuple[Condition, ...]:
        return cond.with_condition(conditions, kind, truth, reason, message, generation=obs.generation, now=now)

    cs = previous.conditions
    facts = obs.broker
    config = _config(obs)
    cs = put(cs, ConditionType.CONFIG_VALID, *config)
    if obs.owner is not None:
        message = f"spec.groupId: Kafka group {obs.spec.group_id!r} is already observed by ConsumerGroup {obs.owner}"
        cs = put(cs, ConditionType.READY, "False", "DuplicateGroup", message + "; this one is ignored.")
        cs = put(cs, ConditionType.STALLED, "Unknown", "DuplicateGroup", message + ".")
        cs = put(cs, ConditionType.REBALANCING, "Unknown", "DuplicateGroup", message + ".")
    elif isinstance(facts, Unreachable):
        cs = put(cs, ConditionType.READY, "False", facts.reason, facts.message)
        cs = put(cs, ConditionType.STALLED, "Unknown", facts.reason, "The group cannot be described.")
        cs = put(cs, ConditionType.REBALANCING, "Unknown", facts.reason, "The group cannot be described.")
    else:
        view = facts.view
        pods = ", ".join(s.pod or s.member_id for s in status.stalled_members)
        if status.stalled_members:
            cs = put(cs, ConditionType.STALLED, "True", "MembersStalled", f"Stalled: {pods}.")
        else:
            cs = put(cs, ConditionType.STALLED, "False", "NoStall", "No member is stalled.")
        said = _state_in_words(view)
        cs = put(cs, ConditionType.REBALANCING, "True" if view.rebalancing else "False", view.state.value, said)
        ready = _readiness(view, status, config)
        cs = put(cs, ConditionType.READY, *ready)
    cs = put(cs, ConditionType.SIDECAR_MISSING, *_sidecars(obs.pods))
    restart = cond.find(cs, ConditionType.RESTART_IN_PROGRESS)  # owned by the restart coordinator once it runs
    if restart is None:
        cs = put(cs, ConditionType.RESTART_IN_PROGRESS, "False", "NoRestart", "No coordinated restart is running.")
    else:
        cs = put(cs, ConditionType.RESTART_IN_PROGRESS, restart.status, restart.reason, restart.message)
    return cs


MISSING_NAMED = 10
"""Pods a SidecarMissing message names; the count says how many more."""


def without_sidecar(pods: Sequence[PodFacts]) -> list[str]:
    """The group's pods labelled for injection that run without the sidecar (being deleted: no longer counted)."""
    return sorted(p.name for p in pods if p.sidecar_missing and not p.deleting)


def _sidecars(pods: Sequence[PodFacts]) -> tuple[cond.Truth, str, str]:
    missing = without_sidecar(pods)
    if not missing:
        return "False", "AllInjected", "Every pod labelled for injection runs the vigil sidecar."
    named = ", ".join(missing[:MISSING_NAMED]) + (
        f" and {len(missing) - MISSING_NAMED} more" if len(missing) > MISSING_NAMED else ""
    )
    return (
        "True",
        "PodsWithoutSidecar",
        (
            f"{len(missing)} pod(s) labelled for injection run without the vigil sidecar: {named}. They were created"
            " while the injection webhook was unreachable or failed open, or it did not inject them (their creation"
            " warnings say why); their members have no liveness enforcement. Delete each once the webhook is up: the"
            " sidecar is injected when a pod is created."
        ),
    )


def _state_in_words(view: GroupView) -> str:
    if view.rebalancing and view.state is GroupState.UNKNOWN:  # a KIP-848 group ConsumerGroupDescribe did not name
        return "The group is rebalancing (Assigning or Reconciling: its KIP-848 state could not be read)."
    return f"The group is {view.state.value}."


def _readiness(
    view: GroupView, status: ConsumerGroupStatus, config: tuple[cond.Truth, str, str]
) -> tuple[cond.Truth, str, str]:
    state = view.state
    if config[0] == "False":
        return "False", "ConfigInvalid", config[2]
    if status.stalled_members:
        return "False", "MembersStalled", f"{status.stalled_count} of {status.member_count} members are stalled."
    if state is GroupState.STABLE:
        return "True", "Stable", f"Stable with {status.member_count} members."
    if state is GroupState.EMPTY:
        return "False", "GroupEmpty", "The group has no members: no consumer of it is running."
    if state is GroupState.DEAD:
        return "False", "GroupNotFound", "The broker does not know the group (no consumer has joined it yet)."
    return "False", "Rebalancing" if view.rebalancing else state.value, _state_in_words(view)


def _config(obs: Observation) -> tuple[cond.Truth, str, str]:
    """ConfigValid: the timing rules against the broker's limits; advice is a reason, never a rejection."""
    if obs.config_problem is not None:
        return "False", *obs.config_problem
    spec = obs.spec
    limits = obs.broker.limits if isinstance(obs.broker, GroupFacts) else rules.BrokerLimits()
    findings = rules.check_timings(spec.timings(), limits)
    problems = [f for f in findings if f.severity is not rules.Severity.INFO]
    if not problems:
        checked = "Kafka's default limits" if limits.from_defaults else "the broker's limits"
        if isinstance(obs.broker, GroupFacts) and obs.broker.group_configs:
            checked += (
                f" and the group's own session ({limits.consumer_session_ms} ms) and heartbeat"
                f" ({limits.consumer_heartbeat_ms} ms)"
            )
        return "True", "Valid", f"Client timings are consistent and within {checked}."
    text = " ".join(f"{_field(f.setting)}: {f.message}" for f in problems)
    if any(f.severity is rules.Severity.ERROR for f in problems):
        return "False", "TimingsRejected", text
    return "True", "ValidWithAdvice", text


def _field(setting: str) -> str:
    """A finding's setting as the ConsumerGroup names it, with the client property it becomes."""
    field = TIMING_FIELDS.get(setting)
    return setting if field is None else f"{field} ({setting})"


def _notices(previous: ConsumerGroupStatus, status: ConsumerGroupStatus) -> list[Notice]:
    """One Event per condition that changed status or reason (a refused configuration also when its message changed:
    another problem under the same reason), plus newly stalled members by name."""
    out: list[Notice] = []
    before = {c.type: c for c in previous.conditions}
    for c in status.conditions:
        old = before.get(c.type)
        refused_anew = (
            c.type is ConditionType.CONFIG_VALID and c.status == "False" and (old is None or old.message != c.message)
        )
        if old is not None and (old.status, old.reason) == (c.status, c.reason) and not refused_anew:
            continue
        bad = (c.type in (ConditionType.STALLED, ConditionType.SIDECAR_MISSING) and c.status == "True") or (
            c.type in (ConditionType.READY, ConditionType.CONFIG_VALID) and c.status == "False"
        )
        if old is None and not bad and c.type is not ConditionType.READY:
            continue  # the first sync says what is wrong, and whether the group is ready; not every default
        out.append(Notice("Warning" if bad else "Normal", f"{c.type.value}{c.status}", c.message or c.reason))
    seen = {m.member_id for m in previous.stalled_members}
    for m in status.stalled_members:
        if m.member_id not in seen:
            out.append(Notice("Warning", "MemberStalled", f"Member {m.member_id} (pod {m.pod}) stalled; {m.action}."))
    return out
