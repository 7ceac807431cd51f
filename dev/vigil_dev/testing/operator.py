"""Run `vigil operator` as a real process against the real apiserver, for e2e tests and the benchmark."""

import json
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from vigil_dev import ports, procs
from vigil_dev.testing.waiting import wait_for


@dataclass(frozen=True)
class RunningOperator:
    process: procs.Managed
    name: str
    log: Path
    liveness_port: int
    webhook_port: int
    metrics_port: int

    def alive(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.liveness_port}/healthz", timeout=2) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def probe(self) -> dict[str, object]:
        """The liveness endpoint's JSON (kopf's probe results: `resyncs`, `kafka_requests`); {} when down."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.liveness_port}/healthz", timeout=2) as response:
                result: dict[str, object] = json.loads(response.read())
                return result
        except (urllib.error.URLError, OSError, ValueError):
            return {}

    def count(self, probe_id: str) -> int:
        """One of the operator's counting probes (`resyncs`, `kafka_requests`, `departures_removed`), 0 when down."""
        value = self.probe().get(probe_id, 0)
        return value if isinstance(value, int) else 0

    def metric(self, name: str, **labels: str) -> float:
        """One sample of the operator's Prometheus `/metrics` (a counter's `_total`), 0 when absent or down."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=2) as response:
                text = response.read().decode()
        except (urllib.error.URLError, OSError):
            return 0.0
        return sample(text, name, **labels)

    def resyncs(self) -> int:
        """Its resyncs so far, live from /metrics (the liveness probe's `resyncs` is kopf's answer cached for 10 s:
        a count read there may predate what happened since)."""
        return int(self.metric("vigil_operator_resyncs_total"))

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self) -> None:
        self.process.stop(grace=10)


def sample(text: str, name: str, **labels: str) -> float:
    """One sample of a Prometheus text exposition (the first with `name` and these labels), 0 when absent."""
    found = reading(text, name, **labels)
    return 0.0 if found is None else found


def reading(text: str, name: str, **labels: str) -> float | None:
    """`sample`, None when absent (a gauge that is 0 and one that is not there are not the same)."""
    for family in text_string_to_metric_families(text):
        for found in family.samples:
            if found.name == name and all(found.labels.get(k) == v for k, v in labels.items()):
                return float(found.value)
    return None


def start_operator(
    kubeconfig: Path,
    state_dir: Path,
    *,
    name: str = "operator",
    events_topic: str = "",
    resync_seconds: float = 3,
    standalone: bool = True,
    webhook: bool = True,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> RunningOperator:
    """Start an operator (managed webhook on a free loopback port) and wait until kopf's liveness answers.
    `env`: more of the process environment (e.g. what the downward API sets in a pod)."""
    liveness, webhook_port, metrics_port = ports.free_ports(3)
    marker_key, marker_value = "VIGIL_TEST_OPERATOR", str(state_dir / name)
    argv = [
        sys.executable, "-m", "vigil_operator", "--state-dir", str(state_dir / name),
        "--resync-seconds", str(resync_seconds), "--events-topic", events_topic,
        "--liveness", f"http://127.0.0.1:{liveness}/healthz", "--namespace", "vigil-system",
        "--metrics-bind", "127.0.0.1", "--metrics-port", str(metrics_port),
    ]  # fmt: skip
    if standalone:
        argv.append("--standalone")
    if webhook:
        argv += ["--webhook-managed", "--webhook-bind", "127.0.0.1", "--webhook-port", str(webhook_port)]
    else:
        argv.append("--no-webhook")
    log = state_dir / f"{name}.log"
    process = procs.start(
        name,
        [*argv, *args],
        pid_file=state_dir / f"{name}.pid",
        marker=f"{marker_key}={marker_value}",
        log_file=log,
        env={"PATH": "/usr/bin:/bin", "KUBECONFIG": str(kubeconfig), **(env or {}), marker_key: marker_value},
    )
    running = RunningOperator(process, name, log, liveness, webhook_port, metrics_port)
    wait_for(running.alive, lambda up: up, timeout=60, what=f"{name} liveness endpoint (log: {log})", interval=0.2)
    return running
