"""Coordinated restarts of a static group's StatefulSet, one pod at a time, with no rebalance. Pure.

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

`plan(...)` decides and returns typed actions (`Started`, `StepEnded`, `Paused`, `Completed`, `BeginStep`), each
told by the Kubernetes Event `note(action)` gives (none for `BeginStep`: the runtime tells it once its pod is
deleted). The runtime reads the sidecar, persists, deletes and runs the bridge; it never reads the text of a note.
A step that cannot begin pauses the rollout through `pause`, as the plan does.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, overload

from vigil_operator.domain.conditions import rfc3339
from vigil_operator.domain.reconcile import Notice
from vigil_operator.domain.spec import ConsumerGroupSpec, RestartStrategy
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
class Started:
    """A rollout to `target` began: the subscriptions are recorded now (a change across the rollout gets one
    rebalance at its end)."""

    target: str
    pods: int


@dataclass(frozen=True)
class StepEnded:
    """The current step's pod is back in the same generation."""

    pod: str
    message: str


@dataclass(frozen=True)
class Paused:
    """The rollout paused (a step went wrong or could not begin); it stays paused until the target changes."""

    message: str


@dataclass(frozen=True)
class Completed:
    """Nothing is outdated any more: the subscriptions are compared with those at the start."""

    target: str
    message: str


@dataclass(frozen=True)
class BeginStep:
    """Read the pod's member from its sidecar, persist it with a bridge, delete the pod (uid precondition). The
    runtime tells it (a RolloutStep Event) once done, or pauses the rollout (`pause`)."""

    pod: str
    uid: str
    instance_id: str | None


Action = Started | StepEnded | Paused | Completed | BeginStep


@overload
def note(action: Started | StepEnded | Paused | Completed) -> Notice: ...
@overload
def note(action: Action) -> Notice | None: ...


def note(action: Action) -> Notice | None:
    """The Kubernetes Event that tells `action` (None for a step begun: the runtime tells it once its pod is
    deleted, or pauses the rollout)."""
    match action:
        case Started(target=goal, pods=count):
            return Notice("Normal", "RolloutStarted", f"restarting {count} pod(s) one at a time for {goal}")
        case StepEnded(message=message):
            return Notice("Normal", "RolloutStep", message)
        case Paused(message=message):
            return Notice("Warning", "RolloutPaused", message)
        case Completed(target=goal, message=message):
            return Notice("Normal", "RolloutComplete", f"{goal}: {message} with no rebalance")
    return None


@dataclass(frozen=True)
class Refusal:
    """Why no rollout can run (a ConfigValid=False reason and message)."""

    reason: str
    message: str


def refusal(spec: ConsumerGroupSpec, workload: SetFacts | None) -> Refusal | None:
    """Coordinated restarts need a StatefulSet that declares OnDelete (a static group on a StatefulSet is the spec's
    own rule: `spec.impossible`, the CRD's CEL)."""
    if spec.restart.strategy is not RestartStrategy.COORDINATED:
        return None
    if workload is None:
        return Refusal(
            "WorkloadNotFound",
            f"spec.workload.name: StatefulSet {spec.workload.name} not found (restart.strategy is"
            " Coordinated: vigil restarts that StatefulSet's pods)",
        )
    if workload.update_strategy != ON_DELETE:
        return Refusal(
            "UpdateStrategyNotOnDelete",
            f"spec.restart.strategy: Coordinated needs StatefulSet {spec.workload.name} to declare updateStrategy"
            f" OnDelete, it has {workload.update_strategy}: set OnDelete so vigil"
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
) -> tuple[RolloutStatus, list[Action]]:
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
        actions: list[Action] = [Started(goal, len(stale))]
    else:
        actions = []
    if state.phase is not RolloutPhase.ROLLING:
        return state, actions
    if state.current_pod is not None:
        state, ended = _step(spec, state, mine, group, bridge_outcome=bridge_outcome, now=now)
        if isinstance(ended, Paused):
            return state, [*actions, ended]
        if ended is None:
            return state, actions
        actions.append(ended)
        stale = [p for p in stale if p.name != ended.pod]
    if not stale:
        done = _with(state, phase=RolloutPhase.COMPLETE, current_pod=None, message=f"{state.done} pod(s) restarted")
        return done, [*actions, Completed(goal, done.message)]
    waiting = _not_ready(mine, group)
    if waiting:
        return _with(state, message=waiting), actions
    pod = max(stale, key=lambda p: p.ordinal)
    begun = _with(state, current_pod=pod.name, old_pod_uid=pod.uid, old_member_id=None, bridge=None,
                    step_started_at=rfc3339(now), message=f"restarting {pod.name}")  # fmt: skip
    return begun, [*actions, BeginStep(pod.name, pod.uid, pod.instance_id)]


def pause(state: RolloutStatus, message: str, **changes: Any) -> tuple[RolloutStatus, Paused]:
    """The rollout paused with `message` (and `changes`, e.g. a bridge that never ran dropped), and the action that
    tells it: the one way a rollout pauses, whether its plan or the runtime (a step that could not begin) decides."""
    return _with(state, phase=RolloutPhase.PAUSED, message=message, **changes), Paused(message)


def _step(
    spec: ConsumerGroupSpec, state: RolloutStatus, pods: Sequence[SetPod], group: GroupNow, *,
    bridge_outcome: str | None, now: datetime,
) -> tuple[RolloutStatus, StepEnded | Paused | None]:  # fmt: skip
    """The current step: (state, how it ended now: its pod is back or the rollout paused; None: it goes on)."""
    name = state.current_pod or ""
    if bridge_outcome is not None and bridge_outcome != "rejoined":
        return pause(state, f"{name}: the bridge ended {bridge_outcome!r}; the member was not kept")
    started = _time(state.step_started_at)
    if started is not None and (now - started).total_seconds() > spec.restart.max_restart_seconds:
        limit = spec.restart.max_restart_seconds
        return pause(state, f"{name}: not back within maxRestartSeconds ({limit:g}s)")
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
    ended = _with(state, done=done, current_pod=None, old_pod_uid=None, old_member_id=None, bridge=None,
                  step_started_at=None, message=message)  # fmt: skip
    return ended, StepEnded(name, message)


HEARTBEAT_MARGIN_SECONDS = 0.5
"""A heartbeat's round trip, on top of the interval: its request may be on its way when the session is raised."""


def session_raise_wait(heartbeat_ms: int) -> float:
    """Seconds from raising a KIP-848 group's session timeout until every member's session timer runs on it (the
    step's pod is deleted only then): the broker re-arms a member's session timer with the group's current session
    timeout at each heartbeat, so one heartbeat interval plus a round trip. A time wait, because it is the only
    signal: no answer shows when a member last heartbeated (ConsumerGroupDescribe has no such field, and a member's
    epoch moves only with its assignment), and the member's client is the app's, not vigil's."""
    return heartbeat_ms / 1000 + HEARTBEAT_MARGIN_SECONDS


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


def _with(state: RolloutStatus, **changes: Any) -> RolloutStatus:
    return state.model_copy(update=changes)


def _time(stamp: str | None) -> datetime | None:
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
