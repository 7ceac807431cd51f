"""The heartbeat bridge across a coordinator move on the 3-node cluster: while the static app is dead and
bridged, the group's coordinator node is stopped and another node takes the group over. Real brokers, the sidecar
and the static app as real processes, generations counted from every node's own log.

Timings: session timeout 6 s, heartbeat 1 s (the app's, the other member's and the bridge's).
"""

import time
from collections.abc import Callable

import pytest

from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing.bridged_group import HEARTBEAT, SESSION, BridgedGroup, bridge
from vigil_dev.testing.broker_log import broker_lines, stabilized
from vigil_dev.testing.waiting import bound, let_time_pass, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.kafka3]

MAX_BRIDGE = 90.0
HEARTBEAT_NONE = 'vigil_sidecar_broker_requests_total{api="Heartbeat",outcome="NONE"}'


def preparing(kafka: KafkaCluster, group: str) -> list[tuple[int, tuple[str, ...]]]:
    """Every rebalance any node began for `group` (also one that never stabilized)."""
    return broker_lines(kafka, group, r"Preparing to rebalance group {g} in state \w+ with old generation (\d+)")


def test_a_coordinator_move_during_a_bridge_costs_no_rebalance(
    kafka3: KafkaCluster, bridged_groups: Callable[..., BridgedGroup]
) -> None:
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
    g = bridged_groups(kafka3, "fo", replication=3, max_bridge_seconds=MAX_BRIDGE)
    before, old_member = g.joined()
    history = stabilized(kafka3, g.group)
    assert history[-1] == (before, 2), history
    began = len(preparing(kafka3, g.group))

    g.kill_app_and_await_bridge(old_member)
    assert bridge(g.sidecar)["generation"] == before

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
