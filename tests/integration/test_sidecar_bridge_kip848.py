"""A KIP-848 static member's app killed and started again after longer than the group's session timeout: with vigil
no group epoch is bumped. While the app is away the sidecar keeps its member alive with ConsumerGroupHeartbeats at
the member's epoch (nothing else changed, no partitions owned); when the restarted app's helper connects and asks
for the go-ahead, the sidecar releases the instance id (epoch -2) and answers; the app's join then replaces the
member with its assignment. Stock, the coordinator fences the member at its session timeout and the restarted app
joins as a new member: two bumps (`bench/kip848_static_restart.py` measures both side by side). Real broker (the
test broker's 10 s KIP-848 session, 1 s heartbeat interval), the sidecar and the apps as real processes.
"""

import re
from pathlib import Path

import pytest

from vigil_dev import procs
from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import broker_log, clients, static_app
from vigil_dev.testing.sidecar import start_sidecar
from vigil_dev.testing.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.kafka_min("4.0")]

SESSION = 10.0
"""The test broker's `group.consumer.session.timeout.ms` (dev/vigil_dev/kafka/config.py)."""
AWAY = 2 * SESSION
"""How long the app stays dead: twice its session, so stock would certainly have fenced it."""
KEEP_ALIVE_SECONDS = 3.0
"""The bridge's pace: the client's default heartbeat interval (a KIP-848 client takes the broker's, 1 s here; the
sidecar is not told it, and 3 s is well inside any session the broker allows)."""


def test_a_kip848_static_app_away_for_two_sessions_comes_back_without_an_epoch_bump(
    kafka: KafkaCluster, tmp_path: Path
) -> None:
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("k848"), partitions=4)
    group = clients.unique("g-k848")
    sidecar = start_sidecar(
        conn, group, "pod-k848", tmp_path, instance_id="k848-app", group_protocol="consumer", budget="none",
        stall_timeout_seconds=60, check_interval_seconds=1, session_timeout_seconds=SESSION, bridge_enabled="true",
        max_bridge_seconds=120, events_topic="",
    )  # fmt: skip
    kip848: clients.ClientConfig = {"group.protocol": "consumer", "group.instance.id": "k848-other"}
    other = clients.Member(conn, group, [topic], "k848-other", extra=kip848).start()
    log = static_app.log_path(tmp_path, "k848-app")

    def start_app() -> procs.Managed:
        return static_app.start(conn, group, topic, "k848-app", tmp_path, beacon_addr=sidecar.beacon_addr,
                                protocol="consumer")  # fmt: skip

    def assigned_lines() -> list[str]:
        text = log.read_text() if log.exists() else ""
        return re.findall(r"static_app: member=(\S+) generation=\d+ assigned=[1-9]", text)

    app = start_app()
    try:
        wait_for(lambda: clients.stable_members(conn, group), lambda n: n == 2, timeout=60, what="2 members Stable")
        first = wait_for(assigned_lines, timeout=30, what="the app holding partitions")[-1]
        wait_for(sidecar.status, lambda s: (s.get("member") or {}).get("member_id") == first
                 and s["app"]["helper_connections"] == 1, timeout=30,
                 what="the sidecar holding the app's connection and proving its member")  # fmt: skip
        bumps = broker_log.epoch_bumps(kafka, group)
        app.kill()
        running = wait_for(
            lambda: (sidecar.status().get("bridge") or {}),
            lambda b: b.get("state") == "running" and b["seconds_bridged"] >= AWAY and b["last_error"] is None,
            timeout=AWAY + 15, what=f"the sidecar keeping the dead app's member alive for {AWAY:g}s",
        )  # fmt: skip
        assert running["member_id"] == first
        assert running["heartbeats_sent"] >= AWAY / KEEP_ALIVE_SECONDS
        app = start_app()
        back = wait_for(assigned_lines, lambda lines: len(lines) >= 2, timeout=30,
                        what="the restarted app holding partitions")[-1]  # fmt: skip
        ended = wait_for(lambda: sidecar.status().get("bridge") or {}, lambda b: b.get("state") == "ended",
                         timeout=10, what="the bridge ended")  # fmt: skip
        assert (ended["outcome"], ended["member_id"]) == ("rejoined", first), ended
        assert back != first  # the restarted app's member took the kept one over
        wait_for(lambda: clients.stable_members(conn, group), lambda n: n == 2, timeout=30, what="2 members Stable")
        # the broker's own words: no epoch bumped, nobody fenced or refused; released once, replaced once
        assert broker_log.epoch_bumps(kafka, group) == bumps
        assert broker_log.session_expiries(kafka, group) == []
        assert broker_log.unreleased_refusals(kafka, group, "k848-app") == []
        assert broker_log.static_releases(kafka, group, "k848-app") == [first]
        assert broker_log.static_replacements(kafka, group, "k848-app") == [(back, first)]
        print(f"kept {running['seconds_bridged']:.1f}s with {running['heartbeats_sent']} keep-alives; bumps {bumps}")
    finally:
        app.stop(grace=5)
        other.close()
        sidecar.stop()
