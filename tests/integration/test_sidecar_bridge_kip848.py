"""A KIP-848 static member's app killed and started again after longer than the group's session timeout: with vigil
no group epoch is bumped. While the app is away the sidecar keeps its member alive with ConsumerGroupHeartbeats at
the member's epoch (nothing else changed, no partitions owned); when the restarted app's helper connects and asks
for the go-ahead, the sidecar releases the instance id (epoch -2) and answers; the app's join then replaces the
member with its assignment. Stock, the coordinator fences the member at its session timeout and the restarted app
joins as a new member: two bumps (`bench/kip848_static_restart.py` measures both side by side). Real broker (the
test broker's 10 s KIP-848 session, 1 s heartbeat interval), the sidecar and the apps as real processes.
"""

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from vigil_core.kafka.security import KafkaConnection
from vigil_dev import procs
from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import broker_log, clients, java_consumer, static_app
from vigil_dev.testing.java_consumer import JavaConsumer
from vigil_dev.testing.sidecar import RunningSidecar, start_sidecar
from vigil_dev.testing.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.kafka_min("4.0")]

SESSION = 10.0
"""The test broker's `group.consumer.session.timeout.ms` (dev/vigil_dev/kafka/config.py)."""
AWAY = 2 * SESSION
"""How long the app stays dead: twice its session, so stock would certainly have fenced it."""
KEEP_ALIVE_SECONDS = 3.0
"""The bridge's pace: the client's default heartbeat interval (a KIP-848 client takes the broker's, 1 s here; the
sidecar is not told it, and 3 s is well inside any session the broker allows)."""


@dataclass
class Kept848:
    """A KIP-848 group on a 4-partition topic, a bridging sidecar for the static member `instance_id`, another static
    member beside it."""

    kafka: KafkaCluster
    conn: KafkaConnection
    topic: str
    group: str
    instance_id: str
    sidecar: RunningSidecar
    other: clients.Member

    @classmethod
    def start(cls, kafka: KafkaCluster, tmp: Path, instance_id: str) -> "Kept848":
        conn = kafka.connection()
        topic = clients.create_topic(conn, clients.unique(instance_id), partitions=4)
        group = clients.unique(f"g-{instance_id}")
        sidecar = start_sidecar(
            conn, group, f"pod-{instance_id}", tmp, instance_id=instance_id, group_protocol="consumer",
            budget="none", stall_timeout_seconds=60, check_interval_seconds=1, session_timeout_seconds=SESSION,
            bridge_enabled="true", max_bridge_seconds=120, events_topic="",
        )  # fmt: skip
        kip848: clients.ClientConfig = {"group.protocol": "consumer", "group.instance.id": f"{instance_id}-other"}
        other = clients.Member(conn, group, [topic], f"{instance_id}-other", extra=kip848).start()
        return cls(kafka, conn, topic, group, instance_id, sidecar, other)

    def proven(self, member_id: str) -> None:
        wait_for(lambda: clients.stable_members(self.conn, self.group), lambda n: n == 2, timeout=60,
                 what="2 members Stable")  # fmt: skip
        wait_for(self.sidecar.status, lambda s: (s.get("member") or {}).get("member_id") == member_id
                 and s["app"]["helper_connections"] == 1, timeout=30,
                 what="the sidecar holding the app's connection and proving its member")  # fmt: skip

    def kept_away(self, member_id: str) -> dict[str, Any]:
        """The bridge's status once it kept the dead app's member `AWAY` seconds, without an error."""
        running = wait_for(
            lambda: (self.sidecar.status().get("bridge") or {}),
            lambda b: b.get("state") == "running" and b["seconds_bridged"] >= AWAY and b["last_error"] is None,
            timeout=AWAY + 15, what=f"the sidecar keeping the dead app's member alive for {AWAY:g}s",
        )  # fmt: skip
        assert running["member_id"] == member_id
        assert running["heartbeats_sent"] >= AWAY / KEEP_ALIVE_SECONDS
        return running

    def handed_over(self, first: str, back: str, bumps: list[int]) -> None:
        """The bridge ended "rejoined", and the broker's own words: no epoch bumped, nobody fenced or refused; the
        kept member released once and replaced once by the restarted app's."""
        ended = wait_for(lambda: self.sidecar.status().get("bridge") or {}, lambda b: b.get("state") == "ended",
                         timeout=10, what="the bridge ended")  # fmt: skip
        assert (ended["outcome"], ended["member_id"]) == ("rejoined", first), ended
        assert back != first
        wait_for(lambda: clients.stable_members(self.conn, self.group), lambda n: n == 2, timeout=30,
                 what="2 members Stable")  # fmt: skip
        kafka, group, iid = self.kafka, self.group, self.instance_id
        assert broker_log.epoch_bumps(kafka, group) == bumps
        assert broker_log.session_expiries(kafka, group) == []
        assert broker_log.unreleased_refusals(kafka, group, iid) == []
        assert broker_log.static_releases(kafka, group, iid) == [first]
        assert broker_log.static_replacements(kafka, group, iid) == [(back, first)]

    def close(self) -> None:
        self.other.close()
        self.sidecar.stop()


def test_a_kip848_static_app_away_for_two_sessions_comes_back_without_an_epoch_bump(
    kafka: KafkaCluster, tmp_path: Path
) -> None:
    """librdkafka (the Python helper)."""
    g = Kept848.start(kafka, tmp_path, "k848-app")

    def start_app() -> procs.Managed:
        return static_app.start(g.conn, g.group, g.topic, "k848-app", tmp_path, beacon_addr=g.sidecar.beacon_addr,
                                protocol="consumer")  # fmt: skip

    def assigned_lines() -> list[str]:
        return static_app.holding_members(tmp_path, "k848-app")

    app = start_app()
    try:
        first = wait_for(assigned_lines, timeout=60, what="the app holding partitions")[-1]
        g.proven(first)
        bumps = broker_log.epoch_bumps(kafka, g.group)
        app.kill()
        running = g.kept_away(first)
        before = len(assigned_lines())
        app = start_app()
        back = wait_for(assigned_lines, lambda lines: len(lines) > before, timeout=30,
                        what="the restarted app holding partitions")[-1]  # fmt: skip
        g.handed_over(first, back, bumps)
        print(f"librdkafka: kept {running['seconds_bridged']:.1f}s, {running['heartbeats_sent']} keep-alives")
    finally:
        app.stop(grace=5)
        g.close()


def test_a_kip848_static_java_app_away_for_two_sessions_comes_back_without_an_epoch_bump(
    kafka: KafkaCluster, tmp_path: Path
) -> None:
    """kafka-clients as vigil's `VigilConsumer` (java/): its `VigilHold` waits for the go-ahead in the constructor,
    before the consumer can join."""
    g = Kept848.start(kafka, tmp_path, "k848-java")

    def start_java(name: str) -> JavaConsumer:
        state = tmp_path / name
        state.mkdir()
        return java_consumer.start(
            kafka.libs, g.conn, group=g.group, topic=g.topic, client_id="k848-java", state_dir=state,
            protocol="consumer", beacon_addr=g.sidecar.beacon_addr, instance_id="k848-java",
        )  # fmt: skip

    java = start_java("first")
    try:
        first = wait_for(java.holding, timeout=60, what="the Java app holding partitions")
        assert first is not None
        g.proven(first["member_id"])
        bumps = broker_log.epoch_bumps(kafka, g.group)
        java.process.kill()
        running = g.kept_away(first["member_id"])
        java = start_java("second")
        back = wait_for(java.holding, timeout=60, what="the restarted Java app holding partitions")
        assert back is not None
        g.handed_over(first["member_id"], back["member_id"], bumps)
        print(f"java: kept {running['seconds_bridged']:.1f}s, {running['heartbeats_sent']} keep-alives")
    finally:
        java.stop()
        g.close()
