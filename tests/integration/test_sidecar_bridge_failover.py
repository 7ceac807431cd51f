"""The heartbeat bridge (issue #6) across a coordinator move on the 3-node cluster: while the static app is dead and
bridged, the group's coordinator node is stopped and another node takes the group over. Real brokers, the sidecar
and the static app as real processes, generations counted from every node's own log.

Timings: session timeout 6 s, heartbeat 1 s (the app's, the other member's and the bridge's).
"""

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException

from vigil_core.kafka.security import KafkaConnection
from vigil_dev import procs
from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import clients, static_app
from vigil_dev.testing.broker_log import broker_lines, stabilized
from vigil_dev.testing.sidecar import RunningSidecar, start_sidecar
from vigil_dev.testing.waiting import bound, let_time_pass, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.kafka3]

SESSION = 6.0
HEARTBEAT = 1.0
MAX_BRIDGE = 90.0
HEARTBEAT_NONE = 'vigil_sidecar_broker_requests_total{api="Heartbeat",outcome="NONE"}'


def preparing(kafka: KafkaCluster, group: str) -> list[tuple[int, tuple[str, ...]]]:
    """Every rebalance any node began for `group` (also one that never stabilized)."""
    return broker_lines(kafka, group, r"Preparing to rebalance group {g} in state \w+ with old generation (\d+)")


def bridge(sidecar: RunningSidecar) -> dict[str, Any]:
    """The sidecar's /v1/status `bridge` (the running one, else the last that ended), {} when none."""
    return dict(sidecar.status().get("bridge") or {})


class Group:
    """A static group of two: an in-process static member (joined first) and the static app next to its own sidecar
    (bridge enabled), both real processes, on a topic replicated to all three nodes."""

    def __init__(self, kafka: KafkaCluster, tmp: Path) -> None:
        self.kafka = kafka
        self.conn: KafkaConnection = kafka.connection()
        self.tmp = tmp / "failover"
        self.tmp.mkdir()
        self.topic = clients.create_topic(self.conn, clients.unique("bridge-fo"), partitions=3, replication=3)
        self.group = clients.unique("g-bridge-fo")
        self.instance = "fo-app"
        self.sidecar = start_sidecar(
            self.conn, self.group, "pod-fo", self.tmp, env=None,
            instance_id=self.instance, bridge_enabled="true", budget="none",
            session_timeout_seconds=SESSION, heartbeat_interval_seconds=HEARTBEAT, max_bridge_seconds=MAX_BRIDGE,
            stall_timeout_seconds=8, check_interval_seconds=1, events_topic="",
        )  # fmt: skip
        self.other = clients.Member(
            self.conn, self.group, [self.topic], "fo-other", extra={"group.instance.id": "fo-other"}
        ).start()
        self.app: procs.Managed | None = None

    def start_app(self) -> None:
        self.app = static_app.start(
            self.conn, self.group, self.topic, self.instance, self.tmp, beacon_addr=self.sidecar.beacon_addr
        )

    def app_generation(self) -> int:
        """The generation the app itself last reported with an assignment (its log), -1 before it has one."""
        path = static_app.log_path(self.tmp, self.instance)
        found = re.findall(r"generation=(-?\d+) assigned=[1-9]", path.read_text() if path.exists() else "")
        return int(found[-1]) if found else -1

    def by_instance(self) -> dict[str | None, str]:
        """Instance id → member id, as DescribeGroups has them now."""
        return {m.group_instance_id: m.member_id for m in clients.describe_group(self.conn, self.group).members}

    def coordinator(self) -> int | None:
        """The node that answers DescribeGroups for the group now (None while none does)."""
        try:
            return clients.describe_group(self.conn, self.group).coordinator.id
        except KafkaException:
            return None

    def stable_instances(self) -> set[str | None]:
        """The members' instance ids while the group is Stable with every member assigned, else an empty set."""
        try:
            desc = clients.describe_group(self.conn, self.group)  # one view: the state and the members together
        except KafkaException:
            return set()
        if str(desc.state).split(".")[-1].upper() != "STABLE":
            return set()
        if any(not m.assignment.topic_partitions for m in desc.members):
            return set()
        return {m.group_instance_id for m in desc.members}

    def joined(self) -> tuple[int, str]:
        """The other member first, then the app; both Stable, the sidecar holding the app's connection and proving
        its member. Returns (the group's generation, the app's member id)."""
        wait_for(lambda: clients.stable_members(self.conn, self.group), lambda n: n == 1, timeout=60,
                 what=f"{self.group}: the other member Stable alone")  # fmt: skip
        self.start_app()
        wait_for(lambda: clients.stable_members(self.conn, self.group), lambda n: n == 2, timeout=60,
                 what=f"{self.group}: 2 static members Stable")  # fmt: skip
        member = self.by_instance()[self.instance]
        wait_for(
            lambda: json.loads(self.sidecar.get("/v1/status")[1] or "{}"),
            lambda s: (s.get("member") or {}).get("member_id") == member and s["app"]["helper_connections"] == 1,
            timeout=30,
            what=f"{self.group}: the sidecar holding the app's connection and proving its member {member}",
        )
        generation = stabilized(self.kafka, self.group)[-1][0]
        wait_for(self.app_generation, lambda g: g == generation, timeout=10,
                 what=f"{self.group}: the app reporting the group's generation {generation}")  # fmt: skip
        return generation, member

    def close(self) -> None:
        if self.app is not None:
            self.app.stop(grace=5)
        self.other.close()
        self.sidecar.stop()


@pytest.fixture
def group(kafka3: KafkaCluster, tmp_path: Path) -> Iterator[Group]:
    made = Group(kafka3, tmp_path)
    yield made
    made.close()


def test_a_coordinator_move_during_a_bridge_costs_no_rebalance(kafka3: KafkaCluster, group: Group) -> None:
    """The app is killed (SIGKILL) and bridged; the group's coordinator node is stopped cleanly (SIGTERM: a
    controlled shutdown that hands the `__consumer_offsets` partition to another node); the app is started again
    once the new coordinator serves the group, has answered bridge heartbeats, and a session timeout plus two
    heartbeats has passed since (the load restarts the session timers: the member is kept by the bridge alone).

    What proves "no rebalance", from the broker logs of ALL three nodes (a rebalance is logged by whichever node
    coordinates the group at the time):
    - no `Preparing to rebalance group <g>` and no `Stabilized group <g> generation N` line after the kill: the
      `Stabilized` lines of the whole episode are exactly those before it (the group's generation 1, 2 members);
    - the move itself is a load, not a rebalance: the old coordinator logs `[GroupId=<g>] Unloading group metadata
      for generation N` with the same N, and the new one `Loaded classic group <g> with 2 members.` (Kafka 4.1.1's
      load line; it logs no `Stabilized` line and starts no join phase: it restarts every member's session timer);
    - the restarted app reports the same generation N (its own log), under a new member id for the same instance.
    """
    g = group
    before, old_member = g.joined()
    history = stabilized(kafka3, g.group)
    assert history[-1] == (before, 2), history
    began = len(preparing(kafka3, g.group))

    assert g.app is not None
    g.app.kill()  # SIGKILL: the helper's connection closes, the sidecar's proof
    running = wait_for(lambda: bridge(g.sidecar), lambda b: b.get("heartbeats_sent", 0) >= 1,
                       timeout=bound(HEARTBEAT), what=f"{g.group}: the bridge heartbeating")  # fmt: skip
    assert running["state"] == "running", running
    assert running["member_id"] == old_member, running
    assert running["generation"] == before, running

    old = g.coordinator()
    assert old is not None
    try:
        assert kafka3.stop_node(old)
        new = wait_for(g.coordinator, lambda node: node not in (None, old), timeout=60,
                       what=f"{g.group}: DescribeGroups answered by a node other than {old}")  # fmt: skip
        new_at = time.monotonic()
        # the bridge keeps the member across the move: heartbeats answered NONE by the new coordinator
        sent, answered = bridge(g.sidecar)["heartbeats_sent"], g.sidecar.metric(HEARTBEAT_NONE)
        after = wait_for(
            lambda: (bridge(g.sidecar), g.sidecar.metric(HEARTBEAT_NONE)),
            lambda s: s[0].get("heartbeats_sent", 0) >= sent + 2 and s[1] >= answered + 2,
            timeout=bound(2 * HEARTBEAT),
            what=f"{g.group}: the bridge's heartbeats answered NONE by the new coordinator {new}",
        )[0]
        assert after["state"] == "running", after
        assert after["last_error"] is None, after
        assert g.by_instance()[g.instance] == old_member  # still the dead app's member
        loaded = broker_lines(kafka3, g.group, r"Loaded classic group {g} with (\d+) members")
        assert loaded == [(new, ("2",))], loaded
        unloaded = broker_lines(kafka3, g.group, r"\[GroupId={g}\] Unloading group metadata for generation (\d+)")
        assert unloaded == [(old, (str(before),))], unloaded

        # a new coordinator restarts every member's session timer when it loads the group: without heartbeats the
        # dead member would expire one session timeout after the load. Keep the app away longer than that.
        quiet = SESSION + 2 * HEARTBEAT
        let_time_pass(
            quiet,
            since=new_at,
            why=f"a session after coordinator {new} took the group over: an unbridged member would have expired",
        )
        still = bridge(g.sidecar)
        assert still["state"] == "running", still
        assert still["heartbeats_sent"] >= after["heartbeats_sent"] + quiet / HEARTBEAT - 2, still
        assert g.by_instance()[g.instance] == old_member  # kept by the bridge's heartbeats alone
        assert stabilized(kafka3, g.group) == history

        g.start_app()
        ended = wait_for(lambda: bridge(g.sidecar), lambda b: b.get("state") == "ended",
                         timeout=bound(2 * HEARTBEAT, slack=10), what=f"{g.group}: the bridge ending")  # fmt: skip
        assert ended["outcome"] == "rejoined", ended
        assert ended["heartbeats_sent"] >= after["heartbeats_sent"], ended
        wait_for(g.stable_instances, lambda ids: ids == {"fo-other", g.instance}, timeout=60,
                 what=f"{g.group}: Stable with both instance ids under coordinator {new}")  # fmt: skip
        wait_for(g.app_generation, lambda gen: gen == before, timeout=15,
                 what=f"{g.group}: the restarted app in the kill's generation {before}")  # fmt: skip
        members = g.by_instance()
        assert members[g.instance] != old_member  # the restarted app, under a new member id
        assert g.coordinator() == new

        print(f"coordinator {old} -> {new}; generations {stabilized(kafka3, g.group)}; bridge {ended}")
        assert stabilized(kafka3, g.group) == history, "a rebalance during the episode"
        assert len(preparing(kafka3, g.group)) == began, preparing(kafka3, g.group)[began:]
        assert g.sidecar.metric('vigil_sidecar_bridges_ended_total{outcome="rejoined"}') == 1
        assert "bridge removed member" not in g.sidecar.log.read_text()
    finally:
        kafka3.start_node(old)
        kafka3.wait_healthy([old])
