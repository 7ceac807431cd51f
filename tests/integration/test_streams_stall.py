"""A Kafka Streams app (classic protocol) whose main consumer is vigil's (`VigilClientSupplier`, java/) next to a real
`vigil sidecar`: a stream thread stuck in processing stops polling (its consumer's heartbeat thread keeps the member
in the group, as it would for up to `max.poll.interval.ms`, 5 minutes by default); the sidecar sees the beacons stop,
evicts exactly that member (LeaveGroup with its member id), and the other instance takes its task over. Let go, the
stuck thread rejoins.
"""

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest

from vigil_core.kafka.group_client import GroupClient
from vigil_core.kafka.model import GroupState, GroupView, TopicPartitionRef
from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import broker_log, clients, streams_app
from vigil_dev.testing.sidecar import RunningSidecar, start_sidecar
from vigil_dev.testing.streams_app import StreamsApp
from vigil_dev.testing.waiting import bound, wait_for

pytestmark = pytest.mark.integration

PARTITIONS = 2
STALL = 6.0
CHECK = 1.0
JOIN_TIMEOUT = 90.0
"""A JVM and Kafka Streams starting on 2 cores next to the broker, then the classic group's join."""


def _each_reading_one(view: GroupView) -> bool:
    return (
        view.state is GroupState.STABLE and len(view.members) == 2 and all(len(m.assignment) == 1 for m in view.members)
    )


def _only_pod_b_reading_both(view: GroupView) -> bool:
    return (
        view.state is GroupState.STABLE
        and [m.member_id for m in view.members] == [_app(view, "pod-b")]
        and len(view.members[0].assignment) == PARTITIONS
    )


def _app(view: GroupView, name: str) -> str | None:
    """The member id of app `name` (Kafka Streams' main consumer: client.id `<name>-StreamThread-1-consumer`)."""
    return next((m.member_id for m in view.members if m.client_id.startswith(f"{name}-")), None)


@dataclass(frozen=True)
class Pair:
    """Two instances of one Kafka Streams app over a 2-partition input: pod-a (the one stalled) next to its sidecar,
    pod-b without one; a client to watch the group with."""

    group: str
    source: str
    sink: str
    sidecar: RunningSidecar
    stalling: StreamsApp
    other: StreamsApp
    client: GroupClient

    def view(self) -> GroupView:
        return self.client.describe(self.group, subscriptions=False)

    def joined(self) -> str:
        """Both Stable with one task each; pod-a's member id."""
        view = wait_for(self.view, _each_reading_one, timeout=JOIN_TIMEOUT,
                        what=f"{self.group}: two Kafka Streams instances Stable, one task each")  # fmt: skip
        member = _app(view, "pod-a")
        assert member is not None, view.members
        return member


@pytest.fixture
def pair(kafka: KafkaCluster, artifacts_dir: Path) -> Iterator[Callable[..., Pair]]:
    """`start(protocol, static, **sidecar settings)` → a `Pair` (static: each instance's `group.instance.id` is its
    pod's name); stopped after the test, its logs under test-artifacts/<run>/streams-stall/<group>/."""
    stop: list[Callable[[], None]] = []

    def start(protocol: Literal["classic", "streams"], static: bool, **settings: str | float) -> Pair:
        conn = kafka.connection()
        source = clients.create_topic(conn, clients.unique("streams-stall-in"), partitions=PARTITIONS)
        sink = clients.create_topic(conn, clients.unique("streams-stall-out"), partitions=PARTITIONS)
        group = clients.unique("g-streams-stall")
        state_dir = artifacts_dir / "streams-stall" / group
        state_dir.mkdir(parents=True)
        common: dict[str, str | float] = {"stall_timeout_seconds": STALL, "check_interval_seconds": CHECK,
                                          "action": "leave-group", "budget": "none", "events_topic": ""}  # fmt: skip
        sidecar = start_sidecar(conn, group, "pod-a", state_dir, env=None, **(common | settings))
        stop.append(sidecar.stop)
        apps = []
        for name in ("pod-a", "pod-b"):
            beacon = sidecar.beacon_addr if name == "pod-a" and protocol == "classic" else None
            app = streams_app.start(
                kafka.libs, conn, application_id=group, input_topic=source, output_topic=sink, name=name,
                state_dir=state_dir, protocol=protocol, beacon_addr=beacon, instance_id=name if static else None,
            )  # fmt: skip
            stop.append(app.stop)
            stop.append(app.resume)  # (run first: a stalled app closes only once let go)
            apps.append(app)
        client = GroupClient(conn)
        stop.append(client.close)
        return Pair(group, source, sink, sidecar, apps[0], apps[1], client)

    yield start
    for close in reversed(stop):
        close()


@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
def test_a_stalled_streams_thread_is_evicted_and_its_task_moves_to_the_other_instance(
    kafka: KafkaCluster, pair: Callable[..., Pair], static: bool
) -> None:
    """Static: Kafka Streams suffixes the instance's `group.instance.id` with the thread's index for the main
    consumer (`pod-a-1`): the sidecar watches that instance id."""
    settings: dict[str, str | float] = {"group_protocol": "classic", "session_timeout_seconds": 6,
                                        "heartbeat_interval_seconds": 1}  # fmt: skip
    if static:
        settings["instance_id"] = "pod-a-1"
    p = pair("classic", static, **settings)
    conn, group, sidecar, client = kafka.connection(), p.group, p.sidecar, p.client
    member = p.joined()
    assert [m.instance_id for m in p.view().members if m.member_id == member] == ["pod-a-1" if static else None]
    wait_for(lambda: (sidecar.status().get("member") or {}).get("member_id"), lambda m: m == member,
             timeout=30, what="the sidecar proving pod-a's member from its beacons")  # fmt: skip

    p.stalling.stall()
    produced = clients.produce_spread(conn, p.source, [f"r{i}" for i in range(10)], PARTITIONS)
    p.stalling.wait_event(lambda e: e["event"] == "stalled", timeout=30, what="pod-a's stream thread stuck")
    wait_for(lambda: sidecar.metric('vigil_sidecar_actions_total{action="leave-group",outcome="NONE"}'),
             lambda n: n == 1, timeout=bound(STALL + 2 * CHECK, slack=10),
             what="the sidecar evicting pod-a's member")  # fmt: skip
    pattern = rf"{re.escape(member)}.* has left group .*vigil: no poll"  # 3.9 and 4.x word it differently
    wait_for(lambda: len(broker_log.broker_lines(kafka, group, pattern)), lambda n: n == 1, timeout=15,
             what=f"the broker logging {member} removed by vigil's LeaveGroup")  # fmt: skip
    moved = wait_for(p.view, _only_pod_b_reading_both, timeout=60, what="pod-b alone, reading both partitions")
    assert member not in {m.member_id for m in moved.members}
    out = [TopicPartitionRef(p.sink, i) for i in range(PARTITIONS)]
    wait_for(lambda: sum(client.end_offsets(out).values()), lambda n: n >= produced, timeout=60,
             what="every record processed, pod-a's partition by pod-b")  # fmt: skip
    assert not p.other.process.exited()

    p.stalling.resume()
    wait_for(p.view, _each_reading_one, timeout=JOIN_TIMEOUT,
             what="pod-a back, after its stream thread was let go: one task each again")  # fmt: skip


@pytest.mark.kafka_min("4.4")  # static membership under the streams protocol (KIP-1071's, in 4.4)
def test_a_stalled_streams_group_member_is_restarted_never_removed(
    kafka: KafkaCluster, pair: Callable[..., Pair]
) -> None:
    """`group.protocol=streams`: no beacon (Kafka Streams builds its main consumer itself), so the sidecar watches
    committed progress; no Kafka API removes a streams group's member, so `leave-group` becomes a restart: the
    sidecar fails the app's probe and sends nothing to the broker."""
    p = pair("streams", True, signal="progress", group_protocol="consumer", session_timeout_seconds=45,
             instance_id="pod-a-1")  # fmt: skip
    conn, sidecar, client = kafka.connection(), p.sidecar, p.client
    member = p.joined()
    # the progress signal judges commits it saw move (a member never seen committing is progress unknown, an
    # alert): a round of commits on both partitions, a full check of the sidecar after it, then a second round,
    # which that check's sample proves a move (the first may come before the sidecar sampled pod-a's new task)
    inputs = [TopicPartitionRef(p.source, i) for i in range(PARTITIONS)]
    fetches = 'vigil_sidecar_broker_requests_total{api="OffsetFetch",outcome="NONE"}'

    def commit_round(name: str) -> None:
        clients.produce_spread(conn, p.source, [f"{name}-0", f"{name}-1"], PARTITIONS)
        wait_for(lambda: client.committed_offsets(p.group), lambda c: c == client.end_offsets(inputs), timeout=60,
                 what=f"both instances committed what they processed ({name} round)")  # fmt: skip
        before = sidecar.metric(fetches)
        wait_for(lambda: sidecar.metric(fetches), lambda n: n >= before + 2, timeout=bound(3 * CHECK, slack=10),
                 what="a whole progress check of the sidecar after those commits")  # fmt: skip

    commit_round("first")
    commit_round("second")
    p.stalling.stall()
    clients.produce_spread(conn, p.source, [f"r{i}" for i in range(10)], PARTITIONS)
    p.stalling.wait_event(lambda e: e["event"] == "stalled", timeout=30, what="pod-a's stream thread stuck")
    wait_for(lambda: sidecar.get("/v1/probe/app")[0], lambda code: code == 503,
             timeout=bound(STALL + 2 * CHECK, slack=20),
             what="the sidecar failing pod-a's probe: a restart")  # fmt: skip
    assert sidecar.metric('vigil_sidecar_actions_total{action="restart",outcome="NONE"}') == 1
    assert 'action="leave-group"' not in sidecar.get("/metrics")[1]
    assert member in {m.member_id for m in p.view().members}
