"""A 3-node cluster really fails a group's coordinator over to another node."""

import pytest
from confluent_kafka import KafkaException

from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import clients
from vigil_dev.testing.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.kafka3]


def test_group_survives_stopping_its_coordinator(kafka3: KafkaCluster) -> None:
    conn = kafka3.connection()
    topic = clients.create_topic(conn, clients.unique("failover"), partitions=3, replication=3)
    group = clients.unique("g-failover")
    members = clients.start_group(conn, group, [topic], size=3)
    old = clients.describe_group(conn, group).coordinator.id
    try:
        assert kafka3.stop_node(old)
        new = wait_for(
            lambda: _coordinator(conn, group),
            lambda node: node not in (None, old),
            timeout=60,
            what="FindCoordinator naming another node",
        )
        assert new in {n.node_id for n in kafka3.nodes} - {old}
        wait_for(lambda: clients.stable_members(conn, group), lambda n: n == 3, timeout=60,
                 what="the group Stable again with 3 members under the new coordinator")  # fmt: skip
        # and it still consumes
        clients.produce(conn, topic, [f"after-{i}" for i in range(30)])
        wait_for(lambda: {v for m in members for _, _, v in m.consumed}, lambda s: len(s) == 30, timeout=60,
                 what="messages produced after failover consumed")  # fmt: skip
    finally:
        for m in members:
            m.close()
        kafka3.start_node(old)
        kafka3.wait_healthy([old])


def _coordinator(conn, group) -> int | None:
    try:
        return clients.describe_group(conn, group).coordinator.id
    except KafkaException:
        return None
