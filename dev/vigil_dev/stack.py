"""`vigil dev up|down|status`: the whole local stack as one unit with one env file.

The env file (`<state>/env`, shell syntax) carries everything a test or a user needs: the `VIGIL_KAFKA_*`
connection the sidecar itself reads, the broker log directory, the broker jars for Java clients, and for
Kubernetes the admin `KUBECONFIG`, the real node's name and the tool binaries built for this release.

With Kubernetes, Kafka's client listener is on the node IP (pods reach it there, so does the host), so the node's
network comes up first.
"""

import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from vigil_dev.errors import DevError
from vigil_dev.kafka import cluster as kafka_cluster
from vigil_dev.kafka.config import Security
from vigil_dev.kube import controlplane
from vigil_dev.kube.controlplane import KubeCluster
from vigil_dev.kube.node import host, layout


@dataclass(frozen=True)
class PartStatus:
    name: str
    running: bool
    detail: str


def env_file(state_dir: Path) -> Path:
    return state_dir / "env"


def up(
    state_dir: Path,
    *,
    brokers: int = 1,
    security: Security = Security.PLAINTEXT,
    kafka_version: str | None = None,
    kafka: bool = True,
    kube: bool = True,
    archives: Sequence[Path] = (),
    progress: Callable[[str], None] = print,
) -> Path:
    """Start the stack and write its env file; returns the env file's path. On failure nothing stays up."""
    if not (kafka or kube):
        raise DevError("nothing to start: both Kafka and Kubernetes were left out")
    state_dir.mkdir(parents=True, exist_ok=True)
    values = {"VIGIL_STATE_DIR": str(state_dir)}
    kafka_part: kafka_cluster.KafkaCluster | None = None
    kube_part: KubeCluster | None = None
    client_host = "127.0.0.1"
    try:
        if kube:
            network = controlplane.network_from_env()
            host.preflight(network)
            host.network_up(network)
            client_host = network.node_ip
        if kafka:
            kafka_part = kafka_cluster.create(
                state_dir,
                brokers=brokers,
                security=security,
                client_host=client_host,
                version=kafka_version,
                progress=progress,
            )
            values |= _kafka_env(kafka_part)
        if kube:
            kube_part = controlplane.create(state_dir, archives=archives, progress=progress)
            values |= _kube_env(kube_part)
    except BaseException:  # also ^C: stop what this call started, never a stack that was already running
        if kube_part is not None:
            kube_part.stop_node()
        if kafka_part is not None:
            kafka_part.stop()
        if kube_part is not None:
            kube_part.stop()
        elif kube:
            host.network_down()
        raise
    path = env_file(state_dir)
    path.write_text("".join(f"{key}={shlex.quote(value)}\n" for key, value in values.items()))
    return path


def _kafka_env(cluster: kafka_cluster.KafkaCluster) -> dict[str, str]:
    return {
        **cluster.connection().to_env(),
        "VIGIL_DEV_KAFKA_VERSION": cluster.version,
        "VIGIL_DEV_KAFKA_LOG_DIR": str(cluster.log_dir),
        "VIGIL_DEV_KAFKA_LIBS": str(cluster.libs),
    }


def _kube_env(cluster: KubeCluster) -> dict[str, str]:
    return {
        "KUBECONFIG": str(cluster.kubeconfig),
        "VIGIL_DEV_KUBE_VERSION": cluster.version,
        "VIGIL_DEV_KUBE_SERVER": cluster.server,
        "VIGIL_DEV_KUBE_NODE": cluster.node_name,
        "VIGIL_DEV_NODE_IP": cluster.network.node_ip,
        "VIGIL_DEV_KUBE_PKI_DIR": str(cluster.pki.directory),
        "VIGIL_DEV_KUBE_LOG_DIR": str(cluster.log_dir),
        "VIGIL_DEV_KUBE_POD_LOG_DIR": str(cluster.pod_log_dir()),
        "VIGIL_DEV_KUBECTL": cluster.binaries["kubectl"],
        "VIGIL_DEV_HELM": cluster.binaries["helm"],
        "VIGIL_DEV_KUBECONFORM": cluster.binaries["kubeconform"],
    }


def status(state_dir: Path) -> list[PartStatus]:
    """Every part the stack at `state_dir` started, and whether it still runs."""
    parts = []
    kafka = kafka_cluster.KafkaCluster.load(state_dir)
    if kafka is not None:
        for node in kafka.nodes:
            pid = kafka.process(node.node_id).pid()
            detail = f"pid {pid}, 127.0.0.1:{node.client}" if pid else f"down (log: {kafka.server_log(node.node_id)})"
            parts.append(PartStatus(f"kafka-{node.node_id}", pid is not None, detail))
    kube = KubeCluster.load(state_dir)
    if kube is not None:
        parts += [_kube_part(kube, name) for name in kube.parts()]
    return parts


def _kube_part(kube: KubeCluster, name: str) -> PartStatus:
    pid = kube.process(name).pid()
    where = {
        "etcd": f"http://127.0.0.1:{kube.ports.etcd}",
        "kube-apiserver": f"{kube.server} ({kube.version})",
        "kube-controller-manager": f"https://127.0.0.1:{kube.ports.controller_manager}/healthz",
        "kube-scheduler": f"https://127.0.0.1:{kube.ports.scheduler}/healthz",
        "containerd": str(kube.node.layout.containerd_socket),
        "kubelet": f"node {layout.NODE_NAME} at {kube.network.node_ip}:{kube.ports.kubelet}",
        "kube-proxy": f"services {kube.network.service_cidr}",
    }[name]
    log = kube.log_dir / name
    return PartStatus(name, pid is not None, f"pid {pid}, {where}" if pid else f"down (logs: {log})")


def down(state_dir: Path) -> list[str]:
    """Stop what `up` started at `state_dir` (by pid); logs and data stay for inspection."""
    stopped: list[str] = []
    kube = KubeCluster.load(state_dir)
    if kube is not None:  # pods first, while the brokers they talk to still answer
        stopped += kube.stop_node()
    kafka = kafka_cluster.KafkaCluster.load(state_dir)
    if kafka is not None:
        stopped += kafka.stop()
    if kube is not None:  # then the control plane, and the network Kafka listened on
        stopped += kube.stop()
    env_file(state_dir).unlink(missing_ok=True)
    return stopped


def read_env(state_dir: Path) -> dict[str, str]:
    """Parse the env file `up` wrote."""
    try:
        text = env_file(state_dir).read_text()
    except FileNotFoundError:
        raise DevError(f"no running stack at {state_dir} (run `vigil dev up`)") from None
    values = {}
    for line in text.splitlines():
        key, _, value = line.partition("=")
        values[key] = shlex.split(value)[0] if value else ""
    return values
