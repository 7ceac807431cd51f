"""Coordinated restarts carried out: the plan (domain.rollout) each resync, its actions done in order — a step's
member persisted with its bridge before its pod is deleted, the bridges run (vigil_operator.rollouts), the
KIP-848 group's session timeout raised for the rollout and restored after it, one deliberate rebalance when the
subscriptions changed across it. Owns the running bridges."""

import asyncio
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from vigil_core import events, rules
from vigil_core.bridge import engine as bridge
from vigil_core.kafka.group_client import GroupClientError
from vigil_core.kafka.model import GroupState
from vigil_core.kafka.outcomes import Reaction
from vigil_core.kafka.security import KafkaConnection
from vigil_operator.brokers import Brokers
from vigil_operator.domain import conditions, rollout
from vigil_operator.domain.reconcile import GroupFacts, Notice, PodFacts
from vigil_operator.domain.spec import ConsumerGroupSpec, RestartStrategy
from vigil_operator.domain.status import ConditionType, ConsumerGroupStatus, RolloutPhase, RolloutStatus
from vigil_operator.k8s.api import KubeApi, KubeError
from vigil_operator.metrics import OperatorMetrics
from vigil_operator.rollouts import Rollouts, StepRefusedError
from vigil_operator.shells.base import Post, StopFlag, dump, step
from vigil_operator.shells.events import Emitter

log = logging.getLogger(__name__)
RESUBSCRIBE_HOLD_SECONDS = 30.0
"""The longest the deliberate rebalance waits for the removed member (it is back within a heartbeat interval)."""


class _StepRefusedError(Exception):
    """A step could not begin: the rollout pauses with the message, from `state` (what was persisted so far)."""

    def __init__(self, state: RolloutStatus, message: str) -> None:
        super().__init__(message)
        self.state = state
        self.message = message


@dataclass(frozen=True)
class _Target:
    """The ConsumerGroup a rollout moves, and the status its steps persist their state in."""

    namespace: str
    name: str
    uid: str
    status: ConsumerGroupStatus


class RolloutShell:
    def __init__(
        self, kube: KubeApi, brokers: Brokers, metrics: OperatorMetrics, emitter: Emitter, bridges: Rollouts
    ) -> None:
        self.kube = kube
        self.brokers = brokers
        self.metrics = metrics
        self.emitter = emitter
        self.bridges = bridges

    async def workload(
        self, namespace: str, spec: ConsumerGroupSpec
    ) -> tuple[rollout.SetFacts | None, rollout.Refusal | None]:
        """The StatefulSet of a Coordinated restart, and why a rollout cannot run (read only for that strategy)."""
        if spec.restart.strategy is not RestartStrategy.COORDINATED:
            return None, None
        try:
            workload = await self.kube.statefulset(namespace, spec.workload.name or "")
        except KubeError as exc:
            return None, rollout.Refusal("WorkloadUnreadable", str(exc))
        return workload, rollout.refusal(spec, workload)

    async def roll(
        self, body: Mapping[str, Any], spec: ConsumerGroupSpec, status: ConsumerGroupStatus,
        workload: rollout.SetFacts | None, *, facts: GroupFacts, pods: list[PodFacts], connection: KafkaConnection,
        now: datetime, post: Post, stop: StopFlag | None,
    ) -> ConsumerGroupStatus:  # fmt: skip
        """A coordinated restart's next move (domain.rollout), carried out; the status with the rollout. Resuming a
        bridge, each action of the plan and the end of a rollout are steps: none begins once `stop` is set (a step
        begun ends: a pod is deleted only after its bridge is persisted)."""
        meta = body["metadata"]
        uid, generation = str(meta["uid"]), int(meta.get("generation") or 0)
        if spec.restart.strategy is not RestartStrategy.COORDINATED:
            self.bridges.stop(uid)
            return status
        problem = rollout.refusal(spec, workload)
        if problem is not None or workload is None:
            self.bridges.stop(uid)
            reason, message = (problem.reason, problem.message) if problem else ("WorkloadUnreadable", "")
            return _restart(status, "False", reason, message, generation=generation, now=now)
        current = status.rollout
        step(stop, "before its rollout move")
        self._resume(uid, spec, current, connection)
        self.bridges.observe(uid, facts.view)
        members = {m.instance_id: m.member_id for m in facts.view.members if m.instance_id}
        group = rollout.GroupNow(stable=facts.view.state is GroupState.STABLE, members=members)
        set_pods = [_set_pod(p, p.ordinal) for p in pods if p.ordinal is not None]
        kip848 = spec.client.group_protocol is rules.GroupProtocol.CONSUMER
        unbridged = current is not None and current.current_pod is not None and not current.bridge
        if kip848 or unbridged:  # no bridge: the step ends when the instance id is back under a new member
            kept = _replaced(current, set_pods, members, gone_fails=kip848)
        else:
            kept = self.bridges.outcome(uid)
        new, actions = rollout.plan(spec, workload, set_pods, group, current, bridge_outcome=kept, now=now)
        target = _Target(str(meta["namespace"]), str(meta["name"]), uid, status)
        for action in actions:
            step(stop, "amid its rollout move")
            if (told := rollout.note(action)) is not None:
                post(told)
            match action:
                case rollout.Started():
                    new = new.model_copy(
                        update={"subscribed_before": await self.brokers.subscriptions(connection, spec.group_id)}
                    )
                case rollout.BeginStep():
                    new = await self._begin(target, spec, new, action, facts=facts, pods=pods, members=members,
                                            connection=connection, post=post)  # fmt: skip
                case rollout.Completed():
                    step(stop, "before ending the rollout")
                    new = await self._resubscribe(spec, new, facts, connection, post, namespace=target.namespace,
                                                  now=now)  # fmt: skip
        if new.phase is not RolloutPhase.ROLLING and new.session_restore is not None:
            step(stop, "before restoring the session timeout")
            new = await self._restore_session(spec, new, connection, post)
        if new.current_pod is None or new.phase is not RolloutPhase.ROLLING:
            self.bridges.stop(uid)
        return _with_rollout(status, new, generation=generation, now=now)

    async def _begin(
        self, target: _Target, spec: ConsumerGroupSpec, state: RolloutStatus, begin: rollout.BeginStep, *,
        facts: GroupFacts, pods: list[PodFacts], members: Mapping[str, str], connection: KafkaConnection, post: Post,
    ) -> RolloutStatus:  # fmt: skip
        """A step begun (KIP-848: with the group's session raised; else with a bridge, or without one for a pod that
        has no sidecar yet), or the rollout paused (`rollout.pause`) with why it could not begin."""
        try:
            if spec.client.group_protocol is rules.GroupProtocol.CONSUMER:
                return await self._begin_raised_step(target, spec, state, begin, facts=facts, members=members,
                                                     connection=connection, post=post)  # fmt: skip
            pod = next(p for p in pods if p.name == begin.pod)
            if pod.sidecar_url is None:
                return await self._begin_unbridged_step(target, state, begin, members=members, post=post)
            return await self._begin_step(target, spec, state, pod, members=members, connection=connection,
                                          post=post)  # fmt: skip
        except _StepRefusedError as refused:
            paused, told = rollout.pause(refused.state, refused.message)
            post(rollout.note(told))
            return paused

    async def _persist(self, target: _Target, state: RolloutStatus) -> None:
        """The step's state in status before the act it guards (an operator restarting mid-step finds it there)."""
        await self.kube.apply_status(
            target.namespace, target.name, dump(target.status.model_copy(update={"rollout": state}))
        )

    async def _delete(self, target: _Target, state: RolloutStatus, pod: str, uid: str) -> None:
        """Delete the step's pod (uid precondition); refused: the rollout pauses from `state`."""
        try:
            await self.kube.delete_pod(target.namespace, pod, uid)
        except KubeError as exc:
            raise _StepRefusedError(state, str(exc)) from None

    async def _begin_unbridged_step(
        self, target: _Target, state: RolloutStatus, begin: rollout.BeginStep, *, members: Mapping[str, str],
        post: Post,
    ) -> RolloutStatus:  # fmt: skip
        """A pod re-rolled to get the sidecar: no generation to bridge with, deleted as it is."""
        state = state.model_copy(update={"old_member_id": members.get(begin.instance_id or ""), "bridge": None})
        await self._persist(target, state)
        await self._delete(target, state, begin.pod, begin.uid)
        self.metrics.rollout_restarts.labels("none").inc()
        post(Notice("Normal", "RolloutStep", f"deleted {begin.pod}: it has no sidecar, so it is restarted without"
                    " a bridge to get one (a restart longer than the session timeout rebalances)"))  # fmt: skip
        return state

    async def _begin_step(
        self, target: _Target, spec: ConsumerGroupSpec, state: RolloutStatus, pod: PodFacts, *,
        members: Mapping[str, str], connection: KafkaConnection, post: Post,
    ) -> RolloutStatus:  # fmt: skip
        """Read the member from the pod's sidecar, persist it with its bridge, delete the pod, start bridging."""
        try:
            member = await self.bridges.member_of(pod.sidecar_url, pod.name)
            if members.get(member.instance_id or "") != member.member_id:
                raise StepRefusedError(f"{pod.name}: its sidecar's member {member.member_id} is not the one the group"
                                       f" has for instance {member.instance_id}")  # fmt: skip
            bridged = self.bridges.begin(spec, member, time.time())
        except StepRefusedError as exc:
            raise _StepRefusedError(state, str(exc)) from None
        state = state.model_copy(update={"old_member_id": member.member_id, "bridge": bridged.to_json()})
        await self._persist(target, state)
        await self._delete(target, state.model_copy(update={"bridge": None}), pod.name, pod.uid)
        self.bridges.run(target.uid, bridged, connection, resumed=False)
        self.metrics.rollout_restarts.labels("heartbeats").inc()
        post(Notice("Normal", "RolloutStep", f"deleted {pod.name}; heartbeating for member {member.member_id}"
                    f" (generation {member.generation}) until its replacement takes it back"))  # fmt: skip
        return state

    async def _begin_raised_step(
        self, target: _Target, spec: ConsumerGroupSpec, state: RolloutStatus, begin: rollout.BeginStep, *,
        facts: GroupFacts, members: Mapping[str, str], connection: KafkaConnection, post: Post,
    ) -> RolloutStatus:  # fmt: skip
        """KIP-848 groups have no classic heartbeat to bridge with: their session timeout lives on the group. Raise
        it (once per rollout; the original is kept in status to restore), let every member heartbeat once so its
        session timer takes the raised value (`rollout.session_raise_wait`), then delete the pod: its member
        outlives the restart."""
        old = members.get(begin.instance_id or "")
        if old is None:
            message = f"{begin.pod}: no member holds its instance id {begin.instance_id}: nothing to keep"
            raise _StepRefusedError(state, message)
        raise_ = rules.session_raise(round(spec.restart.max_restart_seconds * 1000), facts.limits)
        raised = raise_.session_ms
        if raise_.note is not None:
            post(Notice("Warning", "SessionRaiseCapped", f"{begin.pod}: the group's session timeout {raise_.note}"))
        try:
            if state.session_restore is None:
                timings = await self.brokers.group_timings(connection, spec.group_id)
                before = timings.session_override_ms
                state = state.model_copy(update={"session_restore": "" if before is None else str(before)})
                await self._persist(target, state)
                await self.brokers.set_group_session(connection, spec.group_id, raised)
                await asyncio.sleep(rollout.session_raise_wait(timings.heartbeat_ms))
        except GroupClientError as exc:
            message = f"{begin.pod}: could not raise the group's session timeout to {raised} ms: {exc}"
            raise _StepRefusedError(state, message) from None
        state = state.model_copy(update={"old_member_id": old})
        await self._persist(target, state)
        await self._delete(target, state, begin.pod, begin.uid)
        self.metrics.rollout_restarts.labels("session-raised").inc()
        post(Notice("Normal", "RolloutStep", f"deleted {begin.pod}; the group's session timeout is raised to"
                    f" {raised} ms so its member {old} waits for the replacement"))  # fmt: skip
        return state

    async def _restore_session(
        self, spec: ConsumerGroupSpec, done: RolloutStatus, connection: KafkaConnection, post: Post
    ) -> RolloutStatus:
        """The rollout ended (complete or paused): the KIP-848 group's own session timeout back as it was."""
        original = None if not done.session_restore else int(done.session_restore)
        try:
            await self.brokers.set_group_session(connection, spec.group_id, original)
        except GroupClientError as exc:
            post(Notice("Warning", "SessionNotRestored", f"consumer.session.timeout.ms of {spec.group_id}: {exc}"))
            return done
        return done.model_copy(update={"session_restore": None})

    def _resume(
        self, uid: str, spec: ConsumerGroupSpec, current: RolloutStatus | None, connection: KafkaConnection
    ) -> None:
        """An operator restart mid-step: the bridge persisted in status runs again."""
        if current is None or current.phase is not RolloutPhase.ROLLING or not current.bridge:
            return
        if self.bridges.running(uid):
            return
        try:
            self.bridges.run(uid, bridge.BridgeState.from_json(current.bridge), connection, resumed=True)
        except bridge.BridgeDecodeError as exc:
            log.warning("%s: the persisted rollout bridge is unreadable: %s", spec.group_id, exc)

    async def _resubscribe(
        self, spec: ConsumerGroupSpec, done: RolloutStatus, facts: GroupFacts, connection: KafkaConnection, post: Post,
        *, namespace: str, now: datetime,
    ) -> RolloutStatus:  # fmt: skip
        """Subscriptions that changed across the rollout get one deliberate rebalance: a static rejoin in a Stable
        group keeps the old assignment, so new topics would stay unconsumed (compare-and-remove of one member, the
        join held open until it is back: GroupClient.rebalance_removing)."""
        after = await self.brokers.subscriptions(connection, spec.group_id)
        change = rollout.subscription_change(done.subscribed_before, after or ())
        if after is None or change is None or not facts.view.members:
            return done
        member = min(facts.view.members, key=lambda m: (m.instance_id or "", m.member_id))
        reason = f"vigil: subscriptions changed across the rollout ({change}): one rebalance assigns them"
        limits = facts.limits
        hold = min(max(RESUBSCRIBE_HOLD_SECONDS, limits.min_session_ms / 1000), limits.max_session_ms / 1000)
        held = await self.brokers.rebalance_removing(connection, spec.group_id, member, reason,
                                                      protocol=facts.view.assignor, hold_seconds=hold)  # fmt: skip
        outcome = held.removal
        kind = "Normal" if outcome.reaction is Reaction.DONE and held.rejoined else "Warning"
        back = "it rejoined within the same rebalance" if held.rejoined else (
            f"not back within {hold:.0f}s: its return may rebalance again" if held.hold.reaction is Reaction.DONE
            else f"the join could not be held open for it ({held.hold.name})")  # fmt: skip
        self.metrics.deliberate_rebalances.labels(str(held.rejoined).lower()).inc()
        post(Notice(kind, "SubscriptionRebalance", f"{reason} (removed {member.member_id}: {outcome.name}; {back})"))
        if outcome.reaction is Reaction.DONE:
            self.emitter.emit(connection, events.MemberRemoved(
                time=now, cluster=facts.cluster_id, group=spec.group_id, source="operator", namespace=namespace,
                payload=events.MemberRemovedPayload(
                    member=events.MemberRef(member_id=member.member_id, instance_id=member.instance_id),
                    cause="subscription-change",
                ),
            ))  # fmt: skip
        return done.model_copy(update={"message": f"{done.message}; subscriptions {change}: one rebalance"})

    def stop(self, uid: str) -> None:
        self.bridges.stop(uid)

    def close(self) -> None:
        self.bridges.close()


def _replaced(
    current: RolloutStatus | None, pods: list[rollout.SetPod], members: Mapping[str, str], *, gone_fails: bool
) -> str | None:
    """Steps without a bridge (KIP-848, or a pod re-rolled to get its sidecar): "rejoined" once the step's instance
    id is held by a new member, None meanwhile; with `gone_fails`, "member-gone" when nobody holds it (the raised
    session did not keep the member)."""
    if current is None or current.current_pod is None:
        return None
    instance = next((p.instance_id for p in pods if p.name == current.current_pod), None)
    if instance is None:
        return None
    holder = members.get(instance)
    if holder is None:
        return "member-gone" if gone_fails else None
    return "rejoined" if holder != current.old_member_id else None


def _set_pod(pod: PodFacts, ordinal: int) -> rollout.SetPod:
    return rollout.SetPod(
        pod.name, ordinal, pod.uid, pod.revision, pod.ready, pod.sidecar_url is not None, pod.created_at,
        pod.deleting, pod.instance_id,
    )  # fmt: skip


def _with_rollout(
    status: ConsumerGroupStatus, new: RolloutStatus, *, generation: int, now: datetime
) -> ConsumerGroupStatus:
    """The status with the rollout and its RestartInProgress condition."""
    status = status.model_copy(update={"rollout": new})
    if new.phase is RolloutPhase.ROLLING:
        message = f"{new.done}/{new.total} restarted; {new.message}"
        return _restart(status, "True", "Rolling", message, generation=generation, now=now)
    reason = "RolloutPaused" if new.phase is RolloutPhase.PAUSED else "RolloutComplete"
    return _restart(status, "False", reason, new.message, generation=generation, now=now)


def _restart(
    status: ConsumerGroupStatus, truth: conditions.Truth, reason: str, message: str, *, generation: int, now: datetime
) -> ConsumerGroupStatus:
    cs = conditions.with_condition(status.conditions, ConditionType.RESTART_IN_PROGRESS, truth, reason, message,
                                   generation=generation, now=now)  # fmt: skip
    return status.model_copy(update={"conditions": cs})
