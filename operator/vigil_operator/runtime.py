"""One resync of one ConsumerGroup, end to end: gather the observation, decide (domain.reconcile), write.

Kept free of kopf so the handlers stay thin: they pass the CR body, the pods and claims from kopf's indexes,
and a callable that posts Kubernetes Events. Every failure ends as a condition on the CR, never an exception
into kopf (which would retry with backoff and log a traceback for what is a user's or a broker's problem).
"""

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, TypeVar

from pydantic import ValidationError

from vigil_core import events, rules
from vigil_core.bridge import engine as bridge
from vigil_core.budget import lease_api, ledger
from vigil_core.budget.lease_api import BudgetUnavailable
from vigil_core.kafka import model
from vigil_core.kafka.event_sink import EventSink
from vigil_core.kafka.group_client import GroupClientError
from vigil_core.kafka.model import GroupState, GroupType
from vigil_core.kafka.outcomes import Reaction
from vigil_core.kafka.security import KafkaConnection
from vigil_operator import credentials
from vigil_operator.brokers import Brokers
from vigil_operator.domain import claims, conditions, departures, node_loss, pacing, reconcile, rollout
from vigil_operator.domain.reconcile import GroupFacts, Notice, Observation, PodFacts, Unreachable
from vigil_operator.domain.spec import ConsumerGroupSpec, RestartStrategy, SpecError, parse_spec
from vigil_operator.domain.status import ConditionType, ConsumerGroupStatus, RolloutPhase, RolloutStatus
from vigil_operator.event_feed import EventFeed
from vigil_operator.k8s.api import KubeApi, KubeError
from vigil_operator.metrics import OperatorMetrics
from vigil_operator.rollouts import Rollouts, StepRefusedError
from vigil_operator.settings import OperatorSettings

log = logging.getLogger(__name__)
Post = Callable[[Notice], None]
RESUBSCRIBE_HOLD_SECONDS = 30.0
"""The longest the deliberate rebalance waits for the removed member (it is back within a heartbeat interval)."""
T = TypeVar("T")
Key = tuple[str, str]
"""A ConsumerGroup's (namespace, name)."""


class StopFlag(Protocol):
    """kopf's stop flag of a ConsumerGroup's resync loop (`kopf.DaemonStopped`): set when the operator pauses (a peer
    with a higher priority is alive), the ConsumerGroup is deleted or the operator exits."""

    def is_set(self) -> bool: ...

    @property
    def reason(self) -> object: ...

    def wait(self) -> Awaitable[object]: ...


class SyncStoppedError(Exception):
    """The resync gave way to its stop flag; the message says where (e.g. "before it acted")."""


def stopping(stop: StopFlag | None) -> str | None:
    """The stop reason in words once the flag is set (domain.pacing), None while it is not."""
    return None if stop is None or not stop.is_set() else pacing.stop_reason(stop.reason)


def _step(stop: StopFlag | None, where: str) -> None:
    """Raise SyncStoppedError(where) unless the resync may begin its next step (domain.pacing.may_begin_step)."""
    if not pacing.may_begin_step(stopping=stopping(stop)):
        raise SyncStoppedError(where)


async def _unless_stopped(stop: StopFlag | None, work: Awaitable[T]) -> T:
    """`work`, unless `stop` is set first (or already): then `work` is cancelled and SyncStoppedError raised. These
    are the waits before a resync acts (its turn, a Secret, the broker); its steps are checked by `_step`."""
    if stop is None:
        return await work
    task = asyncio.ensure_future(work)
    if stop.is_set():
        task.cancel()
        raise SyncStoppedError("before it acted")
    flag = asyncio.ensure_future(_flag(stop))
    try:
        await asyncio.wait({task, flag}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        flag.cancel()
    if task.done():
        return task.result()
    task.cancel()
    raise SyncStoppedError("before it acted")


async def _flag(stop: StopFlag) -> None:
    await stop.wait()


@dataclass
class Runtime:
    settings: OperatorSettings
    kube: KubeApi
    brokers: Brokers = field(default_factory=Brokers)
    metrics: OperatorMetrics = field(default_factory=OperatorMetrics)
    feeds: dict[KafkaConnection, EventFeed] = field(default_factory=dict)
    sinks: dict[KafkaConnection, EventSink] = field(default_factory=dict)
    _locks: dict[str, asyncio.Lock] = field(default_factory=dict)
    _budgets: dict[str, tuple[int, str]] = field(default_factory=dict)
    _sightings: dict[str, dict[str, departures.Sighting]] = field(default_factory=dict)
    """Per CR uid: when each member was first seen and the pod it belongs to (domain.departures)."""
    _crash_removed: dict[str, dict[str, datetime]] = field(default_factory=dict)
    """Per CR uid: instance id → when its crash-looping member was last removed."""
    _released: dict[str, set[str]] = field(default_factory=dict)
    """Per CR uid: KIP-848 static members (ids) whose instance id is released (by vigil or their own client)."""
    _suspects: dict[str, dict[str, node_loss.Suspect]] = field(default_factory=dict)
    """Per CR uid: members on a lost node being watched for progress (domain.node_loss)."""
    _noted: dict[str, str] = field(default_factory=dict)
    """The last problem logged per source: each is logged once until it changes."""
    syncs: int = 0
    rollouts: Rollouts = field(default_factory=Rollouts)
    departures_removed: int = 0
    """Members removed at once because their consumer was provably gone (domain.departures)."""
    departures_deferred: int = 0
    """Removals the eviction budget held back (a crash-looping member while the budget is spent)."""
    departures_released: int = 0
    """KIP-848 static members whose instance id was released at once because their consumer was provably gone."""
    _requests: dict[Key, asyncio.Event] = field(default_factory=dict)
    """Per ConsumerGroup: a resync asked of its loop (a spec change, a pod's event; domain.pacing)."""
    _resynced: dict[Key, int] = field(default_factory=dict)
    """Per ConsumerGroup: the spec generation its loop last resynced."""
    _states: dict[Key, GroupState] = field(default_factory=dict)
    """Per ConsumerGroup whose loop runs here: the group state its last resync wrote (the group-state metric)."""

    def requests(self, key: Key) -> asyncio.Event:
        """Set when a resync of the ConsumerGroup `key` is asked for; its loop clears it as it begins one."""
        return self._requests.setdefault(key, asyncio.Event())

    def request(self, key: Key) -> None:
        """Ask the ConsumerGroup's loop for a resync now. Nothing happens while no loop runs (paused, or not yet
        started): a loop begins with a resync."""
        self.requests(key).set()

    def resynced(self, key: Key, generation: int | None = None) -> int | None:
        """The spec generation the loop of `key` last resynced (None: none yet); with `generation`, record it."""
        if generation is not None:
            self._resynced[key] = generation
        return self._resynced.get(key)

    def release(self, key: Key, uid: str) -> None:
        """The ConsumerGroup's loop ended (paused, deleted, exiting): its rollout bridge stops heartbeating — the
        replica that acts next resumes it from the state persisted in status — and its requests are forgotten."""
        if self.rollouts.running(uid):
            log.info("%s/%s: its rollout bridge stops with its resync loop (the replica that acts resumes it)", *key)
        self.rollouts.stop(uid)
        self._requests.pop(key, None)
        self._resynced.pop(key, None)
        if self._states.pop(key, None) is not None:
            self.metrics.count_states(self._states.values())

    async def sync(
        self, body: Mapping[str, Any], pods: Iterable[PodFacts], others: Iterable[claims.Claim], post: Post,
        stop: StopFlag | None = None,
    ) -> ConsumerGroupStatus:  # fmt: skip
        """Resync one CR (one at a time per CR: a resync kopf gave up waiting for may still be ending its step).
        Raises SyncStoppedError when `stop` is set while it waits (its turn, a Secret, the broker) or between its
        steps (domain.pacing): once stopped — paused, deleted, exiting — it begins no act and no write."""
        lock = self._locks.setdefault(str(body["metadata"]["uid"]), asyncio.Lock())
        await _unless_stopped(stop, lock.acquire())
        try:
            status = await self._sync(body, list(pods), list(others), post, stop)
        finally:
            lock.release()
        self.syncs += 1
        self.metrics.resyncs.inc()
        key = (str(body["metadata"]["namespace"]), str(body["metadata"]["name"]))
        self._states[key] = model.by_name(GroupState, status.state or "", GroupState.UNKNOWN)
        self.metrics.count_states(self._states.values())
        return status

    async def _sync(
        self, body: Mapping[str, Any], pods: list[PodFacts], others: list[claims.Claim], post: Post,
        stop: StopFlag | None,
    ) -> ConsumerGroupStatus:  # fmt: skip
        meta = body["metadata"]
        namespace, name, generation = meta["namespace"], meta["name"], int(meta.get("generation") or 0)
        previous = _previous(body)
        now = datetime.now(UTC)
        try:
            spec = parse_spec(dict(body.get("spec") or {}))
        except SpecError as exc:
            _step(stop, "before it acted")
            return await self._invalid(body, previous, str(exc), now=now, post=post)
        try:
            connection = await _unless_stopped(
                stop, credentials.connection_for(spec.kafka, namespace, self.kube, self.settings.state_dir / "secrets")
            )
            kip848 = spec.client.group_protocol is rules.GroupProtocol.CONSUMER
            observed = self.brokers.observe(connection, spec.group_id, kip848=kip848)
            facts: GroupFacts | Unreachable = await _unless_stopped(stop, observed)
        except KubeError as exc:
            connection, facts = None, Unreachable("SecretMissing", str(exc))
        except (ValueError, ValidationError) as exc:
            connection, facts = None, Unreachable("InvalidKafkaSettings", _one_line(exc))
        owner = None
        if isinstance(facts, GroupFacts):
            created = str(meta.get("creationTimestamp") or "")
            mine = claims.Claim(created, namespace, name, facts.cluster_id, spec.group_id)
            found = claims.owner([*others, mine], facts.cluster_id, spec.group_id)
            owner = found.ref if found is not None and found != mine else None
        if owner is None and isinstance(facts, GroupFacts) and connection is not None:
            await self._depart(namespace, spec, uid=str(meta["uid"]), facts=facts, pods=pods, connection=connection,
                               now=now, post=post, stop=stop)  # fmt: skip
        stalls = self._stalls(connection, spec, facts, now)
        workload, problem = await self._workload(namespace, spec)
        config_problem = None if problem is None else (problem.reason, problem.message)
        observation = Observation(generation, spec, facts, pods, stalls, owner, config_problem)
        status, notices = reconcile.reconcile(previous, observation, now)
        if owner is None and isinstance(facts, GroupFacts) and connection is not None:
            status = await self._roll(body, spec, status, workload, facts=facts, pods=pods, connection=connection,
                                      now=now, post=post, stop=stop)  # fmt: skip
        if isinstance(facts, GroupFacts):
            uid = str(meta["uid"])
            self._sightings[uid] = departures.remember(self._sightings.get(uid, {}), status.members, now)
        _step(stop, "before writing the status")
        await self.kube.apply_status(namespace, name, _dump(status))
        for notice in notices:  # they tell what this status changed: they go with it
            post(notice)
        if (reason := stopping(stop)) is not None:
            log.info("resync of %s/%s stopped after writing the status: %s", namespace, name, reason)
        elif owner is None:
            await self._provision(body, spec, post)
            if isinstance(facts, GroupFacts) and connection is not None:
                self._snapshot(connection, namespace, spec, status, now)
        return status

    async def _depart(
        self, namespace: str, spec: ConsumerGroupSpec, *, uid: str, facts: GroupFacts, pods: list[PodFacts],
        connection: KafkaConnection, now: datetime, post: Post, stop: StopFlag | None,
    ) -> None:  # fmt: skip
        """Remove at once the members whose consumer is provably gone (domain.departures): an Event, an event on
        the events topic and a count each; KIP-848 static ones are released instead (an Event and a count), unless
        their instance id is released already (ConsumerGroupDescribe, asked only then). The StatefulSet is read only
        when a static member's pod is gone. Each removal or release (with its budget record) is a step: none begins
        once `stop` is set."""
        sightings = self._sightings.get(uid, {})
        replicas = None
        if departures.needs_replicas(spec, sightings, pods) and spec.workload.name:
            try:
                found = await self.kube.statefulset(namespace, spec.workload.name)
                replicas = None if found is None else found.replicas
            except KubeError as exc:
                log.warning("departures of %s: %s", spec.group_id, exc)
                return
        present = {m.member_id: m.instance_id for m in facts.view.members}
        crashed = self._crash_removed.setdefault(uid, {})
        released = self._released[uid] = self._released.get(uid, set()) & present.keys()
        kip848 = facts.view.type is GroupType.CONSUMER

        def proven_now() -> list[departures.Departure]:
            return departures.departures(spec, sightings, present, pods, replicas=replicas, crash_removed=crashed,
                                         now=now, kip848=kip848, released=released)  # fmt: skip

        proven = proven_now()
        if any(d.action == "release" for d in proven):  # released by their own client (a graceful close): no more
            released |= await self.brokers.static_members_left(connection, spec.group_id) & present.keys()
            proven = proven_now()
        member_pods = {member_id: seen.pod for member_id, seen in sightings.items() if seen.pod is not None}
        watched = set(self._suspects.get(uid, {}))
        lost, self._suspects[uid] = node_loss.judge(
            facts.view.members, member_pods, await self._lost_nodes(pods), self._suspects.get(uid, {}),
            committed=facts.committed, end_offsets=facts.end_offsets,
            grace=timedelta(seconds=spec.liveness.node_lost_grace_seconds), now=now,
        )  # fmt: skip
        for member_id in self._suspects[uid].keys() - watched:
            log.info("%s: member %s is on a node that is not Ready: watching its commits", spec.group_id, member_id)
        removing = {d.member_id for d in proven}
        for gone in [*proven, *(d for d in lost if d.member_id not in removing)]:
            _step(stop, f"before {'releasing' if gone.action == 'release' else 'removing'} member {gone.member_id}")
            if not await self._budget_allows(namespace, spec, gone, post):
                continue
            if gone.action == "release":
                await self._release(spec, gone, connection, released, post)
                continue
            outcome = await self.brokers.remove(connection, spec.group_id, gone.member_id, gone.instance_id,
                                                gone.reason)  # fmt: skip
            log.info("%s: removing member %s (%s): %s", spec.group_id, gone.member_id, gone.reason, outcome.name)
            if gone.cause == "crash-loop" and gone.instance_id is not None:
                crashed[gone.instance_id] = now  # once per window, whatever the answer
            if outcome.reaction is Reaction.DONE:
                self.departures_removed += 1
                self.metrics.member_removals.labels(gone.cause).inc()
                post(Notice("Normal", "MemberRemoved", f"removed member {gone.member_id} at once: {gone.reason}"))
                self._emit(connection, events.MemberRemoved(
                    time=now, cluster=facts.cluster_id, group=spec.group_id, source="operator", namespace=namespace,
                    pod=gone.pod,
                    payload=events.MemberRemovedPayload(
                        member=events.MemberRef(member_id=gone.member_id, instance_id=gone.instance_id),
                        cause=gone.cause,
                    ),
                ))  # fmt: skip
            elif outcome.reaction in {Reaction.ALREADY_GONE, Reaction.NOTHING_TO_DO}:
                log.info("%s: member %s needed no removal (%s)", spec.group_id, gone.member_id, outcome.name)
            else:
                message = f"could not remove member {gone.member_id} ({gone.reason}): {outcome.name}: {outcome.message}"
                self.metrics.removal_failures.labels(gone.cause).inc()
                post(Notice("Warning", "MemberRemovalFailed", message))

    async def _release(self, spec: ConsumerGroupSpec, gone: departures.Departure, connection: KafkaConnection,
                       released: set[str], post: Post) -> None:  # fmt: skip
        """Release a KIP-848 static member's instance id for its replacement (compare-and-release); once per member
        unless the broker could not be asked."""
        assert gone.instance_id is not None  # a release is decided for static members only
        outcome = await self.brokers.release(connection, spec.group_id, gone.member_id, gone.instance_id)
        log.info("%s: releasing member %s (%s): %s", spec.group_id, gone.member_id, gone.reason, outcome.name)
        self.metrics.member_releases.labels(gone.cause, outcome.name).inc()
        if outcome.reaction is Reaction.DONE:
            released.add(gone.member_id)
            self.departures_released += 1
            post(Notice("Normal", "MemberReleased", f"released member {gone.member_id} at once: {gone.reason}"))
        elif outcome.reaction in {Reaction.ALREADY_GONE, Reaction.NOTHING_TO_DO}:  # gone, or replaced already
            released.add(gone.member_id)
        else:
            message = f"could not release member {gone.member_id} ({gone.reason}): {outcome.name}: {outcome.message}"
            post(Notice("Warning", "MemberReleaseFailed", message))

    def _note_once(self, source: str, message: str) -> None:
        if self._noted.get(source) != message:
            self._noted[source] = message
            log.warning("%s", message)

    async def _lost_nodes(self, pods: Iterable[PodFacts]) -> dict[str, node_loss.LostNode]:
        """pod → its node, for pods not Ready on a node that is not Ready (the node controller marks such pods not
        Ready, so Ready pods cost no read). Nodes that cannot be read are left out (logged once per problem)."""
        nodes: dict[str, node_loss.LostNode | None] = {}
        lost: dict[str, node_loss.LostNode] = {}
        for pod in pods:
            if pod.ready or pod.node is None:
                continue
            if pod.node not in nodes:
                try:
                    found = await self.kube.node(pod.node)
                except KubeError as exc:
                    self._note_once("nodes", f"node {pod.node} unreadable, lost-node cleanup is off: {exc}")
                    found = None
                nodes[pod.node] = None if found is None else node_loss.lost_node(found)
            if (node := nodes[pod.node]) is not None:
                lost[pod.name] = node
        return lost

    async def _budget_allows(self, namespace: str, spec: ConsumerGroupSpec, gone: departures.Departure,
                             post: Post) -> bool:  # fmt: skip
        """Record the removal (or release) in the group's eviction budget (the sidecars' Lease). A member proven gone
        is removed or released whatever the budget says, and even when the Lease cannot be read; one that may come
        back (crash loop) waits for room, and for a readable Lease."""
        proven = gone.cause not in ("crash-loop", "node-lost")
        answer = await lease_api.request_removal(
            self.kube.budget_store(namespace, spec.group_id), gone.pod or gone.member_id, gone.member_id,
            proven_gone=proven, max_concurrent=spec.liveness.max_concurrent_evictions, cooldown=spec.liveness.cooldown,
        )  # fmt: skip
        if isinstance(answer, ledger.Permit):
            return True
        if isinstance(answer, BudgetUnavailable) and proven:
            log.warning("%s: %s of %s not recorded in the budget (%s): %s", spec.group_id, gone.action, gone.member_id,
                        answer.cause, answer.message)  # fmt: skip
            return True
        self.departures_deferred += 1
        self.metrics.removals_deferred.labels(gone.cause).inc()
        post(Notice("Warning", "MemberRemovalDeferred", f"member {gone.member_id} ({gone.reason}) not removed yet:"
                    f" eviction budget: {answer.message}"))  # fmt: skip
        return False

    async def _workload(
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

    async def _roll(
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
            self.rollouts.stop(uid)
            return status
        problem = rollout.refusal(spec, workload)
        if problem is not None or workload is None:
            self.rollouts.stop(uid)
            reason, message = (problem.reason, problem.message) if problem else ("WorkloadUnreadable", "")
            return _restart(status, "False", reason, message, generation=generation, now=now)
        current = status.rollout
        _step(stop, "before its rollout move")
        self._resume(uid, spec, current, connection)
        self.rollouts.observe(uid, facts.view)
        members = {m.instance_id: m.member_id for m in facts.view.members if m.instance_id}
        group = rollout.GroupNow(stable=facts.view.state is GroupState.STABLE, members=members)
        set_pods = [_set_pod(p, p.ordinal) for p in pods if p.ordinal is not None]
        kip848 = spec.client.group_protocol is rules.GroupProtocol.CONSUMER
        unbridged = current is not None and current.current_pod is not None and not current.bridge
        if kip848 or unbridged:  # no bridge: the step ends when the instance id is back under a new member
            kept = _replaced(current, set_pods, members, gone_fails=kip848)
        else:
            kept = self.rollouts.outcome(uid)
        new, actions = rollout.plan(spec, workload, set_pods, group, current, bridge_outcome=kept, now=now)
        reasons = {a.reason for a in actions if isinstance(a, rollout.Note)}
        if new is not None and "RolloutStarted" in reasons:
            before = await self.brokers.subscriptions(connection, spec.group_id)
            new = new.model_copy(update={"subscribed_before": before})
        for action in actions:
            _step(stop, "amid its rollout move")
            if isinstance(action, rollout.Note):
                post(Notice(action.type, action.reason, action.message))
            elif new is not None and kip848:
                new = await self._begin_raised_step(body, spec, status, new, action, facts=facts, members=members,
                                                    connection=connection, post=post)  # fmt: skip
            elif new is not None:
                new = await self._begin_step(body, spec, status, new, action, pods=pods, members=members,
                                             connection=connection, post=post)  # fmt: skip
        if new is not None and "RolloutComplete" in reasons:
            _step(stop, "before ending the rollout")
            namespace = str(body["metadata"]["namespace"])
            new = await self._resubscribe(spec, new, facts, connection, post, namespace=namespace, now=now)
        if new is not None and new.phase is not RolloutPhase.ROLLING and new.session_restore is not None:
            _step(stop, "before restoring the session timeout")
            new = await self._restore_session(spec, new, connection, post)
        if new is None or new.current_pod is None or new.phase is not RolloutPhase.ROLLING:
            self.rollouts.stop(uid)
        return _with_rollout(status, new, generation=generation, now=now)

    def _resume(self, uid: str, spec: ConsumerGroupSpec, current: RolloutStatus | None,
                connection: KafkaConnection) -> None:  # fmt: skip
        """An operator restart mid-step: the bridge persisted in status runs again."""
        if current is None or current.phase is not RolloutPhase.ROLLING or not current.bridge:
            return
        if self.rollouts.running(uid):
            return
        try:
            self.rollouts.run(uid, bridge.BridgeState.from_json(current.bridge), connection, resumed=True)
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
            self._emit(connection, events.MemberRemoved(
                time=now, cluster=facts.cluster_id, group=spec.group_id, source="operator", namespace=namespace,
                payload=events.MemberRemovedPayload(
                    member=events.MemberRef(member_id=member.member_id, instance_id=member.instance_id),
                    cause="subscription-change",
                ),
            ))  # fmt: skip
        return done.model_copy(update={"message": f"{done.message}; subscriptions {change}: one rebalance"})

    async def _begin_step(
        self, body: Mapping[str, Any], spec: ConsumerGroupSpec, status: ConsumerGroupStatus, state: RolloutStatus,
        step: rollout.BeginStep, *, pods: list[PodFacts], members: Mapping[str, str], connection: KafkaConnection,
        post: Post,
    ) -> RolloutStatus:  # fmt: skip
        """Read the member from the pod's sidecar, persist it with its bridge, delete the pod, start bridging."""
        meta = body["metadata"]
        uid, namespace, name = str(meta["uid"]), str(meta["namespace"]), str(meta["name"])
        pod = next(p for p in pods if p.name == step.pod)
        if pod.sidecar_url is None:  # re-rolled to get the sidecar: no generation to bridge with
            state = state.model_copy(update={"old_member_id": members.get(step.instance_id or ""), "bridge": None})
            await self.kube.apply_status(namespace, name, _dump(status.model_copy(update={"rollout": state})))
            try:
                await self.kube.delete_pod(namespace, pod.name, pod.uid)
            except KubeError as exc:
                post(Notice("Warning", "RolloutPaused", str(exc)))
                return state.model_copy(update={"phase": RolloutPhase.PAUSED, "message": str(exc)})
            self.metrics.rollout_restarts.labels("none").inc()
            post(Notice("Normal", "RolloutStep", f"deleted {pod.name}: it has no sidecar, so it is restarted without"
                        " a bridge to get one (a restart longer than the session timeout rebalances)"))  # fmt: skip
            return state
        try:
            member = await self.rollouts.member_of(pod.sidecar_url, pod.name)
            if members.get(member.instance_id or "") != member.member_id:
                raise StepRefusedError(f"{pod.name}: its sidecar's member {member.member_id} is not the one the group"
                                       f" has for instance {member.instance_id}")  # fmt: skip
            bridged = self.rollouts.begin(spec, member, time.time())
        except StepRefusedError as exc:
            post(Notice("Warning", "RolloutPaused", str(exc)))
            return state.model_copy(update={"phase": RolloutPhase.PAUSED, "message": str(exc)})
        state = state.model_copy(update={"old_member_id": member.member_id, "bridge": bridged.to_json()})
        await self.kube.apply_status(namespace, name, _dump(status.model_copy(update={"rollout": state})))
        try:
            await self.kube.delete_pod(namespace, pod.name, pod.uid)
        except KubeError as exc:
            post(Notice("Warning", "RolloutPaused", str(exc)))
            return state.model_copy(update={"phase": RolloutPhase.PAUSED, "message": str(exc), "bridge": None})
        self.rollouts.run(uid, bridged, connection, resumed=False)
        self.metrics.rollout_restarts.labels("heartbeats").inc()
        post(Notice("Normal", "RolloutStep", f"deleted {pod.name}; heartbeating for member {member.member_id}"
                    f" (generation {member.generation}) until its replacement takes it back"))  # fmt: skip
        return state

    async def _begin_raised_step(
        self, body: Mapping[str, Any], spec: ConsumerGroupSpec, status: ConsumerGroupStatus, state: RolloutStatus,
        step: rollout.BeginStep, *, facts: GroupFacts, members: Mapping[str, str], connection: KafkaConnection,
        post: Post,
    ) -> RolloutStatus:  # fmt: skip
        """KIP-848 groups have no classic heartbeat to bridge with: their session timeout lives on the group. Raise
        it (once per rollout; the original is kept in status to restore), let every member heartbeat once so its
        session timer takes the raised value, then delete the pod: its member outlives the restart."""
        meta = body["metadata"]
        namespace, name = str(meta["namespace"]), str(meta["name"])
        old = members.get(step.instance_id or "")
        if old is None:
            message = f"{step.pod}: no member holds its instance id {step.instance_id}: nothing to keep"
            post(Notice("Warning", "RolloutPaused", message))
            return state.model_copy(update={"phase": RolloutPhase.PAUSED, "message": message})
        raise_ = rules.session_raise(round(spec.restart.max_restart_seconds * 1000), facts.limits)
        raised = raise_.session_ms
        if raise_.note is not None:
            post(Notice("Warning", "SessionRaiseCapped", f"{step.pod}: the group's session timeout {raise_.note}"))
        try:
            if state.session_restore is None:
                timings = await self.brokers.group_timings(connection, spec.group_id)
                before = timings.session_override_ms
                state = state.model_copy(update={"session_restore": "" if before is None else str(before)})
                await self.kube.apply_status(namespace, name, _dump(status.model_copy(update={"rollout": state})))
                await self.brokers.set_group_session(connection, spec.group_id, raised)
                await asyncio.sleep(timings.heartbeat_ms / 1000 + 0.5)  # every member's next heartbeat takes it
        except GroupClientError as exc:
            message = f"{step.pod}: could not raise the group's session timeout to {raised} ms: {exc}"
            post(Notice("Warning", "RolloutPaused", message))
            return state.model_copy(update={"phase": RolloutPhase.PAUSED, "message": message})
        state = state.model_copy(update={"old_member_id": old})
        await self.kube.apply_status(namespace, name, _dump(status.model_copy(update={"rollout": state})))
        try:
            await self.kube.delete_pod(namespace, step.pod, step.uid)
        except KubeError as exc:
            post(Notice("Warning", "RolloutPaused", str(exc)))
            return state.model_copy(update={"phase": RolloutPhase.PAUSED, "message": str(exc)})
        self.metrics.rollout_restarts.labels("session-raised").inc()
        post(Notice("Normal", "RolloutStep", f"deleted {step.pod}; the group's session timeout is raised to"
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

    def _emit(self, connection: KafkaConnection, event: events.Event) -> None:
        """One event on the events topic (none configured: nothing)."""
        if not self.settings.events_topic:
            return
        sink = self.sinks.get(connection)
        if sink is None:
            sink = self.sinks[connection] = EventSink(connection, self.settings.events_topic, "vigil-operator")
        sink.emit(event)

    def _stalls(
        self, connection: KafkaConnection | None, spec: ConsumerGroupSpec, facts: GroupFacts | Unreachable,
        now: datetime,
    ) -> tuple[Any, ...]:  # fmt: skip
        if connection is None or not isinstance(facts, GroupFacts) or not self.settings.events_topic:
            return ()
        feed = self.feeds.get(connection)
        if feed is None:
            feed = self.feeds[connection] = EventFeed(connection, self.settings.events_topic)
        live = spec.liveness
        window = timedelta(seconds=live.cooldown + live.stall_timeout_seconds + self.settings.resync_seconds)
        present = [m.member_id for m in facts.view.members]
        return feed.book().current(spec.group_id, present, now, window)

    async def _provision(self, body: Mapping[str, Any], spec: ConsumerGroupSpec, post: Post) -> None:
        """The budget Lease and its Role, once per spec generation (they are owned by the CR)."""
        uid, generation = str(body["metadata"]["uid"]), int(body["metadata"].get("generation") or 0)
        account = spec.workload.service_account_name
        if self._budgets.get(uid) == (generation, account):
            return
        try:
            await self.kube.ensure_budget(body["metadata"]["namespace"], body, spec.group_id, account)
        except KubeError as exc:
            post(Notice("Warning", "BudgetNotProvisioned", str(exc)))
            return
        self._budgets[uid] = (generation, account)

    def _snapshot(
        self, connection: KafkaConnection, namespace: str, spec: ConsumerGroupSpec, status: ConsumerGroupStatus,
        now: datetime,
    ) -> None:  # fmt: skip
        """A group-snapshot event each resync, so the report works where __consumer_offsets cannot be read."""
        event = events.GroupSnapshot(
            time=now,
            cluster=status.cluster_id or "",
            group=spec.group_id,
            source="operator",
            namespace=namespace,
            payload=events.GroupSnapshotPayload(
                state=status.state or "Unknown",
                protocol=status.protocol or "unknown",
                generation=status.generation,
                coordinator=status.coordinator,
                members=tuple(
                    events.SnapshotMember(
                        member=events.MemberRef(
                            member_id=m.member_id, instance_id=m.instance_id, client_id=m.client_id
                        ),
                        host=m.host,
                        pod=m.pod,
                    )
                    for m in status.members
                ),
                total_lag=status.lag,
            ),
        )
        self._emit(connection, event)

    async def _invalid(
        self, body: Mapping[str, Any], previous: ConsumerGroupStatus, problem: str, *, now: datetime, post: Post
    ) -> ConsumerGroupStatus:
        meta = body["metadata"]
        namespace, name, generation = meta["namespace"], meta["name"], int(meta.get("generation") or 0)
        cs = previous.conditions
        for kind in (ConditionType.CONFIG_VALID, ConditionType.READY):
            cs = conditions.with_condition(cs, kind, "False", "InvalidSpec", problem, generation=generation, now=now)
        status = previous.model_copy(update={"observed_generation": generation, "conditions": cs})
        await self.kube.apply_status(namespace, name, _dump(status))
        if conditions.find(previous.conditions, ConditionType.CONFIG_VALID) != conditions.find(
            cs, ConditionType.CONFIG_VALID
        ):
            post(Notice("Warning", "InvalidSpec", problem))
        return status

    def close(self) -> None:
        self.rollouts.close()
        for feed in self.feeds.values():
            feed.stop()
        for sink in self.sinks.values():
            sink.flush(5)
        self.brokers.close()


def _previous(body: Mapping[str, Any]) -> ConsumerGroupStatus:
    """The status this operator wrote last (the report's part and anything unknown left out)."""
    raw = {k: v for k, v in (body.get("status") or {}).items() if k in _OWN_ALIASES}
    try:
        return ConsumerGroupStatus.model_validate(raw)
    except ValidationError:
        return ConsumerGroupStatus()


_OWN_ALIASES = frozenset(f.alias or n for n, f in ConsumerGroupStatus.model_fields.items()) - {"report"}
"""The status fields the operator owns: `report` is the report job's (field manager vigil-report); carrying it
into an apply would make the operator co-own it and could put an older report back."""


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
    status: ConsumerGroupStatus, new: RolloutStatus | None, *, generation: int, now: datetime
) -> ConsumerGroupStatus:
    """The status with the rollout and its RestartInProgress condition."""
    status = status.model_copy(update={"rollout": new})
    if new is None:
        return status
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


def _dump(status: ConsumerGroupStatus) -> dict[str, Any]:
    return status.model_dump(mode="json", by_alias=True, exclude_none=True, exclude={"report"})


def _one_line(exc: BaseException) -> str:
    return (str(exc) or type(exc).__name__).splitlines()[0]
