"""The operator's Kafka side (`vigil_operator.brokers.Brokers`, one GroupClient per cluster on its worker thread)
against the real broker, with the pure resync (`domain.reconcile`) on what it observed: what the ConsumerGroup
status says of a KIP-848 group mid-reconciliation, which timings ConfigValid judges a KIP-848 group by, and the
release of a dead KIP-848 static member's instance id for its replacement.
"""

import asyncio
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from vigil_core.kafka import cgmd
from vigil_core.kafka.group_client import GroupClient
from vigil_core.kafka.model import GroupState, GroupType
from vigil_core.kafka.outcomes import Reaction
from vigil_core.kafka.security import KafkaConnection
from vigil_dev import procs
from vigil_dev.kafka import cluster as kafka_cluster
from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import broker_log, clients, static_app
from vigil_dev.testing.silent_broker import silent_broker
from vigil_dev.testing.waiting import bound, wait_for
from vigil_operator.brokers import Brokers
from vigil_operator.domain import readings
from vigil_operator.domain.reconcile import GroupFacts, Observation, Unreachable, reconcile
from vigil_operator.domain.spec import parse_spec
from vigil_operator.domain.status import ConditionType, ConsumerGroupStatus
from vigil_operator.metrics import OperatorMetrics

pytestmark = pytest.mark.integration

KIP848: clients.ClientConfig = {"group.protocol": "consumer", "max.poll.interval.ms": 60000}
GROUP_SESSION_MS = 45000
"""Kafka's default KIP-848 session, set on the group (the test broker's is 10 s): the stock wait for a dead static
member's instance id."""
BACK_WITHIN = 10.0
"""A released member's replacement (a new process joining) holds partitions within this long of its start."""
NO_SIDECAR = "127.0.0.1:1"
"""The app's beacon address: no sidecar listens there, so only the operator's release can free the instance id."""
CONNECT_TIMEOUT = 10.0
"""The operator's request timeout (GroupClient's default): how long a connect to a broker that never answers waits."""


@pytest.fixture
def brokers() -> Iterator[Brokers]:
    b = Brokers()
    yield b
    b.close()


def _spec(group: str, bootstrap: str, **liveness: float) -> dict[str, object]:
    return {"groupId": group, "kafka": {"bootstrapServers": bootstrap},
            "workload": {"kind": "Deployment", "name": "app"}, "client": {"groupProtocol": "consumer"},
            "liveness": liveness}  # fmt: skip


def _resync(group: str, bootstrap: str, facts: GroupFacts, **liveness: float) -> ConsumerGroupStatus:
    observation = Observation(1, parse_spec(_spec(group, bootstrap, **liveness)), facts)
    status, _ = reconcile(ConsumerGroupStatus(), observation, datetime.now(UTC))
    return status


def _condition(status: ConsumerGroupStatus, kind: ConditionType) -> tuple[str, str, str]:
    found = next(c for c in status.conditions if c.type is kind)
    return found.status, found.reason, found.message


def test_a_kip848_group_mid_reconciliation_is_reconciling_in_the_status_and_the_metric(
    kafka: KafkaCluster, brokers: Brokers
) -> None:
    """The operator's describe path: a KIP-848 group waiting for a member to let partitions go
    (rebalance callbacks and no poll: librdkafka holds the revocation for its poll) is Reconciling; librdkafka's
    describe says Unknown. The ConsumerGroup status says Reconciling (the `kubectl get kcg` State column), Ready is
    False for Rebalancing, the Rebalancing condition True, and the group-state metric counts it as Reconciling."""
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("op-848-rb"), partitions=4)
    group = clients.unique("g-op-848-rb")
    holder = clients.Member(conn, group, [topic], "holder", extra=KIP848, listener=True).start()
    members = [holder]
    try:
        wait_for(lambda: len(holder.assigned), lambda n: n == 4, timeout=60, what="the holder owning all 4")
        holder.paused_polling.set()
        wait_for(holder.parked.is_set, timeout=5, what="the holder no longer polling")
        members.append(clients.Member(conn, group, [topic], "joiner", extra=KIP848).start())
        facts = wait_for(lambda: asyncio.run(brokers.observe(conn, group, kip848=True)),
                         lambda f: isinstance(f, GroupFacts) and len(f.view.members) == 2
                         and f.view.state is not GroupState.ASSIGNING,  # 4.4: Assigning until the target is computed
                         timeout=30, what="the operator observing both members, their target computed")  # fmt: skip
        assert isinstance(facts, GroupFacts)
        librdkafka = clients.describe_group(conn, group)
        assert str(librdkafka.state).split(".")[-1].upper() == "UNKNOWN"  # what the status said before the fix
        assert facts.view.type is GroupType.CONSUMER
        assert facts.view.state is GroupState.RECONCILING, facts.view.state

        status = _resync(group, conn.bootstrap_servers, facts)
        assert status.state == "Reconciling"
        assert _condition(status, ConditionType.READY)[:2] == ("False", "Rebalancing")
        assert _condition(status, ConditionType.REBALANCING)[:2] == ("True", "Reconciling")
        metrics = OperatorMetrics()
        metrics.move_state(None, GroupState(status.state))
        sample = metrics.registry.get_sample_value
        assert sample("vigil_operator_group_state", {"state": "Reconciling"}) == 1
        assert sample("vigil_operator_group_state", {"state": "Unknown"}) == 0
    finally:
        for m in members:
            m.close()


def test_kip848_config_valid_is_judged_by_the_group_s_own_heartbeat(kafka: KafkaCluster, brokers: Brokers) -> None:
    """The operator's KIP-848 timing check: the group's own heartbeat interval is 3 s (a group config; the
    broker's is 1 s); a stall timeout of 5 s is below two of the group's heartbeats. ConfigValid says so, naming the
    group's 3000 ms; judged by the broker's values (what the operator read before) it was Valid."""
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("op-timings848"), partitions=1)
    group = clients.unique("g-op-timings848")
    entry = ConfigEntry("consumer.heartbeat.interval.ms", "3000", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])
    admin = clients.admin(conn)  # set as a user would (kafka-configs --entity-type groups)
    admin.incremental_alter_configs([resource])[resource].result(30)
    member = clients.Member(conn, group, [topic], "m", extra=KIP848).start()
    try:
        wait_for(lambda: len(member.assigned), lambda n: n == 1, timeout=60, what="the member owning the partition")
        facts = asyncio.run(brokers.observe(conn, group, kip848=True))
        assert isinstance(facts, GroupFacts)
        assert facts.group_configs
        assert (facts.limits.consumer_session_ms, facts.limits.consumer_heartbeat_ms) == (10000, 3000)
        config = _condition(
            _resync(group, conn.bootstrap_servers, facts, stallTimeoutSeconds=5), ConditionType.CONFIG_VALID
        )
        assert config[:2] == ("True", "ValidWithAdvice"), config
        assert "stallTimeout (5000 ms) is below 2× the group's heartbeat interval (3000 ms)" in config[2]
        fine = _condition(
            _resync(group, conn.bootstrap_servers, facts, stallTimeoutSeconds=8), ConditionType.CONFIG_VALID
        )
        assert fine[:2] == ("True", "Valid")
        assert "the group's own session (10000 ms) and heartbeat (3000 ms)" in fine[2]

        broker_only = asyncio.run(brokers.observe(conn, group))  # the broker's values alone: the check before
        assert isinstance(broker_only, GroupFacts)
        assert broker_only.limits.consumer_heartbeat_ms == 1000
        before = _resync(group, conn.bootstrap_servers, broker_only, stallTimeoutSeconds=5)
        assert _condition(before, ConditionType.CONFIG_VALID)[:2] == ("True", "Valid")
    finally:
        member.close()


def test_the_operator_releases_a_dead_kip848_static_member_for_its_replacement(
    kafka: KafkaCluster, brokers: Brokers, tmp_path: Path
) -> None:
    """The operator's side of the KIP-848 static release: a static member's app is killed (no sidecar:
    nobody releases it); the group's session is 45 s. The operator's adapter releases the instance id with the
    observed pair; the replacement takes the member over at once, where it would be refused with
    UNRELEASED_INSTANCE_ID for the session. Then: the same release again is compare-and-release (the instance id is
    the replacement's now: nothing changes), and a graceful close shows as a static member that left (what the
    operator reads before a release, so it does not release again what the client released)."""
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("op-release"), partitions=4)
    group = clients.unique("g-op-release")
    admin = GroupClient(conn)
    try:
        admin.set_group_session(group, GROUP_SESSION_MS)
    finally:
        admin.close()

    def start_app() -> procs.Managed:
        return static_app.start(conn, group, topic, "op-rel", tmp_path, beacon_addr=NO_SIDECAR, protocol="consumer")

    def members_holding() -> list[str]:
        return static_app.holding_members(tmp_path, "op-rel")

    app = start_app()
    try:
        old = wait_for(members_holding, timeout=60, what="the app holding partitions")[-1]
        wait_for(lambda: asyncio.run(brokers.observe(conn, group, kip848=True)),
                 lambda f: isinstance(f, GroupFacts) and f.view.stable, timeout=30,
                 what="the group Stable")  # fmt: skip
        assert asyncio.run(brokers.static_members_left(conn, group)) == frozenset()
        app.kill()  # no close: the member keeps its instance id for the group's 45 s session

        released = asyncio.run(brokers.release(conn, group, old, "op-rel"))
        assert released.reaction is Reaction.DONE, released
        assert asyncio.run(brokers.static_members_left(conn, group)) == {old}
        started = time.monotonic()
        app = start_app()
        new = wait_for(members_holding, lambda held: len(held) >= 2, timeout=bound(BACK_WITHIN),
                       what="the replacement holding partitions")[-1]  # fmt: skip
        took = time.monotonic() - started
        print(f"the replacement held partitions {took:.1f}s after its start (group session 45 s)")
        assert took <= BACK_WITHIN
        assert new != old
        assert broker_log.static_releases(kafka, group, "op-rel") == [old]
        assert broker_log.static_replacements(kafka, group, "op-rel") == [(new, old)]
        assert broker_log.unreleased_refusals(kafka, group, "op-rel") == []

        again = asyncio.run(brokers.release(conn, group, old, "op-rel"))  # a stale pair: the replacement is untouched
        assert again.reaction is Reaction.NOTHING_TO_DO, again
        assert again.name == "FENCED_INSTANCE_ID"
        assert broker_log.static_releases(kafka, group, "op-rel") == [old]
        facts = asyncio.run(brokers.observe(conn, group, kip848=True))
        assert isinstance(facts, GroupFacts)
        assert [(m.member_id, m.instance_id) for m in facts.view.members] == [(new, "op-rel")]

        app.stop(grace=10)  # a graceful close: librdkafka releases the instance id itself
        wait_for(lambda: asyncio.run(brokers.static_members_left(conn, group)), lambda left: left == {new},
                 timeout=15, what="the replacement's own release read back (epoch -2)")  # fmt: skip
    finally:
        app.stop(grace=5)


def test_groups_on_a_silent_broker_cost_one_connect_timeout_then_the_cluster_is_held(
    tmp_path: Path, brokers: Brokers
) -> None:
    """A real broker made silent (SIGSTOP: connections accepted by the kernel, nothing answered). Three groups' resyncs
    ask it at once (queued on the cluster's one worker): the first connect waits out its timeout and fails, the two
    behind it are answered from the hold without a connect of their own, and within the hold no resync connects."""
    with silent_broker(tmp_path / "kafka-silent", "127.0.0.1") as silent:
        assert silent.connections() == frozenset()
        conn = KafkaConnection(bootstrap_servers=silent.bootstrap)

        async def observe(*groups: str) -> list[GroupFacts | Unreachable]:
            return list(await asyncio.gather(*(brokers.observe(conn, group) for group in groups)))

        started = time.monotonic()
        answers = asyncio.run(observe(*(clients.unique(f"silent-{i}") for i in range(3))))
        took = time.monotonic() - started
        assert [getattr(a, "reason", a) for a in answers] == ["BrokerUnreachable"] * 3
        assert all(silent.bootstrap in a.message for a in answers if isinstance(a, Unreachable))
        assert CONNECT_TIMEOUT - 1 <= took < 2 * CONNECT_TIMEOUT, f"{took:.1f} s: not one connect timeout"
        connected = silent.connections()
        assert connected, "the connect never reached the silent broker"

        started = time.monotonic()
        (held,) = asyncio.run(observe(clients.unique("silent-held")))
        assert isinstance(held, Unreachable)
        assert held.reason == "BrokerUnreachable"
        assert time.monotonic() - started < 1, "a resync within the hold waited for the broker"
        assert silent.connections() == connected, "a resync within the hold connected again"


def test_the_groups_a_round_asks_for_at_once_share_one_census_round(kafka: KafkaCluster, brokers: Brokers) -> None:
    """A cluster's round starts its resyncs together: the groups they ask for within a moment of each other are
    observed in one census round, so the broker requests do not grow with the groups; each resync gets its own
    group's facts, and a KIP-848 group's epoch is its generation (the per-group rebalance count's source)."""
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("op-census"), partitions=2)
    live = clients.unique("g-op-census-848")
    member = clients.Member(conn, live, [topic], "m", extra=KIP848).start()
    try:
        first = wait_for(lambda: asyncio.run(brokers.observe(conn, live, kip848=True)),
                         lambda f: isinstance(f, GroupFacts) and f.view.state is GroupState.STABLE
                         and len(f.view.members) == 1, timeout=30, what=f"{live} Stable with its member")  # fmt: skip
        assert isinstance(first, GroupFacts)
        assert first.generation is not None
        assert first.generation >= 1

        def requests_for(*groups: str) -> tuple[int, list[GroupFacts | Unreachable]]:
            async def together() -> list[GroupFacts | Unreachable]:
                asked = [brokers.observe(conn, live, kip848=True), *(brokers.observe(conn, g) for g in groups)]
                return list(await asyncio.gather(*asked))

            before = brokers.requests()
            answers = asyncio.run(together())
            return brokers.requests() - before, answers

        none = [clients.unique(f"g-op-census-none-{i}") for i in range(30)]
        few, _ = requests_for(*none[:2])
        many, answers = requests_for(*none)
        print(f"requests of one census round: {few} for 3 groups, {many} for 31")
        assert many == few, f"{many} requests for 31 groups, {few} for 3: they grow with the groups"
        live_facts, *rest = answers
        assert isinstance(live_facts, GroupFacts)
        assert (live_facts.view.group_id, live_facts.generation) == (live, first.generation)
        assert [f.view.group_id for f in rest if isinstance(f, GroupFacts)] == none
        assert {f.view.state for f in rest if isinstance(f, GroupFacts)} == {GroupState.DEAD}
    finally:
        member.close()


def _read_group(brokers: Brokers, conn: KafkaConnection, metrics: OperatorMetrics, labels: tuple[str, str, str],
                last: readings.Readings | None, *, kip848: bool) -> readings.Readings:  # fmt: skip
    """One resync's readings of the group `labels` names, on `/metrics` as the runtime puts them."""
    facts = asyncio.run(brokers.observe(conn, labels[2], kip848=kip848))
    assert isinstance(facts, GroupFacts), facts
    now, counted = readings.next_readings(last, state=facts.view.state, members=len(facts.view.members), lag=None,
                                          generation=brokers.generation(conn, facts), now=time.time())  # fmt: skip
    metrics.read_group(labels, last, now, counted)
    return now


def test_five_rebalances_between_two_resyncs_count_five(kafka: KafkaCluster, brokers: Brokers) -> None:
    """The per-group rebalance count of a KIP-848 group: five membership changes (three joins,
    two graceful leaves, each seen by the coordinator before the next) between two resyncs raise the group's
    `vigil_operator_consumergroup_rebalances_total` by exactly five — counted from the group epoch's delta, so a
    30 s resync misses none of them."""
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("op-rebalances"), partitions=4)
    group = clients.unique("g-op-rebalances")
    labels = ("shop", "orders", group)
    metrics = OperatorMetrics()

    def resync(last: readings.Readings | None) -> readings.Readings:
        return _read_group(brokers, conn, metrics, labels, last, kip848=True)

    def members() -> int:
        facts = asyncio.run(brokers.observe(conn, group, kip848=True))
        return len(facts.view.members) if isinstance(facts, GroupFacts) else -1

    first = clients.Member(conn, group, [topic], "m0", extra=KIP848).start()
    others: list[clients.Member] = []
    try:
        wait_for(members, lambda n: n == 1, timeout=30, what=f"{group} with its first member")
        last = resync(None)  # the baseline: nothing counted
        sample = metrics.registry.get_sample_value
        counter = "vigil_operator_consumergroup_rebalances_total"
        where = {"namespace": "shop", "consumergroup": "orders", "group": group}
        assert sample(counter, where) == 0
        for i in range(1, 4):  # three joins
            others.append(clients.Member(conn, group, [topic], f"m{i}", extra=KIP848).start())
            wait_for(members, lambda n, want=1 + i: n == want, timeout=30, what=f"{group}: member m{i} joined")
        for member in others[:2]:  # two graceful leaves
            member.close()
        wait_for(members, lambda n: n == 2, timeout=30, what=f"{group}: two members left")
        resync(last)
        assert sample(counter, where) == 5
    finally:
        for member in [first, *others]:
            member.close()


def test_five_classic_rebalances_between_two_resyncs_count_five(kafka: KafkaCluster, brokers: Brokers) -> None:
    """The same count for a classic group, whose DescribeGroups carries no generation: the operator reads it from
    `__consumer_offsets` (generation_feed). Three joins and two graceful leaves, each awaited Stable before the next,
    raise the counter between two resyncs by exactly as much as the members' own generation (librdkafka's group
    metadata) moved: 5, or 4 when two of the changes completed in one generation (seen in 2 of 4 runs)."""
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("op-classic-rebalances"), partitions=4)
    group = clients.unique("g-op-classic-rebalances")
    labels = ("shop", "orders", group)
    metrics = OperatorMetrics()
    sample = metrics.registry.get_sample_value
    counter = "vigil_operator_consumergroup_rebalances_total"
    where = {"namespace": "shop", "consumergroup": "orders", "group": group}

    def observe() -> GroupFacts:
        facts = asyncio.run(brokers.observe(conn, group))
        assert isinstance(facts, GroupFacts), facts
        return facts

    def resync(last: readings.Readings | None) -> readings.Readings:
        return _read_group(brokers, conn, metrics, labels, last, kip848=False)

    def stable_with(n: int) -> None:
        wait_for(observe, lambda f: f.view.state is GroupState.STABLE and len(f.view.members) == n, timeout=60,
                 what=f"{group} Stable with {n} members")  # fmt: skip

    def members_generation() -> int:
        found = cgmd.parse(first.group_metadata or b"")
        return found.generation if found is not None else -1

    def fed_up_to_the_members() -> int:
        both = wait_for(lambda: (members_generation(), brokers.generation(conn, observe())),
                        lambda pair: pair[0] > 0 and pair[0] == pair[1], timeout=60,
                        what=f"{group}: __consumer_offsets read up to the members' generation")  # fmt: skip
        return both[0]

    first = clients.Member(conn, group, [topic], "m0").start()
    others: list[clients.Member] = []
    try:
        stable_with(1)
        fed_up_to_the_members()
        before = members_generation()
        last = resync(None)  # the baseline: nothing counted
        assert sample(counter, where) == 0
        for i in range(1, 4):  # three joins
            others.append(clients.Member(conn, group, [topic], f"m{i}").start())
            stable_with(1 + i)
        for n, member in zip((3, 2), others[:2], strict=True):  # two graceful leaves
            member.close()
            stable_with(n)
        fed = fed_up_to_the_members()
        now = resync(last)
        # the group may take one more generation after the last Stable (seen on 4.4 in 2 runs of 5): the resync
        # reads it or not, and the members reach whichever it read
        assert now.generation is not None
        assert now.generation >= fed
        wait_for(members_generation, lambda g: g >= now.generation, timeout=30, what="the members at the resync's")
        moved = now.generation - before
        print(f"five membership changes moved the members' generation by {moved}")
        assert moved >= 4  # each change awaited Stable; in runs here they made 5 generations, or 4 (two in one)
        assert sample(counter, where) == moved
    finally:
        for member in [first, *others]:
            member.close()


def test_a_fresh_clusters_loading_coordinator_is_asked_again_not_reported_unreachable(
    tmp_path: Path, brokers: Brokers
) -> None:
    """A new Kafka cluster's first FindCoordinator answers COORDINATOR_NOT_AVAILABLE while it makes the offsets
    topic: the census misses the groups, and the operator asks again after a backoff within the resync (as
    GroupClient retries one group's requests), so the first status says the group, never `BrokerUnreachable`."""
    cluster = kafka_cluster.create(tmp_path / "kafka-fresh", progress=lambda _: None)
    try:
        conn = cluster.connection()
        groups = [clients.unique(f"g-fresh-{i}") for i in range(3)]

        async def together() -> list[GroupFacts | Unreachable]:
            return list(await asyncio.gather(*(brokers.observe(conn, g) for g in groups)))

        answers = asyncio.run(together())
        assert [a.view.state if isinstance(a, GroupFacts) else a.message for a in answers] == [GroupState.DEAD] * 3
    finally:
        cluster.stop()
