"""A running KRaft cluster of combined broker+controller nodes, started and stopped by pid.

Its layout is saved as JSON in the state directory, so `vigil dev status|down` and the test fixtures in other
processes can find and stop exactly what was started.
"""

import base64
import functools
import secrets
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pydantic import TypeAdapter

from vigil_core import codec
from vigil_core.kafka.security import KafkaConnection, Mechanism, Protocol
from vigil_dev import ports, procs
from vigil_dev.errors import DevError
from vigil_dev.kafka import install, tls
from vigil_dev.kafka.config import (
    ADMIN_USER,
    APP_USER,
    JVM_OPTS,
    SCRAM_MECHANISM,
    NodePorts,
    Security,
    TlsFiles,
    node_properties,
    render_properties,
    scram_format_args,
)

#: Heartbeat v4 and LeaveGroup v5 (KIP-800 reasons) are what vigil's control-plane client sends.
REQUIRED_API_VERSIONS = {12: 4, 13: 5}
START_TIMEOUT = 90.0


@dataclass(frozen=True)
class KafkaCluster:
    """A cluster layout on disk under `state_dir/kafka` with node logs under `state_dir/logs`."""

    state_dir: Path
    version: str
    libs: Path
    cluster_id: str
    security: Security
    nodes: tuple[NodePorts, ...]
    passwords: dict[str, str]
    client_host: str = "127.0.0.1"
    """Where clients connect: loopback, or the real node's IP when pods are its clients."""

    # -- layout -----------------------------------------------------------------------------------------
    @property
    def home(self) -> Path:
        return self.state_dir / "kafka"

    @property
    def log_dir(self) -> Path:
        return self.state_dir / "logs"

    def node_dir(self, node_id: int) -> Path:
        return self.home / f"node-{node_id}"

    def node_log_dir(self, node_id: int) -> Path:
        return self.log_dir / f"kafka-{node_id}"

    def server_log(self, node_id: int) -> Path:
        """The broker's own log4j file: the input the rebalance report parses."""
        return self.node_log_dir(node_id) / "server.log"

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{self.client_host}:{n.client}" for n in self.nodes)

    @property
    def tls_files(self) -> TlsFiles | None:
        if not self.security.tls:
            return None
        return tls.write_tls_files(self.home / "tls", hosts=("localhost", "127.0.0.1", self.client_host))

    def connection(self, user: str = ADMIN_USER) -> KafkaConnection:
        """How a client reaches this cluster (SASL as `user`: `admin` is a super user, `app` has no ACLs)."""
        if self.security is Security.PLAINTEXT:
            return KafkaConnection(bootstrap_servers=self.bootstrap)
        if self.security.sasl:
            files = self.tls_files  # SCRAM over TLS: the broker's CA
            return KafkaConnection(
                bootstrap_servers=self.bootstrap,
                security_protocol=Protocol.SASL_SSL if files else Protocol.SASL_PLAINTEXT,
                sasl_mechanism=Mechanism(SCRAM_MECHANISM),
                sasl_username=user,
                sasl_password_file=self.home / "secrets" / user,
                ssl_ca_file=files.ca if files else None,
            )
        files = self.tls_files
        assert files is not None
        return KafkaConnection(
            bootstrap_servers=self.bootstrap,
            security_protocol=Protocol.SSL,
            ssl_ca_file=files.ca,
            ssl_cert_file=files.client_cert,
            ssl_key_file=files.client_key,
        )

    def process(self, node_id: int) -> procs.Managed:
        props = self.node_dir(node_id) / "server.properties"
        return procs.Managed(f"kafka-{node_id}", self.node_dir(node_id) / "pid", str(props))

    # -- persistence ------------------------------------------------------------------------------------
    def save(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        (self.home / "cluster.json").write_text(codec.dumps(_LAYOUT.dump_python(self, mode="json"), indent=2))

    @classmethod
    def load(cls, state_dir: Path) -> "KafkaCluster | None":
        """The layout `save` wrote under `state_dir`, None when there is none; DevError (one line naming the file
        and the field) for a file that is not one."""
        path = state_dir / "kafka" / "cluster.json"
        try:
            text = path.read_text()
        except FileNotFoundError:
            return None
        return codec.decode(_LAYOUT, text, str(path), DevError)

    # -- lifecycle --------------------------------------------------------------------------------------
    def _java(self, node_id: int, main: str, *args: str) -> list[str]:
        return [
            "java", *JVM_OPTS, "-cp", f"{self.libs}/*",
            f"-Dlog4j2.configurationFile={install.LOG4J_CONFIG}",
            f"-Dkafka.logs.dir={self.node_log_dir(node_id)}",
            main, *args,
        ]  # fmt: skip

    def format_storage(self, node: NodePorts) -> None:
        props = self.node_dir(node.node_id) / "server.properties"
        args = ["format", "-t", self.cluster_id, "-c", str(props), "--ignore-formatted"]
        if len(self.nodes) == 1:
            args.append("--standalone")
        if self.security.sasl:
            args += scram_format_args(self.passwords)
        result = subprocess.run(
            self._java(node.node_id, "kafka.tools.StorageTool", *args),
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if result.returncode != 0:
            lines = [line.strip() for line in (result.stderr + result.stdout).splitlines() if line.strip()]
            cause = next((line for line in lines if not line.startswith("at ")), "no output")
            raise DevError(f"kafka: formatting node {node.node_id} storage failed: {cause[:300]}")

    def start_node(self, node_id: int) -> procs.Managed:
        """Start one node (already formatted) without waiting for it."""
        props = self.node_dir(node_id) / "server.properties"
        return procs.start(
            f"kafka-{node_id}",
            self._java(node_id, "kafka.Kafka", str(props)),
            pid_file=self.node_dir(node_id) / "pid",
            marker=str(props),
            log_file=self.node_log_dir(node_id) / "stdout.log",
        )

    def stop_node(self, node_id: int) -> bool:
        return self.process(node_id).stop()

    def kill_node(self, node_id: int) -> None:
        self.process(node_id).kill()

    def running_nodes(self) -> list[int]:
        return [n.node_id for n in self.nodes if self.process(n.node_id).running()]

    def stop(self) -> list[str]:
        """Stop every node this layout started; the logs stay."""
        return [f"kafka-{n.node_id}" for n in self.nodes if self.stop_node(n.node_id)]

    def wait_healthy(self, node_ids: list[int] | None = None, timeout: float = START_TIMEOUT) -> None:
        """Wait until the given nodes (default all) listen, are registered brokers in the metadata, every partition
        has a leader and its whole replica set in sync, and the group API versions we need are spoken. A node
        restarted by a test is ready only then: one merely listening may still be fenced or catching up, and the next
        test's failover would leave the cluster without a quorum or `min.insync.replicas` (a group's coordinator
        unavailable for minutes)."""
        wanted = node_ids if node_ids is not None else [n.node_id for n in self.nodes]
        by_id = {n.node_id: n for n in self.nodes}
        for node_id in wanted:
            process, client_port = self.process(node_id), by_id[node_id].client
            procs.wait_until(
                functools.partial(ports.is_listening, client_port, self.client_host),
                timeout=timeout, what=f"kafka node {node_id} ({self.server_log(node_id)})",
                exited=process.exited, log=self.server_log(node_id),
            )  # fmt: skip
        gap: list[str] = []

        def in_sync() -> bool:
            gap[:] = [self._health_gap(wanted)]
            return not gap[0]

        try:
            procs.wait_until(in_sync, timeout=timeout, what=f"kafka nodes {wanted} registered, every partition in sync")
        except DevError as exc:
            raise DevError(f"{exc} (last: {gap[0] if gap else 'no answer'})") from None
        self._check_api_versions()

    def _health_gap(self, wanted: list[int]) -> str:
        """What keeps the cluster from healthy (empty: nothing): a wanted broker missing from the metadata, or a
        partition without a leader or with a replica out of sync."""
        from confluent_kafka.admin import AdminClient  # noqa: PLC0415 - heavy import kept off `vigil --help`

        admin = AdminClient(self.connection().confluent_config() | {"log_level": 0})
        try:
            metadata = admin.list_topics(timeout=2)
        except Exception as exc:  # noqa: BLE001 - any failure here means "not ready yet"
            return f"no metadata ({exc})"
        missing = sorted(set(wanted) - set(metadata.brokers))
        if missing:
            return f"brokers {missing} not registered"
        lagging = sorted(
            f"{topic}-{number}"
            for topic, described in metadata.topics.items()
            for number, partition in described.partitions.items()
            if partition.leader < 0 or set(partition.isrs) != set(partition.replicas)
        )
        return f"partitions without a leader or out of sync: {', '.join(lagging[:5])}" if lagging else ""

    def _check_api_versions(self) -> None:
        from vigil_core.kafka.wire import GroupWire  # noqa: PLC0415 - heavy import kept off `vigil --help`

        wire = GroupWire(self.connection(), client_id="vigil-dev")
        try:
            versions = wire.api_versions()
        finally:
            wire.close()
        for api_key, needed in REQUIRED_API_VERSIONS.items():
            have = versions.get(api_key, (0, -1))[1]
            if have < needed:
                raise DevError(f"kafka: broker supports API {api_key} up to v{have}, vigil needs v{needed}")


_LAYOUT: Final = TypeAdapter(KafkaCluster)
"""`cluster.json`: the dataclass's fields, in order."""


def create(
    state_dir: Path,
    *,
    brokers: int = 1,
    security: Security = Security.PLAINTEXT,
    client_host: str = "127.0.0.1",
    version: str | None = None,
    progress: Callable[[str], None] = print,
) -> KafkaCluster:
    """Install if needed, lay out, format and start a fresh cluster, and wait until it is healthy. Clients
    connect on `client_host` (an address of this machine: loopback, or the node IP for pods). `version`: one of
    `install.SUPPORTED_VERSIONS`, the pom's by default."""
    if brokers not in (1, 3):
        raise DevError(f"--brokers: 1 or 3 supported, got {brokers}")
    existing = KafkaCluster.load(state_dir)
    if existing is not None and existing.running_nodes():
        raise DevError(f"kafka: a cluster is already running from {state_dir} (run `vigil dev down` first)")
    dist = install.ensure_kafka(version, progress)
    free = ports.free_ports(3 * brokers)
    nodes = tuple(
        NodePorts(node_id=i + 1, client=free[3 * i], controller=free[3 * i + 1], internal=free[3 * i + 2])
        for i in range(brokers)
    )
    cluster = KafkaCluster(
        state_dir=state_dir,
        version=dist.version,
        libs=dist.libs,
        cluster_id=_cluster_id(),
        security=security,
        nodes=nodes,
        passwords={ADMIN_USER: secrets.token_hex(12), APP_USER: secrets.token_hex(12)} if security.sasl else {},
        client_host=client_host,
    )
    _write_layout(cluster)
    progress(f"kafka: starting {brokers} node(s) of Kafka {dist.version} ({security.value}) ...")
    started = time.monotonic()
    for node in nodes:
        cluster.format_storage(node)
    for node in nodes:
        cluster.start_node(node.node_id)
    try:
        cluster.wait_healthy()
    except DevError:
        cluster.stop()
        raise
    progress(f"kafka: up at {cluster.bootstrap} in {time.monotonic() - started:.0f}s; logs in {cluster.log_dir}")
    return cluster


def _cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding, as StorageTool's random-uuid makes
    it — and, like Kafka's own `Uuid.randomUuid`, never one starting with "-" (its argument parser would take
    `-t -x...` for an option: about one start in 64 would fail)."""
    while True:
        candidate = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not candidate.startswith("-"):
            return candidate


def _write_layout(cluster: KafkaCluster) -> None:
    files = cluster.tls_files
    for node in cluster.nodes:
        data = cluster.node_dir(node.node_id) / "data"
        shutil.rmtree(data, ignore_errors=True)  # `up` means a fresh cluster (new id); old logs stay
        data.mkdir(parents=True)
        props = node_properties(
            node, list(cluster.nodes), data_dir=data, security=cluster.security, tls=files,
            client_host=cluster.client_host,
        )  # fmt: skip
        (cluster.node_dir(node.node_id) / "server.properties").write_text(render_properties(props))
    secrets_dir = cluster.home / "secrets"
    for user, password in cluster.passwords.items():
        secrets_dir.mkdir(parents=True, exist_ok=True)
        (secrets_dir / user).write_text(password)
        (secrets_dir / user).chmod(0o600)
    cluster.save()
