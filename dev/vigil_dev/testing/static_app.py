"""Start and read `vigil_testapps.static_app` (one static member, killable) as a real process for bridge tests."""

import re
import sys
from pathlib import Path

from vigil_core.kafka.security import KafkaConnection
from vigil_core.sidecar_contract import BEACON_ADDR_ENV
from vigil_dev import procs


def start(
    connection: KafkaConnection,
    group: str,
    topic: str,
    instance_id: str,
    state_dir: Path,
    *,
    beacon_addr: str,
    max_poll_interval_ms: int | None = None,
    session_timeout_ms: int | None = None,
    protocol: str = "classic",
) -> procs.Managed:
    """Start the app as a real process (again, after a kill: same log, appended); stop it with the returned
    handle's `kill()` (the crash) or `stop()` (SIGTERM)."""
    marker_key, marker_value = "VIGIL_TEST_STATIC_APP", str(state_dir / f"app-{instance_id}")
    argv = [sys.executable, "-m", "vigil_testapps.static_app", "--group", group, "--topic", topic]
    argv += ["--instance-id", instance_id]
    if max_poll_interval_ms is not None:
        argv += ["--max-poll-interval-ms", str(max_poll_interval_ms)]
    if session_timeout_ms is not None:
        argv += ["--session-timeout-ms", str(session_timeout_ms)]
    if protocol != "classic":
        argv += ["--protocol", protocol]
    env = {"PATH": "/usr/bin:/bin", **connection.to_env(), BEACON_ADDR_ENV: beacon_addr, marker_key: marker_value}
    return procs.start(
        f"app-{instance_id}",
        argv,
        pid_file=state_dir / f"app-{instance_id}.pid",
        marker=f"{marker_key}={marker_value}",
        log_file=log_path(state_dir, instance_id),
        env=env,
    )


def log_path(state_dir: Path, instance_id: str) -> Path:
    return state_dir / f"app-{instance_id}.log"


def holding_members(state_dir: Path, instance_id: str) -> list[str]:
    """The member id of every line the app (all its processes, one log) printed while holding partitions, in order."""
    log = log_path(state_dir, instance_id)
    text = log.read_text() if log.exists() else ""
    return re.findall(r"static_app: member=(\S+) generation=\d+ assigned=[1-9]", text)
