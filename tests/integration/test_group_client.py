"""The group control-plane client against the real broker: describe, compare-and-remove, heartbeat, failover."""

import re
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from vigil_core import events
from vigil_core.kafka import cgmd
from vigil_core.kafka.event_sink import EventSink
from vigil_core.kafka.group_client import GroupClient, GroupClientError
from vigil_core.kafka.model import GroupState, GroupType, GroupView, TopicPartitionRef
from vigil_core.kafka.outcomes import Outcome, Reaction
from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import clients
from vigil_dev.testing.broker_log import broker_lines, generations
from vigil_dev.testing.waiting import bound, let_time_pass, wait_for

pytestmark = pytest.mark.integration


@pytest.fixture
def client(kafka: KafkaCluster) -> Iterator[GroupClient]:
    c = GroupClient(kafka.connection())
    yield c
    c.close()


def _static(instance: str, session_ms: int = 6000) -> clients.ClientConfig:
    return {"group.instance.id": instance, "session.timeout.ms": session_ms}


def _members_by_instance(view: GroupView) -> dict[str | None, str]:
    return {m.instance_id: m.member_id for m in view.members}


def test_describe_classic_group_decodes_subscriptions(kafka: KafkaCluster, client: GroupClient) -> None:
    conn = kafka.connection()
    a = clients.create_topic(conn, clients.unique("sub-a"), partitions=3)
    b = clients.create_topic(conn, clients.unique("sub-b"), partitions=3)
    group = clients.unique("g-sub")
    members = clients.start_group(conn, group, [a, b], size=2)
    try:
        view = client.describe(group)
        assert view.type is GroupType.CLASSIC
        assert view.state is GroupState.STABLE
        assert view.assignor == "range"
        assert view.coordinator_id == 1
        assert {m.client_id for m in view.members} == {m.client_id for m in members}
        assert all(m.subscription == tuple(sorted([a, b])) for m in view.members)
        assigned = sorted(tp for m in view.members for tp in m.assignment)
        assert assigned == sorted(TopicPartitionRef(t, p) for t in (a, b) for p in range(3))
        assert all(not m.is_static for m in view.members)
    finally:
        for m in members:
            m.close()


@pytest.mark.kafka_min("4.0")  # KIP-848 is GA from 4.0; 3.x serves the classic protocol only
def test_describe_kip848_group(kafka: KafkaCluster, client: GroupClient) -> None:
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("kip848"), partitions=3)
    group = clients.unique("g-848")
    members = clients.start_group(conn, group, [topic], size=3, extra={"group.protocol": "consumer"})
    try:
        view = client.describe(group)
        assert view.type is GroupType.CONSUMER
        assert view.state is GroupState.STABLE
        assert len(view.members) == 3
        assert sorted(tp for m in view.members for tp in m.assignment) == [
            TopicPartitionRef(topic, p) for p in range(3)
        ]
        assert {m.member_id for m in view.members} == {m.member_id for m in members}
    finally:
        for m in members:
            m.close()


@pytest.mark.kafka_min("4.0")  # KIP-848 is GA from 4.0; 3.x serves the classic protocol only
def test_a_kip848_group_mid_rebalance_is_described_as_reconciling_not_unknown(
    kafka: KafkaCluster, client: GroupClient
) -> None:
    """A KIP-848 group waiting for a member to let partitions go (it has rebalance callbacks and
    does not poll, so librdkafka holds the revocation for its poll) is Reconciling. librdkafka's describe says
    Unknown (it knows no KIP-848 state but Stable, Empty and Dead); vigil's describe asks ConsumerGroupDescribe and
    says Reconciling — what /v1/status, the ConsumerGroup status and the watchdog then see."""
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("kip848-rb"), partitions=4)
    group = clients.unique("g-848-rb")
    kip848: clients.ClientConfig = {"group.protocol": "consumer", "max.poll.interval.ms": 60000}
    holder = clients.Member(conn, group, [topic], "holder", extra=kip848, listener=True).start()
    members = [holder]
    try:
        wait_for(lambda: len(holder.assigned), lambda n: n == 4, timeout=60, what="the holder owning all 4")
        holder.paused_polling.set()
        wait_for(holder.parked.is_set, timeout=5, what="the holder no longer polling")
        members.append(clients.Member(conn, group, [topic], "joiner", extra=kip848).start())
        # 4.4's coordinator computes a new target assignment apart from the heartbeat that asked for it: the group
        # is Assigning for that moment (group epoch ahead of the target's), then Reconciling while the holder holds
        first = wait_for(lambda: client.describe(group), lambda v: len(v.members) == 2, timeout=30,
                         what="both members in the group")  # fmt: skip
        assert first.state in (GroupState.ASSIGNING, GroupState.RECONCILING), first.state
        assert first.rebalancing
        view = wait_for(lambda: client.describe(group), lambda v: v.state is not GroupState.ASSIGNING, timeout=30,
                        what="the target assignment computed")  # fmt: skip
        assert view.state is GroupState.RECONCILING, view.state
        assert view.rebalancing
        librdkafka = clients.describe_group(conn, group)
        assert str(librdkafka.state).split(".")[-1].upper() == "UNKNOWN"  # what vigil saw before the fix
    finally:
        for m in members:
            m.close()


def test_evict_a_live_dynamic_member_by_its_pair(kafka: KafkaCluster, client: GroupClient) -> None:
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("evict"), partitions=3)
    group = clients.unique("g-evict")
    members = clients.start_group(conn, group, [topic], size=3)
    victim = members[0]
    victim.paused_polling.set()  # stalled, while librdkafka keeps heartbeating: alive to the coordinator
    try:
        assert victim.member_id is not None
        outcome = client.remove_member(group, victim.member_id, None, "test eviction of a stalled member")
        assert outcome.reaction is Reaction.DONE, outcome
        view = wait_for(
            lambda: client.describe(group),
            lambda v: v.stable and len(v.members) == 2 and len({tp for m in v.members for tp in m.assignment}) == 3,
            timeout=30,
            what="the two survivors owning all partitions",
        )
        assert victim.member_id not in {m.member_id for m in view.members}
        # the KIP-800 reason reached the coordinator
        log = kafka.server_log(1).read_text()
        assert re.search(
            rf"{re.escape(victim.member_id)}.*client reason: vigil: test eviction of a stalled member", log
        )
    finally:
        for m in members:
            m.close()


def test_evict_a_static_member_and_a_stale_pair_is_fenced(kafka: KafkaCluster, client: GroupClient) -> None:
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("static"), partitions=3)
    group = clients.unique("g-static")
    first = clients.Member(conn, group, [topic], "pod-0", extra=_static("pod-0")).start()
    other = clients.Member(conn, group, [topic], "pod-1", extra=_static("pod-1")).start()
    wait_for(lambda: clients.stable_members(conn, group), lambda n: n == 2, timeout=60, what="2 static members")
    old_id = client.describe(group).members and _members_by_instance(client.describe(group))["pod-0"]
    # "restart" pod-0: a static member closes without LeaveGroup and rejoins under the same instance id
    first.close()
    second = clients.Member(conn, group, [topic], "pod-0", extra=_static("pod-0")).start()
    try:
        view = wait_for(
            lambda: client.describe(group),
            lambda v: _members_by_instance(v).get("pod-0") not in (None, old_id),
            timeout=30,
            what="pod-0 rejoined under a new member id",
        )
        new_id = _members_by_instance(view)["pod-0"]
        stale = client.remove_member(group, old_id, "pod-0", "stale observation")
        assert stale.name == "FENCED_INSTANCE_ID"
        assert stale.reaction is Reaction.NOTHING_TO_DO
        assert _members_by_instance(client.describe(group)).get("pod-0") == new_id  # nothing removed

        second.paused_polling.set()
        fresh = client.remove_member(group, new_id, "pod-0", "static member stalled")
        assert fresh.reaction is Reaction.DONE, fresh
        wait_for(
            lambda: _members_by_instance(client.describe(group)),
            lambda ids: "pod-0" not in ids and "pod-1" in ids,
            timeout=20,
            what="pod-0 removed, pod-1 kept",
        )
        again = client.remove_member(group, new_id, "pod-0", "retry after success")
        assert again.reaction is Reaction.ALREADY_GONE
    finally:
        second.close()
        other.close()


def test_scale_down_removes_a_departed_static_member_by_instance_id(kafka: KafkaCluster, client: GroupClient) -> None:
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("scale"), partitions=3)
    group = clients.unique("g-scale")
    session_s = 60
    gone = clients.Member(conn, group, [topic], "pod-2", extra=_static("pod-2", session_s * 1000)).start()
    kept = clients.Member(conn, group, [topic], "pod-0", extra=_static("pod-0", session_s * 1000)).start()
    try:
        wait_for(lambda: clients.stable_members(conn, group), lambda n: n == 2, timeout=60, what="2 static members")
        gone.close()  # static: no LeaveGroup; stock Kafka keeps it for the whole session timeout
        started = time.monotonic()
        outcome = client.remove_departed_static(group, "pod-2", "scaled down")
        assert outcome.reaction is Reaction.DONE, outcome
        wait_for(
            lambda: clients.stable_members(conn, group),
            lambda n: n == 1,
            timeout=20,
            what="the group Stable with only pod-0",
        )
        assert time.monotonic() - started < session_s / 3
        assert set(_members_by_instance(client.describe(group))) == {"pod-0"}
    finally:
        kept.close()


@pytest.mark.parametrize("static", [True, False], ids=["static", "dynamic"])
def test_a_deliberate_rebalance_has_the_removed_member_back_in_one_generation(
    kafka: KafkaCluster, client: GroupClient, static: bool
) -> None:
    """Plain compare-and-remove races: if the others rejoin before the removed member notices (its next
    heartbeat), the join completes without it and its return is a second generation. The pending member holds the
    join open, so every round is exactly one generation with every member in it (counted from the broker's log)."""
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("deliberate"), partitions=4)
    group = clients.unique("g-deliberate")
    timing: clients.ClientConfig = {"session.timeout.ms": 10000, "heartbeat.interval.ms": 3000}
    members = [
        clients.Member(conn, group, [topic], f"pod-{i}", extra=timing | (_static(f"pod-{i}", 10000) if static else {}))
        for i in range(3)
    ]  # fmt: skip
    try:
        for m in members:
            m.start()
        wait_for(lambda: clients.stable_members(conn, group), lambda n: n == 3, timeout=60, what="3 members stable")
        for round_ in range(3):
            settled = generations(kafka, group)
            view = client.describe(group, subscriptions=False)
            chosen = sorted(view.members, key=lambda m: m.member_id)[round_ % 3]
            done = client.rebalance_removing(group, chosen, "test: one deliberate rebalance", protocol=view.assignor,
                                             hold_seconds=20)  # fmt: skip
            assert (done.removal.reaction, done.hold.reaction, done.rejoined) == (Reaction.DONE, Reaction.DONE, True)
            wait_for(lambda: clients.stable_members(conn, group), lambda n: n == 3, timeout=30,
                     what=f"round {round_}: 3 members stable again")  # fmt: skip
            # Stable with all 3 assigned: had the join completed without the removed member, that would be a later
            # generation, already logged by now
            after = generations(kafka, group)
            assert len(after) == len(settled) + 1, (round_, settled, after)
            if static:
                assert chosen.instance_id in {m.instance_id for m in client.describe(group).members}
    finally:
        for m in members:
            m.close()


def test_heartbeats_keep_a_static_member_past_its_session_timeout(kafka: KafkaCluster, client: GroupClient) -> None:
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("bridge"), partitions=3)
    group = clients.unique("g-bridge")
    session = 6.0
    app = clients.Member(conn, group, [topic], "pod-0", extra=_static("pod-0", int(session * 1000))).start()
    wait_for(lambda: clients.stable_members(conn, group), lambda n: n == 1, timeout=60, what="pod-0 stable")
    meta = wait_for(lambda: cgmd.parse(app.group_metadata or b""), timeout=10, what="the app's group metadata")
    assert meta.instance_id == "pod-0"
    app.close()  # the app is gone; only our heartbeats keep its session

    until = time.monotonic() + 2 * session
    while time.monotonic() < until:
        outcome = client.heartbeat(group, meta.generation, meta.member_id, "pod-0")
        assert outcome.reaction is Reaction.DONE, outcome
        time.sleep(1.0)  # the heartbeat interval being bridged, not a wait for a condition
    assert _members_by_instance(client.describe(group)) == {"pod-0": meta.member_id}

    wrong = client.heartbeat(group, meta.generation + 5, meta.member_id, "pod-0")
    assert wrong.name == "ILLEGAL_GENERATION"

    # without heartbeats the coordinator expires it as it would without vigil
    wait_for(
        lambda: client.describe(group).members,
        lambda ms: not ms,
        timeout=bound(session),
        what="pod-0 expired once the heartbeats stopped",
    )


@pytest.mark.kafka3
def test_coordinator_failover_mid_operation_rediscovers(kafka3: KafkaCluster) -> None:
    conn = kafka3.connection()
    topic = clients.create_topic(conn, clients.unique("fo"), partitions=3, replication=3)
    group = clients.unique("g-fo")
    members = clients.start_group(conn, group, [topic], size=3)
    client = GroupClient(conn, max_attempts=12)
    old = client.coordinator(group)
    victim = members[0]
    victim.paused_polling.set()
    try:
        assert kafka3.stop_node(old)
        assert victim.member_id is not None
        outcome = client.remove_member(group, victim.member_id, None, "evict during coordinator failover")
        assert outcome.reaction in (Reaction.DONE, Reaction.ALREADY_GONE), outcome
        assert client.coordinator(group) != old
        wait_for(
            lambda: [m.member_id for m in client.describe(group).members],
            lambda ids: victim.member_id not in ids and len(ids) == 2,
            timeout=60,
            what="the victim gone under the new coordinator",
        )
    finally:
        client.close()
        for m in members:
            m.close()
        kafka3.start_node(old)
        kafka3.wait_healthy([old])


def _view_or_error(client: GroupClient, group: str) -> GroupView | str:
    """The group, or the error that kept it from being described (named in a wait's timeout message)."""
    try:
        return client.describe(group)
    except GroupClientError as exc:
        return str(exc)


@pytest.mark.kafka3
@pytest.mark.parametrize("checked", [True, False], ids=["liveness-checked", "unchecked-as-before-issue-23"])
def test_a_retried_leave_group_never_removes_a_member_that_polls_again(kafka3: KafkaCluster, checked: bool) -> None:
    """A stalled member's eviction is in flight when its coordinator freezes (SIGSTOP, killed
    once the eviction returned: the LeaveGroup hangs for the request timeout, then the client finds the new
    coordinator and retries). The app polls
    again 5 s into the freeze. LeaveGroup carries no generation, so the retry removes whatever member has that id:
    unchecked (the client as it was), the polling member is removed; with the liveness check asked before every
    attempt (what the sidecar passes: no poll since the stall was decided), nothing is sent (APP_POLLED) and the
    member stays. The sidecar's own client: 6 attempts, 10 s per request."""
    conn = kafka3.connection()
    topic = clients.create_topic(conn, clients.unique("retry"), partitions=3, replication=3)
    group = clients.unique("g-retry")
    # a session outlasting the failover (librdkafka also times a session out on its own, without a coordinator): the
    # members keep their ids through the move, only a LeaveGroup removes one
    members = clients.start_group(conn, group, [topic], size=2, extra={"session.timeout.ms": 120000})
    victim = members[0]
    client = GroupClient(conn)
    old = client.describe(group).coordinator_id  # caches the coordinator, as the sidecar's describe does
    victim.paused_polling.set()
    wait_for(victim.parked.is_set, timeout=10, what="the victim no longer polling")
    victim_id, silent_since = victim.member_id, victim.polls
    assert victim_id is not None
    result: dict[str, Outcome] = {}

    def evict() -> None:
        proceed = (lambda: victim.polls == silent_since) if checked else None
        result["outcome"] = client.remove_member(group, victim_id, None, "vigil: no poll (test)", proceed=proceed)

    frozen = kafka3.process(old)
    try:
        frozen.freeze()
        frozen_at = time.monotonic()
        sender = threading.Thread(target=evict, daemon=True)
        sender.start()
        let_time_pass(
            5,
            since=frozen_at,
            why="the app polling again 5 s into the freeze, while the first LeaveGroup hangs (10 s request timeout)",
        )
        assert sender.is_alive(), result
        victim.paused_polling.clear()  # the app polls again
        wait_for(lambda: victim.polls, lambda n: n > silent_since, timeout=10, what="the victim polling again")
        sender.join(timeout=120)
        outcome = result["outcome"]
        frozen.kill()  # the first attempt sits in its socket: killed, never thawed, it is never processed
        # the frozen node never answers again (it is killed below): only what the new coordinator did counts
        left = broker_lines(kafka3, group, r"\[Group {g}\] Member (\S+) has left group through explicit `LeaveGroup`")
        left = [(node, hit) for node, hit in left if node != old]
        if checked:
            assert outcome.name == "APP_POLLED", outcome
            assert outcome.reaction is Reaction.NOTHING_TO_DO
            view = wait_for(lambda: _view_or_error(client, group),
                            lambda v: isinstance(v, GroupView) and v.state is GroupState.STABLE and len(v.members) == 2,
                            timeout=90, what="the group Stable under the new coordinator")  # fmt: skip
            assert isinstance(view, GroupView)
            assert victim_id in [m.member_id for m in view.members]
            assert view.coordinator_id != old
            assert not [m for _, (m,) in left if m == victim_id], left
        else:  # the hazard the check removes: the retry landed on the new coordinator and removed a polling member
            assert outcome.reaction is Reaction.DONE, outcome
            assert [m for _, (m,) in left if m == victim_id], left
        assert victim.polls > silent_since
    finally:
        frozen.kill()
        client.close()
        for m in members:
            m.close()
        kafka3.start_node(old)
        kafka3.wait_healthy([old])


@pytest.mark.kafka_secure
def test_scram_user_without_group_acls_gets_one_clear_line(kafka_secure: KafkaCluster) -> None:
    group = clients.unique("g-noacl")
    client = GroupClient(kafka_secure.connection("app"))
    try:
        with pytest.raises(GroupClientError) as info:
            client.describe(group)
        assert info.value.outcome.name == "GROUP_AUTHORIZATION_FAILED"
        assert info.value.outcome.reaction is Reaction.REPORT
        assert "\n" not in str(info.value)
        assert group in str(info.value)
    finally:
        client.close()


def test_committed_and_end_offsets_see_open_transactions(kafka: KafkaCluster, client: GroupClient) -> None:
    from confluent_kafka import Producer

    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("lso"), partitions=1)
    group = clients.unique("g-lso")
    clients.produce(conn, topic, [f"v{i}" for i in range(5)])
    member = clients.Member(conn, group, [topic], "c0").start()
    part = TopicPartitionRef(topic, 0)
    try:
        wait_for(lambda: client.committed_offsets(group).get(part), lambda o: o == 5, timeout=30, what="commit of 5")
    finally:
        member.close()
    producer = Producer(conn.confluent_config() | {"transactional.id": clients.unique("tx"), "log_level": 3})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, value=f"tx{i}".encode(), partition=0)
    producer.flush(30)
    try:
        # an open transaction: the high watermark moved, the last stable offset did not
        assert client.end_offsets([part], read_committed=False)[part] == 8
        assert client.end_offsets([part], read_committed=True)[part] == 5
    finally:
        producer.commit_transaction(30)
    # committed (markers are written just after EndTxn returns): the LSO moves past the commit marker, so a
    # consumer that reads everything ends at 9 with 3 records and 1 marker after its commit of 5
    wait_for(
        lambda: client.end_offsets([part], read_committed=True)[part],
        lambda lso: lso == 9,
        timeout=10,
        what="the LSO past the commit marker",
    )


def test_broker_limits_are_read_from_the_broker(client: GroupClient) -> None:
    limits = client.broker_limits()
    assert not limits.from_defaults
    assert limits.min_session_ms == 1000  # the test broker's own setting, not Kafka's default of 6000
    assert limits.consumer_min_session_ms == 6000  # lowered for KIP-848 tests (default 45000)
    # the KIP-848 timings in effect, the broker's (not Kafka's defaults of 45 s / 5 s, once assumed)
    assert (limits.consumer_session_ms, limits.consumer_heartbeat_ms) == (10000, 1000)


@pytest.mark.kafka_min("4.0")  # KIP-848 is GA from 4.0; 3.x serves the classic protocol only
def test_remove_a_kip848_member_by_member_id(kafka: KafkaCluster, client: GroupClient) -> None:
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("rm848"), partitions=3)
    group = clients.unique("g-rm848")
    members = clients.start_group(conn, group, [topic], size=2, extra={"group.protocol": "consumer"})
    victim = members[0]
    victim.paused_polling.set()
    try:
        assert victim.member_id is not None
        outcome = client.remove_member(group, victim.member_id, None, "kip-848 stall", group_type=GroupType.CONSUMER)
        assert outcome.reaction is Reaction.DONE, outcome
        # the coordinator removed it (librdkafka then rejoins at once from its background thread under the same
        # member id, without a poll: an "undone eviction" the sidecar must escalate)
        left = (
            rf"\[GroupId {group}\] Dynamic member {re.escape(victim.member_id)} has left group .*vigil: kip-848 stall"
        )
        wait_for(
            lambda: re.search(left, kafka.server_log(1).read_text()),
            timeout=10,
            what="the coordinator logging the KIP-848 member's removal",
        )
    finally:
        for m in members:
            m.close()


@pytest.mark.kafka_secure
def test_the_documented_sidecar_acls_are_enough(kafka_secure: KafkaCluster) -> None:
    """README "Kafka ACLs": group READ+DESCRIBE, topic DESCRIBE (+ events topic WRITE, tested with events)."""
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    admin_conn = kafka_secure.connection("admin")
    topic = clients.create_topic(admin_conn, clients.unique("acl-side"), partitions=3)
    group = clients.unique("g-acl-side")
    members = clients.start_group(admin_conn, group, [topic], size=2)
    victim = members[0]
    victim.paused_polling.set()
    acl_admin = clients.admin(admin_conn)
    events_topic = clients.create_topic(admin_conn, clients.unique("vigil.events"), partitions=1)
    grants = [
        (ResourceType.GROUP, group, AclOperation.READ),
        (ResourceType.GROUP, group, AclOperation.DESCRIBE),
        (ResourceType.TOPIC, topic, AclOperation.DESCRIBE),
        (ResourceType.TOPIC, events_topic, AclOperation.WRITE),
        # idempotent producer on Kafka >= 3.0 needs no IDEMPOTENT_WRITE on the cluster (KIP-679)
    ]
    bindings = [
        AclBinding(kind, name, ResourcePatternType.LITERAL, "User:app", "*", op, AclPermissionType.ALLOW)
        for kind, name, op in grants
    ]
    for future in acl_admin.create_acls(bindings).values():
        future.result(timeout=30)
    client = GroupClient(kafka_secure.connection("app"))
    try:
        view = wait_for(lambda: client.describe(group), lambda v: v.stable, timeout=30, what="describe as app")
        assert len(view.members) == 2
        part = TopicPartitionRef(topic, 0)
        assert client.end_offsets([part])[part] == 0
        assert isinstance(client.committed_offsets(group), dict)
        assert victim.member_id is not None
        outcome = client.remove_member(group, victim.member_id, None, "acl test")
        assert outcome.reaction is Reaction.DONE, outcome
        limits = client.broker_limits()  # no DESCRIBE_CONFIGS on the cluster: Kafka's defaults, said so
        assert limits.from_defaults
        sink = EventSink(kafka_secure.connection("app"), events_topic)
        sink.emit(_member_removed(group))
        assert sink.flush(30) == 0
        assert (sink.delivered, sink.failed) == (1, 0), sink.last_error
    finally:
        client.close()
        for m in members:
            m.close()


def _member_removed(group: str) -> events.MemberRemoved:
    return events.MemberRemoved.model_validate(
        {
            "time": datetime.now(UTC),
            "cluster": "local",
            "group": group,
            "source": "operator",
            "payload": {
                "member": {"member_id": "m-1", "instance_id": "pod-3", "client_id": "pod-3"},
                "cause": "scale-down",
            },
        }
    )


def test_events_round_trip_through_the_events_topic(kafka: KafkaCluster) -> None:
    from confluent_kafka import Consumer

    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("vigil.events"), partitions=3)
    sink = EventSink(conn, topic)
    sent = [_member_removed("orders"), _member_removed("billing"), _member_removed("orders")]
    for event in sent:
        sink.emit(event)
    assert sink.flush(30) == 0
    consumer = Consumer(conn.confluent_config() | {"group.id": clients.unique("g-ev"), "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    received: list[tuple[bytes, events.Event]] = []
    try:
        wait_for(
            lambda: _drain(consumer, received),
            lambda n: n == 3,
            timeout=30,
            what="the 3 events back from the topic",
        )
    finally:
        consumer.close()
    assert sorted(e.event_id for _, e in received) == sorted(e.event_id for e in sent)
    assert {key for key, _ in received} == {b"orders", b"billing"}
    by_id = {e.event_id: e for e in sent}
    assert all(by_id[e.event_id] == e for _, e in received)


def test_a_missing_events_topic_is_counted_not_raised(kafka: KafkaCluster) -> None:
    sink = EventSink(kafka.connection(), clients.unique("no-such-topic"), delivery_timeout=3.0)
    sink.emit(_member_removed("orders"))  # auto-creation is off: the topic never appears
    wait_for(lambda: (sink.flush(1), sink.failed), lambda r: r == (0, 1), timeout=20, what="one counted failure")
    assert sink.last_error is not None
    assert "\n" not in sink.last_error


def _drain(consumer, received: list) -> int:
    msg = consumer.poll(0.5)
    if msg is not None and msg.error() is None:
        received.append((msg.key(), events.parse_event(msg.value())))
    return len(received)


def test_cluster_id_is_the_one_the_storage_was_formatted_with(kafka: KafkaCluster, client: GroupClient) -> None:
    assert client.cluster_id() == kafka.cluster_id


def test_end_offsets_of_many_partitions_in_one_call(kafka: KafkaCluster, client: GroupClient) -> None:
    topic = clients.unique("many")
    clients.create_topic(kafka.connection(), topic, partitions=3)
    for partition, count in enumerate((1, 4, 2)):
        clients.produce(kafka.connection(), topic, [f"v{i}" for i in range(count)], partition=partition)
    parts = [TopicPartitionRef(topic, p) for p in range(3)]
    assert client.end_offsets(parts) == dict(zip(parts, (1, 4, 2), strict=True))
