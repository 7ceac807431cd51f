"""README "Kafka ACLs", the rows not tested elsewhere: the operator's Kafka side (`vigil_operator.brokers.Brokers`,
the event feed, the events it writes, the generation feed) and a KIP-848 static member's keep-alive and release by
its sidecar, each as a principal that holds exactly the documented set, on the broker with StandardAuthorizer ACLs.
Each request a row names is made and must succeed: a missing grant shows as a refusal here. (The sidecar's classic
set: `test_group_client.py::test_the_documented_sidecar_acls_are_enough`; the report's:
`test_spark_ingest_acl.py`.)"""

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from vigil_core import events
from vigil_core.kafka.event_sink import EventSink
from vigil_core.kafka.group_client import GroupClient
from vigil_core.kafka.model import GroupTimings, TopicPartitionRef
from vigil_core.kafka.outcomes import Reaction
from vigil_core.kafka.security import ClientConfig
from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import clients
from vigil_dev.testing.waiting import wait_for
from vigil_operator import event_feed, generation_feed
from vigil_operator.brokers import Brokers
from vigil_operator.domain.reconcile import GroupFacts
from vigil_operator.event_feed import EventFeed
from vigil_sidecar.signals.progress import ProgressSampler

pytestmark = [pytest.mark.integration, pytest.mark.kafka_secure]

PRINCIPAL = "User:app"
KIP848: ClientConfig = {"group.protocol": "consumer", "max.poll.interval.ms": 60000}


@pytest.fixture
def brokers() -> Iterator[Brokers]:
    b = Brokers()
    yield b
    b.close()


@contextmanager
def granted(cluster: KafkaCluster, grants: list[tuple[Any, str, Any]]) -> Iterator[None]:
    """`PRINCIPAL` allowed each (resource type, literal name, operation) while in the block, from when the broker
    applies them (a topic among them described as the principal); taken back after it (the broker's ACLs are the
    session's, shared with other tests of the principal)."""

    def each(kind: type[AclBinding]) -> list[Any]:
        return [kind(resource, name, ResourcePatternType.LITERAL, PRINCIPAL, "*", op, AclPermissionType.ALLOW)
                for resource, name, op in grants]  # fmt: skip

    admin = clients.admin(cluster.connection("admin"))  # held until answered: a dropped client fails its futures
    for future in admin.create_acls(each(AclBinding)).values():
        future.result(timeout=30)
    topic = next(name for resource, name, _ in grants if resource == ResourceType.TOPIC)
    app = clients.admin(cluster.connection("app"))
    wait_for(lambda: app.list_topics(topic, timeout=10).topics[topic].error, lambda error: error is None, timeout=30,
             what=f"the grants in force on the broker (the app principal describing {topic})")  # fmt: skip
    try:
        yield
    finally:
        for future in admin.delete_acls(each(AclBindingFilter)).values():
            future.result(timeout=30)


def kip848_static_member(cluster: KafkaCluster, prefix: str) -> tuple[str, str, clients.Member]:
    """A topic of 2 partitions and a KIP-848 group of one static member (instance id `pod-0`), started as admin."""
    admin_conn = cluster.connection("admin")
    topic = clients.create_topic(admin_conn, clients.unique(prefix), partitions=2)
    group = clients.unique(f"g-{prefix}")
    member = clients.Member(admin_conn, group, [topic], f"{group}-st", extra={**KIP848, "group.instance.id": "pod-0"})
    return topic, group, member.start()


def observed(brokers: Brokers, cluster: KafkaCluster, group: str, members: int, *, kip848: bool = False) -> GroupFacts:
    """The operator's census of `group` as the app principal, once it shows `members` members."""
    facts = wait_for(
        lambda: asyncio.run(brokers.observe(cluster.connection("app"), group, kip848=kip848)),
        lambda f: isinstance(f, GroupFacts) and len(f.view.members) == members,
        timeout=30,
        what=f"the operator observing {members} members of {group} as {PRINCIPAL}",
    )
    assert isinstance(facts, GroupFacts), facts
    return facts


def test_the_documented_operator_acls_are_enough_for_a_classic_group(
    kafka_secure: KafkaCluster, brokers: Brokers
) -> None:
    """Group READ+DESCRIBE, topic DESCRIBE, events topic READ+DESCRIBE+WRITE with the event feed's group DESCRIBE,
    `__consumer_offsets` READ+DESCRIBE with the generation feed's group DESCRIBE: the census (describe, committed and
    end offsets), the classic generation, a rollout bridge's heartbeat for a static member, the events the operator
    writes and the sidecars' it reads back, a departed member's removal (LeaveGroup)."""
    admin_conn = kafka_secure.connection("admin")
    topic = clients.create_topic(admin_conn, clients.unique("acl-op"), partitions=2)
    events_topic = clients.create_topic(admin_conn, clients.unique("vigil.events"), partitions=1)
    group = clients.unique("g-acl-op")
    clients.produce_spread(admin_conn, topic, ["a", "b", "c", "d"], partitions=2)
    dynamic = clients.Member(admin_conn, group, [topic], f"{group}-dyn").start()
    static = clients.Member(admin_conn, group, [topic], f"{group}-st", extra={"group.instance.id": "pod-0"}).start()
    app = kafka_secure.connection("app")
    grants = [
        (ResourceType.GROUP, group, AclOperation.READ),
        (ResourceType.GROUP, group, AclOperation.DESCRIBE),
        (ResourceType.TOPIC, topic, AclOperation.DESCRIBE),
        *((ResourceType.TOPIC, events_topic, op) for op in (AclOperation.READ, AclOperation.DESCRIBE,
                                                           AclOperation.WRITE)),
        (ResourceType.GROUP, event_feed.GROUP_ID, AclOperation.DESCRIBE),
        *((ResourceType.TOPIC, generation_feed.TOPIC, op) for op in (AclOperation.READ, AclOperation.DESCRIBE)),
        (ResourceType.GROUP, generation_feed.GROUP_ID, AclOperation.DESCRIBE),
    ]  # fmt: skip
    with granted(kafka_secure, grants):
        feed = EventFeed(app, events_topic)
        client = GroupClient(app)
        try:
            clients.wait_stable(admin_conn, group, 2)
            wait_for(lambda: sum(clients.committed(admin_conn, group).values()), lambda n: n == 4, timeout=30,
                     what="the members' commits of all 4 records")  # fmt: skip
            facts = observed(brokers, kafka_secure, group, 2)
            parts = [TopicPartitionRef(topic, p) for p in range(2)]
            assert {tp: facts.end_offsets.get(tp) for tp in parts} == {tp: 2 for tp in parts}, facts.end_offsets
            assert {tp: facts.committed.get(tp) for tp in parts} == {tp: 2 for tp in parts}, facts.committed
            generation = wait_for(lambda: brokers.generation(app, facts), lambda g: g is not None, timeout=30,
                                  what="the group's generation read from __consumer_offsets")  # fmt: skip
            assert generation is not None

            kept = next(m for m in facts.view.members if m.instance_id == "pod-0")
            beat = client.heartbeat(group, generation, kept.member_id, "pod-0")  # a rollout bridge's keep-alive
            assert beat.reaction is Reaction.DONE, beat

            sink = EventSink(app, events_topic)
            stalled = next(m for m in facts.view.members if m.instance_id is None)
            sink.emit(_stall(group, stalled.member_id))
            assert sink.flush(30) == 0
            assert (sink.delivered, sink.failed) == (1, 0), sink.last_error
            wait_for(lambda: feed.book().current(group, [stalled.member_id], datetime.now(UTC), timedelta(minutes=5)),
                     timeout=30, what="the event feed reading the stall back as the app principal")  # fmt: skip
            assert feed.problem is None, feed.problem

            dynamic.paused_polling.set()
            removed = asyncio.run(brokers.remove(app, group, stalled.member_id, None, "acl test"))
            assert removed.reaction is Reaction.DONE, removed
            wait_for(lambda: asyncio.run(brokers.observe(app, group)),
                     lambda f: isinstance(f, GroupFacts) and f.view.member(stalled.member_id) is None, timeout=30,
                     what="the removed member gone (a classic rejoin gets a new member id)")  # fmt: skip
        finally:
            feed.stop()
            client.close()
            dynamic.close()
            static.close()


@pytest.mark.kafka_min("4.0")  # KIP-848 is GA from 4.0
def test_the_documented_operator_acls_are_enough_for_a_kip848_group(
    kafka_secure: KafkaCluster, brokers: Brokers
) -> None:
    """KIP-848: group READ+DESCRIBE+DESCRIBE_CONFIGS+ALTER_CONFIGS, topic DESCRIBE: the census with the group's own
    timings, a coordinated rollout's session raise and its restore, the static members that left, and a static
    member's release (ConsumerGroupHeartbeat, epoch -2)."""
    topic, group, member = kip848_static_member(kafka_secure, "acl-op848")
    grants = [
        *((ResourceType.GROUP, group, op) for op in (AclOperation.READ, AclOperation.DESCRIBE,
                                                    AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS)),
        (ResourceType.TOPIC, topic, AclOperation.DESCRIBE),
    ]  # fmt: skip
    app = kafka_secure.connection("app")
    client = GroupClient(app)
    try:
        with granted(kafka_secure, grants):
            wait_for(
                lambda: len(member.assigned), lambda n: n == 2, timeout=60, what="the member owning both partitions"
            )
            facts = observed(brokers, kafka_secure, group, 1, kip848=True)
            assert facts.group_configs, "the group's own timings were not read"

            before = asyncio.run(brokers.group_timings(app, group))
            asyncio.run(brokers.set_group_session(app, group, before.session_ms + 5000))
            raised = wait_for(lambda: asyncio.run(brokers.group_timings(app, group)),
                              lambda t: t.session_override_ms == before.session_ms + 5000, timeout=30,
                              what="the raised session read back")  # fmt: skip
            assert isinstance(raised, GroupTimings)
            asyncio.run(brokers.set_group_session(app, group, before.session_override_ms))
            wait_for(lambda: asyncio.run(brokers.group_timings(app, group)),
                     lambda t: t.session_override_ms == before.session_override_ms, timeout=30,
                     what="the session restored")  # fmt: skip

            assert client.static_members_left(group) == frozenset()  # raises if the describe is refused
            (kept,) = facts.view.members
            released = asyncio.run(brokers.release(app, group, kept.member_id, "pod-0"))  # the live member rejoins
            assert released.reaction is Reaction.DONE, released
    finally:
        client.close()
        member.close()


def _stall(group: str, member_id: str) -> events.StallDetected:
    return events.StallDetected.model_validate(
        {
            "time": datetime.now(UTC),
            "cluster": "local",
            "group": group,
            "source": "sidecar",
            "namespace": "shop",
            "pod": "orders-1",
            "payload": {
                "member": {"member_id": member_id, "instance_id": None},
                "signal": "beacon",
                "stalled_for_ms": 12000,
                "stall_timeout_ms": 10000,
            },
        }
    )


def test_an_event_feed_whose_group_id_may_not_be_looked_up_reads_all_the_same_and_names_the_grant(
    kafka_secure: KafkaCluster,
) -> None:
    """Without GROUP DESCRIBE on the feed's group id librdkafka's coordinator lookup is refused; the feed joins no
    group, so the sidecars' events still arrive, and the line it logs names the group id and the grant."""
    admin_conn = kafka_secure.connection("admin")
    events_topic = clients.create_topic(admin_conn, clients.unique("vigil.events"), partitions=1)
    group = clients.unique("g-acl-feed")
    grants = [(ResourceType.TOPIC, events_topic, op) for op in (AclOperation.READ, AclOperation.DESCRIBE)]
    with granted(kafka_secure, grants):
        feed = EventFeed(kafka_secure.connection("app"), events_topic)
        try:
            sink = EventSink(admin_conn, events_topic)
            sink.emit(_stall(group, "m-1"))
            assert sink.flush(30) == 0
            wait_for(lambda: feed.book().current(group, ["m-1"], datetime.now(UTC), timedelta(minutes=5)),
                     timeout=30, what="the stall read back without the group grant")  # fmt: skip
            problem = wait_for(lambda: feed.problem, lambda p: p is not None and event_feed.GROUP_ID in p, timeout=30,
                               what="the feed naming its group id")  # fmt: skip
            assert "GROUP DESCRIBE" in str(problem), problem
        finally:
            feed.stop()


@pytest.mark.kafka_min("4.0")  # KIP-848 is GA from 4.0
def test_the_documented_sidecar_acls_are_enough_for_a_kip848_static_members_keep_alive_and_release(
    kafka_secure: KafkaCluster,
) -> None:
    """The sidecar's set (group READ+DESCRIBE, topic DESCRIBE): the epoch read (ConsumerGroupDescribe), a keep-alive
    at it and the release (ConsumerGroupHeartbeat, epoch -2) a bridging sidecar sends for its static member."""
    topic, group, member = kip848_static_member(kafka_secure, "acl-side848")
    grants = [
        (ResourceType.GROUP, group, AclOperation.READ),
        (ResourceType.GROUP, group, AclOperation.DESCRIBE),
        (ResourceType.TOPIC, topic, AclOperation.DESCRIBE),
    ]
    client = GroupClient(kafka_secure.connection("app"))
    try:
        with granted(kafka_secure, grants):
            wait_for(lambda: len(member.assigned), lambda n: n == 2, timeout=60, what="the member owning both")
            view = client.describe(group)
            (kept,) = view.members
            epoch = client.member_epochs(group)[kept.member_id]
            beat, _ = client.keep_alive(group, kept.member_id, epoch, "pod-0")
            assert beat.reaction is Reaction.DONE, beat
            released = client.release_static_member(group, kept.member_id, "pod-0")
            assert released.reaction is Reaction.DONE, released
    finally:
        client.close()
        member.close()


def test_the_progress_signal_reads_a_record_with_topic_read_added_and_only_then(kafka_secure: KafkaCluster) -> None:
    """The progress signal's row: to the sidecar's set add TOPIC READ on the consumed topics, for the one-record
    read_committed fetch that tells data waiting from transaction markers. Without it the probe has no answer (the
    sample says "unknown"); with it, data is seen."""
    admin_conn = kafka_secure.connection("admin")
    topic = clients.create_topic(admin_conn, clients.unique("acl-progress"), partitions=1)
    group = clients.unique("g-acl-progress")
    clients.produce(admin_conn, topic, ["a", "b"])
    member = clients.Member(admin_conn, group, [topic], f"{group}-m").start()
    sidecar_set = [
        (ResourceType.GROUP, group, AclOperation.READ),
        (ResourceType.GROUP, group, AclOperation.DESCRIBE),
        (ResourceType.TOPIC, topic, AclOperation.DESCRIBE),
    ]
    client = GroupClient(kafka_secure.connection("app"))
    sampler = ProgressSampler(client, kafka_secure.connection("app"), group, pod_name="acl", probe_timeout=3.0)
    part = TopicPartitionRef(topic, 0)
    try:
        wait_for(lambda: clients.committed(admin_conn, group).get(0), lambda n: n == 2, timeout=30,
                 what="the member's commit of both records")  # fmt: skip
        member.paused_polling.set()
        wait_for(member.parked.is_set, timeout=5, what="the member no longer polling")
        clients.produce(admin_conn, topic, ["c"])  # waiting for the member, which does not poll

        def data_seen() -> bool | None:
            view = client.describe(group)
            (watched,) = view.members
            (facts,) = sampler.sample(view, watched, time.monotonic())
            assert facts.partition == part
            last = facts.samples[-1]
            assert (last.committed, last.lso) == (2, 3), last
            return last.data

        with granted(kafka_secure, sidecar_set):
            assert data_seen() is None  # the fetch refused: no answer within the probe's time
        with granted(kafka_secure, [*sidecar_set, (ResourceType.TOPIC, topic, AclOperation.READ)]):
            assert wait_for(data_seen, lambda data: data is not None, timeout=30,
                            what="the probe's answer once READ is granted") is True  # fmt: skip
    finally:
        sampler.close()
        client.close()
        member.close()
