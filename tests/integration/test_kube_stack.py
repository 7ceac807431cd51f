"""The local Kubernetes is real: a pinned kube-apiserver with CRDs, CEL and webhooks, controllers and a scheduler
that act, and a real node: pods are containers (containerd + runc) in network namespaces of their own, probed,
restarted and stopped by the kubelet, reaching the apiserver through the `kubernetes` Service."""

import base64
import ipaddress
import json
import re
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from vigil_dev import ports, procs
from vigil_dev.kube import build, certs
from vigil_dev.kube.controlplane import KubeCluster
from vigil_dev.testing.images import IMAGE_UID, TESTAPPS
from vigil_dev.testing.kube_fixtures import (
    Kube,
    condition,
    container_status,
    pod_ready,
    process_alive,
    process_argv,
    process_env,
    process_start_ticks,
    process_uid,
)
from vigil_dev.testing.waiting import bound, wait_for

pytestmark = pytest.mark.kube

APP = ["python", "-m", "vigil_testapps.podapp"]


def app_container(name: str = "app", port: int = 8080, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "image": TESTAPPS,
        "imagePullPolicy": "Never",
        "command": APP,
        "args": ["--port", str(port)],
        "readinessProbe": {"httpGet": {"path": "/readyz", "port": port}, "periodSeconds": 1},
        **extra,
    }


def http(method: str, url: str) -> str:
    with urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=5) as resp:  # noqa: S310
        return str(resp.read().decode())


# -- the apiserver ---------------------------------------------------------------------------------------


def test_version_is_the_pinned_release(kube: Kube) -> None:
    info = client.VersionApi(kube.api).get_code()
    assert info.git_version == build.K8S_VERSION
    assert (info.major, info.minor) == ("1", build.K8S_VERSION.split(".")[1])
    assert info.git_tree_state == "clean"
    # The commit is stamped only when the module proxy names it (its .info omits Origin on some days): the
    # apiserver reports exactly what the build recorded, a full hash or nothing, never "$Format:%H$".
    stamped = build.stamped_version()
    assert info.git_commit == stamped["gitCommit"]
    assert info.git_commit == "" or re.fullmatch(r"[0-9a-f]{40}", info.git_commit)
    assert info.build_date == stamped["buildDate"] != "1970-01-01T00:00:00Z"


@pytest.fixture(scope="module")
def widgets(kube: Kube) -> Iterator[tuple[str, str]]:
    """A namespaced CRD with a status subresource and a CEL rule; yields (group, plural)."""
    group, plural = f"t{uuid.uuid4().hex[:8]}.vigil.test", "widgets"
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": "widget", "kind": "Widget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "properties": {"min": {"type": "integer"}, "max": {"type": "integer"}},
                                    "x-kubernetes-validations": [
                                        {"rule": "self.min <= self.max", "message": "min must not exceed max"}
                                    ],
                                },
                                "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
                            },
                        }
                    },
                }
            ],
        },
    }
    kube.apply(crd)
    ext = client.ApiextensionsV1Api(kube.api)
    wait_for(
        lambda: ext.read_custom_resource_definition(f"{plural}.{group}").to_dict(),
        lambda c: any(x["type"] == "Established" and x["status"] == "True" for x in c["status"]["conditions"] or []),
        timeout=bound(5),
        what="the CRD Established",
    )
    yield group, plural
    ext.delete_custom_resource_definition(f"{plural}.{group}")


def test_custom_object_status_subresource_and_watch(kube: Kube, namespace: str, widgets: tuple[str, str]) -> None:
    group, plural = widgets
    listed = kube.custom.list_namespaced_custom_object(group, "v1", namespace, plural)
    since = listed["metadata"]["resourceVersion"]
    kube.apply(
        {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"min": 1, "max": 3}},
        namespace,
    )
    kube.custom.patch_namespaced_custom_object_status(
        group, "v1", namespace, plural, "w", {"status": {"phase": "Ready"}}
    )
    # The main resource ignores status (that is what the subresource means): this patch must not change it.
    kube.custom.patch_namespaced_custom_object(group, "v1", namespace, plural, "w", {"status": {"phase": "Broken"}})
    assert kube.custom.get_namespaced_custom_object(group, "v1", namespace, plural, "w")["status"] == {"phase": "Ready"}

    seen: list[tuple[str, Any]] = []
    watcher: Any = watch.Watch  # untyped package
    w = watcher()
    for event in w.stream(
        kube.custom.list_namespaced_custom_object,
        group,
        "v1",
        namespace,
        plural,
        resource_version=since,
        timeout_seconds=10,
    ):
        seen.append((event["type"], event["object"].get("status")))
        if event["type"] == "MODIFIED" and (event["object"].get("status") or {}).get("phase") == "Ready":
            w.stop()
    assert seen[0] == ("ADDED", None)
    assert ("MODIFIED", {"phase": "Ready"}) in seen


def test_cel_rule_rejects_an_invalid_object(kube: Kube, namespace: str, widgets: tuple[str, str]) -> None:
    group, plural = widgets
    bad = {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "bad"}, "spec": {"min": 5, "max": 2}}
    with pytest.raises(ApiException) as rejected:
        kube.custom.create_namespaced_custom_object(group, "v1", namespace, plural, bad)
    assert rejected.value.status == 422
    assert "min must not exceed max" in str(rejected.value.body)
    with pytest.raises(ApiException) as absent:
        kube.custom.get_namespaced_custom_object(group, "v1", namespace, plural, "bad")
    assert absent.value.status == 404


# -- pods are containers on the real node -----------------------------------------------------------------------


def statefulset(name: str, replicas: int) -> dict[str, Any]:
    env = [
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "GREETING", "value": "hello $(POD_NAME)"},
    ]
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"terminationGracePeriodSeconds": 5, "containers": [app_container(env=env)]},
            },
        },
    }


def ready_replicas(kube: Kube, namespace: str, name: str, count: int) -> None:
    wait_for(
        lambda: kube.apps.read_namespaced_stateful_set(name, namespace).status.ready_replicas,
        lambda n: n == count,
        timeout=bound(15),
        what=f"StatefulSet {name}: {count} ready replica(s)",
    )


def test_statefulset_pods_run_as_containers_in_network_namespaces_of_their_own(kube: Kube, namespace: str) -> None:
    kube.apply(statefulset("web", 2), namespace)
    ready_replicas(kube, namespace, "web", 2)
    ips = set()
    for name in ("web-0", "web-1"):
        pod = kube.pod(namespace, name)
        assert pod is not None
        assert pod_ready(pod)
        assert pod["spec"]["nodeName"] == kube.node  # placed by the real scheduler
        assert container_status(pod, "app")["containerID"].startswith("containerd://")  # type: ignore[index]
        pid = kube.container_pid(pod, "app")
        assert pid is not None
        assert process_alive(pid)
        container = pod["spec"]["containers"][0]
        assert process_argv(pid)[1:] == [*container["command"][1:], *container["args"]]  # the image's python
        assert process_uid(pid) == IMAGE_UID  # the image's user: no root in a test pod
        assert Path(f"/proc/{pid}/ns/net").readlink() != Path("/proc/self/ns/net").readlink()
        env = process_env(pid)
        ip = pod["status"]["podIP"]
        assert ipaddress.ip_address(ip) in ipaddress.ip_network(kube.cluster.network.pod_cidr)
        assert (env["POD_NAME"], env["POD_IP"], env["NODE"]) == (name, ip, kube.node)
        assert env["GREETING"] == f"hello {name}"
        whoami = json.loads(http("GET", f"http://{ip}:8080/whoami"))  # reached through the pod bridge
        assert whoami["pid"] == 1  # in a pid namespace of its own, where the host's pid is the container's init
        ips.add(ip)
    assert len(ips) == 2


def test_a_pod_reaches_the_apiserver_through_the_kubernetes_service_with_in_cluster_config(
    kube: Kube, namespace: str
) -> None:
    """The ServiceAccount token and CA the kubelet mounts, the Service address it sets: kube-proxy forwards the
    ClusterIP to the apiserver on the node IP."""
    script = (
        "import json, os, ssl, urllib.request\n"
        "sa = '/var/run/secrets/kubernetes.io/serviceaccount/'\n"
        "url = f\"https://{os.environ['KUBERNETES_SERVICE_HOST']}:{os.environ['KUBERNETES_SERVICE_PORT']}/version\"\n"
        "ctx = ssl.create_default_context(cafile=sa + 'ca.crt')\n"
        "req = urllib.request.Request(url, headers={'Authorization': 'Bearer ' + open(sa + 'token').read()})\n"
        "print('version', json.loads(urllib.request.urlopen(req, context=ctx, timeout=10).read())['gitVersion'])\n"
    )
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "incluster"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {"name": "app", "image": TESTAPPS, "imagePullPolicy": "Never", "command": ["python", "-c", script]}
            ],
        },
    }
    kube.apply(pod, namespace)
    done = kube.wait_pod(
        namespace, "incluster", lambda p: (p or {}).get("status", {}).get("phase") in ("Succeeded", "Failed"),
        timeout=bound(15), what="finished",
    )  # fmt: skip
    log = kube.container_log(namespace, "incluster", "app").read_text()
    assert done is not None
    assert done["status"]["phase"] == "Succeeded", log
    assert f"version {build.K8S_VERSION}" in log
    service = kube.core.read_namespaced_service("kubernetes", "default").spec
    assert (service.cluster_ip, [(p.name, p.port) for p in service.ports]) == (kube.cluster.network.service_ip,
                                                                               [("https", 443)])  # fmt: skip


def test_stopping_another_stopped_stack_leaves_the_running_node_alone(
    kube: Kube, namespace: str, tmp_path: Path
) -> None:
    """`vigil dev down` of a stack that is not running (another checkout, a test's state dir) cleans only its own
    traces. It once killed every process naming the node's short link, the running node's kubelet and every pod's
    shim with them: an e2e run died mid-suite when a unit test ran `vigil dev down` on a saved, stopped stack."""
    kube.apply(statefulset("keep", 1), namespace)
    ready_replicas(kube, namespace, "keep", 1)
    pod = kube.pod(namespace, "keep-0")
    assert pod is not None
    app = kube.container_pid(pod, "app")
    kubelet = kube.cluster.process("kubelet").pid()
    assert app is not None
    assert kubelet is not None
    ticks = (process_start_ticks(app), process_start_ticks(kubelet))

    def services_chain() -> int:
        done = subprocess.run(["iptables", "-t", "nat", "-S", "KUBE-SERVICES"], capture_output=True, check=False)
        return done.returncode

    assert services_chain() == 0
    stopped = KubeCluster(tmp_path, kube.cluster.version, kube.cluster.ports, kube.cluster.binaries)
    stopped.save()
    assert stopped.stop() == []
    assert process_alive(app)
    assert process_alive(kubelet)
    assert (process_start_ticks(app), process_start_ticks(kubelet)) == ticks  # the same processes, not restarted
    assert services_chain() == 0  # kube-proxy's rules too: no `kube-proxy --cleanup` on the machine's behalf
    assert kube.cluster.leftovers() != []  # the running node is still there to find


def test_deleting_a_pod_stops_its_container_and_the_statefulset_recreates_it(kube: Kube, namespace: str) -> None:
    kube.apply(statefulset("db", 1), namespace)
    old = kube.wait_ready(namespace, "db-0", timeout=bound(15))
    old_pid = kube.container_pid(old, "app")
    assert old_pid is not None
    assert process_alive(old_pid)
    log = kube.container_log(namespace, "db-0", "app")
    kube.core.delete_namespaced_pod("db-0", namespace)
    said_goodbye = wait_for(
        lambda: log.read_text() if log.exists() else "",
        lambda text: "podapp: SIGTERM, exiting" in text,
        timeout=bound(5),
        what="the old container's SIGTERM line",
    )
    assert said_goodbye
    wait_for(lambda: process_alive(old_pid), lambda alive: not alive, timeout=bound(5), what="the old process gone")
    new = kube.wait_pod(
        namespace,
        "db-0",
        lambda p: p is not None and p["metadata"]["uid"] != old["metadata"]["uid"] and pod_ready(p),
        timeout=bound(15),
        what="recreated and Ready",
    )
    new_pid = kube.container_pid(new, "app")
    assert new_pid is not None
    assert new_pid != old_pid
    assert process_alive(new_pid)


def test_failing_liveness_probe_restarts_the_container(kube: Kube, namespace: str) -> None:
    liveness = {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 1, "failureThreshold": 2}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "live"},
        "spec": {"containers": [app_container(livenessProbe=liveness)]},
    }
    kube.apply(pod, namespace)
    before = kube.wait_ready(namespace, "live", timeout=bound(10))
    first_pid = kube.container_pid(before, "app")
    first_id = (container_status(before, "app") or {}).get("containerID")
    assert first_pid is not None
    http("POST", f"http://{before['status']['podIP']}:8080/fail")
    after = kube.wait_pod(
        namespace,
        "live",
        lambda p: (container_status(p, "app") or {}).get("restartCount", 0) >= 1 and pod_ready(p),
        timeout=bound(2 + 2, slack=10),
        what="restarted after failing liveness and Ready again",
    )
    status = container_status(after, "app")
    assert status is not None
    assert status["lastState"]["terminated"]["containerID"] == first_id
    second_pid = kube.container_pid(after, "app")
    assert second_pid not in (None, first_pid)
    assert not process_alive(first_pid)
    reasons = {e.reason for e in kube.core.list_namespaced_event(namespace).items}
    assert {"Unhealthy", "Killing", "Started"} <= reasons


def test_grace_period_then_sigkill_then_the_deletion_is_finalized(kube: Kube, namespace: str) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "stubborn"},
        "spec": {"terminationGracePeriodSeconds": 3, "containers": [app_container(args=["--ignore-sigterm"])]},
    }
    kube.apply(pod, namespace)
    pid = kube.container_pid(kube.wait_ready(namespace, "stubborn", timeout=bound(10)), "app")
    assert pid is not None
    log = kube.container_log(namespace, "stubborn", "app")
    began = time.monotonic()
    kube.core.delete_namespaced_pod("stubborn", namespace)
    wait_for(log.read_text, lambda text: "podapp: SIGTERM ignored" in text, timeout=bound(3),
             what="SIGTERM delivered and ignored")  # fmt: skip
    wait_for(lambda: process_alive(pid), lambda alive: not alive, timeout=bound(3), what="the process killed")
    assert time.monotonic() - began >= 2.5  # it ignored SIGTERM: only SIGKILL, after the grace period, ended it
    kube.wait_pod(namespace, "stubborn", lambda p: p is None, timeout=bound(5), what="deletion finalized")


def test_native_sidecar_starts_first_and_stops_last(kube: Kube, namespace: str) -> None:
    init = {"name": "init", "image": TESTAPPS, "imagePullPolicy": "Never", "command": ["python", "-c", "print(1)"]}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "sided"},
        "spec": {
            "terminationGracePeriodSeconds": 5,
            "initContainers": [init, {**app_container("side", 9090), "restartPolicy": "Always"}],
            "containers": [app_container("app", 8080)],
        },
    }
    kube.apply(pod, namespace)
    ready = kube.wait_ready(namespace, "sided", timeout=bound(10))
    assert condition(ready, "Initialized")
    init_status = container_status(ready, "init")
    assert init_status is not None
    assert init_status["state"]["terminated"]["exitCode"] == 0
    side_pid, app_pid = kube.container_pid(ready, "side"), kube.container_pid(ready, "app")
    assert side_pid is not None
    assert app_pid is not None
    assert process_start_ticks(side_pid) < process_start_ticks(app_pid)  # the sidecar was started first
    kube.core.delete_namespaced_pod("sided", namespace)
    gone: dict[int, float] = {}
    deadline = time.monotonic() + bound(10)
    while len(gone) < 2 and time.monotonic() < deadline:  # which one ends first: sampled every 5 ms
        for pid in (side_pid, app_pid):
            if pid not in gone and not process_alive(pid):
                gone[pid] = time.monotonic()
        time.sleep(0.005)
    assert set(gone) == {side_pid, app_pid}
    assert gone[app_pid] < gone[side_pid]  # the app got SIGTERM first; the sidecar only after the app ended


# -- admission webhooks --------------------------------------------------------------------------------------


@pytest.fixture
def webhook(kube: Kube, namespace: str, tmp_path: Path) -> Iterator[Path]:
    """A mutating webhook served over TLS by a separate process, for pods of `namespace`; yields its call log."""
    cert, key = certs.issue_serving_cert(kube.cluster.pki.ca(), tmp_path, ["127.0.0.1"])
    (port,) = ports.free_ports(1)
    calls = tmp_path / "calls.jsonl"
    argv = [sys.executable, "-m", "vigil_dev.testing.webhook", "--port", str(port), "--cert", str(cert),
            "--key", str(key), "--env", "INJECTED=by-webhook", "--calls", str(calls)]  # fmt: skip
    server = procs.start("webhook", argv, pid_file=tmp_path / "pid", marker=str(calls), log_file=tmp_path / "log")
    name = f"inject-{namespace}"
    config = client.AdmissionregistrationV1Api(kube.api)
    try:
        procs.wait_until(lambda: ports.is_listening(port), timeout=bound(5), what="webhook", exited=server.exited)
        ca = base64.b64encode(kube.cluster.pki.ca_cert.read_bytes()).decode()
        kube.apply(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "MutatingWebhookConfiguration",
                "metadata": {"name": name},
                "webhooks": [
                    {
                        "name": "inject.vigil.test",
                        "clientConfig": {"url": f"https://127.0.0.1:{port}/mutate", "caBundle": ca},
                        "rules": [
                            {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}
                        ],
                        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                        "failurePolicy": "Fail",
                        "sideEffects": "None",
                        "admissionReviewVersions": ["v1"],
                        "timeoutSeconds": 5,
                    }
                ],
            }
        )
        yield calls
    finally:
        config.delete_mutating_webhook_configuration(name)
        server.stop(grace=5)


def test_mutating_webhook_is_called_over_tls_and_the_pod_runs_mutated(
    kube: Kube, namespace: str, webhook: Path
) -> None:
    probe = {"metadata": {"name": "probe"}, "spec": {"containers": [app_container()]}}

    def dry_run_env() -> list[Any]:
        created = kube.core.create_namespaced_pod(namespace, probe, dry_run="All")
        return [(e.name, e.value) for e in created.spec.containers[0].env or []]

    # The apiserver picks the configuration up asynchronously: wait until a dry-run create is mutated.
    wait_for(dry_run_env, lambda env: ("INJECTED", "by-webhook") in env, timeout=bound(5), what="webhook active")
    kube.apply(
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "hooked"}, "spec": {"containers": [app_container()]}},
        namespace,
    )
    pod = kube.wait_ready(namespace, "hooked", timeout=bound(5))
    assert {"name": "INJECTED", "value": "by-webhook"} in pod["spec"]["containers"][0]["env"]  # the admitted spec
    pid = kube.container_pid(pod, "app")
    assert pid is not None
    assert process_env(pid)["INJECTED"] == "by-webhook"
    calls = [json.loads(line) for line in webhook.read_text().splitlines()]
    real = [c for c in calls if c["name"] == "hooked" and not c["dryRun"]]
    assert len(real) == 1
    assert real[0]["operation"] == "CREATE"
    assert real[0]["namespace"] == namespace
    assert real[0]["tls"]
