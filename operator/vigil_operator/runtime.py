"""One resync of one ConsumerGroup, end to end: gather the observation, decide (domain.reconcile), write.

Kept free of kopf so the handlers stay thin: they pass the CR body, the pods and claims from kopf's indexes,
and a callable that posts Kubernetes Events. Every failure ends as a condition on the CR, never an exception
into kopf (which would retry with backoff and log a traceback for what is a user's or a broker's problem).

The runtime composes one shell per feature (vigil_operator.shells), each owning its state: departures (members
whose consumer is gone), rollout (coordinated restarts), stalls (the sidecars' reports), budget (the Lease), events
(the events topic). It owns only the resync loop's pacing and the status it writes.
"""

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from vigil_core import rules
from vigil_core.errors import first_line
from vigil_core.kafka import model
from vigil_core.kafka.model import GroupState
from vigil_core.kafka.security import KafkaConnection
from vigil_core.settings import describe_validation_error
from vigil_operator import credentials
from vigil_operator import settings as operator_settings
from vigil_operator.brokers import Brokers
from vigil_operator.domain import claims, conditions, readings, reconcile, tenancy
from vigil_operator.domain.readings import Readings
from vigil_operator.domain.reconcile import GroupFacts, Notice, Observation, PodFacts, Unreachable
from vigil_operator.domain.spec import ConsumerGroupSpec, SpecError, parse_spec
from vigil_operator.domain.status import ConditionType, ConsumerGroupStatus
from vigil_operator.k8s.api import KubeApi, KubeError
from vigil_operator.metrics import GroupLabels, OperatorMetrics
from vigil_operator.rollouts import Rollouts
from vigil_operator.settings import OperatorSettings
from vigil_operator.shells.base import (
    Post,
    StopFlag,
    SyncStoppedError,
    acquire,
    dump,
    step,
    stopping,
    unless_stopped,
)
from vigil_operator.shells.budget import BudgetLeases
from vigil_operator.shells.departures import Departures
from vigil_operator.shells.events import Emitter
from vigil_operator.shells.notices import Notices
from vigil_operator.shells.rollout import RolloutShell
from vigil_operator.shells.stalls import StallFeeds

__all__ = ["Key", "Post", "Runtime", "StopFlag", "SyncStoppedError", "stopping"]

log = logging.getLogger(__name__)
NOT_FOUND = 404
Key = tuple[str, str]
"""A ConsumerGroup's (namespace, name)."""
TURNS = 16
"""Resyncs doing Kubernetes work at once (`Runtime._turn`)."""


@dataclass
class Runtime:
    settings: OperatorSettings
    kube: KubeApi
    brokers: Brokers = field(default_factory=Brokers)
    metrics: OperatorMetrics = field(default_factory=OperatorMetrics)
    syncs: int = 0
    _locks: dict[str, asyncio.Lock] = field(default_factory=dict)
    _resynced: dict[Key, int] = field(default_factory=dict)
    """Per ConsumerGroup: the spec generation its loop last resynced."""
    _readings: dict[Key, tuple[GroupLabels, Readings]] = field(default_factory=dict)
    """Per ConsumerGroup resynced here: its last readings (domain.readings) under its metric labels."""
    _turns: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(TURNS))
    _specs: dict[str, tuple[dict[str, Any], ConsumerGroupSpec | SpecError]] = field(default_factory=dict)
    """Per ConsumerGroup uid: its spec as last parsed (the content and what it parsed to)."""

    def __post_init__(self) -> None:
        self.events = Emitter(self.settings.events_topic)
        self.departures = Departures(self.kube, self.brokers, self.metrics, self.events)
        self.rollout = RolloutShell(self.kube, self.brokers, self.metrics, self.events, Rollouts())
        self.stalls = StallFeeds(self.settings.events_topic, self.settings.resync_seconds)
        self.budgets = BudgetLeases(self.kube)
        self.notices = Notices(self.kube, operator_settings.identity(os.environ))
        self._tenancy = self.settings.injection().tenancy()

    def resynced(self, key: Key, generation: int | None = None) -> int | None:
        """The spec generation `key` was last resynced at (None: none yet); with `generation`, record it."""
        if generation is not None:
            self._resynced[key] = generation
        return self._resynced.get(key)

    def release(self, key: Key, uid: str) -> None:
        """The ConsumerGroup's resyncs end here (deleted, leadership lost, exiting): its rollout bridge stops
        heartbeating — the replica that acts next resumes it from the state persisted in status — and everything kept
        of it goes (departures' sightings, the budget's provisioning, its metric series): memory per ConsumerGroup
        lives only as long as it is resynced here."""
        if self.rollout.bridges.running(uid):
            log.info("%s/%s: its rollout bridge stops with its resync loop (the replica that acts resumes it)", *key)
        self.rollout.stop(uid)
        self.departures.forget(uid)
        self.budgets.forget(uid)
        self._specs.pop(uid, None)
        lock = self._locks.get(uid)
        if lock is not None and not lock.locked():  # held: a resync still ends its step, and the lock is its order
            del self._locks[uid]
        self._resynced.pop(key, None)
        labels, last = self._readings.pop(key, (None, None))
        if labels is not None and last is not None:
            self.metrics.move_state(last.state, None)
            self.metrics.forget_group(labels, last)

    async def sync(
        self, body: Mapping[str, Any], pods: Iterable[PodFacts], others: Iterable[claims.Claim], post: Post,
        stop: StopFlag | None = None,
    ) -> ConsumerGroupStatus:  # fmt: skip
        """Resync one CR (one at a time per CR: a resync that was asked to stop may still be ending its step).
        Raises SyncStoppedError when `stop` is set while it waits (its turn, a Secret, the broker) or between its
        steps (domain.pacing): once stopped — leadership lost, deleted, exiting — it begins no act and no write."""
        lock = self._locks.setdefault(str(body["metadata"]["uid"]), asyncio.Lock())
        await acquire(stop, lock)
        try:
            status = await self._sync(body, list(pods), list(others), post, stop)
        finally:
            lock.release()
        self.syncs += 1
        self.metrics.resyncs.inc()
        return status

    def _read(self, key: Key, group_id: str, status: ConsumerGroupStatus, facts: GroupFacts | Unreachable,
              connection: KafkaConnection | None, *, pods: list[PodFacts]) -> None:  # fmt: skip
        """The group's readings on `/metrics` (domain.readings): state, members, lag, rebalances (from the group epoch
        a KIP-848 group is described with, or a classic group's generation in `__consumer_offsets`), the resync's
        time."""
        labels: GroupLabels = (*key, group_id)
        old_labels, last = self._readings.get(key, (labels, None))
        if old_labels != labels and last is not None:  # the spec names another Kafka group now
            self.metrics.forget_group(old_labels, last)
            self.metrics.move_state(last.state, None)
            last = None
        now, rebalances = readings.next_readings(
            last,
            state=model.by_name(GroupState, status.state or "", GroupState.UNKNOWN),
            members=status.member_count,
            lag=reconcile.lag(facts) if isinstance(facts, GroupFacts) else None,
            generation=self.brokers.generation(connection, facts)
            if isinstance(facts, GroupFacts) and connection is not None
            else None,
            now=time.time(),
            without_sidecar=len(reconcile.without_sidecar(pods)),
        )
        self.metrics.move_state(last.state if last is not None else None, now.state)
        self.metrics.read_group(labels, last, now, rebalances)
        self._readings[key] = (labels, now)

    def _spec(self, body: Mapping[str, Any]) -> ConsumerGroupSpec:
        """The CR's spec, parsed once per content (pydantic's parse was a tenth of a round's CPU at 3,000 groups).
        Raises SpecError."""
        uid, raw = str(body["metadata"]["uid"]), dict(body.get("spec") or {})
        cached = self._specs.get(uid)
        if cached is None or cached[0] != raw:
            try:
                cached = self._specs[uid] = (raw, parse_spec(raw))
            except SpecError as exc:
                cached = self._specs[uid] = (raw, exc)
        if isinstance(cached[1], SpecError):
            raise cached[1]
        return cached[1]

    async def _sync(
        self, body: Mapping[str, Any], pods: list[PodFacts], others: list[claims.Claim], post: Post,
        stop: StopFlag | None,
    ) -> ConsumerGroupStatus:  # fmt: skip
        namespace = body["metadata"]["namespace"]
        stored = _stored(body)
        try:
            spec = self._spec(body)
        except SpecError as exc:
            step(stop, "before it acted")
            return await self._invalid(body, stored, str(exc), now=datetime.now(UTC), post=post)
        if refused := tenancy.refusals(spec, self._tenancy):  # before a Secret is read or a broker contacted
            step(stop, "before it acted")
            return await self._invalid(body, stored, "; ".join(refused), now=datetime.now(UTC), post=post,
                                       reason="NotAllowed")  # fmt: skip
        try:
            async with self._turn(stop):
                secrets = self.settings.state_dir / "secrets"
                connection = await unless_stopped(stop, credentials.connection_for(spec.kafka, namespace, self.kube,
                                                                                   secrets))  # fmt: skip
            kip848 = spec.client.group_protocol is rules.GroupProtocol.CONSUMER
            observed = self.brokers.observe(connection, spec.group_id, kip848=kip848)
            facts: GroupFacts | Unreachable = await unless_stopped(stop, observed)  # no turn held: one census
        except KubeError as exc:
            connection, facts = None, Unreachable("SecretMissing", str(exc))
        except ValidationError as exc:
            problem = f"spec.kafka: {describe_validation_error(exc)}"
            connection, facts = None, Unreachable("InvalidKafkaSettings", problem)
        except ValueError as exc:
            connection, facts = None, Unreachable("InvalidKafkaSettings", first_line(exc))
        except OSError as exc:  # the credential files: --state-dir was writable at start (cli.preflight)
            problem = f"--state-dir {self.settings.state_dir}: {exc}"
            connection, facts = None, Unreachable("CredentialsNotWritten", problem)
        async with self._turn(stop):
            return await self._act(body, spec, stored, connection=connection, facts=facts, pods=pods,
                                   others=others, post=post, stop=stop)  # fmt: skip

    @contextlib.asynccontextmanager
    async def _turn(self, stop: StopFlag | None) -> AsyncIterator[None]:
        """One of TURNS for the Kubernetes work of a resync: a round begins thousands of resyncs together (their
        observations meet in one census), and their Secret reads, writes and Leases go TURNS at a time."""
        await acquire(stop, self._turns)
        try:
            yield
        finally:
            self._turns.release()

    async def _act(
        self, body: Mapping[str, Any], spec: ConsumerGroupSpec, stored: "Stored", *,
        connection: KafkaConnection | None, facts: GroupFacts | Unreachable, pods: list[PodFacts],
        others: list[claims.Claim], post: Post, stop: StopFlag | None,
    ) -> ConsumerGroupStatus:  # fmt: skip
        """The resync with the group observed: departures, the rollout's next move, the status, its Events."""
        meta = body["metadata"]
        namespace, name, generation = meta["namespace"], meta["name"], int(meta.get("generation") or 0)
        now = datetime.now(UTC)
        owner = None
        if isinstance(facts, GroupFacts):
            created = str(meta.get("creationTimestamp") or "")
            mine = claims.Claim(created, namespace, name, facts.cluster_id, spec.group_id)
            found = claims.owner([*others, mine], facts.cluster_id, spec.group_id)
            owner = found.ref if found is not None and found != mine else None
        if owner is None and isinstance(facts, GroupFacts) and connection is not None:
            await self.departures.depart(namespace, spec, uid=str(meta["uid"]), facts=facts, pods=pods,
                                         connection=connection, now=now, post=post, stop=stop)  # fmt: skip
        stalls = self.stalls.current(connection, spec, facts, now)
        workload, problem = await self.rollout.workload(namespace, spec)
        config_problem = None if problem is None else (problem.reason, problem.message)
        observation = Observation(generation, spec, facts, pods, stalls, owner, config_problem)
        status, notices = reconcile.reconcile(stored.status, observation, now)
        if owner is None and isinstance(facts, GroupFacts) and connection is not None:
            status = await self.rollout.roll(body, spec, status, workload, facts=facts, pods=pods,
                                             connection=connection, now=now, post=post, stop=stop)  # fmt: skip
        if isinstance(facts, GroupFacts):
            self.departures.remember(str(meta["uid"]), status.members, now)
        step(stop, "before writing the status")
        await self._write(body, status, stored)
        self._read((namespace, name), spec.group_id, status, facts, connection, pods=pods)
        for notice in notices:  # they tell what this status changed: they go with it
            post(notice)
        if (reason := stopping(stop)) is not None:
            log.info("resync of %s/%s stopped after writing the status: %s", namespace, name, reason)
        elif owner is None:
            await self.budgets.provision(body, spec, post)
            if isinstance(facts, GroupFacts) and connection is not None:
                self.events.snapshot(connection, namespace, spec.group_id, status, lag=reconcile.lag(facts), now=now)
        return status

    async def _invalid(
        self, body: Mapping[str, Any], stored: "Stored", problem: str, *, now: datetime, post: Post,
        reason: str = "InvalidSpec",
    ) -> ConsumerGroupStatus:  # fmt: skip
        generation = int(body["metadata"].get("generation") or 0)
        previous = stored.status
        cs = previous.conditions
        for kind in (ConditionType.CONFIG_VALID, ConditionType.READY):
            cs = conditions.with_condition(cs, kind, "False", reason, problem, generation=generation, now=now)
        status = previous.model_copy(update={"observed_generation": generation, "conditions": cs})
        await self._write(body, status, stored)
        if conditions.find(previous.conditions, ConditionType.CONFIG_VALID) != conditions.find(
            cs, ConditionType.CONFIG_VALID
        ):
            post(Notice("Warning", f"{ConditionType.CONFIG_VALID.value}False", problem))  # as `reconcile` names them
        return status

    async def _write(self, body: Mapping[str, Any], status: ConsumerGroupStatus, stored: "Stored") -> None:
        """Apply the status, unless it is what the CR holds already: a resync that found nothing new writes nothing."""
        if stored.exact and stored.status == status:
            return
        meta = body["metadata"]
        try:
            await self.kube.apply_status(meta["namespace"], meta["name"], dump(status))
        except KubeError as exc:
            if exc.status != NOT_FOUND:
                raise
            log.info("status of %s/%s not written: the ConsumerGroup is gone", meta["namespace"], meta["name"])
            return
        self.metrics.status_writes.inc()

    def close(self) -> None:
        self.rollout.close()
        self.stalls.close()
        self.events.close()
        self.brokers.close()


@dataclass(frozen=True)
class Stored:
    """The status this operator wrote last, as the CR holds it."""

    status: ConsumerGroupStatus
    """Parsed from the fields the operator owns (the report's part and anything unknown left out); the defaults
    when it does not parse."""
    exact: bool
    """The CR holds exactly `status` — nothing the operator does not write any more (e.g. 0.2.0's `lag`,
    `lastSyncTime`), nothing unparsable — so a resync that computes the same status need not write: compared as
    parsed, since the apiserver fills the schema's defaults in."""


def _stored(body: Mapping[str, Any]) -> Stored:
    stored = {k: v for k, v in (body.get("status") or {}).items() if k != "report"}
    own = {k: v for k, v in stored.items() if k in _OWN_ALIASES}
    try:
        return Stored(ConsumerGroupStatus.model_validate(own), exact=len(own) == len(stored))
    except ValidationError:
        return Stored(ConsumerGroupStatus(), exact=False)


_OWN_ALIASES = frozenset(f.alias or n for n, f in ConsumerGroupStatus.model_fields.items()) - {"report"}
"""The status fields the operator owns: `report` is the report job's (field manager vigil-report); carrying it
into an apply would make the operator co-own it and could put an older report back."""
