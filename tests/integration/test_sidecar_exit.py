"""SIGTERM: the sidecar exits within 1 s whatever Kafka does — idle, its broker unreachable (silent, or its port
closed), in the middle of a describe to a broker gone silent — or its HTTP clients (a request half sent), and,
bridging, only once the bridge's end is on the events topic. The sidecar is a real process; the time runs from the
signal to its exit status."""

import contextlib
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from vigil_core import events
from vigil_core.kafka.security import KafkaConnection
from vigil_dev import ports
from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import clients
from vigil_dev.testing.bridged_group import BridgedGroup
from vigil_dev.testing.sidecar import RunningSidecar, start_sidecar
from vigil_dev.testing.silent_broker import connections_to, silent_broker
from vigil_dev.testing.waiting import bound, wait_for
from vigil_sidecar.signals.beacon import encode_beacon

pytestmark = pytest.mark.integration

EXIT = 1.0
"""Seconds from SIGTERM to the exit (issue #20)."""
SETTINGS: dict[str, str | float] = {
    "budget": "none",
    "events_topic": "",
    "check_interval_seconds": 1,
    "stall_timeout_seconds": 6,
    "session_timeout_seconds": 6,
}


@pytest.fixture
def sidecars(tmp_path: Path) -> Iterator[Callable[..., RunningSidecar]]:
    """`start(connection, name)`: a sidecar as a real process watching a group of its own; stopped after the test."""
    started: list[RunningSidecar] = []

    def start(connection: KafkaConnection, name: str) -> RunningSidecar:
        sidecar = start_sidecar(connection, clients.unique(f"g-exit-{name}"), f"pod-{name}", tmp_path, **SETTINGS)
        started.append(sidecar)
        return sidecar

    yield start
    for sidecar in started:
        sidecar.stop()


def _exits_within_a_second(sidecar: RunningSidecar) -> None:
    status, seconds = sidecar.terminate(timeout=60)
    print(f"exit status {status}, {seconds:.2f}s after SIGTERM")
    log = sidecar.log.read_text()
    assert status == 0, log
    assert seconds < bound(EXIT, slack=1.0), f"{seconds:.2f}s from SIGTERM to the exit:\n{log}"
    assert "vigil.sidecar: stopped" in log


def _in_flight(sidecar: RunningSidecar) -> str | None:
    """The watchdog's request under way (/v1/status), None when there is none."""
    return (sidecar.status().get("in_flight") or {}).get("request")


def _await_idle(sidecar: RunningSidecar) -> None:
    wait_for(sidecar.status, lambda s: s.get("coordinator") is not None and s["in_flight"] is None, timeout=bound(5),
             what="the coordinator found, nothing in flight")  # fmt: skip


def test_idle_with_its_broker_up(kafka: KafkaCluster, sidecars: Callable[..., RunningSidecar]) -> None:
    sidecar = sidecars(kafka.connection(), "idle")
    _await_idle(sidecar)
    _exits_within_a_second(sidecar)


def test_with_a_request_half_sent_to_each_listener(
    kafka: KafkaCluster, sidecars: Callable[..., RunningSidecar]
) -> None:
    """A client that never sends the rest of its request (a statistics document cut off, a scrape that hangs)."""
    sidecar = sidecars(kafka.connection(), "http")
    _await_idle(sidecar)
    with contextlib.ExitStack() as held:
        for port, path in ((sidecar.beacon_port, "/v1/stats"), (sidecar.health_port, "/metrics")):
            client = held.enter_context(socket.create_connection(("127.0.0.1", port)))
            client.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{{".encode())
            wait_for(lambda port=port: connections_to(port, unread=True), lambda unread: not unread, timeout=bound(1),
                     what=f"the sidecar reading the start of {path}")  # fmt: skip
        _exits_within_a_second(sidecar)


def test_while_it_bootstraps_to_a_silent_broker(tmp_path: Path, sidecars: Callable[..., RunningSidecar]) -> None:
    """The first connection waits on a broker that answers nothing (kafka-python's bootstrap: 10 s)."""
    with silent_broker(tmp_path / "kafka-silent", "127.0.0.1") as silent:
        sidecar = sidecars(silent.cluster.connection(), "silent")
        wait_for(lambda: (_in_flight(sidecar), silent.unanswered()), lambda seen: seen[0] == "lookup" and seen[1],
                 timeout=bound(5), what="the coordinator's lookup waiting in the silent broker")  # fmt: skip
        _exits_within_a_second(sidecar)


def test_while_its_broker_port_is_closed(sidecars: Callable[..., RunningSidecar]) -> None:
    """Nothing listens on the bootstrap port: every connect is refused, and the bootstrap retries for 10 s."""
    (closed,) = ports.free_ports(1)
    sidecar = sidecars(KafkaConnection(bootstrap_servers=f"127.0.0.1:{closed}"), "refused")
    wait_for(lambda: _in_flight(sidecar), lambda request: request == "lookup", timeout=bound(5),
             what="the coordinator's lookup under way")  # fmt: skip
    _exits_within_a_second(sidecar)


def test_in_the_middle_of_a_describe_to_a_broker_gone_silent(
    tmp_path: Path, sidecars: Callable[..., RunningSidecar]
) -> None:
    """The broker answered the lookup, then froze; the app's first beacon makes the watchdog describe the group (to
    prove the member), and the describe waits on the frozen broker (its retries: a minute)."""
    with silent_broker(tmp_path / "kafka-hangs", "127.0.0.1", silent=False) as broker:
        sidecar = sidecars(broker.cluster.connection(), "describe")
        _await_idle(sidecar)
        broker.silence()
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as app:
            app.sendto(encode_beacon("m-1", 1, None, 1, time.time()), ("127.0.0.1", sidecar.beacon_port))
        wait_for(lambda: (_in_flight(sidecar), broker.unanswered()), lambda seen: seen[0] == "describe" and seen[1],
                 timeout=bound(5), what="the describe waiting in the silent broker")  # fmt: skip
        _exits_within_a_second(sidecar)


def test_bridging_the_bridges_end_is_on_the_events_topic_before_the_exit(
    kafka: KafkaCluster, bridged_groups: Callable[..., BridgedGroup]
) -> None:
    """The bridge ends `stopped` (no Remove: the member expires at its session timeout unless the app is back), and
    its end — member, generation, heartbeats — is delivered before the process is gone."""
    events_topic = clients.create_topic(kafka.connection(), clients.unique("vigil.events"), partitions=1)
    going = bridged_groups(kafka, "exit", events_topic=events_topic)
    generation, member = going.joined()
    going.kill_app_and_await_bridge(member)
    running: dict[str, Any] = wait_for(lambda: going.sidecar.status()["bridge"], lambda b: b["heartbeats_sent"] >= 2,
                                       timeout=bound(2.0), what="the bridge heartbeating")  # fmt: skip
    _exits_within_a_second(going.sidecar)
    started, ended = clients.group_events(kafka.connection(), events_topic, going.group, count=2)
    assert isinstance(started, events.BridgeStarted), started
    assert isinstance(ended, events.BridgeEnded), ended
    assert (ended.payload.member.member_id, ended.payload.member.instance_id) == (member, going.instance)
    assert started.payload.generation == generation
    assert ended.payload.outcome == "stopped"
    assert ended.payload.heartbeats_sent >= running["heartbeats_sent"]
    assert ended.payload.bridged_ms >= running["seconds_bridged"] * 1000
