"""`vigil dev up|down|status`: the whole local stack as one unit with one env file.

The env file (`<state>/env`, shell syntax) carries everything a test or a user needs: the `VIGIL_KAFKA_*`
connection the sidecar itself reads, the broker log directory, the broker jars for Java clients.
"""

import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from vigil_dev.errors import DevError
from vigil_dev.kafka import cluster as kafka_cluster
from vigil_dev.kafka.config import Security


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
    progress: Callable[[str], None] = print,
) -> Path:
    """Start the stack and write its env file; returns the env file's path."""
    state_dir.mkdir(parents=True, exist_ok=True)
    kafka = kafka_cluster.create(state_dir, brokers=brokers, security=security, progress=progress)
    values = {
        "VIGIL_STATE_DIR": str(state_dir),
        **kafka.connection().to_env(),
        "VIGIL_DEV_KAFKA_VERSION": kafka.version,
        "VIGIL_DEV_KAFKA_LOG_DIR": str(kafka.log_dir),
        "VIGIL_DEV_KAFKA_LIBS": str(kafka.libs),
    }
    path = env_file(state_dir)
    path.write_text("".join(f"{key}={shlex.quote(value)}\n" for key, value in values.items()))
    return path


def status(state_dir: Path) -> list[PartStatus]:
    """Every part the stack at `state_dir` started, and whether it still runs."""
    kafka = kafka_cluster.KafkaCluster.load(state_dir)
    if kafka is None:
        return []
    parts = []
    for node in kafka.nodes:
        pid = kafka.process(node.node_id).pid()
        detail = f"pid {pid}, 127.0.0.1:{node.client}" if pid else f"down (log: {kafka.server_log(node.node_id)})"
        parts.append(PartStatus(f"kafka-{node.node_id}", pid is not None, detail))
    return parts


def down(state_dir: Path) -> list[str]:
    """Stop what `up` started at `state_dir` (by pid); logs and data stay for inspection."""
    kafka = kafka_cluster.KafkaCluster.load(state_dir)
    if kafka is None:
        return []
    stopped = kafka.stop()
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
