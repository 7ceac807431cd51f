"""A KIP-848 static member's app killed and started again. Its old member still holds the
instance id, so the coordinator refuses the new one's join with UNRELEASED_INSTANCE_ID (fatal in the Java client and
librdkafka) until the old member's session timeout fences it (45 s by default, 45-60 s). Where vigil knows the old
member is dead — the helper's connection closed with its process — it releases the instance id on the dead member's
behalf (ConsumerGroupHeartbeat with epoch -2, what the client sends when it closes): the new app takes the member
and its assignment over at once. Real broker (the group's session raised to 45 s, as in production), the sidecar and
the apps as real processes.
"""

import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from vigil_core.kafka.group_client import GroupClient
from vigil_core.kafka.security import KafkaConnection
from vigil_dev import procs
from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import broker_log, clients, java_consumer, static_app
from vigil_dev.testing.java_consumer import JavaConsumer
from vigil_dev.testing.sidecar import RunningSidecar, start_sidecar
from vigil_dev.testing.waiting import bound, wait_for

pytestmark = pytest.mark.integration

GROUP_SESSION_MS = 45000
"""The KIP-848 default session timeout, set on the group: the stock wait for a killed static member."""
BACK_WITHIN = {"librdkafka": 10.0, "java": 20.0}
"""The restarted app holds partitions within this long of the kill (a new process, a JVM for Java, joining)."""


@dataclass
class Static848:
    """A KIP-848 group whose session is Kafka's default 45 s (the test broker's is 10 s) on a 4-partition topic, a
    sidecar for the static member `instance_id` (never evicting: stall timeout 60 s), and another static member."""

    conn: KafkaConnection
    topic: str
    group: str
    sidecar: RunningSidecar
    other: clients.Member

    @classmethod
    def start(cls, kafka: KafkaCluster, tmp: Path, prefix: str, instance_id: str) -> "Static848":
        conn = kafka.connection()
        topic = clients.create_topic(conn, clients.unique(prefix), partitions=4)
        group = clients.unique(f"g-{prefix}")
        admin = GroupClient(conn)
        try:
            admin.set_group_session(group, GROUP_SESSION_MS)
        finally:
            admin.close()
        sidecar = start_sidecar(
            conn, group, "pod-rel", tmp, instance_id=instance_id, group_protocol="consumer", budget="none",
            stall_timeout_seconds=60, check_interval_seconds=1, session_timeout_seconds=GROUP_SESSION_MS / 1000,
            events_topic="",
        )  # fmt: skip
        kip848: clients.ClientConfig = {"group.protocol": "consumer", "group.instance.id": "rel-other"}
        other = clients.Member(conn, group, [topic], "rel-other", extra=kip848).start()
        return cls(conn, topic, group, sidecar, other)

    def close(self) -> None:
        self.other.close()
        self.sidecar.stop()


def _released_then_replaced(kafka: KafkaCluster, group: str, instance_id: str, old: str, new: str) -> None:
    """The broker's own words: the old member left for now (vigil's release), the new one replaced it, and nobody
    was refused for an unreleased instance id."""
    released = broker_log.static_releases(kafka, group, instance_id)
    assert released == [old], released
    replaced = broker_log.static_replacements(kafka, group, instance_id)
    assert replaced == [(new, old)], replaced
    refused = broker_log.unreleased_refusals(kafka, group, instance_id)
    assert refused == [], refused


def test_a_killed_kip848_static_app_started_again_takes_its_member_over_at_once(
    kafka: KafkaCluster, tmp_path: Path
) -> None:
    """librdkafka (the Python helper)."""
    g = Static848.start(kafka, tmp_path, "release", "rel-app")
    conn, topic, group, sidecar = g.conn, g.topic, g.group, g.sidecar

    def start_app() -> procs.Managed:
        return static_app.start(conn, group, topic, "rel-app", tmp_path, beacon_addr=sidecar.beacon_addr,
                                protocol="consumer")  # fmt: skip

    def assigned_lines() -> list[str]:
        return static_app.holding_members(tmp_path, "rel-app")

    app = start_app()
    try:
        wait_for(lambda: clients.stable_members(conn, group), lambda n: n == 2, timeout=60, what="2 members Stable")
        first = wait_for(assigned_lines, timeout=30, what="the app holding partitions")[-1]
        wait_for(sidecar.status, lambda s: (s.get("member") or {}).get("member_id") == first
                 and s["app"]["helper_connections"] == 1, timeout=30,
                 what="the sidecar holding the app's connection and proving its member")  # fmt: skip
        app.kill()
        killed_at = time.monotonic()
        before = len(assigned_lines())  # the first app may have logged more than one assignment
        app = start_app()
        limit = BACK_WITHIN["librdkafka"]
        back = wait_for(assigned_lines, lambda lines: len(lines) > before, timeout=bound(limit),
                        what="the restarted app holding partitions")[-1]  # fmt: skip
        took = time.monotonic() - killed_at
        print(f"librdkafka: the restarted app held partitions {took:.1f}s after the kill (session 45 s)")
        assert took <= limit
        assert back != first  # a new member id took the member over
        _released_then_replaced(kafka, group, "rel-app", first, back)
        assert sidecar.metric('vigil_sidecar_actions_total{action="release",outcome="NONE"}') == 1
        assert sidecar.status()["last_action"]["action"] == "release"
    finally:
        app.stop(grace=5)
        g.close()


def test_a_killed_kip848_static_java_app_started_again_takes_its_member_over_at_once(
    kafka: KafkaCluster, tmp_path: Path
) -> None:
    """kafka-clients (the broker's, 4.4.0 by default) as vigil's `VigilConsumer` (java/): its `VigilHold` is the
    proof that the killed app ended."""
    g = Static848.start(kafka, tmp_path, "release-java", "rel-java")
    conn, topic, group, sidecar = g.conn, g.topic, g.group, g.sidecar

    def start_java(name: str) -> JavaConsumer:
        state = tmp_path / name
        state.mkdir()
        return java_consumer.start(
            kafka.libs, conn, group=group, topic=topic, client_id="rel-java", state_dir=state, protocol="consumer",
            beacon_addr=sidecar.beacon_addr, instance_id="rel-java",
        )  # fmt: skip

    java = start_java("first")
    try:
        wait_for(lambda: clients.stable_members(conn, group), lambda n: n == 2, timeout=60, what="2 members Stable")
        first = wait_for(java.holding, timeout=30, what="the Java app holding partitions")
        assert first is not None
        wait_for(sidecar.status, lambda s: (s.get("member") or {}).get("member_id") == first["member_id"]
                 and s["app"]["helper_connections"] == 1, timeout=30,
                 what="the sidecar holding the Java app's connection (VigilHold) and proving its member")  # fmt: skip
        java.process.kill()
        killed_at = time.monotonic()
        java = start_java("second")
        limit = BACK_WITHIN["java"]
        back = wait_for(java.holding, timeout=bound(limit), what="the restarted Java app holding partitions")
        assert back is not None
        took = time.monotonic() - killed_at
        print(f"java: the restarted app held partitions {took:.1f}s after the kill (session 45 s)")
        assert took <= limit
        assert back["member_id"] != first["member_id"]
        _released_then_replaced(kafka, group, "rel-java", first["member_id"], back["member_id"])
        assert sidecar.metric('vigil_sidecar_actions_total{action="release",outcome="NONE"}') == 1
    finally:
        java.stop()
        g.close()
