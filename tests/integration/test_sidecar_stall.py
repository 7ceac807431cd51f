"""The sidecar against the real broker: a stalled member is evicted and its partitions consumed by the others,
long before Kafka itself would notice (stock: max.poll.interval.ms, or max.poll + session for static members).
"""

import re
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from vigil_dev import ports, procs
from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import clients
from vigil_dev.testing.waiting import bound, wait_for
from vigil_sidecar.client import Consumer as BeaconingConsumer

pytestmark = pytest.mark.integration

STALL = 6.0
CHECK = 1.0


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - loopback test URL
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""


@pytest.fixture
def start_sidecar(kafka: KafkaCluster, tmp_path: Path) -> Iterator[Callable[..., tuple[int, int]]]:
    """Start `vigil sidecar` as a real process; returns (beacon port, health port)."""
    started: list[procs.Managed] = []

    def start(group: str, pod: str, **settings: str) -> tuple[int, int]:
        beacon, health = ports.free_ports(2)
        marker = f"VIGIL_TEST_SIDECAR={tmp_path}/{pod}"
        env = {
            "PATH": "/usr/bin:/bin",
            **kafka.connection().to_env(),
            "VIGIL_GROUP_ID": group,
            "VIGIL_POD_NAME": pod,
            "VIGIL_STALL_TIMEOUT_SECONDS": str(STALL),
            "VIGIL_CHECK_INTERVAL_SECONDS": str(CHECK),
            "VIGIL_SESSION_TIMEOUT_SECONDS": "6",
            "VIGIL_BEACON_PORT": str(beacon),
            "VIGIL_HEALTH_BIND": "127.0.0.1",
            "VIGIL_HEALTH_PORT": str(health),
            **{f"VIGIL_{k.upper()}": v for k, v in settings.items()},
        }
        env[marker.split("=", 1)[0]] = marker.split("=", 1)[1]
        managed = procs.start(
            f"sidecar-{pod}", [sys.executable, "-m", "vigil_sidecar"], pid_file=tmp_path / f"{pod}.pid",
            marker=marker, log_file=tmp_path / f"{pod}.log", env=env,
        )  # fmt: skip
        started.append(managed)
        wait_for(lambda: _get(f"http://127.0.0.1:{health}/livez")[0], lambda s: s == 200, timeout=20,
                 what=f"sidecar {pod} /livez")  # fmt: skip
        return beacon, health

    yield start
    for managed in started:
        managed.stop(grace=5)


def _watched(conn, group: str, topic: str, pod: str, *, beacon: int, extra: clients.ClientConfig) -> clients.Member:
    return clients.Member(
        conn, group, [topic], client_id=pod, extra=extra,
        consumer_factory=lambda conf: BeaconingConsumer(conf, beacon_addr=f"127.0.0.1:{beacon}"),
    ).start()  # fmt: skip


@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
def test_a_stalled_member_is_evicted_and_its_partitions_consumed_by_the_others(
    kafka: KafkaCluster, start_sidecar, static: bool
) -> None:
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("stall"), partitions=3)
    group = clients.unique("g-stall")
    pod = "pod-a"
    # static members with a long session: stock Kafka keeps a stalled one for max.poll + session (5 + 2 min)
    member_extra: clients.ClientConfig = {"session.timeout.ms": 120000} if static else {}
    sidecar_settings = {"instance_id": pod, "session_timeout_seconds": "120"} if static else {}
    beacon, health = start_sidecar(group, pod, events_topic="", **sidecar_settings)

    def extra(name: str) -> clients.ClientConfig:
        return {**member_extra, "group.instance.id": name} if static else dict(member_extra)

    watched = _watched(conn, group, topic, pod, beacon=beacon, extra=extra(pod))
    others = [clients.Member(conn, group, [topic], f"pod-{x}", extra=extra(f"pod-{x}")).start() for x in "bc"]
    members = [watched, *others]
    try:
        wait_for(lambda: clients.stable_members(conn, group), lambda n: n == 3, timeout=60, what="3 members stable")
        clients.produce(conn, topic, [f"a{i}" for i in range(300)], key=None)
        wait_for(lambda: {v for m in members for _, _, v in m.consumed}, lambda s: len(s) == 300, timeout=60,
                 what="the first 300 messages consumed")  # fmt: skip
        status = wait_for(lambda: _get(f"http://127.0.0.1:{health}/v1/status"), lambda r: '"member": {' in r[1],
                          timeout=20, what="the sidecar identifying its member")  # fmt: skip
        assert watched.member_id in status[1]
        stalled_id = watched.member_id
        assert stalled_id is not None

        watched.paused_polling.set()  # stalled: no poll, while librdkafka keeps heartbeating
        stalled_at = time.monotonic()
        expected = {f"b{i}" for i in range(300)}
        clients.produce(conn, topic, sorted(expected))

        def survivors_took_over() -> set[str]:
            return {v for m in others for _, _, v in m.consumed} & expected

        wait_for(survivors_took_over, lambda s: s == expected, timeout=STALL + 5, what="the others consuming all")
        took = time.monotonic() - stalled_at
        assert took >= STALL, f"acted before the stall timeout ({took:.1f}s)"
        assert took <= bound(STALL + CHECK, slack=2.0)

        log = kafka.server_log(1).read_text()
        assert re.search(
            rf"{re.escape(stalled_id)}.*client reason: vigil: no poll for \d+\.\ds \(stall timeout 6s\)", log
        )
        _, metrics = _get(f"http://127.0.0.1:{health}/metrics")
        assert 'vigil_sidecar_actions_total{action="leave-group",outcome="NONE"} 1.0' in metrics
        assert stalled_id not in metrics  # never a member id as a label
    finally:
        for m in members:
            m.close()
