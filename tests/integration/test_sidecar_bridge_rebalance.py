"""The heartbeat bridge meeting a foreign rebalance: while the static app is dead and bridged, a third
member joins the group. Real broker, the sidecar and the static app as real processes, generations counted from the
broker's own log.

Timings: session timeout 6 s, heartbeat 1 s (the app's, the in-process members' and the bridge's).

- `remove`: the bridge's next heartbeat is answered REBALANCE_IN_PROGRESS and it compare-and-removes the absent
  member at once, so the joiner's rebalance completes within a heartbeat interval plus the rebalance itself, not
  after the dead member's session timeout: one new generation, two members, the bridge ended "removed".
- `hold` (expected return 15 s): the bridge keeps heartbeating through the joiner's rebalance; the app restarted
  inside the hold takes its instance id back (the coordinator swaps the static member's id while the join is
  pending), so one rebalance holds all three members; the bridge's heartbeat with the old member id is fenced (or
  the watchdog's view shows the new member id): it ends "rejoined" and never removes anything.
"""

import re
import time
from collections.abc import Callable

import pytest

from vigil_core.kafka import cgmd
from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import clients
from vigil_dev.testing.bridged_group import HEARTBEAT, SESSION, BridgedGroup, bridge
from vigil_dev.testing.broker_log import stabilized
from vigil_dev.testing.waiting import bound, let_time_pass, wait_for

pytestmark = pytest.mark.integration

EXPECTED_RETURN = 15.0


def generation_of(member: clients.Member) -> int:
    meta = cgmd.parse(member.group_metadata) if member.group_metadata else None
    return meta.generation if meta else -1


def test_remove_a_joiner_during_a_bridge_gets_a_stable_group_within_a_heartbeat_and_a_rebalance(
    kafka: KafkaCluster, bridged_groups: Callable[..., BridgedGroup]
) -> None:
    g = bridged_groups(kafka, "remove", on_foreign_rebalance="remove")
    before, old_member = g.joined()
    history = stabilized(kafka, g.group)
    g.kill_app_and_await_bridge(old_member)

    joining_at = time.monotonic()
    joiner = g.member("remove-joiner")
    # the bridge's next heartbeat (≤ 1 interval) is answered REBALANCE_IN_PROGRESS and it removes the absent member
    # at once; the rebalance then needs the other member's rejoin (its own heartbeat) and the sync
    wait_for(g.stable_instances, lambda ids: ids == {"remove-other", "remove-joiner"}, timeout=bound(HEARTBEAT + 1),
             what=f"{g.group}: Stable again with the other member and the joiner")  # fmt: skip
    elapsed = time.monotonic() - joining_at
    print(f"remove: Stable again {elapsed:.2f}s after the joiner started (session timeout {SESSION:g}s)")
    assert elapsed < SESSION, f"the rebalance waited for the session timeout ({elapsed:.2f}s)"

    ended = wait_for(lambda: bridge(g.sidecar), lambda b: b.get("state") == "ended", timeout=bound(HEARTBEAT),
                     what=f"{g.group}: the bridge ending")  # fmt: skip
    assert ended["outcome"] == "removed", ended
    assert ended["member_id"] == old_member
    assert g.sidecar.metric('vigil_sidecar_bridges_ended_total{outcome="removed"}') == 1
    assert re.search(rf"bridge of member {re.escape(old_member)} ended: removed after", g.sidecar.log.read_text())

    left = [line for line in kafka.server_log(1).read_text().splitlines() if f"Member {old_member} has left" in line]
    assert len(left) == 1, left
    assert "vigil:" in left[0], left  # the bridge's compare-and-remove, not an expiry
    members = g.by_instance()
    assert set(members) == {"remove-other", "remove-joiner"}, members
    assert old_member not in members.values()
    # one rebalance, not two: the absent member was not kept, given partitions and expired later
    assert stabilized(kafka, g.group) == [*history, (before + 1, 2)], stabilized(kafka, g.group)
    wait_for(lambda: generation_of(joiner), lambda gen: gen == before + 1, timeout=10,
             what=f"{g.group}: the joiner in generation {before + 1}")  # fmt: skip


def test_hold_the_app_restarted_inside_the_hold_joins_the_joiners_generation_and_the_bridge_ends_rejoined(
    kafka: KafkaCluster, bridged_groups: Callable[..., BridgedGroup]
) -> None:
    g = bridged_groups(kafka, "hold", on_foreign_rebalance="hold", expected_return_seconds=EXPECTED_RETURN)
    before, old_member = g.joined()
    history = stabilized(kafka, g.group)
    g.kill_app_and_await_bridge(old_member)

    joiner = g.member("hold-joiner")
    # the bridge saw the joiner's rebalance (REBALANCE_IN_PROGRESS) and holds: it keeps heartbeating, no Remove yet
    holding = wait_for(lambda: bridge(g.sidecar), lambda b: b.get("holding") is True, timeout=bound(2 * HEARTBEAT),
                       what=f"{g.group}: the bridge holding through the joiner's rebalance")  # fmt: skip
    assert holding["state"] == "running", holding
    assert holding["seconds_bridged"] < EXPECTED_RETURN - 5, holding  # room left for the restart
    assert g.stable() == -1, "the joiner's rebalance completed without waiting for the held member"

    g.start_app()  # inside the hold
    wait_for(g.stable_instances, lambda ids: ids == {"hold-other", "hold-joiner", g.instance},
             timeout=bound(EXPECTED_RETURN),
             what=f"{g.group}: Stable with the other member, the joiner and the restarted app")  # fmt: skip
    ended = wait_for(lambda: bridge(g.sidecar), lambda b: b.get("state") == "ended", timeout=bound(2 * HEARTBEAT),
                     what=f"{g.group}: the bridge ending")  # fmt: skip
    # the app took its instance id back: the old member id's heartbeat is fenced (or the watchdog's view shows the
    # new member id first); the hold never ran out, so no Remove was sent
    assert ended["outcome"] == "rejoined", ended
    assert ended["seconds_bridged"] < EXPECTED_RETURN, ended
    assert g.sidecar.metric('vigil_sidecar_bridges_ended_total{outcome="rejoined"}') == 1
    assert "bridge removed member" not in g.sidecar.log.read_text()

    # the restarted app took the held member's place inside the joiner's rebalance (the broker's own words)
    replaced = rf"groupInstanceId={g.instance} .* {re.escape(g.group)} in PreparingRebalance state\. Replacing"
    replaced += rf" previously mapped member {re.escape(old_member)} "
    assert re.search(replaced, kafka.server_log(1).read_text()), replaced
    members = g.by_instance()
    assert set(members) == {"hold-other", "hold-joiner", g.instance}, members
    assert members[g.instance] != old_member  # the restarted app, under a new member id
    wait_for(
        lambda: (generation_of(joiner), g.app_generation()),
        lambda gens: gens == (before + 1, before + 1),
        timeout=10,
        what=f"{g.group}: the joiner and the restarted app both in generation {before + 1}",
    )
    # exactly one rebalance since the kill (the joiner's, which the restarted app joined), with 3 members ...
    assert stabilized(kafka, g.group) == [*history, (before + 1, 3)], stabilized(kafka, g.group)
    # ... and none after it: a member kept as a ghost would expire one session timeout after its last heartbeat
    since = time.monotonic()  # after the bridge's end, so after its last heartbeat
    quiet = SESSION + 2 * HEARTBEAT
    let_time_pass(
        quiet,
        since=since,
        why="a session after the bridge's last heartbeat: a member kept as a ghost would have expired",
    )
    assert stabilized(kafka, g.group) == [*history, (before + 1, 3)], stabilized(kafka, g.group)
    assert g.stable() == 3
    assert g.by_instance() == members


HOLD_EXPECTED_RETURN = 60.0
"""The hold test's expected return: an app expected back after a minute that never comes back."""


def _logged_at(kafka: KafkaCluster, pattern: str) -> list[float]:
    """When the broker logged each line matching `pattern` (its own timestamps, seconds)."""
    log = kafka.server_log(1).read_text()
    stamps = re.findall(rf"^\[(\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d,\d{{3}})\] .*{pattern}", log, re.M)
    return [time.mktime(time.strptime(s[:19], "%Y-%m-%d %H:%M:%S")) + int(s[20:]) / 1000 for s in stamps]


def test_hold_keeps_an_eager_group_waiting_at_most_one_session_timeout(
    kafka: KafkaCluster, bridged_groups: Callable[..., BridgedGroup]
) -> None:
    """`hold` with the app expected back in 60 s, and it never comes: while held, the joiner's
    eager rebalance waits in its join phase, every member revoked. The hold ends at most one session timeout after
    the bridge met the rebalance (what a dead member would have cost without vigil: it expires within its session),
    then the absent member is removed and the join completes. Before the fix the group waited the whole expected
    return (measured below, by the broker's own timestamps: rebalance begun → Stabilized)."""
    g = bridged_groups(kafka, "holdcap", on_foreign_rebalance="hold", expected_return_seconds=HOLD_EXPECTED_RETURN,
                       max_bridge_seconds=90)  # fmt: skip
    before, old_member = g.joined()
    g.kill_app_and_await_bridge(old_member)
    g.member("holdcap-joiner")
    wait_for(lambda: bridge(g.sidecar), lambda b: b.get("holding") is True, timeout=bound(2 * HEARTBEAT),
             what=f"{g.group}: the bridge holding through the joiner's rebalance")  # fmt: skip
    wait_for(g.stable_instances, lambda ids: ids == {"holdcap-other", "holdcap-joiner"},
             timeout=bound(SESSION + HEARTBEAT), what=f"{g.group}: Stable without the absent member")  # fmt: skip
    ended = bridge(g.sidecar)
    assert ended["outcome"] == "removed", ended
    began = _logged_at(kafka, rf"Preparing to rebalance group {re.escape(g.group)} .*Adding new member")[-1]
    done = [t for t in _logged_at(kafka, rf"Stabilized group {re.escape(g.group)} generation") if t >= began]
    waited = done[0] - began
    print(f"the eager group waited {waited:.1f}s in its join phase (session {SESSION}s, expected return"
          f" {HOLD_EXPECTED_RETURN}s)")  # fmt: skip
    assert waited <= SESSION + 2 * HEARTBEAT, waited  # a session after the bridge met it (≤ a heartbeat later)
    assert stabilized(kafka, g.group)[-1] == (before + 1, 2)
