"""The batched group census against the real broker: each observation equals what `GroupClient` says of the same
group at the same moment, a round's requests do not grow with the groups, and a silent broker (SIGSTOP) costs only
its own groups, which are misses naming it."""

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import NewTopic

from vigil_core.kafka.census import Census
from vigil_core.kafka.census_plan import CensusRound, Miss, Observation
from vigil_core.kafka.group_client import GroupClient
from vigil_core.kafka.model import GroupState, GroupType, GroupView, TopicPartitionRef
from vigil_core.kafka.outcomes import TRANSPORT_ERROR, Api
from vigil_core.kafka.security import KafkaConnection
from vigil_core.kafka.wire import GroupWire
from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import clients
from vigil_dev.testing.waiting import wait_for

pytestmark = pytest.mark.integration

PARTITIONS = 3
KIP848: clients.ClientConfig = {"group.protocol": "consumer"}


def _static(instance: str) -> clients.ClientConfig:
    return {"group.instance.id": instance}


def _commit(conn: KafkaConnection, group: str, topic: str, offsets: dict[int, int]) -> str:
    """A group with committed offsets and no members (Empty): what most groups of a large cluster are. The admin
    API reports a failed commit per partition (on a fresh broker: the offsets topic still loading), so until none
    fails."""
    admin = clients.admin(conn)  # referenced until its futures resolve
    request = [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p, o) for p, o in offsets.items()])]

    def errors() -> list[str]:
        answer = admin.alter_consumer_group_offsets(request)[group].result(15)
        return [str(tp.error) for tp in answer.topic_partitions if tp.error is not None]

    wait_for(errors, lambda e: not e, timeout=30, what=f"offsets committed for {group}")
    return group


def _assigned(view: GroupView) -> list[TopicPartitionRef]:
    return sorted({tp for m in view.members for tp in m.assignment})


@dataclass
class Mix:
    """One group of each kind on the single-node broker, settled: Stable, every record consumed and committed."""

    topic: str
    classic: str
    """Two live members, one static."""
    kip848: str
    """One live member, `group.protocol=consumer`."""
    empty: str
    """Committed offsets, never a member."""
    missing: str
    """No such group."""
    members: list[clients.Member] = field(default_factory=list)

    @property
    def groups(self) -> list[str]:
        return [self.classic, self.kip848, self.empty, self.missing]


@pytest.fixture(scope="module")
def mix(kafka: KafkaCluster) -> Iterator[Mix]:
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("census"), partitions=PARTITIONS)
    clients.produce_spread(conn, topic, [f"r{i}" for i in range(30)], PARTITIONS)
    found = Mix(topic, clients.unique("g-classic"), clients.unique("g-848"), clients.unique("g-empty"),
                clients.unique("g-missing"))  # fmt: skip
    found.members += [
        clients.Member(conn, found.classic, [topic], "pod-0", extra=_static("pod-0")).start(),
        clients.Member(conn, found.classic, [topic], "dynamic").start(),
        clients.Member(conn, found.kip848, [topic], "kip848", extra=KIP848).start(),
    ]
    _commit(conn, found.empty, topic, {0: 3, 1: 5})
    client = GroupClient(conn)
    try:
        clients.wait_stable(conn, found.classic, 2)
        clients.wait_stable(conn, found.kip848, 1)
        everything = [TopicPartitionRef(topic, p) for p in range(PARTITIONS)]
        for group in (found.classic, found.kip848):  # nothing moves between the census and the client's reads
            wait_for(lambda g=group: client.committed_offsets(g), lambda c: c == client.end_offsets(everything),
                     timeout=60, what=f"{group} committed every record")  # fmt: skip
        yield found
    finally:
        client.close()
        for m in found.members:
            m.close()


@pytest.fixture
def wire(kafka: KafkaCluster) -> Iterator[GroupWire]:
    connection = GroupWire(kafka.connection())
    yield connection
    connection.close()


@pytest.fixture
def census(wire: GroupWire) -> Census:
    return Census(wire)


def test_each_observation_equals_what_group_client_says(kafka: KafkaCluster, mix: Mix, census: Census) -> None:
    client = GroupClient(kafka.connection())
    try:
        seen = census.round(mix.groups)
        assert list(seen.groups) == mix.groups
        for group in mix.groups:
            observed = seen.groups[group]
            assert isinstance(observed, Observation), observed
            view = client.describe(group, subscriptions=False)
            assert observed.view == view
            assert observed.committed == client.committed_offsets(group)
            assert observed.end_offsets == client.end_offsets(_assigned(view))
        classic, kip848, empty, missing = (seen.observed[g] for g in mix.groups)
        assert (classic.view.state, classic.view.type, classic.view.assignor) == (
            GroupState.STABLE, GroupType.CLASSIC, "range")  # fmt: skip
        assert sorted(m.instance_id or "" for m in classic.view.members) == ["", "pod-0"]
        assert len(classic.end_offsets) == PARTITIONS
        assert (kip848.view.state, kip848.view.type) == (GroupState.STABLE, GroupType.CONSUMER)
        assert kip848.timings == client.group_timings(mix.kip848)
        assert kip848.group_epoch is not None
        assert kip848.group_epoch >= 1
        assert kip848.member_epochs == {m.member_id: kip848.group_epoch for m in kip848.view.members}  # Stable
        assert (empty.view.state, empty.committed) == (
            GroupState.EMPTY, {TopicPartitionRef(mix.topic, 0): 3, TopicPartitionRef(mix.topic, 1): 5})  # fmt: skip
        assert (missing.view.state, missing.committed, missing.end_offsets) == (GroupState.DEAD, {}, {})
        assert classic.group_epoch is None
        assert classic.timings is None
    finally:
        client.close()


def _seen(
    seen: CensusRound,
) -> dict[str, tuple[GroupView, Mapping[TopicPartitionRef, int], Mapping[TopicPartitionRef, int]]]:
    return {g: (o.view, o.committed, o.end_offsets) for g, o in seen.observed.items()}


def test_a_round_sends_as_many_requests_for_60_groups_as_for_5(kafka: KafkaCluster, mix: Mix, wire: GroupWire) -> None:
    """One broker: ListGroups, DescribeGroups, ConsumerGroupDescribe, OffsetFetch, DescribeConfigs, Metadata,
    ListOffsets and FindCoordinator (for the groups that do not exist): 8 requests, for 5 groups as for 60 —
    where `GroupClient` would send ~3 per group."""
    conn = kafka.connection()
    live: list[clients.Member] = []
    try:
        five = [*mix.groups, _commit(conn, clients.unique("g-empty"), mix.topic, {2: 1})]
        for kind, extra in (("classic", {}), ("classic", {}), ("848", KIP848)):
            group = clients.unique(f"g-{kind}")
            live.append(clients.Member(conn, group, [mix.topic], group, extra=dict(extra)).start())
        empties = [_commit(conn, clients.unique("g-empty"), mix.topic, {n % PARTITIONS: 1}) for n in range(51)]
        sixty = [*five, *(m.group for m in live), *empties, clients.unique("g-missing")]
        for m in live:
            clients.wait_stable(conn, m.group, 1)
        assert len(sixty) == 60

        census = Census(wire)
        small, large = census.round(five), census.round(sixty)
        print(f"requests per round: {small.requests} for 5 groups, {large.requests} for 60")

        assert not small.missed
        assert not large.missed
        assert (small.requests, large.requests) == (8, 8)
        states = {g: o.view.state for g, o in large.observed.items()}
        assert [states[m.group] for m in live] == [GroupState.STABLE] * 3
        assert {states[g] for g in empties} == {GroupState.EMPTY}
        # batches of 10: the 58 groups that exist take 6 OffsetFetch, 5 more requests, all to the one broker at once
        # (more than its 4 in flight: the rest wait their turn), and the same observations
        chunked = Census(wire, groups_per_request=10).round(sixty)
        assert chunked.requests == 8 + 5
        assert _seen(chunked) == _seen(large)
    finally:
        for m in live:
            m.close()


TIMEOUT = 5.0
"""The census wire's request timeout in the 3-node test: what the frozen broker costs."""


def _wait_leaders(conn: KafkaConnection, topic: str, partitions: int) -> None:
    def leaders() -> int:
        meta = clients.admin(conn).list_topics(topic=topic, timeout=5).topics.get(topic)
        return 0 if meta is None or meta.error is not None else sum(p.leader >= 0 for p in meta.partitions.values())

    wait_for(leaders, lambda n: n == partitions, timeout=30, what=f"leaders for topic {topic}")


@pytest.mark.kafka3
def test_a_silent_broker_costs_only_its_own_groups(kafka3: KafkaCluster) -> None:
    """One of three brokers SIGSTOPped: the groups the other two coordinate are observed in well under the request
    timeout, while the frozen broker's ListGroups waits it out; its groups — one Empty, one that does not exist — are
    misses naming it. A group that does not exist on a broker that answered is still Dead (once every ListGroups is
    in: the wait is the frozen broker's)."""
    conn = kafka3.connection()
    wire = GroupWire(conn, request_timeout=TIMEOUT)
    census = Census(wire)
    by_node: dict[int, list[str]] = {}
    for _ in range(40):  # group ids by coordinator (the hash of the id picks an offsets partition, its leader)
        group = clients.unique("g-3")
        found = wait_for(lambda g=group: wire.find_coordinator(g), lambda f: f.code == 0, timeout=60,
                         what=f"the coordinator of {group} (a fresh cluster creates the offsets topic)")  # fmt: skip
        by_node.setdefault(found.node_id, []).append(group)
    frozen = max(by_node, key=lambda n: len(by_node[n]))
    others = sorted(n for n in by_node if n != frozen)
    assert others, by_node
    first, last = others[0], others[-1]
    assert len(by_node[first]) >= 3, by_node
    assert len(by_node[frozen]) >= 2, by_node
    topic = clients.unique("census3")  # its partitions led by the brokers that stay up: ListOffsets never waits
    hosts = [n.node_id for n in kafka3.nodes if n.node_id != frozen]
    admin = clients.admin(conn)
    admin.create_topics([NewTopic(topic, len(hosts), replica_assignment=[[n] for n in hosts])])[topic].result(30)
    _wait_leaders(conn, topic, len(hosts))
    live_group, dead_here = by_node[first][0], by_node[first][1]
    empty_there = _commit(conn, by_node[last][-1], topic, {0: 1})
    empty_frozen, dead_frozen = _commit(conn, by_node[frozen][0], topic, {1: 1}), by_node[frozen][1]
    member = clients.Member(conn, live_group, [topic], "live").start()
    process = kafka3.process(frozen)
    try:
        clients.wait_stable(conn, live_group, 1)
        asked = [live_group, empty_there, dead_here, empty_frozen, dead_frozen]
        warm = census.round(asked)  # every broker answers; the connections are up
        assert not warm.missed, warm.missed
        assert warm.observed[empty_frozen].view.coordinator_id == frozen

        process.freeze()
        seen = census.round(asked)

        fast = {g: seen.observed[g].seconds for g in (live_group, empty_there)}
        print(f"broker {frozen} frozen: round {seen.seconds:.2f}s, {seen.requests} requests, the others' groups in"
              f" {max(fast.values()):.3f}s")  # fmt: skip
        assert all(s < TIMEOUT / 3 for s in fast.values()), (fast, seen.seconds)
        assert seen.observed[live_group].view.state is GroupState.STABLE
        assert seen.observed[empty_there].view.state is GroupState.EMPTY
        assert seen.seconds >= TIMEOUT - 0.1  # the frozen broker's ListGroups waited out its timeout
        dead = seen.observed[dead_here]
        assert (dead.view.state, dead.view.coordinator_id) == (GroupState.DEAD, first)
        for group in (empty_frozen, dead_frozen):
            missed = seen.groups[group]
            assert isinstance(missed, Miss), missed
            assert (missed.api, missed.node, missed.code) == (Api.LIST_GROUPS, frozen, TRANSPORT_ERROR)
            assert f"ListGroups to broker {frozen}: TRANSPORT_ERROR" in missed.line
    finally:
        process.thaw()
        member.close()
        wire.close()
        kafka3.wait_healthy([frozen])


@pytest.mark.kafka_secure
def test_a_group_the_principal_may_not_describe_is_a_miss_not_dead(kafka_secure: KafkaCluster) -> None:
    """ListGroups leaves out, silently, the groups the principal may not Describe; FindCoordinator answers them
    GROUP_AUTHORIZATION_FAILED. So the census names the denial, as `GroupClient.describe` does (it raises it), and
    never calls a group it cannot see Dead."""
    group = clients.unique("g-noacl")
    wire = GroupWire(kafka_secure.connection("app"))
    try:
        seen = Census(wire).round([group]).groups[group]
    finally:
        wire.close()
    assert isinstance(seen, Miss), seen
    assert (seen.api, seen.outcome.name) == (Api.FIND_COORDINATOR, "GROUP_AUTHORIZATION_FAILED")
    assert "FindCoordinator" in seen.line


def test_a_round_of_groups_that_do_not_exist_ends_with_each_dead(census: Census) -> None:
    """Nothing listed anywhere (a new ConsumerGroup names a group no consumer joined yet): every group is found by
    FindCoordinator alone, Dead (a fresh cluster's coordinator may first answer COORDINATOR_NOT_AVAILABLE while the
    offsets topic is made: a miss naming it, not retried within the round — `Brokers` asks again)."""
    asked = [clients.unique(f"g-census-none-{i}") for i in range(3)]
    found = wait_for(lambda: census.round(asked), lambda r: len(r.observed) == len(asked), timeout=30,
                     what="a round observing each group that does not exist")  # fmt: skip
    assert {g: (r.view.state, r.committed) for g, r in found.observed.items()} == dict.fromkeys(
        asked, (GroupState.DEAD, {})
    )
