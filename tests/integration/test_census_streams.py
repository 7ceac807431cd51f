"""Streams groups (KIP-1071) on the real broker, with a real Kafka Streams app (`vigil_dev.testing.streams_app`,
`group.protocol=streams`): the census describes them by their own API (StreamsGroupDescribe) as `GroupClient.describe`
does — type, state, members and the input partitions their active tasks read — reads their committed offsets as for
a consumer group, and nothing is sent to remove one of their members (no Kafka API does).

The app's topology is one stateless sub-topology (input → mapValues → output): task (0, p) reads partition p of the
input topic. The decoding of other topologies (repartition topics, standby tasks) is unit-tested on encoded answers.
"""

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from vigil_core.kafka.census import Census
from vigil_core.kafka.census_plan import Observation
from vigil_core.kafka.group_client import GroupClient
from vigil_core.kafka.model import GroupState, GroupType, GroupView, TopicPartitionRef
from vigil_core.kafka.outcomes import Reaction
from vigil_core.kafka.wire import GroupWire
from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import clients, streams_app
from vigil_dev.testing.streams_app import StreamsApp
from vigil_dev.testing.waiting import wait_for

# streams groups are on by default from 4.2's format: 4.4's `streams.version` 1 is bootstrapped by metadata version
# 4.2-IV1 (4.1 had it at 0: early access, off)
pytestmark = [pytest.mark.integration, pytest.mark.kafka_min("4.2")]

PARTITIONS = 2
RECORDS = 40
#: The first assignment of a new streams group waits `group.streams.initial.rebalance.delay.ms` (3 s); a member
#: learns of a new target assignment at its next heartbeat (`group.streams.heartbeat.interval.ms`, 5 s). JVM start
#: and Kafka Streams' own start come on top, on 2 cores next to the broker.
JOIN_TIMEOUT = 90.0


@dataclass(frozen=True)
class StreamsGroup:
    group: str
    """The app's application.id: its streams group's id."""
    input: str
    output: str
    start: Callable[..., StreamsApp]
    """Start one more instance of the app, named (its client.id), static with an `instance_id` if given."""

    def partitions(self) -> tuple[TopicPartitionRef, ...]:
        return tuple(TopicPartitionRef(self.input, p) for p in range(PARTITIONS))


@pytest.fixture
def streams_group(kafka: KafkaCluster, artifacts_dir: Path) -> Iterator[StreamsGroup]:
    """A 2-partition input topic, an output topic, and a starter of app instances (stopped after the test). The
    apps' logs stay under test-artifacts/<run>/streams/<group>/."""
    conn = kafka.connection()
    source = clients.create_topic(conn, clients.unique("streams-in"), partitions=PARTITIONS)
    sink = clients.create_topic(conn, clients.unique("streams-out"), partitions=PARTITIONS)
    group = clients.unique("g-streams")
    state_dir = artifacts_dir / "streams" / group
    state_dir.mkdir(parents=True)
    started: list[StreamsApp] = []

    def start(name: str, instance_id: str | None = None, input_topic: str = source) -> StreamsApp:
        app = streams_app.start(
            kafka.libs, conn, application_id=group, input_topic=input_topic, output_topic=sink, name=name,
            state_dir=state_dir, protocol="streams", instance_id=instance_id,
        )  # fmt: skip
        started.append(app)
        return app

    try:
        yield StreamsGroup(group, source, sink, start)
    finally:
        for app in reversed(started):
            app.stop()


def _stable(view: GroupView, members: int) -> bool:
    """Stable with `members` members, each reading something."""
    return view.state is GroupState.STABLE and len(view.members) == members and all(m.assignment for m in view.members)


def _census(wire: GroupWire, group: str) -> Observation | None:
    """The group as one census round observes it; None when the round missed it (a wait tries again)."""
    seen = Census(wire).round([group]).groups[group]
    return seen if isinstance(seen, Observation) else None


def _observed(wire: GroupWire, group: str) -> Observation:
    seen = _census(wire, group)
    assert seen is not None, Census(wire).round([group]).groups[group]
    return seen


def _census_view(wire: GroupWire, group: str) -> GroupView | None:
    seen = _census(wire, group)
    return seen.view if seen is not None else None


def test_a_streams_group_is_observed_by_type_as_group_client_describes_it(
    kafka: KafkaCluster, streams_group: StreamsGroup
) -> None:
    group = streams_group.group
    app = streams_group.start("streams-a")
    client, wire = GroupClient(kafka.connection()), GroupWire(kafka.connection())
    try:
        app.wait_state("RUNNING", timeout=JOIN_TIMEOUT)
        view = wait_for(lambda: client.describe(group, subscriptions=False), lambda v: _stable(v, 1),
                        timeout=JOIN_TIMEOUT, what=f"{group} Stable with its member reading")  # fmt: skip
        assert view.type is GroupType.STREAMS
        member = view.members[0]
        assert member.assignment == streams_group.partitions()  # both tasks (0, 0) and (0, 1): both partitions
        assert member.client_id.startswith("streams-a"), member  # Kafka Streams' consumer: <client.id>-StreamThread-1…
        assert member.instance_id is None
        wait_for(lambda: _census_view(wire, group), lambda v: v == client.describe(group, subscriptions=False),
                 timeout=30, what="the census and the client agree")  # fmt: skip
        seen = _observed(wire, group)
        assert seen.view.type is GroupType.STREAMS
        assert set(seen.end_offsets) == set(streams_group.partitions())
        assert seen.group_epoch is not None
        assert seen.group_epoch > 0
        epoch = seen.group_epoch

        outcome = client.remove_member(group, member.member_id, None, "test", group_type=view.type)
        assert outcome.reaction is not Reaction.DONE
        assert "no Kafka API removes a member of a streams group" in outcome.message
        after = _observed(wire, group)
        assert [m.member_id for m in after.view.members] == [member.member_id]
        assert after.view.state is GroupState.STABLE
        assert after.group_epoch == epoch  # nothing reached the group: a departure would have bumped its epoch
    finally:
        client.close()
        wire.close()


def test_a_streams_groups_committed_offsets_reach_the_end_offsets(
    kafka: KafkaCluster, streams_group: StreamsGroup
) -> None:
    """The app commits what it processed (every 500 ms); the census reads those offsets (OffsetFetch, as for a
    consumer group) and the input's end offsets: lag 0 once all is processed."""
    group, conn = streams_group.group, kafka.connection()
    app = streams_group.start("streams-a")
    client, wire = GroupClient(conn), GroupWire(conn)
    try:
        app.wait_state("RUNNING", timeout=JOIN_TIMEOUT)
        wait_for(lambda: client.describe(group, subscriptions=False), lambda v: _stable(v, 1), timeout=JOIN_TIMEOUT,
                 what=f"{group} Stable with its member reading")  # fmt: skip
        clients.produce_spread(conn, streams_group.input, [f"r{i}" for i in range(RECORDS)], PARTITIONS)
        ends = {tp: RECORDS // PARTITIONS for tp in streams_group.partitions()}

        seen = wait_for(lambda: _census(wire, group), lambda s: s is not None and dict(s.committed) == ends,
                        timeout=60, what="the census reading the input's offsets committed up to the end")  # fmt: skip
        assert seen is not None
        assert dict(seen.end_offsets) == ends  # lag 0
        # the app really processed them: every record reached the output topic
        out = client.end_offsets([TopicPartitionRef(streams_group.output, p) for p in range(PARTITIONS)])
        assert sum(out.values()) == RECORDS
    finally:
        client.close()
        wire.close()


def test_a_second_streams_member_gets_one_of_the_two_tasks(kafka: KafkaCluster, streams_group: StreamsGroup) -> None:
    """The broker's assignor splits the two active tasks between two app instances: each reads one partition."""
    group = streams_group.group
    first = streams_group.start("streams-a")
    client, wire = GroupClient(kafka.connection()), GroupWire(kafka.connection())
    try:
        first.wait_state("RUNNING", timeout=JOIN_TIMEOUT)
        wait_for(lambda: client.describe(group, subscriptions=False), lambda v: _stable(v, 1), timeout=JOIN_TIMEOUT,
                 what=f"{group} Stable with one member")  # fmt: skip
        streams_group.start("streams-b")
        view = wait_for(lambda: client.describe(group, subscriptions=False), lambda v: _stable(v, 2),
                        timeout=JOIN_TIMEOUT, what=f"{group} Stable with two members, each reading")  # fmt: skip
        by_app = {m.client_id.split("-StreamThread")[0]: m.assignment for m in view.members}
        assert set(by_app) == {"streams-a", "streams-b"}, view.members
        assert all(len(owned) == 1 for owned in by_app.values()), by_app
        assert sorted(tp for owned in by_app.values() for tp in owned) == list(streams_group.partitions())
        wait_for(lambda: _census_view(wire, group), lambda v: v == client.describe(group, subscriptions=False),
                 timeout=30, what="the census and the client agree on the two members")  # fmt: skip
    finally:
        client.close()
        wire.close()


def test_a_streams_group_without_its_source_topic_is_not_ready(
    kafka: KafkaCluster, streams_group: StreamsGroup
) -> None:
    """Its input topic missing, the broker cannot configure the topology: the group is NotReady with its member and
    no task, and the census says so as the client does. (The app gives up after its own 10 s and stops; its member
    stays until its session times out.)"""
    group = streams_group.group
    streams_group.start("streams-a", input_topic=clients.unique("streams-missing"))
    client, wire = GroupClient(kafka.connection()), GroupWire(kafka.connection())
    try:
        view = wait_for(lambda: client.describe(group, subscriptions=False),
                        lambda v: v.state is GroupState.NOT_READY and len(v.members) == 1, timeout=JOIN_TIMEOUT,
                        what=f"{group} NotReady with its member")  # fmt: skip
        assert view.type is GroupType.STREAMS
        assert view.members[0].assignment == ()
        seen = _observed(wire, group)
        assert seen.view == view
        assert seen.end_offsets == {}
    finally:
        client.close()
        wire.close()


def test_a_static_streams_member_keeps_its_tasks_when_it_leaves_for_now(
    kafka: KafkaCluster, streams_group: StreamsGroup
) -> None:
    """Static membership under the streams protocol (4.4): Kafka Streams suffixes the instance id with the stream
    thread's index. Closed, a static member leaves for now (member epoch -2): the broker keeps it and its tasks
    until its session times out, and calls the group Reconciling meanwhile — what vigil reads as it is."""
    group = streams_group.group
    app = streams_group.start("streams-a", instance_id="orders-0")
    client, wire = GroupClient(kafka.connection()), GroupWire(kafka.connection())
    try:
        app.wait_state("RUNNING", timeout=JOIN_TIMEOUT)
        view = wait_for(lambda: client.describe(group, subscriptions=False), lambda v: _stable(v, 1),
                        timeout=JOIN_TIMEOUT, what=f"{group} Stable with its member reading")  # fmt: skip
        member = view.members[0]
        assert member.instance_id == "orders-0-1"
        assert _observed(wire, group).view == view

        app.stop()
        assert app.last("closed") is not None, f"the app did not close (log: {app.log})"
        seen = wait_for(lambda: _census(wire, group),
                        lambda s: s is not None and s.member_epochs.get(member.member_id) == -2,
                        timeout=30, what="the static member left for now (epoch -2)")  # fmt: skip
        assert seen is not None
        assert seen.view.members == (member,)  # same member id, instance id and tasks
        assert seen.view.state is GroupState.RECONCILING
        assert seen.view == client.describe(group, subscriptions=False)
    finally:
        client.close()
        wire.close()
