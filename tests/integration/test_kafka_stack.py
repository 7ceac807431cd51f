"""The local Kafka is real: a real group consumes everything, the broker describes it and logs its rebalances."""

import re

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import clients
from vigil_dev.testing.waiting import wait_for

pytestmark = pytest.mark.integration


def test_ten_thousand_messages_through_a_three_member_group_none_lost(kafka: KafkaCluster) -> None:
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("smoke"), partitions=3)
    group = clients.unique("g-smoke")
    members = clients.start_group(conn, group, [topic], size=3)
    try:
        expected = {f"m-{i}" for i in range(10_000)}
        assert clients.produce_spread(conn, topic, sorted(expected), partitions=3) == 10_000

        def seen() -> set[str]:
            return {value for m in members for (_, _, value) in m.consumed}

        wait_for(seen, lambda s: s == expected, timeout=60, what="all 10k messages consumed")
        # every member did real work: the range assignor gave each one partition
        assert all(m.consumed for m in members)
        assert sum(len(m.consumed) for m in members) == 10_000  # no duplicates in a stable group
        assert not [e for m in members for e in m.errors]
    finally:
        for m in members:
            m.close()


def test_group_as_the_broker_describes_it(kafka: KafkaCluster) -> None:
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("describe"), partitions=3)
    group = clients.unique("g-describe")
    members = clients.start_group(conn, group, [topic], size=3)
    try:
        desc = clients.describe_group(conn, group)
        assert {m.client_id for m in desc.members} == {m.client_id for m in members}
        assigned = sorted(
            (tp.topic, tp.partition) for member in desc.members for tp in member.assignment.topic_partitions
        )
        assert assigned == [(topic, 0), (topic, 1), (topic, 2)]
        assert desc.partition_assignor == "range"
        # the ids and partitions the broker reports are the ones the clients hold (a client learns its
        # assignment at its next poll after SyncGroup, which may come just after the broker says Stable)
        wait_for(
            lambda: ({m.member_id for m in members}, sorted(tp for m in members for tp in m.assigned)),
            lambda seen: seen == ({m.member_id for m in desc.members}, assigned),
            timeout=10,
            what="the clients' own member ids and assignments equal to the broker's",
        )
    finally:
        for m in members:
            m.close()


def test_broker_log_records_the_coordinator_stabilizing_the_group(kafka: KafkaCluster) -> None:
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("log"), partitions=3)
    group = clients.unique("g-log")
    members = clients.start_group(conn, group, [topic], size=2)
    for m in members:
        m.close()
    line = re.compile(rf"Stabilized group {re.escape(group)} generation (\d+) with (\d+) members")
    found = wait_for(
        lambda: line.findall(kafka.server_log(1).read_text()),
        timeout=10,
        what=f"'Stabilized group {group}' in the broker log",
    )
    # the last generation the coordinator stabilized held both members
    assert int(found[-1][1]) == 2
    assert [int(g) for g, _ in found] == sorted(int(g) for g, _ in found)


@pytest.mark.kafka_secure
def test_scram_client_needs_acls(kafka_secure: KafkaCluster) -> None:

    admin_conn = kafka_secure.connection("admin")
    app_conn = kafka_secure.connection("app")
    topic = clients.create_topic(admin_conn, clients.unique("acl"), partitions=1)
    clients.produce(admin_conn, topic, ["one"])
    group = clients.unique("g-acl")

    denied = clients.Member(app_conn, group, [topic], client_id="app-denied").start()
    try:
        wait_for(lambda: denied.errors, timeout=30, what="an authorization error for the app user")
        assert any("AUTHORIZATION_FAILED" in e for e in denied.errors), denied.errors
        assert not denied.consumed
    finally:
        denied.close()
    with pytest.raises(KafkaException, match="AUTHORIZATION_FAILED"):
        clients.describe_group(app_conn, group)

    principal = "User:app"
    bindings = [
        AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, principal, "*",
                   AclOperation.READ, AclPermissionType.ALLOW),
        AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, principal, "*",
                   AclOperation.DESCRIBE, AclPermissionType.ALLOW),
        AclBinding(ResourceType.GROUP, group, ResourcePatternType.LITERAL, principal, "*",
                   AclOperation.READ, AclPermissionType.ALLOW),
        AclBinding(ResourceType.GROUP, group, ResourcePatternType.LITERAL, principal, "*",
                   AclOperation.DESCRIBE, AclPermissionType.ALLOW),
    ]  # fmt: skip
    acl_admin = clients.admin(admin_conn)
    for future in acl_admin.create_acls(bindings).values():
        future.result(timeout=30)

    allowed = clients.Member(app_conn, group, [topic], client_id="app-allowed").start()
    try:
        wait_for(lambda: [v for _, _, v in allowed.consumed], lambda v: v == ["one"], timeout=30,
                 what="the app user consuming once ACLs exist")  # fmt: skip
        assert clients.describe_group(app_conn, group).members
    finally:
        allowed.close()
