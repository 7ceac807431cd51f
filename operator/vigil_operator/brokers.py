"""The operator's Kafka side: one GroupClient per distinct connection, each on its own worker thread.

The groups of a round are observed together: the resyncs that ask for their group within a moment of each other
(a cluster's round starts them together, `resyncs`) share one census round (`GroupClient.survey`): describe,
committed offsets, read_committed end offsets of the assigned partitions and, for KIP-848 groups, their own session,
heartbeat (group configs) and group epoch — in requests that grow with the brokers and coordinators, not with the
groups. The cluster id and the broker's timing limits are reused (asked once per connection, limits refreshed every
LIMITS_TTL). Every failure becomes `Unreachable` with one line naming the bootstrap servers; nothing raises into
kopf.
"""

import asyncio
import logging
import random
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from confluent_kafka import KafkaException

from vigil_core import rules
from vigil_core.errors import first_line
from vigil_core.kafka import retry
from vigil_core.kafka.census_plan import Miss, Observation
from vigil_core.kafka.group_client import DeliberateRebalance, GroupClient, GroupClientError, GroupTimings
from vigil_core.kafka.model import MemberView
from vigil_core.kafka.outcomes import TRANSPORT_ERROR, Api, Outcome, Reaction, classify
from vigil_core.kafka.security import KafkaConnection
from vigil_operator.domain.reconcile import GroupFacts, Unreachable
from vigil_operator.generation_feed import GenerationFeed

log = logging.getLogger(__name__)
LIMITS_TTL = 600.0
RETRIES = 2
"""Census rounds again for the groups a round missed for a transient reason (`_transient`)."""
GATHER_QUIET = 0.05
"""A census round starts once no resync asked for a group for this long (seconds)…"""
GATHER_MAX = 1.0
"""…or this long after the first asked: the groups of one resync round go in one census round."""
DOWN_HOLD_SECONDS = 10.0
"""After connecting to a cluster failed, its groups' resyncs within this long report that failure without trying
again: N groups on a cluster that is down cost one connect timeout per hold, not N queued on its one worker."""


class _StillDownError(ConnectionError):
    """Connecting to the cluster failed less than DOWN_HOLD_SECONDS ago (the message is that failure's)."""


@dataclass
class _Cluster:
    connection: KafkaConnection
    worker: ThreadPoolExecutor
    client: GroupClient | None = None
    """Made on the worker thread at first use (it connects, blocking): never on kopf's event loop."""
    cluster_id: str | None = None
    limits: rules.BrokerLimits | None = None
    limits_at: float = 0.0
    requests: int = 0
    """Broker requests sent by this operator to the cluster (counted per vigil call; for the benchmark)."""
    down: tuple[float, str] | None = None
    """When connecting last failed (monotonic) and why; None once a client is connected."""
    unread_timings: set[str] = field(default_factory=set)
    """KIP-848 groups whose own timings could not be read (logged once each)."""
    gathering: "_Gathering | None" = None
    """The groups asked for since the last census round began, waiting for the next one."""
    generations: GenerationFeed | None = None
    """Classic groups' generations from `__consumer_offsets`, read from the first time one is asked for."""


@dataclass
class _Gathering:
    """Observations asked for, waiting for one census round together."""

    opened: float
    last: float
    asked: dict[str, "asyncio.Future[GroupFacts | Unreachable]"] = field(default_factory=dict)
    kip848: set[str] = field(default_factory=set)
    task: "asyncio.Task[None] | None" = None


class Brokers:
    def __init__(self) -> None:
        self._clusters: dict[KafkaConnection, _Cluster] = {}
        self._jitter = random.Random()  # noqa: S311 - retry pacing, not secrecy

    def _cluster(self, connection: KafkaConnection) -> _Cluster:
        found = self._clusters.get(connection)
        if found is None:
            found = _Cluster(connection, ThreadPoolExecutor(max_workers=1, thread_name_prefix="vigil-kafka"))
            self._clusters[connection] = found
        return found

    async def observe(self, connection: KafkaConnection, group_id: str, *, kip848: bool = False
                      ) -> GroupFacts | Unreachable:  # fmt: skip
        """The group now, observed in the next census round of its cluster with the other groups asked for meanwhile;
        `kip848`: its members use the consumer protocol, so its own session and heartbeat (group configs) are judged
        instead of the broker's."""
        cluster = self._cluster(connection)
        loop = asyncio.get_running_loop()
        gathering = cluster.gathering
        if gathering is None:
            gathering = cluster.gathering = _Gathering(loop.time(), loop.time())
            gathering.task = loop.create_task(self._census(cluster, gathering))
        gathering.last = loop.time()
        if kip848:
            gathering.kip848.add(group_id)
        found = gathering.asked.get(group_id)
        if found is None:
            found = gathering.asked[group_id] = loop.create_future()
        return await asyncio.shield(found)

    async def _census(self, cluster: _Cluster, gathering: _Gathering) -> None:
        """Once the resyncs stopped asking (GATHER_QUIET) or GATHER_MAX passed: one census round for all they asked."""
        loop = asyncio.get_running_loop()
        while (due := min(gathering.last + GATHER_QUIET, gathering.opened + GATHER_MAX)) > loop.time():
            await asyncio.sleep(due - loop.time())
        cluster.gathering = None
        groups = list(gathering.asked)
        found: dict[str, GroupFacts | Unreachable] = {}
        try:
            kip848 = frozenset(gathering.kip848)
            found = await loop.run_in_executor(cluster.worker, self._survey, cluster, groups, kip848)
        except _StillDownError as exc:
            found = dict.fromkeys(groups, _unreachable(cluster.connection, str(exc)))
        except Exception as exc:  # every asker gets an answer, whatever failed
            if not isinstance(exc, (GroupClientError, KafkaException, StopIteration, RuntimeError, OSError)):
                log.exception("census of %d groups on %s failed", len(groups), cluster.connection.bootstrap_servers)
            # start over next time: a client that lived through an outage may keep failing after the broker
            # is back (seen with librdkafka's admin client after a broker restart)
            await loop.run_in_executor(cluster.worker, self._reset, cluster)
            found = dict.fromkeys(groups, _unreachable(cluster.connection, first_line(exc)))
        finally:
            for group_id, future in gathering.asked.items():
                if future.done():
                    continue
                if group_id in found:
                    future.set_result(found[group_id])
                else:  # cancelled (the operator exits)
                    future.cancel()

    @staticmethod
    def _reset(cluster: _Cluster) -> None:
        client, cluster.client, cluster.cluster_id, cluster.limits = cluster.client, None, None, None
        if client is not None:
            client.close()

    async def remove(self, connection: KafkaConnection, group_id: str, member_id: str, instance_id: str | None,
                     reason: str) -> Outcome:  # fmt: skip
        """Compare-and-remove one member (the pair observed); every failure as an Outcome, never raised."""
        return await self._member_request(
            connection, lambda client: client.remove_member(group_id, member_id, instance_id, reason),
            Api.LEAVE_GROUP, f"remove {member_id} from {group_id}",
        )  # fmt: skip

    async def release(self, connection: KafkaConnection, group_id: str, member_id: str, instance_id: str
                      ) -> Outcome:  # fmt: skip
        """Release a dead KIP-848 static member's instance id on its behalf, compare-and-release
        (`GroupClient.release_static_member`, as the sidecar does); every failure as an Outcome, never raised."""
        return await self._member_request(
            connection, lambda client: client.release_static_member(group_id, member_id, instance_id),
            Api.CONSUMER_GROUP_HEARTBEAT, f"release {member_id} of {group_id}",
        )  # fmt: skip

    async def _member_request(self, connection: KafkaConnection, call: Callable[[GroupClient], Outcome], api: Api,
                              what: str) -> Outcome:  # fmt: skip
        """One request about one member on the cluster's worker: a refusal as its Outcome, a transport failure as
        `api`'s transport error (logged as `what`)."""
        cluster = self._cluster(connection)

        def send() -> Outcome:
            cluster.requests += 1
            return call(_client(cluster))

        try:
            return await asyncio.get_running_loop().run_in_executor(cluster.worker, send)
        except GroupClientError as exc:
            return exc.outcome
        except (KafkaException, RuntimeError, OSError) as exc:
            log.warning("%s: %s", what, first_line(exc))
            return classify(api, TRANSPORT_ERROR)

    async def static_members_left(self, connection: KafkaConnection, group_id: str) -> frozenset[str]:
        """The KIP-848 group's static members whose instance id is released already (epoch -2); empty when that
        cannot be read (a release is compare-and-release: sent again, it changes nothing)."""
        cluster = self._cluster(connection)

        def left() -> frozenset[str]:
            cluster.requests += 1
            return _client(cluster).static_members_left(group_id)

        try:
            return await asyncio.get_running_loop().run_in_executor(cluster.worker, left)
        except (GroupClientError, KafkaException, RuntimeError, OSError) as exc:
            log.warning("static members of %s that left: %s", group_id, first_line(exc))
            return frozenset()

    async def rebalance_removing(self, connection: KafkaConnection, group_id: str, member: MemberView, reason: str,
                                 *, protocol: str, hold_seconds: float) -> DeliberateRebalance:  # fmt: skip
        """One deliberate rebalance with `member` removed and back in it (GroupClient.rebalance_removing); every
        failure as an Outcome of the removal, never raised."""
        cluster = self._cluster(connection)

        def rebalance() -> DeliberateRebalance:
            cluster.requests += 4
            return _client(cluster).rebalance_removing(group_id, member, reason, protocol=protocol,
                                                       hold_seconds=hold_seconds)  # fmt: skip

        try:
            return await asyncio.get_running_loop().run_in_executor(cluster.worker, rebalance)
        except GroupClientError as exc:
            return DeliberateRebalance(exc.outcome, exc.outcome, rejoined=False)
        except (KafkaException, RuntimeError, OSError) as exc:
            log.warning("rebalance %s removing %s: %s", group_id, member.member_id, first_line(exc))
            failed = classify(Api.LEAVE_GROUP, TRANSPORT_ERROR)
            return DeliberateRebalance(failed, failed, rejoined=False)

    async def subscriptions(self, connection: KafkaConnection, group_id: str) -> tuple[str, ...] | None:
        """The topics the group's members subscribe to (classic groups; one DescribeGroups); None when unknown."""
        cluster = self._cluster(connection)

        def describe() -> tuple[str, ...] | None:
            cluster.requests += 2
            view = _client(cluster).describe(group_id, subscriptions=True)
            if any(m.subscription is None for m in view.members):
                return None
            return tuple(sorted({t for m in view.members for t in m.subscription or ()}))

        try:
            return await asyncio.get_running_loop().run_in_executor(cluster.worker, describe)
        except (GroupClientError, KafkaException, RuntimeError, OSError) as exc:
            log.warning("subscriptions of %s: %s", group_id, first_line(exc))
            return None

    async def group_timings(self, connection: KafkaConnection, group_id: str) -> GroupTimings:
        """A KIP-848 group's session and heartbeat (and its own override). Raises GroupClientError."""
        cluster = self._cluster(connection)

        def call() -> GroupTimings:
            cluster.requests += 1
            return _client(cluster).group_timings(group_id)

        return await asyncio.get_running_loop().run_in_executor(cluster.worker, call)

    async def set_group_session(self, connection: KafkaConnection, group_id: str, session_ms: int | None) -> None:
        """Set a KIP-848 group's own session timeout (None: remove it). Raises GroupClientError."""
        cluster = self._cluster(connection)

        def call() -> None:
            cluster.requests += 1
            _client(cluster).set_group_session(group_id, session_ms)

        await asyncio.get_running_loop().run_in_executor(cluster.worker, call)

    def generation(self, connection: KafkaConnection, facts: GroupFacts) -> int | None:
        """The observed group's generation: the group epoch it was described with (KIP-848), else its classic
        generation as `__consumer_offsets` says it (generation_feed: the cluster's reader starts at the first ask);
        None while unknown."""
        if facts.generation is not None:
            return facts.generation
        cluster = self._cluster(connection)
        if cluster.generations is None:
            cluster.generations = GenerationFeed(connection)
        return cluster.generations.generation(facts.view.group_id)

    def requests(self) -> int:
        return sum(c.requests for c in self._clusters.values())

    def _answers(self, cluster: _Cluster, client: GroupClient, groups: list[str]) -> dict[str, Observation | Miss]:
        """A census round of `groups`, and again for the groups it missed for a transient reason (a coordinator
        loading or moving: COORDINATOR_NOT_AVAILABLE on a fresh cluster), after a backoff, up to RETRIES times, as
        `GroupClient` retries one group's requests. A broker that does not answer is not asked again in the round:
        its groups cost one timeout."""
        results: dict[str, Observation | Miss] = {}
        asked = groups
        for attempt in range(RETRIES + 1):
            answered = client.survey(asked)
            cluster.requests += answered.requests
            results.update(answered.groups)
            asked = [g for g, r in answered.groups.items() if isinstance(r, Miss) and _transient(r)]
            if not asked or attempt == RETRIES:
                break
            time.sleep(retry.jittered(attempt, self._jitter.random()))
        return results

    def _survey(
        self, cluster: _Cluster, groups: list[str], kip848: frozenset[str]
    ) -> dict[str, GroupFacts | Unreachable]:
        """One census round of `groups` on the cluster's worker; a group missed is `Unreachable` naming why."""
        client = _client(cluster)  # raises _StillDownError within the hold of a failed connect
        if cluster.cluster_id is None:
            cluster.cluster_id = client.cluster_id()
            cluster.requests += 1
        if cluster.limits is None or time.monotonic() - cluster.limits_at > LIMITS_TTL:
            cluster.limits, cluster.limits_at = client.broker_limits(), time.monotonic()
            cluster.requests += 2
        results = self._answers(cluster, client, groups)
        found: dict[str, GroupFacts | Unreachable] = {}
        for group_id, result in results.items():
            if isinstance(result, Miss):
                found[group_id] = _unreachable(cluster.connection, result.line)
                continue
            limits, group_configs = cluster.limits, False
            if group_id in kip848:
                if result.timings is None:  # e.g. no DESCRIBE_CONFIGS on the group: the broker's values, said once
                    if group_id not in cluster.unread_timings:
                        cluster.unread_timings.add(group_id)
                        log.warning("%s: its own session and heartbeat unread, the broker's judged instead", group_id)
                else:
                    cluster.unread_timings.discard(group_id)
                    limits = limits.for_group(result.timings.session_ms, result.timings.heartbeat_ms)
                    group_configs = True
            found[group_id] = GroupFacts(cluster.cluster_id, result.view, result.committed, result.end_offsets, limits,
                                         group_configs, result.group_epoch, result.share_lag)  # fmt: skip
        return found

    def close(self) -> None:
        for cluster in self._clusters.values():
            if cluster.generations is not None:
                cluster.generations.stop()
            if cluster.client is not None:
                cluster.worker.submit(cluster.client.close)
            cluster.worker.shutdown(wait=True, cancel_futures=True)
        self._clusters.clear()


def _client(cluster: _Cluster) -> GroupClient:
    """The cluster's client, made at first use on its worker thread (it connects, blocking)."""
    if cluster.client is None:
        if cluster.down is not None and time.monotonic() - cluster.down[0] < DOWN_HOLD_SECONDS:
            raise _StillDownError(cluster.down[1])
        try:
            cluster.client = GroupClient(cluster.connection, client_id="vigil-operator", max_attempts=3)
        except OSError as exc:  # no broker answered (GroupWire's ConnectionError)
            cluster.down = (time.monotonic(), first_line(exc))
            raise
        cluster.down = None
    return cluster.client


def _transient(missed: Miss) -> bool:
    """Worth asking again in the same round: the error table says retry, and the broker did answer."""
    outcome = missed.outcome
    return outcome.code != TRANSPORT_ERROR and outcome.reaction in (
        Reaction.REDISCOVER_COORDINATOR,
        Reaction.RETRY_BACKOFF,
    )


def _unreachable(connection: KafkaConnection, why: str) -> Unreachable:
    servers = connection.bootstrap_servers
    return Unreachable("BrokerUnreachable", f"Kafka at {servers}: {why.removeprefix(f'{servers}: ')}")
