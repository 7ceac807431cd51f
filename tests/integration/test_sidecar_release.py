"""Issue #23 point 7: a KIP-848 static member's app killed and started again. Its old member still holds the
instance id, so the coordinator refuses the new one's join with UNRELEASED_INSTANCE_ID (fatal in the Java client and
librdkafka) until the old member's session timeout fences it (45 s by default, 45-60 s). Where vigil knows the old
member is dead — the helper's connection closed with its process — it releases the instance id on the dead member's
behalf (ConsumerGroupHeartbeat with epoch -2, what the client sends when it closes): the new app takes the member
and its assignment over at once. Real broker (the group's session raised to 45 s, as in production), the sidecar and
the apps as real processes.
"""

import re
import time
from pathlib import Path

import pytest

from vigil_core.kafka.group_client import GroupClient
from vigil_dev import procs
from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import clients, static_app
from vigil_dev.testing.broker_log import broker_lines
from vigil_dev.testing.sidecar import start_sidecar
from vigil_dev.testing.waiting import bound, wait_for

pytestmark = pytest.mark.integration

GROUP_SESSION_MS = 45000
"""The KIP-848 default session timeout, set on the group: the stock wait for a killed static member."""
BACK_WITHIN = 10.0
"""The restarted app holds partitions within this long of the kill (a new Python process joining)."""


def test_a_killed_kip848_static_app_started_again_takes_its_member_over_at_once(
    kafka: KafkaCluster, tmp_path: Path
) -> None:
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("release"), partitions=4)
    group = clients.unique("g-release")
    admin = GroupClient(conn)
    try:
        admin.set_group_session(group, GROUP_SESSION_MS)
    finally:
        admin.close()
    sidecar = start_sidecar(
        conn, group, "pod-rel", tmp_path, instance_id="rel-app", group_protocol="consumer", budget="none",
        stall_timeout_seconds=60, check_interval_seconds=1, session_timeout_seconds=GROUP_SESSION_MS / 1000,
        events_topic="",
    )  # fmt: skip
    kip848: clients.ClientConfig = {"group.protocol": "consumer", "group.instance.id": "rel-other"}
    other = clients.Member(conn, group, [topic], "rel-other", extra=kip848).start()
    log = static_app.log_path(tmp_path, "rel-app")

    def start_app() -> procs.Managed:
        return static_app.start(conn, group, topic, "rel-app", tmp_path, beacon_addr=sidecar.beacon_addr,
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
        app.kill()
        killed_at = time.monotonic()
        app = start_app()
        back = wait_for(assigned_lines, lambda lines: len(lines) >= 2, timeout=bound(BACK_WITHIN),
                        what="the restarted app holding partitions")[-1]  # fmt: skip
        took = time.monotonic() - killed_at
        print(f"the restarted app held partitions {took:.1f}s after the kill (group session {GROUP_SESSION_MS} ms)")
        assert took <= BACK_WITHIN
        assert back != first  # a new member id took the member over
        released = broker_lines(kafka, group, r"\[GroupId {g}\] Static member (\S+) with instance id rel-app"
                                r" temporarily left the consumer group")  # fmt: skip
        assert [m for _, (m,) in released] == [first], released
        replaced = broker_lines(kafka, group, r"\[GroupId {g}\] Static member with instance id rel-app re-joins the"
                                r" consumer group using the consumer protocol\. Created a new member (\S+) to replace"
                                r" the existing member (\S+)\.")  # fmt: skip
        assert [hit for _, hit in replaced] == [(back, first)], replaced
        refused = broker_lines(kafka, group, r"\[GroupId {g}\] Static member \S+ with instance id rel-app cannot join")
        assert refused == [], refused
        assert sidecar.metric('vigil_sidecar_actions_total{action="release",outcome="NONE"}') == 1
        assert sidecar.status()["last_action"]["action"] == "release"
    finally:
        app.stop(grace=5)
        other.close()
        sidecar.stop()
