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
from confluent_kafka import Producer

from vigil_core.kafka.security import KafkaConnection
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

    def start(group: str, pod: str, stall: float = STALL) -> RunningSidecar:
        sidecar = start_sidecar(
            kafka.connection(), group, pod, tmp_path, signal="stats", stall_timeout_seconds=stall,
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


# --- librdkafka's consumer_lag is LSO minus the *committed* offset ----------------------------------------------------

EOS_STALL = 10.0
"""The issue's scenario: a stall timeout of 10 s."""


class ExactlyOnceApp:
    """A consume-transform-produce app (read_committed input, transactional output, offsets committed through the
    transaction with `send_offsets_to_transaction`): the consumer never commits itself, so librdkafka's own committed
    offset, and `consumer_lag` with it, stays where the group started."""

    def __init__(
        self, conn: KafkaConnection, group: str, source: str, sink: str, sidecar: RunningSidecar | None
    ) -> None:
        conf = conn.confluent_config() | clients.QUIET | dict(clients.CONSUMER_DEFAULTS)
        conf |= {"group.id": group, "client.id": "pod-eos", "enable.auto.commit": False,
                 "isolation.level": "read_committed", "statistics.interval.ms": 500}  # fmt: skip
        self.consumer = HelperConsumer(conf, beacon_addr=sidecar.beacon_addr if sidecar else "", signal="stats")
        self.producer = Producer(conn.confluent_config() | clients.QUIET | {"transactional.id": clients.unique("tx")})
        self.sink = sink
        self.consumed = 0
        self.member_id: str | None = None
        self.errors: list[str] = []
        self._stop = threading.Event()
        self.consumer.subscribe([source])
        self._thread = threading.Thread(target=self._run, name="eos-app", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        self.producer.init_transactions(30)
        while not self._stop.is_set():
            batch = self.consumer.consume(100, 0.2)
            self.member_id = self.consumer.memberid()
            records = [m for m in batch if m.error() is None]
            self.errors += [str(m.error()) for m in batch if m.error() is not None]
            if not records:
                continue
            self.producer.begin_transaction()
            for m in records:
                self.producer.produce(self.sink, value=m.value())
            positions = self.consumer.position(self.consumer.assignment())
            self.producer.send_offsets_to_transaction(positions, self.consumer.consumer_group_metadata(), 30)
            self.producer.commit_transaction(30)
            self.consumed += len(records)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self.consumer.close()


def test_an_exactly_once_app_that_consumed_every_record_is_never_evicted(
    kafka: KafkaCluster, sidecars: Callable[..., RunningSidecar]
) -> None:
    """An exactly-once app whose group already has committed offsets (it ran before: librdkafka
    fetches them at assignment, and never again, since the consumer itself never commits) takes bursts of 100
    records and commits them through the transaction, then keeps polling an empty topic. Judged by its position
    (app_offset = the LSO), it waits for nothing: no eviction after either burst (before the fix:
    consumer_lag = LSO − that stale committed offset > 0, and the member was evicted a stall timeout later)."""
    conn = kafka.connection()
    source = clients.create_topic(conn, clients.unique("eos-in"), partitions=2)
    sink = clients.create_topic(conn, clients.unique("eos-out"), partitions=2)
    group = clients.unique("g-eos")
    sidecar = sidecars(group, "pod-eos", stall=EOS_STALL)
    clients.produce_spread(conn, source, [f"r0-{i}" for i in range(100)], partitions=2)
    earlier = ExactlyOnceApp(conn, group, source, sink, None)  # an earlier life (no sidecar yet): the group's commits
    try:
        wait_for(lambda: earlier.consumed, lambda n: n == 100, timeout=60, what="the earlier life's 100 records")
    finally:
        earlier.close()
    assert clients.committed(conn, group) == {0: 50, 1: 50}
    app = ExactlyOnceApp(conn, group, source, sink, sidecar)
    try:
        wait_for(lambda: (app.member_id, sidecar.get("/v1/status")[1]), lambda s: s[0] is not None and s[0] in s[1],
                 timeout=60, what="the sidecar identifying the app's member from the stats")  # fmt: skip
        member_id = app.member_id
        assert member_id is not None
        for burst in (1, 2):
            clients.produce_spread(conn, source, [f"r{burst}-{i}" for i in range(100)], partitions=2)
            wait_for(lambda: app.consumed, lambda n, b=burst: n == 100 * b, timeout=30,
                     what=f"burst {burst} consumed and committed in transactions")  # fmt: skip
            first = sidecar.metric(ACCEPTED)
            # two stall timeouts of real documents (one per 0.5 s) after the burst, counted by the sidecar itself
            wait_for(lambda: sidecar.metric(ACCEPTED), lambda n, f=first: n >= f + 4 * EOS_STALL,
                     timeout=4 * EOS_STALL, what=f"two stall timeouts of statistics after burst {burst}")  # fmt: skip
            assert member_id in _members(conn, group), f"evicted after burst {burst}"
            assert sidecar.metric(LEFT) == 0
        assert app.errors == []
        assert clients.committed(conn, group) == {0: 150, 1: 150}  # the transactions' commits
    finally:
        app.close()


def test_a_member_that_paused_its_partition_with_records_left_is_never_evicted(
    kafka: KafkaCluster, sidecars: Callable[..., RunningSidecar]
) -> None:
    """A paused partition waits for nobody: the app keeps polling (its statistics flow) with 50 records left behind
    the pause, its committed offset 10. Before the fix consumer_lag (hi − committed = 50) made it `waiting`, and the
    member was evicted one stall timeout later."""
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("stats-pause"), partitions=1)
    group = clients.unique("g-stats-pause")
    clients.produce(conn, topic, [f"p{i}" for i in range(60)], partition=0)
    sidecar = sidecars(group, "pod-pause")
    conf = conn.confluent_config() | clients.QUIET | dict(clients.CONSUMER_DEFAULTS)
    conf |= {"group.id": group, "client.id": "pod-pause", "statistics.interval.ms": 500,
             "enable.auto.commit": False}  # fmt: skip
    consumer = HelperConsumer(conf, beacon_addr=sidecar.beacon_addr, signal="stats")
    consumer.subscribe([topic])
    taken: list[int] = []
    try:
        while len(taken) < 10:  # this thread is the app: it takes 10 records, commits them and pauses the partition
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                taken.append(msg.offset())
        consumer.commit(asynchronous=False)
        consumer.pause(consumer.assignment())
        member_id = consumer.memberid()
        first = sidecar.metric(ACCEPTED)
        deadline = time.monotonic() + 4 * STALL
        while sidecar.metric(ACCEPTED) < first + 4 * STALL:  # two stall timeouts of documents, polling on
            assert time.monotonic() < deadline, "the statistics stopped"
            assert consumer.poll(0.2) is None  # paused: nothing is delivered
        assert taken == list(range(10))
        assert clients.committed(conn, group) == {0: 10}
        assert member_id in _members(conn, group)
        assert sidecar.metric(LEFT) == 0
        assert sidecar.metric('vigil_sidecar_alerts_total{kind="stall"}') == 0
    finally:
        consumer.close()
