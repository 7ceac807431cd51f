"""Run `vigil sidecar` as a real process next to a test or benchmark consumer, and talk to its listeners."""

import json
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vigil_core.kafka.security import KafkaConnection
from vigil_dev import ports, procs
from vigil_dev.testing.waiting import wait_for


@dataclass(frozen=True)
class RunningSidecar:
    process: procs.Managed
    beacon_port: int
    health_port: int
    log: Path
    popen: "subprocess.Popen[bytes]"
    """The process as this test process started it: its exit status."""

    @property
    def beacon_addr(self) -> str:
        return f"127.0.0.1:{self.beacon_port}"

    def get(self, path: str) -> tuple[int, str]:
        """GET a health-listener path; (0, "") when nothing answers."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}{path}", timeout=2) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()
        except OSError:
            return 0, ""

    def metric(self, sample: str) -> float:
        """One sample of /metrics, named as exposed (`name{labels}`); 0 when absent."""
        for line in self.get("/metrics")[1].splitlines():
            name, _, value = line.rpartition(" ")
            if name == sample:
                return float(value)
        return 0.0

    def status(self) -> dict[str, Any]:
        """/v1/status as a dict; {} when the sidecar does not answer."""
        code, body = self.get("/v1/status")
        result: dict[str, Any] = json.loads(body) if code == 200 else {}
        return result

    def stop(self) -> None:
        self.process.stop(grace=5)

    def terminate(self, timeout: float) -> tuple[int, float]:
        """SIGTERM it (by pid) and wait for its exit: (exit status, seconds from the signal to the exit). Fails naming
        the log if it is still running after `timeout` (the test's teardown then kills it)."""
        sent = time.monotonic()
        self.popen.send_signal(signal.SIGTERM)
        try:
            status = self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the sidecar still runs {timeout:.1f}s after SIGTERM (log: {self.log})") from None
        return status, time.monotonic() - sent


def start_sidecar(
    connection: KafkaConnection,
    group: str,
    pod: str,
    state_dir: Path,
    *,
    env: Mapping[str, str] | None = None,
    **settings: str | float,
) -> RunningSidecar:
    """Start a sidecar for `pod` on free loopback ports (`settings`: VIGIL_* names in lower case, e.g.
    stall_timeout_seconds=6; `env`: anything else, e.g. KUBERNETES_SERVICE_HOST) and wait until /livez answers."""
    beacon, health = ports.free_ports(2)
    marker_key, marker_value = "VIGIL_TEST_SIDECAR", str(state_dir / pod)
    full_env = {
        "PATH": "/usr/bin:/bin",
        **(env or {}),
        **connection.to_env(),
        "VIGIL_GROUP_ID": group,
        "VIGIL_POD_NAME": pod,
        "VIGIL_BEACON_PORT": str(beacon),
        "VIGIL_HEALTH_BIND": "127.0.0.1",
        "VIGIL_HEALTH_PORT": str(health),
        **{f"VIGIL_{key.upper()}": str(value) for key, value in settings.items()},
        marker_key: marker_value,
    }
    log = state_dir / f"sidecar-{pod}.log"
    process, popen = procs.spawn(
        f"sidecar-{pod}",
        [sys.executable, "-m", "vigil_sidecar"],
        pid_file=state_dir / f"sidecar-{pod}.pid",
        marker=f"{marker_key}={marker_value}",
        log_file=log,
        env=full_env,
    )
    sidecar = RunningSidecar(process, beacon, health, log, popen)
    wait_for(
        lambda: sidecar.get("/livez")[0],
        lambda status: status == 200,
        timeout=20,
        what=f"sidecar {pod} /livez (log: {log})",
        interval=0.1,
    )
    return sidecar
