"""Share groups (KIP-932) on the real broker: the census describes them by their own API (ShareGroupDescribe) as
`GroupClient.describe` does, with their type, state and members, and nothing is sent to remove one of their members
(no Kafka API does); a share group's lag is the broker's (DescribeShareGroupOffsets). Streams groups, read by the
same path (StreamsGroupDescribe), are tested with a real Kafka Streams app in test_census_streams.py."""

from collections.abc import Iterator

import pytest

from vigil_core.kafka.census import Census
from vigil_core.kafka.census_plan import Observation
from vigil_core.kafka.group_client import GroupClient
from vigil_core.kafka.model import GroupState, GroupType, GroupView, TopicPartitionRef
from vigil_core.kafka.outcomes import Reaction
from vigil_core.kafka.wire import GroupWire
from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import clients
from vigil_dev.testing.sharer import Sharer
from vigil_dev.testing.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.kafka_min("4.2")]  # share groups on by default from 4.2's format

PARTITIONS = 2


@pytest.fixture
def share_group(kafka: KafkaCluster) -> Iterator[tuple[str, str]]:
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("share"), partitions=PARTITIONS)
    clients.produce_spread(conn, topic, [f"r{i}" for i in range(10)], PARTITIONS)
    group = clients.unique("g-share")
    member = Sharer(kafka, group, topic)
    try:
        yield group, topic
    finally:
        member.close()


def test_a_share_group_is_observed_by_type_as_group_client_describes_it(
    kafka: KafkaCluster, share_group: tuple[str, str]
) -> None:
    group, topic = share_group
    client, wire = GroupClient(kafka.connection()), GroupWire(kafka.connection())
    try:
        view = wait_for(lambda: client.describe(group, subscriptions=False),
                        lambda v: v.state is GroupState.STABLE and len(v.members) == 1 and v.members[0].assignment,
                        timeout=60, what=f"{group} Stable with its member assigned")  # fmt: skip
        assert view.type is GroupType.SHARE
        assert view.members[0].assignment == tuple(TopicPartitionRef(topic, p) for p in range(PARTITIONS))

        def observed() -> GroupView | None:
            seen = Census(wire).round([group]).groups[group]
            return seen.view if isinstance(seen, Observation) else None

        wait_for(observed, lambda v: v == client.describe(group, subscriptions=False), timeout=30,
                 what="the census and the client agree")  # fmt: skip
        seen = Census(wire).round([group]).groups[group]
        assert isinstance(seen, Observation), seen
        assert seen.committed == {}  # a share group's offsets are kept apart: no OffsetFetch
        assert set(seen.end_offsets) == set(view.members[0].assignment)
        assert seen.group_epoch is not None

        member = view.members[0]
        outcome = client.remove_member(group, member.member_id, None, "test", group_type=view.type)
        assert outcome.reaction is not Reaction.DONE
        assert "no Kafka API removes a member of a share group" in outcome.message
        assert [m.member_id for m in client.describe(group, subscriptions=False).members] == [member.member_id]
    finally:
        client.close()
        wire.close()


@pytest.mark.kafka_min("4.4")  # DescribeShareGroupOffsets v1 (its lag, KIP-1226)
def test_a_share_group_s_lag_is_what_the_broker_counts_undelivered(kafka: KafkaCluster) -> None:
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("share-lag"), partitions=PARTITIONS)
    group = clients.unique("g-share-lag")
    wire = GroupWire(conn)
    tps = [TopicPartitionRef(topic, p) for p in range(PARTITIONS)]

    def lag() -> dict[TopicPartitionRef, int] | None:
        seen = Census(wire).round([group]).groups[group]
        return dict(seen.share_lag) if isinstance(seen, Observation) else None

    client = GroupClient(conn)
    try:
        member = Sharer(kafka, group, topic)
        try:  # the broker counts a share-partition's lag once records went through it (-1, unknown, before)
            wait_for(lambda: client.describe(group, subscriptions=False),
                     lambda v: v.state is GroupState.STABLE and len(v.members) == 1 and v.members[0].assignment,
                     timeout=60, what=f"{group} Stable with its member assigned")  # fmt: skip
            clients.produce_spread(conn, topic, ["first-0", "first-1"], PARTITIONS)
            wait_for(lag, lambda seen: seen == dict.fromkeys(tps, 0), timeout=60,
                     what=f"{group}'s lag known: 0, its first records delivered and acknowledged")  # fmt: skip
        finally:
            member.close()
        produced = clients.produce_spread(conn, topic, [f"r{i}" for i in range(10)], PARTITIONS)
        assert produced == 10
        wait_for(lag, lambda seen: seen == dict.fromkeys(tps, 5), timeout=30,
                 what=f"{group}'s lag: the 10 records nobody consumed")  # fmt: skip
        member = Sharer(kafka, group, topic)
        try:
            wait_for(lag, lambda seen: seen == dict.fromkeys(tps, 0), timeout=60,
                     what=f"{group}'s lag back to 0 once a member consumed and acknowledged them")  # fmt: skip
        finally:
            member.close()
    finally:
        client.close()
        wire.close()
