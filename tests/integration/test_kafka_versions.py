"""What vigil does on each broker release the suites run on (docs/kafka-versions.md): the run's broker is the one
asked for, and a feature the broker cannot serve is one clear line and no action, never a wrong one.

Runs on the default release (`make test-kafka`) and on 3.9.1 (`make test-kafka-39`)."""

import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from vigil_core.kafka.group_client import GroupClient
from vigil_core.kafka.model import GroupType
from vigil_core.kafka.outcomes import Reaction
from vigil_core.rules import PROTOCOLS
from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import clients
from vigil_dev.testing.fixtures import release, run_kafka_version
from vigil_dev.testing.sidecar import RunningSidecar, start_sidecar
from vigil_dev.testing.waiting import wait_for
from vigil_sidecar.client import Consumer as BeaconingConsumer

pytestmark = pytest.mark.integration

SERVES_KIP848 = release(run_kafka_version()) >= (4, 0)


@pytest.fixture
def client(kafka: KafkaCluster) -> Iterator[GroupClient]:
    c = GroupClient(kafka.connection())
    yield c
    c.close()


@pytest.fixture
def sidecars(kafka: KafkaCluster, tmp_path: Path) -> Iterator[Callable[..., RunningSidecar]]:
    started: list[RunningSidecar] = []

    def start(group: str, pod: str, **settings: str | float) -> RunningSidecar:
        sidecar = start_sidecar(kafka.connection(), group, pod, tmp_path, budget="none", **settings)
        started.append(sidecar)
        return sidecar

    yield start
    for sidecar in started:
        sidecar.stop()


def test_the_broker_is_the_release_the_run_asked_for(kafka: KafkaCluster) -> None:
    """`$VIGIL_TEST_KAFKA_VERSION` really chooses the broker: its own start-up line names the release."""
    assert kafka.version == run_kafka_version()
    started = re.search(r"Kafka version: (\S+)", kafka.server_log(1).read_text())
    assert started is not None
    assert started.group(1) == run_kafka_version()


def test_the_coordinator_s_protocols_are_read_from_the_broker(client: GroupClient) -> None:
    """3.x serves the classic protocol only by default; 4.0+ serves KIP-848's consumer protocol beside it."""
    protocols = client.broker_limits().protocols
    assert protocols is not None
    assert "classic" in protocols
    assert ("consumer" in protocols) is SERVES_KIP848


@pytest.mark.kafka_before("4.0")  # a 4.0+ broker removes KIP-848 members: test_group_client covers it
def test_a_kip848_removal_on_a_broker_without_it_is_refused_before_any_request(
    kafka: KafkaCluster, client: GroupClient
) -> None:
    """A 3.x broker's LeaveGroup cannot remove a consumer-protocol member: vigil says so in one line and sends
    nothing. Shown on a live classic member named as a KIP-848 one: a LeaveGroup sent anyway would remove it."""
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("versions"), partitions=1)
    group = clients.unique("g-versions")
    member = clients.Member(conn, group, [topic], "pod-a").start()
    try:
        wait_for(lambda: len(member.assigned), lambda n: n == 1, timeout=30, what="the member assigned")
        victim = client.describe(group).members[0]
        outcome = client.remove_member(group, victim.member_id, None, "version check", group_type=GroupType.CONSUMER)
        assert outcome.reaction is Reaction.REPORT, outcome
        assert re.fullmatch(r"removing a KIP-848 member needs a Kafka 4\.0\+ broker; this one is 3\.9(\.\d+)?",
                            outcome.message), outcome  # fmt: skip
        assert victim.member_id in {m.member_id for m in client.describe(group).members}
        assert "version check" not in kafka.server_log(1).read_text()  # no LeaveGroup carried the reason
    finally:
        member.close()


@pytest.mark.kafka_before("4.0")  # a 4.0+ coordinator serves the consumer protocol: nothing to say
def test_a_kip848_sidecar_on_a_classic_only_broker_says_so_in_one_line(
    kafka: KafkaCluster, sidecars: Callable[..., RunningSidecar]
) -> None:
    """A KIP-848 app deployed against a 3.x cluster: its client cannot join; its sidecar says why once and acts on
    nothing."""
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("versions-848"), partitions=1)
    group = clients.unique("g-848-on-3x")
    sidecar = sidecars(group, "pod-a", group_protocol="consumer", events_topic="")
    app = clients.Member(
        conn, group, [topic], client_id="pod-a", extra={"group.protocol": "consumer"},
        consumer_factory=lambda conf: BeaconingConsumer(conf, beacon_addr=sidecar.beacon_addr),
    ).start()  # fmt: skip
    try:
        line = wait_for(
            lambda: [ln for ln in sidecar.log.read_text().splitlines() if PROTOCOLS in ln],
            bool, timeout=30, what="the sidecar's line about the protocol",
        )  # fmt: skip
        assert len(line) == 1, line
        assert "serves only classic" in line[0], line[0]
        assert "KIP-848 is GA from Kafka 4.0" in line[0], line[0]
        assert sidecar.metric('vigil_sidecar_actions_total{action="leave-group",outcome="NONE"}') == 0
    finally:
        app.close()
