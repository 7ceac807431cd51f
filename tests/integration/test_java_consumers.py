"""Java consumers (the broker jars' kafka-clients, 4.4.0) stalled next to a real `vigil sidecar`: what each one
does after the sidecar evicts it, and the sidecar's answer when the client undoes the eviction by itself.

Per case (classic / KIP-848 × the app's own ConsumerRebalanceListener / none, so VigilConsumer's no-op one / KIP-848's
broker-side regex, the one subscription left without a listener): the Java app is vigil's VigilConsumer
(java/; its generation reaches /v1/status equal to the broker's), stops polling, is evicted; then, over the sidecar's
eviction watch (one cooldown), the client either stays out (nothing happens without poll) or rejoins from its
background thread (undone: restart once, then alert); finally it polls again and the test records what the first
poll does (callbacks, member id, generation). A client upgrade that changes any of this fails here; JAVA.md has the
table.
The librdkafka app without a rebalance callback is tests/integration/test_sidecar_stall.py's KIP-848 test.
"""

import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest

from vigil_core.kafka.security import ClientConfig
from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import broker_log, clients, java_consumer
from vigil_dev.testing.java_consumer import JavaConsumer, Subscription
from vigil_dev.testing.sidecar import RunningSidecar, start_sidecar
from vigil_dev.testing.waiting import bound, wait_for

pytestmark = pytest.mark.integration

STALL = 6.0
CHECK = 1.0
COOLDOWN = 2 * STALL  # the sidecar's default: its eviction watch lasts this long
POD = "pod-a"

Protocol = Literal["classic", "consumer"]


@dataclass(frozen=True)
class Expected:
    """What kafka-clients (4.4.0; 4.1.1 alike) does after vigil's LeaveGroup on its behalf (observed; see JAVA.md)."""

    rejoins_without_poll: bool
    """Its background thread rejoins while the app thread is stalled: the eviction is undone."""
    callbacks_on_resume: tuple[str, ...]
    """The listener's calls at the first poll after the stall."""
    same_member_id: bool
    """After the stall it is the same member id (KIP-848: the client keeps it) or a new one (classic)."""


LOST_ASSIGNED = ("lost", "assigned")
STAYS_OUT = {"rejoins_without_poll": False}
EXPECTED: dict[tuple[Protocol, Subscription], Expected] = {
    ("classic", "topics"): Expected(**STAYS_OUT, callbacks_on_resume=(), same_member_id=False),
    ("classic", "listener"): Expected(**STAYS_OUT, callbacks_on_resume=LOST_ASSIGNED, same_member_id=False),
    ("consumer", "topics"): Expected(**STAYS_OUT, callbacks_on_resume=(), same_member_id=True),
    ("consumer", "listener"): Expected(**STAYS_OUT, callbacks_on_resume=LOST_ASSIGNED, same_member_id=True),
    ("consumer", "broker-regex"): Expected(rejoins_without_poll=True, callbacks_on_resume=(), same_member_id=True),
}  # fmt: skip


@dataclass
class Case:
    kafka: KafkaCluster
    group: str
    protocol: Protocol
    sidecar: RunningSidecar
    java: JavaConsumer
    client_id: str = POD

    def broker_generation(self) -> int:
        """The group's latest generation (classic) or group epoch (KIP-848), from the broker's log."""
        if self.protocol == "classic":
            return max(broker_log.generations(self.kafka, self.group), default=-1)
        bumps = broker_log.broker_lines(self.kafka, self.group, r"\[GroupId {g}\] Bumped group epoch to (\d+)")
        return max((int(n) for _, (n,) in bumps), default=-1)

    def left(self, member_id: str) -> int:
        """How many times the broker logged vigil's LeaveGroup for `member_id`."""
        pattern = (
            rf"\[Group(?:Id)? {{g}}\] (?:Dynamic )?[Mm]ember {re.escape(member_id)} has left group .*vigil: no poll"
        )
        return len(broker_log.broker_lines(self.kafka, self.group, pattern))

    def java_in_group(self) -> list[str]:
        """Member ids the broker has for the Java app's client id."""
        return [m.member_id for m in clients.describe_group(self.kafka.connection(), self.group).members
                if m.client_id == self.client_id]  # fmt: skip

    def views(self) -> tuple[Any, ...]:
        """(the Java app's last reported member id, generation and partitions; the member id and generation the
        sidecar's /v1/status shows; the broker's generation)."""
        group = self.java.last("group") or {}
        member = self.sidecar.status().get("member") or {}
        return (group.get("member_id"), group.get("generation"), group.get("assigned"),
                (member.get("member_id"), member.get("generation")), self.broker_generation())  # fmt: skip


def _agreed(views: tuple[Any, ...]) -> bool:
    """The Java app holds partitions as the member and generation the sidecar shows, and that is the broker's."""
    member_id, generation, assigned, sidecar, broker = views
    return bool(assigned) and sidecar == (member_id, generation) and generation == broker


def _java_agrees_with_broker(views: tuple[Any, ...]) -> bool:
    """As `_agreed`, the sidecar aside."""
    _, generation, assigned, _, broker = views
    return bool(assigned) and generation == broker


@pytest.fixture
def started(kafka: KafkaCluster, artifacts_dir: Path) -> Iterator[Callable[..., Case]]:
    """A 3-partition topic; a sidecar for pod-a; the Java app as pod-a (its client.id the pod name unless given); a
    librdkafka member pod-b (never stalls). The logs (the Java app's, the sidecar's) stay under
    test-artifacts/<run>/java/<group>/."""
    stop: list[Callable[[], None]] = []

    def start(protocol: Protocol, subscription: Subscription, client_id: str = POD) -> Case:
        conn = kafka.connection()
        topic = clients.create_topic(conn, clients.unique("java"), partitions=3)
        group = clients.unique(f"g-java-{protocol}")
        state_dir = artifacts_dir / "java" / group
        state_dir.mkdir(parents=True)
        # the app's timings as the sidecar's rules check them (KIP-848: the broker's, which it must not be told)
        timings: dict[str, float] = {"session_timeout_seconds": 6, "heartbeat_interval_seconds": 1}
        sidecar = start_sidecar(
            conn, group, POD, state_dir, stall_timeout_seconds=STALL, check_interval_seconds=CHECK,
            group_protocol=protocol, budget="none", events_topic="",
            **(timings if protocol == "classic" else {"session_timeout_seconds": 10}),
        )  # fmt: skip
        stop.append(sidecar.stop)
        java = java_consumer.start(
            kafka.libs, conn, group=group, topic=topic, client_id=client_id, state_dir=state_dir, protocol=protocol,
            subscription=subscription, beacon_addr=sidecar.beacon_addr,
        )  # fmt: skip
        stop.append(java.stop)
        extra: ClientConfig = {"group.protocol": "consumer"} if protocol == "consumer" else {}
        other = clients.Member(conn, group, [topic], "pod-b", extra=extra).start()
        stop.append(other.close)
        return Case(kafka, group, protocol, sidecar, java, client_id)

    yield start
    for close in reversed(stop):
        close()


def _observe_for(seconds: float, check: Callable[[], None], what: str) -> None:
    """Run `check` (it raises on a violation) repeatedly for `seconds`: a negative observation over a window."""
    end = time.monotonic() + seconds

    def checked_until_the_end() -> bool:
        check()
        return time.monotonic() >= end

    wait_for(checked_until_the_end, timeout=seconds + 30, what=what, interval=0.5)


@pytest.mark.parametrize(
    ("protocol", "subscription"),
    [
        pytest.param("classic", "topics", id="classic-no-listener"),
        pytest.param("classic", "listener", id="classic-listener"),
        pytest.param("consumer", "topics", id="kip848-no-listener"),
        pytest.param("consumer", "listener", id="kip848-listener"),
        pytest.param("consumer", "broker-regex", id="kip848-broker-regex-no-listener"),
    ],
)
def test_a_java_consumer_after_an_eviction(
    started: Callable[..., Case], protocol: Protocol, subscription: Subscription
) -> None:
    expected = EXPECTED[(protocol, subscription)]
    case = started(protocol, subscription)
    java, sidecar = case.java, case.sidecar
    conn = case.kafka.connection()

    # joined, beaconing over HTTP, and the generation it reports is the broker's
    wait_for(lambda: clients.stable_members(conn, case.group), lambda n: n == 2, timeout=60, what="2 members stable")
    agreed = wait_for(case.views, _agreed, timeout=30,
                      what="Java's member and generation = the sidecar's status = the broker's")  # fmt: skip
    member_id, generation = agreed[0], agreed[1]
    _, answer = java.wait_event(lambda e: e["event"] == "beacon", timeout=5, what="the sidecar's answer to a beacon")
    assert answer["status"] == 204
    assert sidecar.metric('vigil_sidecar_beacons_total{transport="http"}') > 0
    assert sidecar.metric("vigil_sidecar_bad_beacons_total") == 0

    # stalled: evicted after the stall timeout
    generation_at_stall = case.broker_generation()
    java.stall()
    stalled_at = time.monotonic()
    wait_for(lambda: case.left(member_id), lambda n: n == 1, timeout=bound(STALL + CHECK),
             what="the broker logging vigil's LeaveGroup for the Java member")  # fmt: skip
    evicted_at = time.monotonic()
    assert evicted_at - stalled_at >= STALL
    wait_for(lambda: sidecar.metric('vigil_sidecar_actions_total{action="leave-group",outcome="NONE"}'),
             lambda n: n == 1, timeout=5, what="the sidecar counting the broker's answer")  # fmt: skip
    events_at_stall = len(java.events())

    if expected.rejoins_without_poll:
        _undone_then_restart_then_alert(case, member_id)
    else:

        def stays_out() -> None:
            assert case.java_in_group() == [], "the stalled Java member is back in the group without a poll"
            assert sidecar.get("/v1/probe/app")[0] == 200
            assert len(java.events()) == events_at_stall  # the app thread is stalled: no callback runs

        _observe_for(COOLDOWN + 2 * CHECK, stays_out, "the evicted Java member staying out over the eviction watch")
        assert sidecar.metric('vigil_sidecar_actions_total{action="restart",outcome="NONE"}') == 0
        assert sidecar.metric('vigil_sidecar_alerts_total{kind="stall"}') == 0

    # one rebalance per eviction and one per rejoin, counted by the broker (undone: evicted and back, twice)
    generation_before_resume = generation_at_stall + (4 if expected.rejoins_without_poll else 1)
    assert case.broker_generation() == generation_before_resume

    # it polls again: what its first polls do
    events_before = len(java.events())
    java.resume()
    index, _ = java.wait_event(lambda e: e["event"] == "resumed", after=events_before, timeout=10, what="resumed")
    back = wait_for(case.views, lambda v: _java_agrees_with_broker(v) and v[4] > generation, timeout=30,
                    what="the Java member back holding partitions, as the broker says")  # fmt: skip
    # not back yet: one more rebalance (its rejoin); already back: its first poll changes nothing at the broker
    assert case.broker_generation() == generation_before_resume + (0 if expected.rejoins_without_poll else 1)
    assert (back[0] == member_id) is expected.same_member_id, (member_id, back)
    callbacks = [e for e in java.events()[index:] if e["event"] in ("assigned", "revoked", "lost")]
    assert tuple(e["event"] for e in callbacks[: len(expected.callbacks_on_resume)]) == expected.callbacks_on_resume
    if subscription == "listener":
        lost, assigned = callbacks[0], callbacks[1]
        assert lost["partitions"], lost  # the partitions it held before the eviction
        assert assigned["member_id"] == back[0]
    assert sidecar.get("/v1/probe/app")[0] == 200
    assert java.process.running()
    # the app polls again: the sidecar proves the member again, even under the same member id (KIP-848)
    wait_for(case.views, _agreed, timeout=bound(2 * CHECK, slack=5),
             what="the sidecar's /v1/status showing the member and generation the Java app reports")  # fmt: skip


def test_an_undone_kip848_eviction_is_seen_by_the_member_id_whatever_the_client_id(
    started: Callable[..., Case],
) -> None:
    """The KIP-848 Java consumer without a listener (broker-side regex), `client.id=orders` (not the pod's name, no
    instance id): evicted, it rejoins from its background thread under the same member id (KIP-1082: the client
    makes it once) without a poll. The sidecar knows it by the member id its app reported: back for a stall
    timeout without a poll, the eviction is undone, and it escalates to a restart. Before the fix it matched a
    rejoined member by instance id or client.id only, saw nobody, and let the undone eviction stand."""
    case = started("consumer", "broker-regex", client_id="orders")
    conn = case.kafka.connection()
    wait_for(lambda: clients.stable_members(conn, case.group), lambda n: n == 2, timeout=60, what="2 members stable")
    member_id = wait_for(case.views, _agreed, timeout=30, what="the sidecar proving the Java member")[0]
    case.java.stall()
    wait_for(lambda: case.left(member_id), lambda n: n == 1, timeout=bound(STALL + CHECK),
             what="the broker logging vigil's LeaveGroup for the Java member")  # fmt: skip
    wait_for(case.java_in_group, lambda ids: ids == [member_id], timeout=bound(CHECK, slack=5),
             what="the Java member rejoining without a poll, under the same member id")  # fmt: skip
    wait_for(lambda: case.sidecar.get("/v1/probe/app")[0], lambda code: code == 503,
             timeout=bound(STALL + 2 * CHECK),
             what="the sidecar failing /v1/probe/app (back for a stall timeout without a poll: undone)")  # fmt: skip
    assert case.sidecar.metric('vigil_sidecar_actions_total{action="restart",outcome="NONE"}') == 1
    assert f"member {member_id} rejoined without polling" in case.sidecar.status()["last_action"]["reason"]


def _undone_then_restart_then_alert(case: Case, member_id: str) -> None:
    """The KIP-848 client without a listener (broker-side regex) rejoins by itself (same member id): restart once;
    stalled again after polling a moment, the next undone eviction is only an alert."""
    sidecar, java = case.sidecar, case.java
    wait_for(case.java_in_group, lambda ids: ids == [member_id], timeout=bound(CHECK, slack=5),
             what="the Java member rejoining without a poll, with the same member id")  # fmt: skip
    wait_for(lambda: sidecar.get("/v1/probe/app")[0], lambda code: code == 503, timeout=bound(STALL + 2 * CHECK),
             what="the sidecar failing /v1/probe/app (back for a stall timeout without a poll: restart)")  # fmt: skip
    assert sidecar.metric('vigil_sidecar_actions_total{action="restart",outcome="NONE"}') == 1
    assert "eviction undone" in sidecar.status()["last_action"]["reason"]

    # no restart comes (the test is the kubelet that does not restart it): the app polls again, then stalls again
    java.resume()
    wait_for(lambda: sidecar.get("/v1/probe/app")[0], lambda code: code == 200, timeout=10,
             what="the probe passing again once the app polls")  # fmt: skip
    # stalled again only once it reported its partitions (a beacon saying 0 would make it an idle member)
    wait_for(case.views, _agreed, timeout=30, what="the Java member polling with partitions, agreed by all")
    java.stall()
    wait_for(lambda: case.left(member_id), lambda n: n == 2, timeout=bound(COOLDOWN + CHECK),
             what="the second eviction (after the cooldown)")  # fmt: skip
    wait_for(lambda: sidecar.metric('vigil_sidecar_alerts_total{kind="stall"}'), lambda n: n == 1,
             timeout=bound(STALL + 2 * CHECK, slack=5),
             what="the second undone eviction answered with an alert")  # fmt: skip
    assert case.java_in_group() == [member_id]  # undone again
    assert sidecar.metric('vigil_sidecar_actions_total{action="leave-group",outcome="NONE"}') == 2
    assert sidecar.metric('vigil_sidecar_actions_total{action="restart",outcome="NONE"}') == 1  # exactly once
    assert sidecar.get("/v1/probe/app")[0] == 200
