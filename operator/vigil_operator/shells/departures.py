"""Members whose consumer is provably gone, removed (or, KIP-848 static ones, released) at once: the decision is
domain.departures' and domain.node_loss', each act recorded in the group's eviction budget first. Owns what it
remembers per ConsumerGroup (by uid) between resyncs: when each member was first seen, crash-looping members last
removed, released members, members on a lost node being watched."""

import logging
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

from vigil_core import events
from vigil_core.budget import lease_api, ledger
from vigil_core.budget.lease_api import BudgetUnavailable
from vigil_core.kafka import model
from vigil_core.kafka.model import GroupType
from vigil_core.kafka.outcomes import Reaction
from vigil_core.kafka.security import KafkaConnection
from vigil_operator.brokers import Brokers
from vigil_operator.domain import departures, node_loss
from vigil_operator.domain.reconcile import GroupFacts, Notice, PodFacts
from vigil_operator.domain.spec import ConsumerGroupSpec
from vigil_operator.domain.status import MemberStatus
from vigil_operator.k8s.api import KubeApi, KubeError
from vigil_operator.metrics import OperatorMetrics
from vigil_operator.shells.base import Post, StopFlag, step
from vigil_operator.shells.events import Emitter

log = logging.getLogger(__name__)


class Departures:
    def __init__(self, kube: KubeApi, brokers: Brokers, metrics: OperatorMetrics, emitter: Emitter) -> None:
        self.kube = kube
        self.brokers = brokers
        self.metrics = metrics
        self.emitter = emitter
        self.sightings: dict[str, dict[str, departures.Sighting]] = {}
        """Per CR uid: when each member was first seen and the pod it belongs to (domain.departures)."""
        self._crash_removed: dict[str, dict[str, datetime]] = {}
        """Per CR uid: instance id → when its crash-looping member was last removed."""
        self._released: dict[str, set[str]] = {}
        """Per CR uid: KIP-848 static members (ids) whose instance id is released (by vigil or their own client)."""
        self._suspects: dict[str, dict[str, node_loss.Suspect]] = {}
        """Per CR uid: members on a lost node being watched for progress (domain.node_loss)."""
        self._noted: dict[str, str] = {}
        """The last problem logged per source: each is logged once until it changes."""
        self.removals = 0
        """Members removed at once because their consumer was provably gone (domain.departures)."""
        self.deferrals = 0
        """Removals the eviction budget held back (a crash-looping member while the budget is spent)."""
        self.releases = 0
        """KIP-848 static members whose instance id was released at once because their consumer was provably gone."""

    def forget(self, uid: str) -> None:
        """The ConsumerGroup's resyncs end here (deleted, leadership lost, exiting): what was kept of it goes. Resumed,
        it starts over, which only delays an action (a member's first sighting is later), never hastens one."""
        for per_cr in (self.sightings, self._crash_removed, self._released, self._suspects):
            per_cr.pop(uid, None)

    def remember(self, uid: str, members: Sequence[MemberStatus], now: datetime) -> None:
        """The members this resync saw (when each was first seen, and its pod)."""
        self.sightings[uid] = departures.remember(self.sightings.get(uid, {}), members, now)

    async def depart(
        self, namespace: str, spec: ConsumerGroupSpec, *, uid: str, facts: GroupFacts, pods: list[PodFacts],
        connection: KafkaConnection, now: datetime, post: Post, stop: StopFlag | None,
    ) -> None:  # fmt: skip
        """Remove at once the members whose consumer is provably gone (domain.departures): an Event, an event on
        the events topic and a count each; KIP-848 static ones are released instead (an Event and a count), unless
        their instance id is released already (ConsumerGroupDescribe, asked only then). The StatefulSet is read only
        when a static member's pod is gone. Each removal or release (with its budget record) is a step: none begins
        once `stop` is set."""
        if not model.removable(facts.view.type):
            return  # share and streams groups: their members leave at their session timeout
        sightings = self.sightings.get(uid, {})
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
            step(stop, f"before {'releasing' if gone.action == 'release' else 'removing'} member {gone.member_id}")
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
                self.removals += 1
                self.metrics.member_removals.labels(gone.cause).inc()
                post(Notice("Normal", "MemberRemoved", f"removed member {gone.member_id} at once: {gone.reason}"))
                self.emitter.emit(connection, events.MemberRemoved(
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
            self.releases += 1
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
        proven = gone.proven_gone
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
        self.deferrals += 1
        self.metrics.removals_deferred.labels(gone.cause).inc()
        post(Notice("Warning", "MemberRemovalDeferred", f"member {gone.member_id} ({gone.reason}) not removed yet:"
                    f" eviction budget: {answer.message}"))  # fmt: skip
        return False
