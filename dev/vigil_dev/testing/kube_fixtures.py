"""pytest fixtures over the real local Kubernetes (loaded by tests/conftest.py as a plugin).

`kube` is a session-wide cluster: etcd, kube-apiserver, kube-controller-manager and kube-scheduler built from Go
modules, and one real node (kubelet, containerd, runc, CNI bridge, kube-proxy) whose containerd holds vigil's
images (`make images`); `namespace` is a fresh namespace per test. Fixtures never skip: a cluster that cannot
start fails the test with one line naming what is missing. Logs stay under `test-artifacts/<run>/kube/logs/`
(containers: `logs/pods/<ns>_<pod>_<uid>/<container>/<restart>.log`, written by the kubelet).
"""

import contextlib
import json
import shutil
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient

from vigil_dev.errors import DevError
from vigil_dev.kube import controlplane
from vigil_dev.kube.controlplane import KubeCluster
from vigil_dev.kube.node import agent
from vigil_dev.testing import images
from vigil_dev.testing.waiting import wait_for

Obj = dict[str, Any]
FIELD_MANAGER = "vigil-tests"
RESTRICTED = {
    "pod-security.kubernetes.io/enforce": "restricted",
    "pod-security.kubernetes.io/enforce-version": "latest",
}
"""Namespace labels: the apiserver's Pod Security admission refuses any pod short of the `restricted` standard."""
RESTRICTED_CONTAINER: Obj = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}
"""What a container needs to pass `restricted` (the images already run as a non-root user)."""


@dataclass
class Kube:
    """The control plane and clients for it; pods and other objects come back as plain dicts (camelCase)."""

    cluster: KubeCluster
    api: Any  # kubernetes.client.ApiClient (untyped package)

    @property
    def kubeconfig(self) -> Path:
        return self.cluster.kubeconfig

    @property
    def core(self) -> Any:
        return client.CoreV1Api(self.api)

    @property
    def apps(self) -> Any:
        return client.AppsV1Api(self.api)

    @property
    def custom(self) -> Any:
        return client.CustomObjectsApi(self.api)

    @property
    def dynamic(self) -> Any:
        untyped: Any = DynamicClient
        return untyped(self.api, cache_file=str(self.cluster.home / "discovery-cache.json"))

    def apply(self, manifest: Mapping[str, Any] | str, namespace: str | None = None) -> list[Obj]:
        """Server-side apply one object or a YAML stream of them (as `kubectl apply --server-side`)."""
        docs = list(yaml.safe_load_all(manifest)) if isinstance(manifest, str) else [manifest]
        dyn = self.dynamic
        out = []
        for doc in filter(None, docs):
            resource = dyn.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
            ns = (doc.get("metadata", {}).get("namespace") or namespace) if resource.namespaced else None
            applied = dyn.server_side_apply(
                resource, body=dict(doc), namespace=ns, field_manager=FIELD_MANAGER, force_conflicts=True
            )
            out.append(applied.to_dict())
        return out

    def pod(self, namespace: str, name: str) -> Obj | None:
        """The pod as a dict, or None if there is none."""
        return read_json(lambda: self.core.read_namespaced_pod(name, namespace, _preload_content=False))

    def wait_pod(
        self, namespace: str, name: str, accept: Callable[[Obj | None], bool], *, timeout: float, what: str
    ) -> Obj | None:
        """Poll the pod until `accept` takes it (None = absent); fails naming `what` and the last pod seen."""
        return wait_for(
            lambda: self.pod(namespace, name), accept, timeout=timeout, what=f"pod {namespace}/{name}: {what}"
        )

    def create_namespace(self, name: str, *, restricted: bool = True) -> None:
        """A namespace that enforces the `restricted` Pod Security Standard (unless told otherwise)."""
        self.core.create_namespace({"metadata": {"name": name, "labels": RESTRICTED if restricted else {}}})

    def wait_ready(self, namespace: str, name: str, *, timeout: float) -> Obj:
        pod = self.wait_pod(namespace, name, lambda p: p is not None and pod_ready(p), timeout=timeout, what="Ready")
        assert pod is not None
        return pod

    @property
    def node(self) -> str:
        return self.cluster.node_name

    def _runs(self, namespace: str, pod: str, container: str) -> list[Path]:
        """The container's log files, one per run: where the kubelet writes them, else the links the session's
        log keeper made before the pod (and its logs) went."""
        pattern = f"{namespace}_{pod}_*/{container}/*.log"
        live, kept = self.cluster.pod_log_dir(), self.cluster.kept_pod_log_dir()
        found = {p.relative_to(kept): p for p in kept.glob(pattern)}
        found |= {p.relative_to(live): p for p in live.glob(pattern)}
        return sorted(found.values(), key=lambda p: (p.stat().st_mtime, int(p.stem) if p.stem.isdigit() else -1))

    def container_log(self, namespace: str, pod: str, container: str) -> Path:
        """The log file of the container's latest run, as the kubelet writes it (CRI format: each line is
        `<time> <stream> <F|P> <text>`)."""
        runs = self._runs(namespace, pod, container)
        return runs[-1] if runs else self.cluster.pod_log_dir() / f"{namespace}_{pod}_-" / container / "0.log"

    def container_logs(self, namespace: str, pod: str, container: str) -> str:
        """Every run's output of the container, oldest first (what `kubectl logs` shows, and its earlier runs)."""
        return "".join(run.read_text(errors="replace") for run in self._runs(namespace, pod, container))

    def container_pid(self, pod: Mapping[str, Any] | None, name: str) -> int | None:
        """The host pid of the container's running process (containerd's task for its `containerID`)."""
        s = container_status(pod, name)
        if not s or "running" not in s.get("state", {}):
            return None
        return self.cluster.node.task_pid(str(s.get("containerID", "")).removeprefix("containerd://"))


# -- helpers over pod dicts and /proc ----------------------------------------------------------------------


def condition(obj: Mapping[str, Any] | None, kind: str) -> bool:
    """Whether the object's status has condition `kind` True."""
    conditions = (obj or {}).get("status", {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def pod_ready(pod: Mapping[str, Any] | None) -> bool:
    return condition(pod, "Ready")


def container_status(pod: Mapping[str, Any] | None, name: str) -> Obj | None:
    status = (pod or {}).get("status", {})
    for s in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
        if s.get("name") == name:
            return dict(s)
    return None


def process_alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def process_env(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode(errors="replace").partition("=")[::2] for item in raw if item)


def process_argv(pid: int) -> list[str]:
    return [a.decode(errors="replace") for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if a]


def process_uid(pid: int) -> int:
    """The real uid of a host process (a container's, seen from the host)."""
    line = next(x for x in Path(f"/proc/{pid}/status").read_text().splitlines() if x.startswith("Uid:"))
    return int(line.split()[1])


def process_start_ticks(pid: int) -> int:
    """When the process started, in clock ticks since boot (/proc/<pid>/stat field 22): orders two starts."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])


# -- fixtures ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def kube(artifacts_dir: Path) -> Iterator[Kube]:
    """A real cluster with a real node for the whole session, vigil's images in its containerd; it must leave
    nothing on the machine when it stops (a failure names what stayed)."""
    state = artifacts_dir / "kube"
    try:
        archives = images.archives(progress=lambda line: print(line, flush=True))
        cluster = controlplane.create(state, archives=archives, progress=lambda _: None)
    except DevError as exc:
        pytest.fail(f"the real Kubernetes cluster could not start: {exc}", pytrace=False)
    loader: Any = config
    api = loader.new_client_from_config(config_file=str(cluster.kubeconfig))
    keeping = threading.Event()
    keeper = threading.Thread(target=_keep_logs, args=(cluster, keeping), daemon=True, name="pod-log-keeper")
    keeper.start()
    try:
        yield Kube(cluster, api)
    finally:
        api.close()
        keeping.set()
        keeper.join(timeout=10)
        cluster.stop()
        shutil.rmtree(cluster.home / "etcd", ignore_errors=True)
        shutil.rmtree(cluster.node.layout.containerd_dir / "root", ignore_errors=True)  # image layers: large
    if leftovers := cluster.leftovers():
        pytest.fail(f"the real node left behind: {'; '.join(leftovers)}", pytrace=False)


def _keep_logs(cluster: KubeCluster, stop: threading.Event) -> None:
    """Every second, link new pod log files where the kubelet does not delete them (test artifacts)."""
    while True:
        agent.keep_logs(cluster.pod_log_dir(), cluster.kept_pod_log_dir())
        if stop.wait(1.0):
            agent.keep_logs(cluster.pod_log_dir(), cluster.kept_pod_log_dir())
            return


@pytest.fixture
def namespace(kube: Kube) -> Iterator[str]:
    """A namespace of its own for each test (its `default` ServiceAccount exists); deleted afterwards."""
    yield from fresh_namespace(kube, restricted=False)


def fresh_namespace(kube: Kube, *, restricted: bool) -> Iterator[str]:
    """A new namespace (enforcing `restricted` Pod Security if asked), once its `default` ServiceAccount exists;
    deleted when the generator is closed."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    kube.create_namespace(name, restricted=restricted)
    wait_for(
        lambda: exists(lambda: kube.core.read_namespaced_service_account("default", name)),
        timeout=30,
        what=f"the default ServiceAccount of namespace {name}",
    )
    try:
        yield name
    finally:
        with contextlib.suppress(ApiException):
            kube.core.delete_namespace(name)


def install_crd(kube: Kube, crd: Mapping[str, Any] | None = None) -> None:
    """Apply the ConsumerGroup CRD (the shipped one unless given) and wait until it is Established and served."""
    from vigil_operator import crd as shipped  # noqa: PLC0415 - the stack itself does not need the operator

    body = dict(crd or shipped.load())
    kube.apply(body)
    name = str(body["metadata"]["name"])
    ext = client.ApiextensionsV1Api(kube.api)
    wait_for(
        lambda: ext.read_custom_resource_definition(name).to_dict()["status"]["conditions"] or [],
        lambda conditions: any(c["type"] == "Established" and c["status"] == "True" for c in conditions),
        timeout=15,
        what=f"CRD {name} Established",
    )
    spec = body["spec"]
    served = (spec["group"], spec["versions"][0]["name"], spec["names"]["plural"])
    wait_for(lambda: exists(lambda: kube.custom.list_cluster_custom_object(*served)), timeout=30,
             what=f"CRD {name} served")  # fmt: skip


def read_json(read: Callable[[], Any]) -> Obj | None:
    """A raw read (`_preload_content=False`) as the API server's JSON (camelCase); None on 404."""
    try:
        response = read()
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    result: Obj = json.loads(response.data)
    return result


def exists(read: Callable[[], object]) -> bool:
    """Whether the object `read` fetches exists (404: no; other API errors raise)."""
    try:
        read()
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True
