"""vigil installed as users install it: `helm install` of charts/vigil into the test cluster, the operator running
in pods from the vigil-operator image on the real node, its webhook called by the apiserver through its Service.

`install_operator` returns a `RunningOperator` whose replicas are read through their pods: kopf's liveness JSON
and Prometheus `/metrics` on the pod IP (the host reaches the pod network through the pod bridge), the container
logs the kubelet writes, and a SIGKILL of the container's process for a crash the kubelet then restarts.
"""

import contextlib
import json
import os
import signal
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes.client.exceptions import ApiException

from vigil_core.version import VERSION
from vigil_dev.testing import operator
from vigil_dev.testing.chart import CHART, Tools
from vigil_dev.testing.kube_fixtures import Kube, container_status, pod_ready
from vigil_dev.testing.waiting import wait_for

LIVENESS_PORT = 8080
METRICS_PORT = 8081


@dataclass(frozen=True)
class Replica:
    """One operator pod (by name: a Deployment's replacement pod is another Replica)."""

    kube: Kube
    namespace: str
    pod: str

    @property
    def name(self) -> str:
        return self.pod

    def _ip(self) -> str | None:
        pod = self.kube.pod(self.namespace, self.pod) or {}
        ip = pod.get("status", {}).get("podIP")
        return str(ip) if ip else None

    def _get(self, port: int, path: str) -> bytes | None:
        ip = self._ip()
        if ip is None:
            return None
        try:
            with urllib.request.urlopen(f"http://{ip}:{port}{path}", timeout=2) as response:
                return bytes(response.read())
        except (urllib.error.URLError, OSError):
            return None

    def alive(self) -> bool:
        return self._get(LIVENESS_PORT, "/healthz") is not None

    def probe(self) -> dict[str, object]:
        """kopf's liveness JSON (its counting probes: `resyncs`, `kafka_requests`, ...); {} when down."""
        body = self._get(LIVENESS_PORT, "/healthz")
        try:
            result: dict[str, object] = json.loads(body or b"{}")
        except ValueError:
            return {}
        return result

    def count(self, probe_id: str) -> int:
        value = self.probe().get(probe_id, 0)
        return value if isinstance(value, int) else 0

    def resyncs(self) -> int:
        """Its resyncs so far, live from /metrics (the liveness probe's `resyncs` is kopf's answer cached for 10 s:
        a count read there may predate what happened since)."""
        return int(self.metric("vigil_operator_resyncs_total"))

    def metric(self, name: str, **labels: str) -> float:
        """One sample of the replica's Prometheus `/metrics`, 0 when absent or down."""
        return operator.sample((self._get(METRICS_PORT, "/metrics") or b"").decode(), name, **labels)

    def reading(self, name: str, **labels: str) -> float | None:
        """`metric`, None when absent or down."""
        return operator.reading((self._get(METRICS_PORT, "/metrics") or b"").decode(), name, **labels)

    def log_text(self) -> str:
        """Everything the operator container printed, across its restarts."""
        return self.kube.container_logs(self.namespace, self.pod, "operator")

    def kill(self) -> int:
        """SIGKILL the operator's process (a crash, not a deletion: the kubelet restarts the container)."""
        pid = self.kube.container_pid(self.kube.pod(self.namespace, self.pod), "operator")
        if pid is None:
            raise AssertionError(f"operator pod {self.namespace}/{self.pod} runs no operator process to kill")
        os.kill(pid, signal.SIGKILL)
        return pid

    def restarts(self) -> int:
        return int((container_status(self.kube.pod(self.namespace, self.pod), "operator") or {}).get("restartCount", 0))

    def stop(self) -> None:
        """Delete the pod (SIGTERM: it releases the leader Lease on the way out) and wait until it is gone."""
        with contextlib.suppress(ApiException):
            self.kube.core.delete_namespaced_pod(self.pod, self.namespace)
        self.kube.wait_pod(self.namespace, self.pod, lambda p: p is None, timeout=90, what="gone")


@dataclass(frozen=True)
class RunningOperator:
    """A Helm release of vigil: its operator replicas and the tools that installed it."""

    kube: Kube
    tools: Tools
    release: str
    namespace: str

    @property
    def name(self) -> str:
        return self.release

    @property
    def log(self) -> str:
        """Where to look (for messages): the release's pod logs."""
        return f"kubectl logs -n {self.namespace} -l app.kubernetes.io/instance={self.release}"

    def replicas(self) -> list[Replica]:
        """The operator pods of the release that are not being deleted, oldest first."""
        selector = f"app.kubernetes.io/instance={self.release},app.kubernetes.io/component=operator"
        pods = self.kube.core.list_namespaced_pod(self.namespace, label_selector=selector).items
        live = [p for p in pods if p.metadata.deletion_timestamp is None]
        live.sort(key=lambda p: p.metadata.creation_timestamp)
        return [Replica(self.kube, self.namespace, p.metadata.name) for p in live]

    def replica(self) -> Replica:
        """The one replica of a single-replica release."""
        replicas = self.replicas()
        if len(replicas) != 1:
            raise AssertionError(f"release {self.release}: {len(replicas)} operator pods, expected 1")
        return replicas[0]

    # single-replica conveniences, as the tests read them
    def alive(self) -> bool:
        return any(r.alive() for r in self.replicas())

    def probe(self) -> dict[str, object]:
        return self.replica().probe()

    def count(self, probe_id: str) -> int:
        return self.replica().count(probe_id)

    def resyncs(self) -> int:
        return self.replica().resyncs()

    def metric(self, name: str, **labels: str) -> float:
        return self.replica().metric(name, **labels)

    def reading(self, name: str, **labels: str) -> float | None:
        return self.replica().reading(name, **labels)

    def log_text(self) -> str:
        return "".join(r.log_text() for r in self.replicas())

    def wait_ready(self, replicas: int = 1, *, timeout: float = 120) -> list[Replica]:
        """Until `replicas` operator pods are Ready and answer on their liveness port."""
        return wait_for(
            self.replicas,
            lambda found: (
                len(found) == replicas
                and all(pod_ready(self.kube.pod(self.namespace, r.pod)) and r.alive() for r in found)
            ),
            timeout=timeout,
            what=f"release {self.release}: {replicas} operator pod(s) Ready and alive ({self.log})",
        )

    def scale(self, replicas: int) -> None:
        """The operator Deployment's replicas (as `kubectl scale`), waiting until that many pods run."""
        self.kube.apps.patch_namespaced_deployment_scale(
            f"{self.release}-operator", self.namespace, {"spec": {"replicas": replicas}}
        )
        wait_for(lambda: len(self.replicas()), lambda n: n == replicas, timeout=120,
                 what=f"release {self.release}: {replicas} operator pod(s)")  # fmt: skip

    def start_replica(self, pod: str, *, lease: str) -> Replica:
        """A replica named `pod` electing its leader by the Lease `lease` (in the release namespace): a bare pod from
        the release's Deployment template, never restarted, so a killed replica stays gone."""
        deployment = self.kube.apps.read_namespaced_deployment(f"{self.release}-operator", self.namespace)
        spec: dict[str, Any] = self.kube.api.sanitize_for_serialization(deployment.spec.template.spec)
        [container] = spec["containers"]
        if not any(a.startswith("--leader-lease=") for a in container["args"]):
            raise AssertionError(f"release {self.release}: its operator elects no leader ({container['args']})")
        container["args"] = [f"--leader-lease={lease}" if a.startswith("--leader-lease=") else a
                             for a in container["args"]]  # fmt: skip
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": pod, "labels": {"vigil.test/replica-of": self.release}},
            "spec": {**spec, "restartPolicy": "Never"},
        }
        self.kube.core.create_namespaced_pod(self.namespace, body)
        replica = Replica(self.kube, self.namespace, pod)
        wait_for(replica.alive, timeout=120, what=f"operator replica {pod} alive ({self.log})")
        return replica

    def stop(self) -> None:
        """helm uninstall, waiting until its objects (and pods) are gone."""
        self.tools.helm("uninstall", self.release, "--namespace", self.namespace, "--wait", "--timeout", "120s",
                        timeout=180)  # fmt: skip


def install_operator(
    kube: Kube,
    tools: Tools,
    release: str,
    *,
    namespace: str = "vigil-system",
    events_topic: str = "",
    resync_seconds: float = 3,
    replicas: int = 1,
    values: Mapping[str, Any] | None = None,
    timeout: float = 180,
) -> RunningOperator:
    """`helm install <release> charts/vigil` with the images the node holds (pull policy Never), then wait until
    the operator pods are Ready. `values` are merged over the test defaults (one level deep)."""
    kube.cluster.node.require_images([f"vigil-operator:{VERSION}", f"vigil-sidecar:{VERSION}"])
    defaults: dict[str, Any] = {
        "operator": {
            "image": {"pullPolicy": "Never"},
            "resyncSeconds": int(resync_seconds),
            "eventsTopic": events_topic,
            "replicas": replicas,
        },
    }
    for key, value in (values or {}).items():
        defaults[key] = {**defaults.get(key, {}), **value} if isinstance(value, dict) else value
    replicas = int(defaults["operator"]["replicas"])
    path = tools.values_file(release, defaults)
    began = time.monotonic()
    tools.helm(
        "install", release, str(CHART), "--namespace", namespace, "--create-namespace", "-f", str(path),
        "--wait", "--timeout", f"{int(timeout)}s", timeout=timeout + 30,
    ).check()  # fmt: skip
    running = RunningOperator(kube, tools, release, namespace)
    running.wait_ready(replicas, timeout=max(10.0, timeout - (time.monotonic() - began)))
    return running
