"""Broker configuration for each cluster layout and security mode (pure rendering)."""

from pathlib import Path

import pytest

from vigil_dev.kafka.config import (
    TEST_BROKER_SETTINGS,
    NodePorts,
    Security,
    TlsFiles,
    node_properties,
    render_properties,
    scram_format_args,
)

ONE = [NodePorts(1, 9001, 9002, 9003)]
THREE = [NodePorts(i, 9000 + 10 * i, 9001 + 10 * i, 9002 + 10 * i) for i in (1, 2, 3)]
TLS = TlsFiles(Path("/t/ca.pem"), Path("/t/broker.pem"), Path("/t/c.pem"), Path("/t/k.pem"))


@pytest.mark.parametrize(
    ("nodes", "key", "expected"),
    [
        (ONE, "controller.quorum.bootstrap.servers", "127.0.0.1:9002"),
        (ONE, "offsets.topic.replication.factor", "1"),
        (ONE, "transaction.state.log.min.isr", "1"),
        (THREE, "controller.quorum.voters", "1@127.0.0.1:9011,2@127.0.0.1:9021,3@127.0.0.1:9031"),
        (THREE, "offsets.topic.replication.factor", "3"),
        (THREE, "transaction.state.log.replication.factor", "3"),
        (THREE, "transaction.state.log.min.isr", "2"),
    ],
)
def test_layout_dependent_settings(nodes: list[NodePorts], key: str, expected: str) -> None:
    assert node_properties(nodes[0], nodes, data_dir=Path("/d"), security=Security.PLAINTEXT)[key] == expected


def test_one_node_has_no_static_voters_and_three_have_no_bootstrap() -> None:
    one = node_properties(ONE[0], ONE, data_dir=Path("/d"), security=Security.PLAINTEXT)
    three = node_properties(THREE[1], THREE, data_dir=Path("/d"), security=Security.PLAINTEXT)
    assert "controller.quorum.voters" not in one
    assert "controller.quorum.bootstrap.servers" not in three
    assert three["node.id"] == "2"
    assert "127.0.0.1:9020" in three["listeners"]


@pytest.mark.parametrize("security", list(Security))
def test_test_rules_hold_in_every_mode(security: Security) -> None:
    props = node_properties(ONE[0], ONE, data_dir=Path("/d"), security=security, tls=TLS)
    for key, value in TEST_BROKER_SETTINGS.items():
        assert props[key] == value
    assert props["group.initial.rebalance.delay.ms"] == "0"
    assert props["auto.create.topics.enable"] == "false"
    # clients only ever get the CLIENT listener; loopback only
    assert all("127.0.0.1" in part for part in props["listeners"].split(","))


@pytest.mark.parametrize(
    ("security", "protocol"),
    [
        (Security.PLAINTEXT, "PLAINTEXT"),
        (Security.SASL_SCRAM, "SASL_PLAINTEXT"),
        (Security.SSL, "SSL"),
        (Security.SASL_SCRAM_TLS, "SASL_SSL"),
    ],
)
def test_client_listener_protocol(security: Security, protocol: str) -> None:
    props = node_properties(ONE[0], ONE, data_dir=Path("/d"), security=security, tls=TLS)
    assert f"CLIENT:{protocol}" in props["listener.security.protocol.map"]


def test_scram_mode_locks_the_cluster_down_but_lets_the_controller_principal_in() -> None:
    props = node_properties(ONE[0], ONE, data_dir=Path("/d"), security=Security.SASL_SCRAM)
    assert props["authorizer.class.name"].endswith("StandardAuthorizer")
    assert props["allow.everyone.if.no.acl.found"] == "false"
    assert "User:ANONYMOUS" in props["super.users"].split(";")
    assert "User:app" not in props["super.users"]
    assert "ScramLoginModule" in props["listener.name.client.scram-sha-512.sasl.jaas.config"]


def test_ssl_mode_requires_client_certificates() -> None:
    props = node_properties(ONE[0], ONE, data_dir=Path("/d"), security=Security.SSL, tls=TLS)
    assert props["listener.name.client.ssl.client.auth"] == "required"
    assert props["listener.name.client.ssl.truststore.location"] == "/t/ca.pem"
    with pytest.raises(ValueError, match="TLS"):
        node_properties(ONE[0], ONE, data_dir=Path("/d"), security=Security.SSL)


def test_scram_over_tls_authenticates_by_sasl_behind_the_server_certificate() -> None:
    props = node_properties(ONE[0], ONE, data_dir=Path("/d"), security=Security.SASL_SCRAM_TLS, tls=TLS)
    assert props["listener.name.client.ssl.client.auth"] == "none"
    assert props["listener.name.client.ssl.keystore.type"] == "PEM"
    assert "ScramLoginModule" in props["listener.name.client.scram-sha-512.sasl.jaas.config"]
    assert props["allow.everyone.if.no.acl.found"] == "false"


def test_rendered_properties_are_sorted_lines() -> None:
    text = render_properties({"b": "2", "a": "1"})
    assert text == "a=1\nb=2\n"


def test_scram_users_get_both_mechanisms() -> None:
    args = scram_format_args({"app": "p1"})
    assert args == [
        "--add-scram",
        "SCRAM-SHA-256=[name=app,password=p1]",
        "--add-scram",
        "SCRAM-SHA-512=[name=app,password=p1]",
    ]


def test_cluster_ids_never_start_with_a_dash() -> None:
    """StorageTool's parser would take `-t -x...` for an option (seen here: one failed start in 64)."""
    from vigil_dev.kafka.cluster import _cluster_id

    ids = [_cluster_id() for _ in range(2000)]
    assert not [i for i in ids if i.startswith("-")]
    assert all(len(i) == 22 for i in ids)
