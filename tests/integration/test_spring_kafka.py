"""A Spring Kafka app (spring-kafka 4.1.2 on the broker jars' kafka-clients) next to a real `vigil sidecar`: its
`KafkaMessageListenerContainer` gets its consumers from the consumer factory JAVA.md gives Spring users, so every
container poll beacons; a listener stuck in processing a record stops the container's polls while the client's
heartbeat thread keeps the member in the group (up to `max.poll.interval.ms`, 5 minutes here). The sidecar removes
exactly that member after the stall timeout; the other member takes its partition over and consumes it; let go, the
listener returns, the container polls again and rejoins — and the sidecar, seeing the member back before that poll
returned, restarts nothing."""

import re
from pathlib import Path

import pytest

from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import broker_log, clients, spring_app
from vigil_dev.testing.sidecar import start_sidecar
from vigil_dev.testing.waiting import bound, wait_for

pytestmark = pytest.mark.integration

STALL = 6.0
CHECK = 1.0
POD = "pod-a"
PARTITIONS = 2


def test_a_spring_listener_stuck_in_processing_is_evicted_and_its_partition_consumed_by_the_other(
    kafka: KafkaCluster, artifacts_dir: Path
) -> None:
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("spring"), partitions=PARTITIONS)
    group = clients.unique("g-spring")
    state_dir = artifacts_dir / "spring" / group
    state_dir.mkdir(parents=True)
    sidecar = start_sidecar(
        conn, group, POD, state_dir, stall_timeout_seconds=STALL, check_interval_seconds=CHECK,
        session_timeout_seconds=6, heartbeat_interval_seconds=1, budget="none", events_topic="",
    )  # fmt: skip
    app = None
    other = clients.Member(conn, group, [topic], "pod-b")
    try:
        app = spring_app.start(kafka.libs, conn, group=group, topic=topic, client_id=POD, state_dir=state_dir,
                               beacon_addr=sidecar.beacon_addr)  # fmt: skip
        other.start()
        wait_for(lambda: clients.stable_members(conn, group), lambda n: n == 2, timeout=90, what="2 members stable")
        _, assigned = app.wait_event(lambda e: e["event"] == "assigned" and e["partitions"], timeout=30,
                                     what="the Spring container assigned a partition")  # fmt: skip
        spring_member, (mine,) = assigned["member_id"], assigned["partitions"]
        wait_for(lambda: sidecar.metric('vigil_sidecar_beacons_total{transport="http"}'), lambda n: n > 0,
                 timeout=10, what="the container's polls beaconing to the sidecar")  # fmt: skip
        wait_for(lambda: (sidecar.status().get("member") or {}).get("member_id"), lambda m: m == spring_member,
                 timeout=bound(2 * CHECK, slack=5), what="the sidecar proving the Spring member")  # fmt: skip

        # the listener is stuck on the first record of its partition: the container polls no more
        app.stall()
        clients.produce_spread(conn, topic, [f"r{i}" for i in range(2 * PARTITIONS)], PARTITIONS)
        app.wait_event(lambda e: e["event"] == "stalled", timeout=30, what="the Spring listener stuck in a record")
        member = re.escape(spring_member)
        left = rf"\[Group(?:Id)? {{g}}\] (?:Dynamic )?[Mm]ember {member} has left group .*vigil: no poll"
        wait_for(lambda: len(broker_log.broker_lines(kafka, group, left)), lambda n: n == 1,
                 timeout=bound(STALL + 2 * CHECK),
                 what="the broker logging vigil's LeaveGroup for the Spring member")  # fmt: skip
        assert sidecar.metric('vigil_sidecar_actions_total{action="leave-group",outcome="NONE"}') == 1

        # pod-b reads the stuck member's partition (the records the listener never finished included)
        wait_for(lambda: sorted({p for p, _, _ in other.consumed}), lambda seen: mine in seen, timeout=60,
                 what=f"pod-b consuming partition {mine}, the evicted member's")  # fmt: skip
        assert [m.client_id for m in clients.describe_group(conn, group).members] == ["pod-b"]

        # let go: the listener returns, the container polls and rejoins
        events_before = len(app.events())
        app.resume()
        _, back = app.wait_event(lambda e: e["event"] == "assigned" and e["partitions"], after=events_before,
                                 timeout=60, what="the Spring container back with a partition")  # fmt: skip
        wait_for(lambda: clients.stable_members(conn, group), lambda n: n == 2, timeout=60, what="2 members again")
        # its rejoin came from its own poll, seen by the sidecar before that poll returned and beaconed: the sidecar
        # proves the new member and restarts nothing (it did, when a member back in the group meant undone)
        wait_for(lambda: (sidecar.status().get("member") or {}).get("member_id"), lambda m: m == back["member_id"],
                 timeout=bound(STALL + 2 * CHECK), what="the sidecar proving the Spring member back")  # fmt: skip
        assert sidecar.get("/v1/probe/app")[0] == 200
        assert sidecar.metric('vigil_sidecar_actions_total{action="restart",outcome="NONE"}') == 0
        assert "eviction undone" not in sidecar.log.read_text()
        assert app.process.running()
    finally:
        other.close()
        if app is not None:
            app.stop()
        sidecar.stop()
