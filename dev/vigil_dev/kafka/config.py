"""Broker configuration for the dev stack, rendered from a layout (pure: no I/O).

The test settings here are binding on every suite (tests/README.md): fast initial rebalance, short minimum
session timeouts (KIP-848 minimums lowered too), few partitions, two network/io threads.
"""

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path


class Security(StrEnum):
    PLAINTEXT = "plaintext"
    SASL_SCRAM = "sasl-scram"
    SSL = "ssl"
    SASL_SCRAM_TLS = "sasl-scram-tls"
    """SASL/SCRAM over TLS (SASL_SSL): the ACLs of `sasl-scram`, the server certificate of `ssl` (no client's)."""

    @property
    def sasl(self) -> bool:
        return self in (Security.SASL_SCRAM, Security.SASL_SCRAM_TLS)

    @property
    def tls(self) -> bool:
        return self in (Security.SSL, Security.SASL_SCRAM_TLS)


SCRAM_MECHANISM = "SCRAM-SHA-512"
ADMIN_USER = "admin"
#: A user with a password but no ACLs: tests grant it exactly what a vigil component needs.
APP_USER = "app"

TEST_BROKER_SETTINGS: dict[str, str] = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "group.consumer.min.session.timeout.ms": "6000",
    "group.consumer.session.timeout.ms": "10000",
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.heartbeat.interval.ms": "1000",
    "offsets.topic.num.partitions": "4",
    "num.partitions": "3",
    "auto.create.topics.enable": "false",
    "num.network.threads": "2",
    "num.io.threads": "2",
    "log.retention.check.interval.ms": "60000",
}

JVM_OPTS = ["-Xms256m", "-Xmx512m", "-XX:+UseSerialGC"]


@dataclass(frozen=True)
class NodePorts:
    node_id: int
    client: int
    controller: int
    internal: int


@dataclass(frozen=True)
class TlsFiles:
    """PEM files: the CA, and a key+chain bundle per party (Kafka's PEM keystore reads one file)."""

    ca: Path
    broker_bundle: Path
    client_cert: Path
    client_key: Path


def node_properties(
    node: NodePorts,
    nodes: list[NodePorts],
    *,
    data_dir: Path,
    security: Security,
    tls: TlsFiles | None = None,
    client_host: str = "127.0.0.1",
) -> dict[str, str]:
    """The full server.properties of one combined broker+controller node of the given cluster layout. Clients
    connect on `client_host` (the node IP when pods must reach the broker); broker-to-broker and controller
    traffic stays on loopback."""
    replication = "3" if len(nodes) >= 3 else "1"
    min_isr = "2" if len(nodes) >= 3 else "1"
    client_protocol = {
        Security.PLAINTEXT: "PLAINTEXT",
        Security.SASL_SCRAM: "SASL_PLAINTEXT",
        Security.SSL: "SSL",
        Security.SASL_SCRAM_TLS: "SASL_SSL",
    }[security]
    props: dict[str, str] = {
        "process.roles": "broker,controller",
        "node.id": str(node.node_id),
        "controller.listener.names": "CONTROLLER",
        "listeners": (
            f"CLIENT://{client_host}:{node.client},INTERNAL://127.0.0.1:{node.internal},"
            f"CONTROLLER://127.0.0.1:{node.controller}"
        ),
        "advertised.listeners": f"CLIENT://{client_host}:{node.client},INTERNAL://127.0.0.1:{node.internal}",
        "listener.security.protocol.map": (f"CLIENT:{client_protocol},INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT"),
        "inter.broker.listener.name": "INTERNAL",
        "log.dirs": str(data_dir),
        "offsets.topic.replication.factor": replication,
        "transaction.state.log.replication.factor": replication,
        "transaction.state.log.min.isr": min_isr,
        "share.coordinator.state.topic.replication.factor": replication,
        "share.coordinator.state.topic.min.isr": min_isr,
        "default.replication.factor": replication,
        **TEST_BROKER_SETTINGS,
    }
    if len(nodes) == 1:
        props["controller.quorum.bootstrap.servers"] = f"127.0.0.1:{node.controller}"
    else:
        props["controller.quorum.voters"] = ",".join(f"{n.node_id}@127.0.0.1:{n.controller}" for n in nodes)
    if security.sasl:
        props.update(
            {
                "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
                "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                # INTERNAL and CONTROLLER are loopback PLAINTEXT listeners: their principal is ANONYMOUS
                # and the node cannot start unless it is a super user. Clients only get the SASL listener.
                "super.users": f"User:ANONYMOUS;User:{ADMIN_USER}",
                "allow.everyone.if.no.acl.found": "false",
                # the server side of SCRAM still needs a (credential-less) JAAS login module per mechanism
                **{
                    f"listener.name.client.{mech.lower()}.sasl.jaas.config": (
                        "org.apache.kafka.common.security.scram.ScramLoginModule required;"
                    )
                    for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512")
                },
            }
        )
    if security.tls:
        if tls is None:
            raise ValueError(f"{security.value} security needs TLS files")
        props.update(
            {
                "listener.name.client.ssl.keystore.type": "PEM",
                "listener.name.client.ssl.keystore.location": str(tls.broker_bundle),
                "listener.name.client.ssl.truststore.type": "PEM",
                "listener.name.client.ssl.truststore.location": str(tls.ca),
                # mutual TLS authenticates the client in `ssl` mode; SASL does in `sasl-scram-tls`
                "listener.name.client.ssl.client.auth": "required" if security is Security.SSL else "none",
            }
        )
    return props


def render_properties(props: dict[str, str]) -> str:
    """Java properties text; values here never contain characters that need escaping."""
    return "".join(f"{key}={value}\n" for key, value in sorted(props.items()))


def scram_format_args(passwords: dict[str, str]) -> list[str]:
    """`--add-scram` arguments for StorageTool: every user with both SCRAM mechanisms."""
    args: list[str] = []
    for user, password in sorted(passwords.items()):
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            args += ["--add-scram", f"{mechanism}=[name={user},password={password}]"]
    return args
