"""The sidecar loads kafka-python (the LeaveGroup/Heartbeat client, ~9 MB of RSS) only when a moment needs it: a
healthy member watched by the beacon or the progress signal never loads it; a silence of half the stall timeout does,
ahead of the eviction it may end in (which then does not wait ~0.1 s for it).

What a real `vigil sidecar` process imported is read from its own log: started with `PYTHONPROFILEIMPORTTIME=1`,
the interpreter writes one line per module imported, when it is imported (at start or later, lazily).
"""

import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import clients
from vigil_dev.testing.sidecar import RunningSidecar, start_sidecar
from vigil_dev.testing.waiting import bound, wait_for
from vigil_sidecar.client import Consumer as BeaconingConsumer

pytestmark = pytest.mark.integration

STALL = 6.0
CHECK = 1.0
LEFT = 'vigil_sidecar_actions_total{action="leave-group",outcome="NONE"}'
OFFSET_FETCHES = 'vigil_sidecar_broker_requests_total{api="OffsetFetch",outcome="NONE"}'


def _import_at(sidecar: RunningSidecar, package: str) -> int | None:
    """Where in the sidecar's log its interpreter first imported `package` (or a module of it); None: not so far."""
    found = re.search(rf"^import time:.*\|\s+{re.escape(package)}(\.\S+)?$", sidecar.log.read_text(), re.M)
    return None if found is None else found.start()


def _imported(sidecar: RunningSidecar, package: str) -> bool:
    return _import_at(sidecar, package) is not None


@pytest.fixture
def sidecars(kafka: KafkaCluster, tmp_path: Path) -> Iterator[Callable[..., RunningSidecar]]:
    started: list[RunningSidecar] = []

    def start(group: str, pod: str, **settings: str | float) -> RunningSidecar:
        defaults = {"stall_timeout_seconds": STALL, "check_interval_seconds": CHECK, "session_timeout_seconds": 6,
                    "budget": "none", "events_topic": ""}  # fmt: skip
        sidecar = start_sidecar(
            kafka.connection(), group, pod, tmp_path, env={"PYTHONPROFILEIMPORTTIME": "1"}, **(defaults | settings)
        )
        started.append(sidecar)
        return sidecar

    yield start
    for sidecar in started:
        sidecar.stop()


def test_the_beacon_signal_loads_kafka_python_ahead_of_the_first_eviction_only(
    kafka: KafkaCluster, sidecars: Callable[..., RunningSidecar]
) -> None:
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("lazy"), partitions=2)
    group = clients.unique("g-lazy")
    # no check falls between half the stall timeout and the stall: the loop wakes for the load all the same
    sidecar = sidecars(group, "pod-a", check_interval_seconds=STALL)
    watched = clients.Member(
        conn, group, [topic], client_id="pod-a",
        consumer_factory=lambda conf: BeaconingConsumer(conf, beacon_addr=sidecar.beacon_addr),
    ).start()  # fmt: skip
    other = clients.Member(conn, group, [topic], "pod-b").start()
    try:
        wait_for(lambda: clients.stable_members(conn, group), lambda n: n == 2, timeout=60, what="2 members stable")
        # the positive signal: the watchdog looked its coordinator up and proved its member from a describe
        status = wait_for(sidecar.status, lambda s: s.get("member") is not None and s.get("coordinator") is not None,
                          timeout=20, what="the sidecar identifying its member")  # fmt: skip
        assert status["member"]["member_id"] == watched.member_id
        assert _imported(sidecar, "confluent_kafka"), "the import log names what the sidecar loaded"
        assert not _imported(sidecar, "kafka"), "a healthy member's sidecar loaded kafka-python"

        watched.paused_polling.set()  # stalled: an eviction may follow, the moment kafka-python is for
        # loaded at half the stall timeout, before the stall is even due (no check in between: the loop woke for it)
        wait_for(lambda: _imported(sidecar, "kafka"), timeout=bound(STALL / 2, slack=0.5), what="kafka-python loaded")
        assert sidecar.metric(LEFT) == 0
        wait_for(lambda: sidecar.metric(LEFT), lambda n: n == 1, timeout=STALL + 15, what="the eviction done")
        loaded_at, decided_at = _import_at(sidecar, "kafka"), sidecar.log.read_text().find("evicting member")
        assert loaded_at is not None
        assert 0 <= loaded_at < decided_at, "kafka-python was loaded by the eviction, not ahead of it"
        wait_for(lambda: clients.stable_members(conn, group), lambda n: n == 1, timeout=30, what="pod-b alone")
    finally:
        watched.close()
        other.close()


def test_the_progress_signal_never_loads_kafka_python(
    kafka: KafkaCluster, sidecars: Callable[..., RunningSidecar]
) -> None:
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("lazy-p"), partitions=2)
    group = clients.unique("g-lazy-p")
    sidecar = sidecars(group, "pod-a", signal="progress", stall_timeout_seconds=60)
    members = [clients.Member(conn, group, [topic], pod).start() for pod in ("pod-a", "pod-b")]
    try:
        wait_for(lambda: clients.stable_members(conn, group), lambda n: n == 2, timeout=60, what="2 members stable")
        clients.produce(conn, topic, [f"m{i}" for i in range(20)])
        # the positive signal: several progress checks sent their describe, OffsetFetch and ListOffsets
        wait_for(lambda: sidecar.metric(OFFSET_FETCHES), lambda n: n >= 3, timeout=30, what="3 progress checks")
        assert _imported(sidecar, "confluent_kafka")
        assert not _imported(sidecar, "kafka"), "the progress signal loaded kafka-python"
    finally:
        for m in members:
            m.close()
