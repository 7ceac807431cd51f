"""Immediate cleanup of departed members end to end: the operator installed by Helm, pods on the real
node running real consumers with injected sidecars, real Kafka. The consumers' session timeout is 30 s, so a member the
coordinator had to expire by itself would keep its partitions unconsumed for 30 s; vigil removes it at once.

Times are measured from the act (kill -9, the replicas patch) to the broker's own DescribeGroups showing the group
Stable without the departed members and every partition assigned; that the removal was vigil's is read from the
broker's log (a LeaveGroup whose client reason is vigil's), not from vigil.
"""

import os
import re
import signal
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from vigil_core.budget import ledger as lg
from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import clients
from vigil_dev.testing.broker_log import broker_lines
from vigil_dev.testing.budget import read_ledger
from vigil_dev.testing.e2e import ConsumerSet, events_for, status_of
from vigil_dev.testing.kube_fixtures import Kube
from vigil_dev.testing.release import RunningOperator
from vigil_dev.testing.waiting import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.kube]

SESSION_MS = 30_000
PARTITIONS = 6
WITHIN = 5.0
RESYNCED = "vigil_operator_consumergroup_last_resync_timestamp_seconds"
"""When the operator last resynced a ConsumerGroup (its /metrics, per group)."""
"""The issue's bound: departed members gone, partitions reassigned, within 5 s (stock: the 30 s session)."""
LEFT = (
    r"\[Group(?:Id)? {g}\] (?:Dynamic |Static )?[Mm]ember (\S+)(?: with instance id \S+)? has left group through"
    r" explicit `LeaveGroup` request; client reason: (.*) \("
)
"""Classic (`[Group g] Member m has left…`) and KIP-848 (`[GroupId g] Dynamic member m has left…`, `… Static member m
with instance id i has left…`, Kafka 4.1)."""


def left_by_vigil(kafka: KafkaCluster, group: str) -> dict[str, str]:
    """member id → client reason of every LeaveGroup the broker logged for `group` whose reason is vigil's."""
    found = broker_lines(kafka, group, LEFT)
    return {member: reason for _, (member, reason) in found if reason.startswith("vigil: ")}


def app_restarts(kube: Kube, namespace: str, pod: str) -> int:
    """How many times the kubelet restarted the pod's app container (0 while the pod or its status is missing)."""
    status = (kube.pod(namespace, pod) or {}).get("status") or {}
    app = next((c for c in status.get("containerStatuses") or [] if c["name"] == "app"), {})
    return int(app.get("restartCount") or 0)


class Group(ConsumerSet):
    """A set of consumers with a 30 s session, and what the broker logged of vigil's removals."""

    def __init__(self, kube: Kube, kafka: KafkaCluster, *, replicas: int, membership: str,
                 protocol: str = "classic", sidecar: bool = True) -> None:  # fmt: skip
        kip848 = protocol == "consumer"  # KIP-848: the session lives on the broker (10 s here), not the client
        super().__init__(
            kube, kafka, replicas=replicas, membership=membership, session_ms=SESSION_MS, partitions=PARTITIONS,
            spec={"client": {"groupProtocol": "consumer"}} if kip848 else None,
            env={"KAFKA_GROUP_PROTOCOL": "consumer"} if kip848 else None, sidecar=sidecar,
        )  # fmt: skip

    def known_for(self, operator: RunningOperator, members: dict[str, dict[str, Any]], seconds: float) -> None:
        """Until a resync more than `seconds` after the one that showed `members`: the operator acts only on an
        end provably after it first saw a member (departures.CLOCK_SKEW), as on a user's kill of a settled pod. The
        time of a resync is the group's `…_last_resync_timestamp_seconds` on the operator's /metrics."""
        ids = {m["memberId"] for m in members.values()}

        def seen() -> tuple[float, set[str]]:
            synced = operator.metric(RESYNCED, namespace=self.namespace, consumergroup=self.name)
            return synced, {m["memberId"] for m in status_of(self.kube, self.namespace, self.name).get("members") or []}

        first = wait_for(seen, lambda s: s[0] > 0 and ids <= s[1], timeout=30,
                         what=f"{self.group}: a resync showing the members on the operator's /metrics")[0]  # fmt: skip
        wait_for(seen, lambda s: s[0] > first + seconds and ids <= s[1], timeout=30,
                 what=f"{self.group}: a resync {seconds}s after the members were mapped, the same ones")  # fmt: skip

    def left_by_vigil(self) -> dict[str, str]:
        return left_by_vigil(self.kafka, self.group)


@pytest.fixture
def make_group(kube: Kube, kafka: KafkaCluster, operator: RunningOperator) -> Iterator[Callable[..., Group]]:
    made: list[Group] = []

    def make(replicas: int, membership: str, protocol: str = "classic", sidecar: bool = True) -> Group:
        made.append(Group(kube, kafka, replicas=replicas, membership=membership, protocol=protocol, sidecar=sidecar))
        return made[-1]

    yield make
    for group in made:
        group.close()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_killed_dynamic_members_partitions_move_at_once(
    make_group: Callable[..., Group], kube: Kube, operator: RunningOperator, protocol: str
) -> None:
    """Classic (session 30 s) and KIP-848 (the broker's group session, 10 s here; a third party may remove a
    KIP-848 member from Kafka 4.0 on)."""
    g = make_group(3, "dynamic", protocol)
    members = g.mapped(3)
    g.known_for(operator, members, 1.5)
    victim = f"{g.name}-1"
    old = members[victim]["memberId"]
    removed_before = operator.count("departures_removed")
    pid = kube.container_pid(kube.pod(g.namespace, victim), "app")
    assert pid is not None

    os.kill(pid, signal.SIGKILL)  # no LeaveGroup: stock, the member keeps its partitions for its session
    killed = time.monotonic()
    what = f"{g.group}: Stable without the killed member {old}, all {PARTITIONS} partitions assigned"
    wait_for(lambda: g.settled_without({old}), timeout=SESSION_MS / 1000, what=what)
    took = time.monotonic() - killed
    print(f"kill -9 of {victim} ({protocol}): partitions reassigned after {took:.1f}s")
    assert took <= WITHIN, f"{took:.1f}s"

    reasons = g.left_by_vigil()
    assert list(reasons) == [old], reasons  # the broker removed it on vigil's LeaveGroup, not on expiry
    assert re.fullmatch(rf"vigil: the app container of pod {victim} ended at \S+ UTC without leaving the group",
                        reasons[old]), reasons[old]  # fmt: skip
    wait_for(lambda: events_for(kube, g.namespace, g.name),
             lambda es: any(e["reason"] == "MemberRemoved" and old in e["message"] for e in es), timeout=15,
             what="a MemberRemoved Event on the ConsumerGroup")  # fmt: skip
    wait_for(lambda: operator.count("departures_removed"), lambda n: n >= removed_before + 1, timeout=15,
             what="the operator's departures_removed probe counting it (kopf caches probes for 10 s)")  # fmt: skip
    assert operator.metric("vigil_operator_member_removals_total", cause="container-terminated") >= 1
    # the restarted app rejoins under a new member id and gets its share again
    again = wait_for(lambda: g.mapped(3), lambda m: m[victim]["memberId"] != old, timeout=60,
                     what=f"{victim}'s restarted app mapped again")  # fmt: skip
    assert again[victim]["partitions"] > 0


def test_a_killed_kip848_static_app_takes_its_member_back_once_the_operator_released_it(
    make_group: Callable[..., Group], kube: Kube, operator: RunningOperator
) -> None:
    """A KIP-848 static member's app killed with -9 in a pod without the sidecar (started before its ConsumerGroup),
    so only the operator can free its instance id. Stock, the restarted app's join is refused with
    UNRELEASED_INSTANCE_ID (fatal in librdkafka: the container ends again) until the broker's session (10 s here)
    fences the dead member, and the member's return bumps the epoch. With vigil the operator releases the instance id
    (epoch -2, compare-and-release) when it sees the container end, and the restarted app takes the member over: the
    epoch does not move."""
    g = make_group(2, "static", "consumer", sidecar=False)
    members = g.mapped(2)
    g.known_for(operator, members, 1.5)
    victim = f"{g.name}-1"
    old = members[victim]["memberId"]
    bumps = r"\[GroupId {g}\] Bumped group epoch to (\d+)"
    settled = len(broker_lines(g.kafka, g.group, bumps))
    pod = kube.pod(g.namespace, victim)
    assert pod is not None
    assert "vigil-sidecar" not in str(pod["spec"])
    pid = kube.container_pid(pod, "app")
    assert pid is not None

    os.kill(pid, signal.SIGKILL)
    killed = time.monotonic()
    wait_for(lambda: events_for(kube, g.namespace, g.name),
             lambda es: any(e["reason"] == "MemberReleased" and old in e["message"] for e in es), timeout=15,
             what=f"a MemberReleased Event for {old}")  # fmt: skip
    released = time.monotonic() - killed
    again = wait_for(lambda: g.mapped(2), lambda m: m[victim]["memberId"] != old and m[victim]["partitions"] > 0,
                     timeout=60, what=f"{victim}'s restarted app holding its partitions as a new member")  # fmt: skip
    took = time.monotonic() - killed
    restarts = app_restarts(kube, g.namespace, victim)
    print(f"kill -9 of KIP-848 static {victim}: released after {released:.1f}s, member taken over after {took:.1f}s,"
          f" app container restarts {restarts}")  # fmt: skip
    assert again[victim]["instanceId"] == members[victim]["instanceId"] == victim
    assert broker_lines(g.kafka, g.group, bumps)[settled:] == [], "the group epoch moved"
    assert operator.metric("vigil_operator_member_releases_total", cause="container-terminated") >= 1


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_scaling_a_static_group_down_removes_the_departed_members_at_once(
    make_group: Callable[..., Group], kube: Kube, operator: RunningOperator, protocol: str
) -> None:
    """Classic (session 30 s) and KIP-848 (a static member that stops leaves "temporarily", epoch -2, and keeps its
    partitions for the broker's group session, 10 s here): vigil removes the departed instances at once."""
    g = make_group(4, "static", protocol)
    members = g.mapped(4)
    assert {p: m.get("instanceId") for p, m in members.items()} == {
        f"{g.name}-{i}": f"{g.namespace}-{g.name}-{i}" for i in range(4)
    }
    departed = {members[f"{g.name}-{i}"]["memberId"] for i in (2, 3)}

    kube.apps.patch_namespaced_stateful_set(g.name, g.namespace, {"spec": {"replicas": 2}})
    scaled = time.monotonic()
    # static members never send LeaveGroup: stock, the two would hold their partitions for the 30 s session
    what = f"{g.group}: Stable without the members of pods 2 and 3, all {PARTITIONS} partitions assigned"
    wait_for(lambda: g.settled_without(departed), timeout=SESSION_MS / 1000, what=what)
    took = time.monotonic() - scaled
    print(f"scale 4 -> 2 ({protocol}): departed members gone, partitions reassigned after {took:.1f}s")
    assert took <= WITHIN, f"{took:.1f}s"

    reasons = g.left_by_vigil()
    assert set(reasons) == departed, reasons
    for i in (2, 3):
        member = members[f"{g.name}-{i}"]["memberId"]
        assert reasons[member] == f"vigil: pod {g.name}-{i} scaled away (ordinal {i}, replicas 2)"
    desc = clients.describe_group(g.conn, g.group)
    assert {m.group_instance_id for m in desc.members} == {f"{g.namespace}-{g.name}-{i}" for i in (0, 1)}
    removed = wait_for(lambda: [e for e in events_for(kube, g.namespace, g.name) if e["reason"] == "MemberRemoved"],
                       lambda es: len(es) == 2, timeout=15, what="two MemberRemoved Events")  # fmt: skip
    assert all("scaled away" in e["message"] for e in removed)
    # recorded in the group's eviction budget (proven gone: never refused by it)
    permits = read_ledger(kube, g.namespace, lg.lease_name(g.group)).permits
    assert {(p.pod, p.member_id) for p in permits} == {(f"{g.name}-{i}", members[f"{g.name}-{i}"]["memberId"])
                                                       for i in (2, 3)}  # fmt: skip


def test_a_crash_looping_static_member_is_removed_once_per_window(
    kube: Kube, kafka: KafkaCluster, operator: RunningOperator
) -> None:
    """The app of pod orders-1 exits 3 s after each assignment (no LeaveGroup: a crash); the kubelet restarts it
    with the kubelet's growing back-off, showing CrashLoopBackOff after the second end. Static members keep their
    partitions through a session timeout (30 s here): vigil removes the member once, not at every loop."""
    s = ConsumerSet(kube, kafka, replicas=2, membership="static", session_ms=SESSION_MS, partitions=PARTITIONS,
                    env={"CRASH_AFTER_SECONDS": "3", "CRASH_CLIENT_ID": "orders-1"})  # fmt: skip
    try:

        def loops() -> int:
            return app_restarts(kube, s.namespace, "orders-1")

        what = f"{s.group}: vigil removing the crash-looping member of orders-1"
        removed = wait_for(lambda: left_by_vigil(kafka, s.group), lambda found: len(found) >= 1, timeout=90,
                           interval=0.5, what=what)  # fmt: skip
        assert list(removed.values()) == ["vigil: the app of pod orders-1 is crash-looping (CrashLoopBackOff)"]
        assert loops() >= 2  # not before its second end
        at = loops()
        wait_for(loops, lambda n: n >= at + 2, timeout=90, interval=1, what="two more crash loops of orders-1")
        assert left_by_vigil(kafka, s.group) == removed  # at most once per window (10 minutes), whatever the loops
        events = [e for e in events_for(kube, s.namespace, s.name) if e["reason"] == "MemberRemoved"]
        assert len(events) == 1, events
        # a member that may come back needs room in the group's eviction budget: its permit is in the Lease
        permits = read_ledger(kube, s.namespace, lg.lease_name(s.group)).permits
        assert [(p.pod, p.member_id) for p in permits] == [("orders-1", next(iter(removed)))]
    finally:
        s.close()
