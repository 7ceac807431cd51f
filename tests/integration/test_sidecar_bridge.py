"""The heartbeat bridge against the real broker: the sidecar as a real process, the static app as a real
process killed with SIGKILL and started again, generations counted from the broker's own log.

Timings: session timeout 6 s, heartbeat 1 s (the app's and the bridge's); the app comes back after 2 × the session
timeout, long after the coordinator would have expired it without a bridge.
"""

import os
import re
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from vigil_core import events
from vigil_dev import procs
from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import clients, static_app
from vigil_dev.testing.bridged_group import HEARTBEAT, SESSION, BridgedGroup, bridging_sidecar
from vigil_dev.testing.broker_log import broker_lines, generations
from vigil_dev.testing.sidecar import RunningSidecar
from vigil_dev.testing.waiting import bound, let_time_pass, wait_for

pytestmark = pytest.mark.integration


def test_a_killed_static_app_restarted_after_two_session_timeouts_keeps_its_generation_only_when_bridged(
    kafka: KafkaCluster, bridged_groups: Callable[..., BridgedGroup]
) -> None:
    events_topic = clients.create_topic(kafka.connection(), clients.unique("vigil.events"), partitions=1)
    bridged = bridged_groups(kafka, "on", bridge_enabled="true", events_topic=events_topic)
    stock = bridged_groups(kafka, "off", bridge_enabled="false")
    for s in (bridged, stock):
        s.joined()
    before = {s.group: generations(kafka, s.group)[-1] for s in (bridged, stock)}
    old_member = bridged.app_member()

    killed_at = time.monotonic()
    for s in (bridged, stock):  # the same moment, the same timings: only the setting differs
        assert s.app is not None
        s.app.kill()
    # without a bridge the coordinator expires the member at its session timeout: a rebalance
    wait_for(lambda: generations(kafka, stock.group)[-1], lambda g: g > before[stock.group],
             timeout=bound(SESSION), what="the unbridged member expiring (a new generation)")  # fmt: skip
    assert stock.sidecar.metric("vigil_sidecar_app_ends_total") == 1  # the end was seen, not bridged
    let_time_pass(
        2 * SESSION,
        since=killed_at,
        why="two session timeouts after the kill: the app away that long, an unbridged member expired",
    )
    # the bridged member is still there, under its old member id, in the same generation
    assert bridged.app_member() == old_member
    assert generations(kafka, bridged.group)[-1] == before[bridged.group]
    running = bridged.sidecar.status()["bridge"]
    assert running["state"] == "running", running
    assert running["heartbeats_sent"] >= 2 * SESSION / HEARTBEAT - 1

    for s in (bridged, stock):
        s.start_app()
    ended = wait_for(lambda: bridged.sidecar.status()["bridge"], lambda b: b["state"] == "ended",
                     timeout=bound(2 * HEARTBEAT, slack=10), what="the bridge ending")  # fmt: skip
    assert ended["outcome"] == "rejoined", ended
    for s in (bridged, stock):
        wait_for(lambda s=s: clients.stable_members(s.conn, s.group), lambda n: n == 2, timeout=60,
                 what=f"{s.group}: both members Stable again")  # fmt: skip
        wait_for(s.app_generation, lambda g, s=s: g == generations(kafka, s.group)[-1], timeout=15,
                 what=f"{s.group}: the restarted app in the group's latest generation")  # fmt: skip

    bridged_gens, stock_gens = generations(kafka, bridged.group), generations(kafka, stock.group)
    print(f"generations: bridged {bridged_gens} (kill at {before[bridged.group]}), "
          f"stock {stock_gens} (kill at {before[stock.group]})")  # fmt: skip
    assert bridged_gens[-1] == before[bridged.group], "bridged: the restart cost a rebalance"
    assert bridged.app_generation() == before[bridged.group]
    assert bridged.app_member() != old_member  # the app is back under a new member id, same instance id
    assert stock_gens[-1] >= before[stock.group] + 1, "stock: the restart should have cost a rebalance"

    assert bridged.sidecar.metric("vigil_sidecar_bridge_heartbeats_total") >= 2 * SESSION / HEARTBEAT - 1
    assert bridged.sidecar.metric('vigil_sidecar_bridges_started_total{proof="helper-connection-closed"}') == 1
    assert bridged.sidecar.metric('vigil_sidecar_bridges_ended_total{outcome="rejoined"}') == 1
    assert bridged.sidecar.metric("vigil_sidecar_bridged_seconds_total") >= 2 * SESSION
    assert 'action="leave-group"' not in bridged.sidecar.get("/metrics")[1]  # the watchdog left the dead app alone
    assert stock.sidecar.metric("vigil_sidecar_bridge_heartbeats_total") == 0
    assert "vigil_sidecar_bridges_started_total{" not in stock.sidecar.get("/metrics")[1]

    received = clients.group_events(kafka.connection(), events_topic, bridged.group, count=2)
    started, done = received
    assert isinstance(started, events.BridgeStarted)
    assert isinstance(done, events.BridgeEnded)
    assert started.payload.member.member_id == old_member
    assert started.payload.member.instance_id == bridged.instance
    assert started.payload.generation == before[bridged.group]
    assert started.payload.proof == "helper-connection-closed"
    assert done.payload.outcome == "rejoined"
    assert done.payload.heartbeats_sent == ended["heartbeats_sent"]
    assert done.payload.bridged_ms >= 2 * SESSION * 1000


@pytest.mark.kafka_min("4.1")  # the Java test app closes with CloseOptions (kafka-clients 4.1+)
def test_a_killed_static_java_app_restarted_after_two_session_timeouts_keeps_its_member_s_generation(
    kafka: KafkaCluster, bridged_groups: Callable[..., BridgedGroup]
) -> None:
    """vigil's `VigilConsumer` (java/) as the classic static member: the close of its `VigilHold` connection is the
    sidecar's proof that the app ended, the bridge keeps the member's session, and the app started again two
    session timeouts later takes its member over in the same generation: no rebalance."""
    bridged = bridged_groups(kafka, "java", app="java")
    generation, old_member = bridged.joined()
    killed_at = time.monotonic()
    bridged.kill_app_and_await_bridge(old_member)
    let_time_pass(2 * SESSION, since=killed_at,
                  why="two session timeouts after the kill: an unbridged member would have expired")  # fmt: skip
    assert bridged.app_member() == old_member
    assert generations(kafka, bridged.group)[-1] == generation

    bridged.start_app()
    ended = wait_for(lambda: bridged.sidecar.status()["bridge"], lambda b: b["state"] == "ended",
                     timeout=bound(2 * HEARTBEAT, slack=30), what="the bridge ending")  # fmt: skip
    assert ended["outcome"] == "rejoined", ended
    java = bridged.java
    assert java is not None
    back = wait_for(lambda: java.last("group"),
                    lambda e: e is not None and e["member_id"] not in ("", old_member) and bool(e["assigned"]),
                    timeout=60, what="the restarted Java app holding partitions as a new member id")  # fmt: skip
    assert back is not None
    wait_for(bridged.stable, lambda n: n == 2, timeout=60, what=f"{bridged.group}: both members Stable again")
    assert back["generation"] == generation
    assert bridged.app_member() == back["member_id"]
    assert generations(kafka, bridged.group)[-1] == generation, "the restart cost a rebalance"
    assert bridged.sidecar.metric('vigil_sidecar_bridges_ended_total{outcome="rejoined"}') == 1


def test_a_stalled_but_alive_app_is_never_bridged_and_expires_as_stock(
    kafka: KafkaCluster, bridged_groups: Callable[..., BridgedGroup]
) -> None:
    """Silence is never proof: the app stops polling but lives (its helper connection stays open). The watchdog's
    alert path runs; no bridge starts; librdkafka gives the member up after max.poll.interval.ms and the coordinator
    rebalances, as without vigil."""
    stalled = bridged_groups(kafka, "stall", bridge_enabled="true", action="alert", stall_timeout_seconds=3,
                        max_poll_interval_seconds=8)  # fmt: skip
    stalled.max_poll_ms = 8000
    stalled.joined()
    before = generations(kafka, stalled.group)[-1]
    assert stalled.app is not None
    pid = stalled.app.pid()
    assert pid is not None
    os.kill(pid, signal.SIGUSR1)
    stalled_at = time.monotonic()
    wait_for(lambda: stalled.sidecar.metric('vigil_sidecar_alerts_total{kind="stall"}'), lambda n: n >= 1,
             timeout=bound(3 + 1), what="the watchdog's stall alert")  # fmt: skip
    wait_for(lambda: generations(kafka, stalled.group)[-1], lambda g: g > before, timeout=bound(8 + SESSION),
             what="the stalled member given up by its client and the group rebalanced")  # fmt: skip
    assert time.monotonic() - stalled_at >= 8 - 1  # no sooner than max.poll.interval.ms: stock behaviour
    status = stalled.sidecar.status()
    assert status["app"] == {"helper_connections": 1, "ends": 0}, status["app"]
    assert status["bridge"] is None
    assert stalled.sidecar.metric("vigil_sidecar_app_ends_total") == 0
    assert stalled.sidecar.metric("vigil_sidecar_bridge_heartbeats_total") == 0
    assert "vigil_sidecar_bridges_started_total{" not in stalled.sidecar.get("/metrics")[1]
    assert 'action="leave-group"' not in stalled.sidecar.get("/metrics")[1]


def test_a_bridge_gives_up_at_max_bridge_seconds_and_the_member_expires_with_one_rebalance(
    kafka: KafkaCluster, bridged_groups: Callable[..., BridgedGroup]
) -> None:
    deadline = 8.0
    gone = bridged_groups(kafka, "deadline", bridge_enabled="true", max_bridge_seconds=deadline)
    gone.joined()
    before = generations(kafka, gone.group)[-1]
    assert gone.app is not None
    killed_at = time.monotonic()
    gone.app.kill()
    ended = wait_for(lambda: gone.sidecar.status()["bridge"], lambda b: (b or {}).get("state") == "ended",
                     timeout=bound(deadline), what="the bridge ending at its deadline")  # fmt: skip
    assert ended["outcome"] == "deadline", ended
    assert ended["seconds_bridged"] >= deadline
    assert time.monotonic() - killed_at >= deadline
    assert ended["heartbeats_sent"] >= deadline / HEARTBEAT - 1
    assert generations(kafka, gone.group)[-1] == before  # bridged until the deadline: no rebalance yet
    after = wait_for(lambda: generations(kafka, gone.group), lambda g: g[-1] > before, timeout=bound(SESSION),
                     what="the member expiring after the bridge gave up")  # fmt: skip
    assert after[-1] == before + 1
    wait_for(lambda: clients.stable_members(gone.conn, gone.group), lambda n: n == 1, timeout=30,
             what="the other member Stable alone")  # fmt: skip
    assert generations(kafka, gone.group)[-1] == before + 1  # one rebalance, not two
    assert gone.sidecar.metric('vigil_sidecar_bridges_ended_total{outcome="deadline"}') == 1
    assert 'action="leave-group"' not in gone.sidecar.get("/metrics")[1]


def test_sigterm_of_the_sidecar_ends_a_running_bridge_without_removing_the_member(
    kafka: KafkaCluster, bridged_groups: Callable[..., BridgedGroup]
) -> None:
    """The pod is going away: the bridge stops where it is (bridge-ended "stopped"), sends no Remove, and the
    member expires at its session timeout as it would have without vigil."""
    going = bridged_groups(kafka, "sigterm", bridge_enabled="true")
    going.joined()
    before = generations(kafka, going.group)[-1]
    old_member = going.app_member()
    assert going.app is not None
    going.app.kill()
    wait_for(lambda: going.sidecar.status()["bridge"], lambda b: (b or {}).get("heartbeats_sent", 0) >= 2,
             timeout=bound(2 * HEARTBEAT), what="the bridge heartbeating")  # fmt: skip
    stopping = time.monotonic()
    going.sidecar.stop()  # SIGTERM; SIGKILL only after 5 s
    assert time.monotonic() - stopping < 5, "the sidecar waited on its own helper connections"
    log = going.sidecar.log.read_text()
    assert re.search(rf"bridge of member {re.escape(str(old_member))} ended: stopped after", log), log
    assert log.rstrip().endswith("stopped")  # a clean exit, not a kill
    wait_for(lambda: generations(kafka, going.group)[-1], lambda g: g == before + 1, timeout=bound(SESSION),
             what="the member expiring at its session timeout")  # fmt: skip
    server_log = kafka.server_log(1).read_text()
    assert not [line for line in server_log.splitlines() if str(old_member) in line and "vigil:" in line]


def _bridging_sidecar(
    kafka: KafkaCluster, group: str, pod: str, tmp: Path, *, instance_id: str, session: float
) -> RunningSidecar:
    """A sidecar bridging `instance_id` (heartbeat 1 s, at most 60 s), whose watchdog stays out of the way (stall
    timeout 60 s)."""
    return bridging_sidecar(
        kafka.connection(), group, pod, tmp, instance_id=instance_id, session_timeout_seconds=session,
        stall_timeout_seconds=60, max_bridge_seconds=60,
    )  # fmt: skip


def test_two_consumer_processes_in_one_pod_the_end_of_one_never_bridges_the_other(
    kafka: KafkaCluster, tmp_path: Path
) -> None:
    """One pod, one sidecar (its instance id `p0-a`), two app processes with the helper: A (`p0-a`)
    and B (`p0-b`). A stalls, so B is the last to beacon, then A is killed (-9). The proof (A's helper connection
    closing) binds to A's process: A's member is bridged, B is never touched. Before the fix the bridge took whoever
    beaconed last (B): A expired a session later, B's bridged heartbeat met that rebalance and the bridge removed
    the healthy B."""
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("bridge-two"), partitions=4)
    group = clients.unique("g-bridge-two")
    sidecar = _bridging_sidecar(kafka, group, "pod-p0", tmp_path, instance_id="p0-a", session=SESSION)
    apps = {name: static_app.start(conn, group, topic, name, tmp_path, beacon_addr=sidecar.beacon_addr)
            for name in ("p0-a", "p0-b")}  # fmt: skip

    def members() -> dict[str | None, str]:
        return {m.group_instance_id: m.member_id for m in clients.describe_group(conn, group).members}

    try:
        wait_for(lambda: clients.stable_members(conn, group), lambda n: n == 2, timeout=60,
                 what="A and B Stable")  # fmt: skip
        before = members()
        wait_for(sidecar.status, lambda s: (s.get("member") or {}).get("member_id") == before["p0-a"]
                 and s["app"]["helper_connections"] == 2, timeout=30,
                 what="the sidecar holding both processes' connections and proving A's member")  # fmt: skip
        generation = generations(kafka, group)[-1]
        pid = apps["p0-a"].pid()
        assert pid is not None
        os.kill(pid, signal.SIGUSR1)  # A hangs: B beacons on, the last to do so
        wait_for(lambda: static_app.log_path(tmp_path, "p0-a").read_text(), lambda t: "stalled" in t, timeout=10,
                 what="A stalled")  # fmt: skip
        seen = sidecar.metric('vigil_sidecar_beacons_total{transport="udp"}')
        wait_for(lambda: sidecar.metric('vigil_sidecar_beacons_total{transport="udp"}'), lambda n: n >= seen + 3,
                 timeout=10, what="B's beacons after A hung")  # fmt: skip
        apps["p0-a"].kill()
        running = wait_for(lambda: sidecar.status()["bridge"], lambda b: (b or {}).get("heartbeats_sent", 0) >= 1,
                           timeout=bound(HEARTBEAT), what="a bridge heartbeating")  # fmt: skip
        assert running["member_id"] == before["p0-a"], running  # A's member, not B's
        assert running["instance_id"] == "p0-a", running
        # two session timeouts: A kept by the bridge, B by itself, no rebalance, nobody removed
        wait_for(lambda: sidecar.status()["bridge"], lambda b: b["heartbeats_sent"] >= 2 * SESSION / HEARTBEAT,
                 timeout=2 * SESSION + 5, what="two session timeouts of bridging")  # fmt: skip
        assert members() == before
        assert generations(kafka, group)[-1] == generation
        apps["p0-a"] = static_app.start(conn, group, topic, "p0-a", tmp_path, beacon_addr=sidecar.beacon_addr)
        ended = wait_for(lambda: sidecar.status()["bridge"], lambda b: b["state"] == "ended",
                         timeout=bound(2 * HEARTBEAT, slack=10), what="the bridge ending")  # fmt: skip
        assert ended["outcome"] == "rejoined", ended
        wait_for(lambda: clients.stable_members(conn, group), lambda n: n == 2, timeout=60,
                 what="A (restarted) and B Stable")  # fmt: skip
        after = members()
        assert after["p0-b"] == before["p0-b"]  # B: the same member throughout
        assert after["p0-a"] != before["p0-a"]  # A: back under a new member id, same instance id
        assert generations(kafka, group)[-1] == generation, "a rebalance during the episode"
        server_log = kafka.server_log(1).read_text()
        assert not [line for line in server_log.splitlines() if before["p0-b"] in line and "LeaveGroup" in line]
    finally:
        for app in apps.values():
            app.stop(grace=5)
        sidecar.stop()


STALE_SESSION = 10.0
"""The stale-generation test's session: room for the restarted app (a new Python process) to be back within it on a
loaded machine."""


@pytest.mark.parametrize("back", [True, False], ids=["back-within-the-session", "not-back"])
def test_a_stale_generation_stops_the_bridge_and_the_session_decides(
    kafka: KafkaCluster, tmp_path: Path, back: bool
) -> None:
    """The app's last report is a generation behind: it stopped beaconing (SIGUSR2: polls on,
    reports no more), a joiner's rebalance moved the group to the next generation with the app in it, then the app
    was killed. The bridge heartbeats with the reported generation and gets ILLEGAL_GENERATION: its heartbeats no
    longer count. It stops (`stale-generation`), nothing removed:
    - back within its session: the app's static rejoin in a Stable group costs no rebalance (before the fix the
      bridge removed the member — one rebalance — and the app's return was a second);
    - not back: the member expires at its session timeout, one rebalance, as stock — and no LeaveGroup."""
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("bridge-stale"), partitions=3)
    group = clients.unique("g-bridge-stale")
    sidecar = _bridging_sidecar(kafka, group, "pod-stale", tmp_path, instance_id="stale-app", session=STALE_SESSION)
    extra: clients.ClientConfig = {"session.timeout.ms": int(STALE_SESSION * 1000)}
    others = [clients.Member(conn, group, [topic], "stale-other", extra=extra | {"group.instance.id": "stale-other"})]
    others[0].start()

    def start_app() -> procs.Managed:
        return static_app.start(conn, group, topic, "stale-app", tmp_path, beacon_addr=sidecar.beacon_addr,
                                session_timeout_ms=int(STALE_SESSION * 1000))  # fmt: skip

    def app_log() -> str:
        path = static_app.log_path(tmp_path, "stale-app")
        return path.read_text() if path.exists() else ""

    app = None
    try:
        wait_for(lambda: clients.stable_members(conn, group), lambda n: n == 1, timeout=60, what="the other alone")
        app = start_app()
        wait_for(lambda: clients.stable_members(conn, group), lambda n: n == 2, timeout=60, what="2 Stable")
        first = generations(kafka, group)[-1]
        wait_for(sidecar.status, lambda s: (s.get("member") or {}).get("generation") == first, timeout=30,
                 what=f"the sidecar holding the app's report of generation {first}")  # fmt: skip
        pid = app.pid()
        assert pid is not None
        os.kill(pid, signal.SIGUSR2)  # no more reports
        wait_for(app_log, lambda t: "beacons withheld" in t, timeout=10, what="the app's beacons withheld")
        others.append(clients.Member(conn, group, [topic], "stale-joiner",
                                     extra=extra | {"group.instance.id": "stale-joiner"}).start())  # fmt: skip
        wait_for(lambda: clients.stable_members(conn, group), lambda n: n == 3, timeout=60, what="3 Stable")
        moved = generations(kafka, group)[-1]
        assert moved == first + 1
        wait_for(app_log, lambda t: f"generation={moved} assigned=" in t, timeout=15,
                 what=f"the app itself in generation {moved}")  # fmt: skip
        assert sidecar.status()["member"]["generation"] == first  # the sidecar still has the older report
        app.kill()
        killed_at = time.monotonic()
        ended = wait_for(lambda: sidecar.status()["bridge"], lambda b: (b or {}).get("state") == "ended",
                         timeout=bound(2 * HEARTBEAT), what="the bridge ending")  # fmt: skip
        assert ended["outcome"] == "stale-generation", ended
        assert ended["kafka_error"] == "ILLEGAL_GENERATION", ended
        assert ended["generation"] == first, ended
        if back:
            app = start_app()
            wait_for(lambda: clients.stable_members(conn, group), lambda n: n == 3, timeout=60,
                     what="3 Stable with the app back")  # fmt: skip
            assert time.monotonic() - killed_at < STALE_SESSION + 10
            wait_for(app_log, lambda t: t.count(f"generation={moved} assigned=") >= 2, timeout=15,
                     what=f"the restarted app in generation {moved}")  # fmt: skip
            # a session and two heartbeats after its return: still no rebalance
            since = time.monotonic()
            let_time_pass(
                STALE_SESSION + 2,
                since=since,
                why="a session and two heartbeats after the app's return: a ghost member would have expired by then",
            )
            assert generations(kafka, group)[-1] == moved, "the app's return cost a rebalance"
        else:
            after = wait_for(lambda: generations(kafka, group), lambda g: g[-1] > moved, timeout=bound(STALE_SESSION),
                             what="the member expiring at its session timeout")  # fmt: skip
            assert time.monotonic() - killed_at >= STALE_SESSION - 2
            assert after[-1] == moved + 1
            wait_for(lambda: clients.stable_members(conn, group), lambda n: n == 2, timeout=30, what="2 Stable")
            assert generations(kafka, group)[-1] == moved + 1  # one rebalance
            expired = broker_lines(kafka, group, r"rebalance group {g} .*removing member (\S+) on heartbeat expiration")
            assert len(expired) == 1, expired
        server_log = kafka.server_log(1).read_text()
        assert not [line for line in server_log.splitlines() if group in line and "vigil:" in line]
        assert "bridge removed member" not in sidecar.log.read_text()
    finally:
        if app is not None:
            app.stop(grace=5)
        for m in others:
            m.close()
        sidecar.stop()


@pytest.mark.kafka_secure
def test_over_sasl_and_tls_a_bridges_first_heartbeat_waits_for_no_handshake(
    kafka_sasl_tls: KafkaCluster, tmp_path: Path
) -> None:
    """SASL/SCRAM over TLS, session 6 s: the bridge's client is made and its connection to the
    coordinator opened while the app is healthy (at its first beacon, refreshed every few minutes), so after the
    app's kill the first bridged heartbeat is answered at once. Before, the client was made at the first heartbeat:
    the TLS and SASL handshakes (bootstrap, then the coordinator) came first, out of the member's session."""
    conn = kafka_sasl_tls.connection()
    topic = clients.create_topic(conn, clients.unique("bridge-tls"), partitions=2)
    group = clients.unique("g-bridge-tls")
    sidecar = _bridging_sidecar(kafka_sasl_tls, group, "pod-tls", tmp_path, instance_id="tls-app", session=SESSION)
    app = static_app.start(conn, group, topic, "tls-app", tmp_path, beacon_addr=sidecar.beacon_addr)
    answered = 'vigil_sidecar_broker_requests_total{api="Heartbeat",outcome="NONE"}'
    try:
        wait_for(lambda: clients.stable_members(conn, group), lambda n: n == 1, timeout=60, what="the app Stable")
        wait_for(sidecar.status, lambda s: (s.get("member") or {}).get("generation", -1) >= 0
                 and s["app"]["helper_connections"] == 1, timeout=30,
                 what="the sidecar holding the app's connection and its generation")  # fmt: skip
        wait_for(lambda: sidecar.status().get("bridge_ready"), timeout=30,
                 what="the bridge's connection to the coordinator opened ahead of need")  # fmt: skip
        app.kill()
        killed_at = time.monotonic()
        wait_for(lambda: sidecar.metric(answered), lambda n: n >= 1, timeout=SESSION, interval=0.02,
                 what="the first bridged heartbeat answered")  # fmt: skip
        took = time.monotonic() - killed_at
        print(f"SASL/SCRAM over TLS: the first bridged heartbeat answered {took:.3f}s after the kill")
        assert took <= 1.0, took
        assert sidecar.status()["bridge"]["state"] == "running"
    finally:
        app.stop(grace=5)
        sidecar.stop()
