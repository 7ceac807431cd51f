"""One resync of one ConsumerGroup, end to end: gather the observation, decide (domain.reconcile), write.

Kept free of kopf so the handlers stay thin: they pass the CR body, the pods and claims from kopf's indexes,
and a callable that posts Kubernetes Events. Every failure ends as a condition on the CR, never an exception
into kopf (which would retry with backoff and log a traceback for what is a user's or a broker's problem).
"""

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import ValidationError

from vigil_core import events
from vigil_core.kafka.event_sink import EventSink
from vigil_core.kafka.outcomes import Reaction
from vigil_core.kafka.security import KafkaConnection
from vigil_operator import credentials
from vigil_operator.brokers import Brokers
from vigil_operator.domain import claims, conditions, departures, reconcile
from vigil_operator.domain.reconcile import GroupFacts, Notice, Observation, PodFacts, Unreachable
from vigil_operator.domain.spec import ConsumerGroupSpec, SpecError, parse_spec
from vigil_operator.domain.status import ConditionType, ConsumerGroupStatus
from vigil_operator.event_feed import EventFeed
from vigil_operator.k8s.api import KubeApi, KubeError
from vigil_operator.settings import OperatorSettings

log = logging.getLogger(__name__)
Post = Callable[[Notice], None]


@dataclass
class Runtime:
    settings: OperatorSettings
    kube: KubeApi
    brokers: Brokers = field(default_factory=Brokers)
    feeds: dict[KafkaConnection, EventFeed] = field(default_factory=dict)
    sinks: dict[KafkaConnection, EventSink] = field(default_factory=dict)
    _locks: dict[str, asyncio.Lock] = field(default_factory=dict)
    _budgets: dict[str, tuple[int, str]] = field(default_factory=dict)
    _sightings: dict[str, dict[str, departures.Sighting]] = field(default_factory=dict)
    """Per CR uid: when each member was first seen and the pod it belongs to (domain.departures)."""
    syncs: int = 0
    departures_removed: int = 0
    """Members removed at once because their consumer was provably gone (domain.departures)."""

    async def sync(
        self, body: Mapping[str, Any], pods: Iterable[PodFacts], others: Iterable[claims.Claim], post: Post
    ) -> ConsumerGroupStatus:
        """Resync one CR (one at a time per CR: the timer and a spec change may fire together)."""
        uid = str(body["metadata"]["uid"])
        async with self._locks.setdefault(uid, asyncio.Lock()):
            status = await self._sync(body, list(pods), list(others), post)
            self.syncs += 1
            return status

    async def _sync(
        self, body: Mapping[str, Any], pods: list[PodFacts], others: list[claims.Claim], post: Post
    ) -> ConsumerGroupStatus:
        meta = body["metadata"]
        namespace, name, generation = meta["namespace"], meta["name"], int(meta.get("generation") or 0)
        previous = _previous(body)
        now = datetime.now(UTC)
        try:
            spec = parse_spec(dict(body.get("spec") or {}))
        except SpecError as exc:
            return await self._invalid(body, previous, str(exc), now=now, post=post)
        try:
            connection = await credentials.connection_for(
                spec.kafka, namespace, self.kube, self.settings.state_dir / "secrets"
            )
            facts: GroupFacts | Unreachable = await self.brokers.observe(connection, spec.group_id)
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
                               now=now, post=post)  # fmt: skip
        stalls = self._stalls(connection, spec, facts, now)
        observation = Observation(generation, spec, facts, pods, stalls, owner)
        status, notices = reconcile.reconcile(previous, observation, now)
        if isinstance(facts, GroupFacts):
            uid = str(meta["uid"])
            self._sightings[uid] = departures.remember(self._sightings.get(uid, {}), status.members, now)
        await self.kube.apply_status(namespace, name, _dump(status))
        for notice in notices:
            post(notice)
        if owner is None:
            await self._provision(body, spec, post)
            if isinstance(facts, GroupFacts) and connection is not None:
                self._snapshot(connection, namespace, spec, status, now)
        return status

    async def _depart(
        self, namespace: str, spec: ConsumerGroupSpec, *, uid: str, facts: GroupFacts, pods: list[PodFacts],
        connection: KafkaConnection, now: datetime, post: Post,
    ) -> None:  # fmt: skip
        """Remove at once the members whose consumer is provably gone (domain.departures): an Event, an event on
        the events topic and a count each. The StatefulSet is read only when a static member's pod is gone."""
        sightings = self._sightings.get(uid, {})
        replicas = None
        if departures.needs_replicas(spec, sightings, pods) and spec.workload.name:
            try:
                replicas = await self.kube.statefulset_replicas(namespace, spec.workload.name)
            except KubeError as exc:
                log.warning("departures of %s: %s", spec.group_id, exc)
                return
        present = {m.member_id: m.instance_id for m in facts.view.members}
        for gone in departures.departures(spec, sightings, present, pods, replicas=replicas):
            outcome = await self.brokers.remove(connection, spec.group_id, gone.member_id, gone.instance_id,
                                                gone.reason)  # fmt: skip
            log.info("%s: removing member %s (%s): %s", spec.group_id, gone.member_id, gone.reason, outcome.name)
            if outcome.reaction is Reaction.DONE:
                self.departures_removed += 1
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
                post(Notice("Warning", "MemberRemovalFailed", message))

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
        cooldown = live.cooldown_seconds or 2 * live.stall_timeout_seconds
        window = timedelta(seconds=cooldown + live.stall_timeout_seconds + self.settings.resync_seconds)
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


_OWN_ALIASES = frozenset(f.alias or n for n, f in ConsumerGroupStatus.model_fields.items())


def _dump(status: ConsumerGroupStatus) -> dict[str, Any]:
    return status.model_dump(mode="json", by_alias=True, exclude_none=True)


def _one_line(exc: BaseException) -> str:
    return (str(exc) or type(exc).__name__).splitlines()[0]
