"""The stats signal against the real broker: a real confluent-kafka consumer forwards its real librdkafka
statistics to a real `vigil sidecar --signal stats`; a member that stops polling while records wait is removed
(seen on the broker), an idle one never is.
"""

import json
import re
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import clients
from vigil_dev.testing.sidecar import RunningSidecar, start_sidecar
from vigil_dev.testing.waiting import bound, wait_for
from vigil_sidecar.client import Consumer as HelperConsumer

pytestmark = pytest.mark.integration

STALL = 6.0
CHECK = 1.0
ACCEPTED = 'vigil_sidecar_stats_documents_total{outcome="accepted"}'
LEFT = 'vigil_sidecar_actions_total{action="leave-group",outcome="NONE"}'


@pytest.fixture
def sidecars(kafka: KafkaCluster, tmp_path: Path) -> Iterator[Callable[..., RunningSidecar]]:
    started: list[RunningSidecar] = []

    def start(group: str, pod: str) -> RunningSidecar:
        sidecar = start_sidecar(
            kafka.connection(), group, pod, tmp_path, signal="stats", stall_timeout_seconds=STALL,
            check_interval_seconds=CHECK, session_timeout_seconds=6, budget="none", events_topic="",
        )  # fmt: skip
        started.append(sidecar)
        return sidecar

    yield start
    for sidecar in started:
        sidecar.stop()


def _stats_member(conn, group: str, topic: str, pod: str, sidecar: RunningSidecar) -> clients.Member:
    """A real consumer whose librdkafka statistics go to the sidecar through the helper (signal="stats")."""
    return clients.Member(
        conn, group, [topic], client_id=pod, extra={"statistics.interval.ms": 500},
        consumer_factory=lambda conf: HelperConsumer(conf, beacon_addr=sidecar.beacon_addr, signal="stats"),
    ).start()  # fmt: skip


def _members(conn, group: str) -> set[str]:
    return {m.member_id for m in clients.describe_group(conn, group).members}


def test_a_member_that_stops_polling_with_records_waiting_is_removed(
    kafka: KafkaCluster, sidecars: Callable[..., RunningSidecar]
) -> None:
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("stats"), partitions=2)
    group = clients.unique("g-stats")
    sidecar = sidecars(group, "pod-a")
    watched = _stats_member(conn, group, topic, "pod-a", sidecar)
    other = clients.Member(conn, group, [topic], "pod-b").start()
    stop = threading.Event()

    def produce_continuously() -> None:
        i = 0
        while not stop.wait(0.1):
            clients.produce_spread(conn, topic, [f"m{i}", f"n{i}"], partitions=2)
            i += 1

    producer = threading.Thread(target=produce_continuously, daemon=True)
    producer.start()
    try:
        wait_for(lambda: clients.stable_members(conn, group), lambda n: n == 2, timeout=60, what="2 members stable")
        wait_for(lambda: len(watched.consumed), lambda n: n > 20, timeout=30, what="the watched member consuming")
        wait_for(lambda: sidecar.get("/v1/status")[1], lambda s: '"member": {' in s, timeout=30,
                 what="the sidecar identifying its member from the stats")  # fmt: skip
        stalled_id = watched.member_id
        assert stalled_id is not None
        assert stalled_id in sidecar.get("/v1/status")[1]
        assert sidecar.metric(ACCEPTED) > 0
        assert sidecar.metric(LEFT) == 0

        watched.paused_polling.set()  # no poll: librdkafka heartbeats on, records keep arriving, app_offset stays
        stalled_at = time.monotonic()
        wait_for(lambda: _members(conn, group), lambda ids: stalled_id not in ids, timeout=STALL + CHECK + 10,
                 what="the broker no longer listing the stalled member")  # fmt: skip
        took = time.monotonic() - stalled_at
        assert took >= STALL - CHECK, f"acted before the stall timeout ({took:.1f}s)"
        assert took <= bound(STALL + CHECK, slack=2.0)
        lines = [line for line in kafka.server_log(1).read_text().splitlines() if stalled_id in line]
        assert any(re.search(r"client reason: vigil: ", line) for line in lines), lines[-5:]
        assert sidecar.metric(LEFT) == 1
    finally:
        stop.set()
        producer.join(timeout=5)
        for m in (watched, other):
            m.close()


def _post(sidecar: RunningSidecar, body: bytes) -> tuple[int, str]:
    request = urllib.request.Request(f"http://{sidecar.beacon_addr}/v1/stats", data=body, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310 - http, built above
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_an_idle_consumer_is_never_judged_stalled(kafka: KafkaCluster, sidecars: Callable[..., RunningSidecar]) -> None:
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("stats-idle"), partitions=2)
    group = clients.unique("g-stats-idle")
    sidecar = sidecars(group, "pod-a")
    idle = _stats_member(conn, group, topic, "pod-a", sidecar)
    try:
        wait_for(lambda: sidecar.get("/v1/status")[1], lambda s: '"member": {' in s, timeout=60,
                 what="the sidecar identifying its member from the stats")  # fmt: skip
        member_id = idle.member_id
        assert member_id is not None
        # 2 stall timeouts of real documents (one per 0.5 s), counted by the sidecar itself
        first = sidecar.metric(ACCEPTED)
        wait_for(lambda: sidecar.metric(ACCEPTED), lambda n: n >= first + 4 * STALL, timeout=4 * STALL,
                 what="two stall timeouts of statistics")  # fmt: skip
        assert member_id in _members(conn, group)
        assert sidecar.metric(LEFT) == 0
        assert sidecar.metric('vigil_sidecar_alerts_total{kind="stall"}') == 0
        assert idle.consumed == []

        # malformed and oversized documents are refused with one line, counted
        code, body = _post(sidecar, json.dumps({"type": "consumer", "ts": 1}).encode())
        assert code == 400
        assert "time is missing" in json.loads(body)["error"]
        code, _ = _post(sidecar, b"{" + b" " * (1024 * 1024 + 10) + b"}")
        assert code == 413
        assert sidecar.metric('vigil_sidecar_stats_documents_total{outcome="malformed"}') == 1
        assert sidecar.metric('vigil_sidecar_stats_documents_total{outcome="too-large"}') == 1
    finally:
        idle.close()
