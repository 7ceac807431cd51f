"""Coordinated restarts of a static group's StatefulSet, one pod at a time, with no rebalance (issue #8). Pure.

A static member (KIP-345) whose app comes back inside its session timeout, in a Stable group with the same
protocol, takes its member id back without a rebalance. A pod restart takes longer than a short session timeout,
so while a pod is replaced the operator heartbeats for its member (the `bridge` engine, proof "pod-deleted").
The user's StatefulSet declares `updateStrategy: OnDelete` (the operator never writes it: Helm's and GitOps'
three-way merges would revert it), and the operator deletes the outdated pods itself:

1. Outdated: a pod whose `controller-revision-hash` is not the set's updateRevision, one created before a restart
   request (`vigil.dev/restart-requested-at` on the StatefulSet), or one without the sidecar (it cannot report
   its member's generation, so it could never be bridged: it is re-rolled to get one).
2. A step begins only when the group is Stable and every pod of the set is Ready: the highest ordinal outdated pod
   is deleted after its member (id, generation, instance id: from its sidecar) is persisted with the bridge.
3. A step ends when the bridge ended "rejoined" (the instance id answered with a new member id: the app is back
   in the same generation) and the replacement pod (another uid) is Ready. Any other end of the bridge (a foreign
   rebalance, the member expired, the deadline) or `maxRestartSeconds` overrun pauses the rollout, with why.
4. A paused rollout stays paused until the target changes (a new revision or restart request).

`plan(...)` decides; the runtime reads the sidecar, persists, deletes and runs the bridge.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from vigil_operator.domain.conditions import rfc3339
from vigil_operator.domain.spec import ConsumerGroupSpec, Membership, RestartStrategy, WorkloadKind
from vigil_operator.domain.status import RolloutPhase, RolloutStatus

ON_DELETE = "OnDelete"
RESTART_ANNOTATION = "vigil.dev/restart-requested-at"


@dataclass(frozen=True)
class SetFacts:
    """The StatefulSet as the API shows it."""

    update_strategy: str
    update_revision: str
    replicas: int
    restart_requested_at: datetime | None = None


@dataclass(frozen=True)
class SetPod:
    name: str
    ordinal: int
    uid: str
    revision: str
    """The `controller-revision-hash` label."""
    ready: bool
    injected: bool
    """It runs the sidecar (the rollout needs it to learn the member's generation)."""
    created_at: datetime | None = None
    deleting: bool = False
    instance_id: str | None = None


@dataclass(frozen=True)
class GroupNow:
    stable: bool
    members: Mapping[str, str]
    """instance id → member id, as DescribeGroups shows them now."""


@dataclass(frozen=True)
class BeginStep:
    """Read the pod's member from its sidecar, persist it with a bridge, delete the pod (uid precondition)."""

    pod: str
    uid: str
    instance_id: str | None


@dataclass(frozen=True)
class Note:
    """A Kubernetes Event on the ConsumerGroup."""

    type: str
    reason: str
    message: str


Action = BeginStep | Note


@dataclass(frozen=True)
class Refusal:
    """Why no rollout can run (a ConfigValid=False reason and message)."""

    reason: str
    message: str


def refusal(spec: ConsumerGroupSpec, workload: SetFacts | None) -> Refusal | None:
    """Coordinated restarts need a static group on a StatefulSet that declares OnDelete."""
    if spec.restart.strategy is not RestartStrategy.COORDINATED:
        return None
    if spec.membership is not Membership.STATIC or spec.workload.kind is not WorkloadKind.STATEFUL_SET:
        return Refusal("CoordinatedNeedsStaticStatefulSet",
                       "restart.strategy Coordinated needs membership static on a StatefulSet")  # fmt: skip
    if workload is None:
        return Refusal("WorkloadNotFound", f"StatefulSet {spec.workload.name} not found")
    if workload.update_strategy != ON_DELETE:
        return Refusal(
            "UpdateStrategyNotOnDelete",
            f"StatefulSet {spec.workload.name} has updateStrategy {workload.update_strategy}: set OnDelete so vigil"
            " restarts its pods one at a time without a rebalance (vigil never writes it: Helm and GitOps would"
            " revert it)",
        )
    return None


def target(workload: SetFacts) -> str:
    """What the rollout rolls to: the revision, and the restart request when there is one."""
    if workload.restart_requested_at is None:
        return workload.update_revision
    return f"{workload.update_revision}+restart@{rfc3339(workload.restart_requested_at)}"


def outdated(workload: SetFacts, pod: SetPod) -> bool:
    if pod.revision != workload.update_revision or not pod.injected:
        return True
    asked = workload.restart_requested_at
    return asked is not None and (pod.created_at is None or pod.created_at < asked)


def plan(  # noqa: PLR0911 - one return per stage of a step, in order
    spec: ConsumerGroupSpec,
    workload: SetFacts,
    pods: Sequence[SetPod],
    group: GroupNow,
    previous: RolloutStatus | None,
    *,
    bridge_outcome: str | None,
    now: datetime,
) -> tuple[RolloutStatus | None, list[Action]]:
    """The rollout after this resync, and what to do. `bridge_outcome`: how the current step's bridge ended (None
    while it runs or when there is none)."""
    goal = target(workload)
    mine = sorted((p for p in pods if p.ordinal < workload.replicas), key=lambda p: p.ordinal)
    stale = [p for p in mine if outdated(workload, p)]
    state = previous if previous is not None and previous.target_revision == goal else None
    if state is None:
        if not stale:  # the target is what runs already: say so (`vigil rollout status` compares targets)
            return RolloutStatus(target_revision=goal, phase=RolloutPhase.COMPLETE, message="nothing to restart"), []
        state = RolloutStatus(target_revision=goal, phase=RolloutPhase.ROLLING, total=len(stale))
        notes: list[Action] = [Note("Normal", "RolloutStarted",
                                    f"restarting {len(stale)} pod(s) one at a time for {goal}")]  # fmt: skip
    else:
        notes = []
    if state.phase is not RolloutPhase.ROLLING:
        return state, notes
    if state.current_pod is not None:
        state, ended = _step(spec, state, mine, group, bridge_outcome=bridge_outcome, now=now)
        if state.phase is RolloutPhase.PAUSED:
            return state, [*notes, Note("Warning", "RolloutPaused", state.message)]
        if not ended:
            return state, notes
        notes.append(Note("Normal", "RolloutStep", state.message))
        stale = [p for p in stale if p.name != ended]
    if not stale:
        done = _with(state, phase=RolloutPhase.COMPLETE, current_pod=None, message=f"{state.done} pod(s) restarted")
        return done, [*notes, Note("Normal", "RolloutComplete", f"{goal}: {done.message} with no rebalance")]
    waiting = _not_ready(mine, group)
    if waiting:
        return _with(state, message=waiting), notes
    pod = max(stale, key=lambda p: p.ordinal)
    begun = _with(state, current_pod=pod.name, old_pod_uid=pod.uid, old_member_id=None, bridge=None,
                    step_started_at=rfc3339(now), message=f"restarting {pod.name}")  # fmt: skip
    return begun, [*notes, BeginStep(pod.name, pod.uid, pod.instance_id)]


def _step(
    spec: ConsumerGroupSpec, state: RolloutStatus, pods: Sequence[SetPod], group: GroupNow, *,
    bridge_outcome: str | None, now: datetime,
) -> tuple[RolloutStatus, str | None]:  # fmt: skip
    """The current step: (state, the pod whose step ended now or None)."""
    name = state.current_pod or ""
    if bridge_outcome is not None and bridge_outcome != "rejoined":
        return _paused(state, f"{name}: the bridge ended {bridge_outcome!r}; the member was not kept"), None
    started = _time(state.step_started_at)
    if started is not None and (now - started).total_seconds() > spec.restart.max_restart_seconds:
        limit = spec.restart.max_restart_seconds
        return _paused(state, f"{name}: not back within maxRestartSeconds ({limit:g}s)"), None
    replacement = next((p for p in pods if p.name == name and p.uid != state.old_pod_uid), None)
    back = replacement is not None and replacement.ready and not replacement.deleting
    instance = replacement.instance_id if replacement is not None else None
    rejoined = (
        bridge_outcome == "rejoined"
        and instance is not None
        and group.members.get(instance) not in (None, state.old_member_id)
        and group.stable
    )
    if not (back and rejoined):
        return state, None
    done = state.done + 1
    message = f"{name} restarted ({done}/{state.total}): back in the same generation"
    return _with(state, done=done, current_pod=None, old_pod_uid=None, old_member_id=None, bridge=None,
                   step_started_at=None, message=message), name  # fmt: skip


def subscription_change(before: Sequence[str] | None, after: Sequence[str]) -> str | None:
    """What changed in the subscribed topics across a rollout ("+t2 -t1"), None when nothing (or nothing known)."""
    if before is None:
        return None
    added, removed = sorted(set(after) - set(before)), sorted(set(before) - set(after))
    if not added and not removed:
        return None
    return " ".join([*(f"+{t}" for t in added), *(f"-{t}" for t in removed)])


def _not_ready(pods: Sequence[SetPod], group: GroupNow) -> str:
    """Why a step cannot begin now ("" when it can)."""
    if not group.stable:
        return "waiting for the group to be Stable"
    unready = [p.name for p in pods if not p.ready or p.deleting]
    return f"waiting for {', '.join(unready)} to be Ready" if unready else ""


def _paused(state: RolloutStatus, message: str) -> RolloutStatus:
    return _with(state, phase=RolloutPhase.PAUSED, message=message)


def _with(state: RolloutStatus, **changes: Any) -> RolloutStatus:
    return state.model_copy(update=changes)


def _time(stamp: str | None) -> datetime | None:
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
