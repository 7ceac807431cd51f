"""examples/ as a user runs them: `kubectl apply` the ConsumerGroup, then the labelled StatefulSet of
the example app; the operator injects the sidecars, the app consumes as a static group, `kubectl get kcg` says so.

The files are read from disk and changed only where this machine differs from a real cluster (each replacement
asserts that what it replaces is there, so an example that drifts fails here instead of being patched silently):
- the ConsumerGroup (examples/consumergroups/static-statefulset.yaml): `spec.groupId` and
  `spec.kafka.bootstrapServers` → this test's unique group and the local broker;
- the StatefulSet (examples/consumer/statefulset.yaml), app container only: the image → vigil's test image (it
  holds vigil's base install, as the example's Dockerfile builds it), with this checkout's
  examples/consumer/app.py mounted at /app from a ConfigMap instead of built in, and the values of
  KAFKA_BOOTSTRAP_SERVERS, KAFKA_GROUP_ID and KAFKA_TOPICS → the local broker, the group and a fresh topic.

The pods run on the real node, in a namespace that enforces the `restricted` Pod Security Standard.

The ConsumerGroups under examples/consumergroups/ are dry-run against the apiserver by
tests/integration/test_crd_apiserver.py; every other manifest under examples/ is dry-run here.
"""

import functools
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]
from confluent_kafka import KafkaException
from prometheus_client.parser import text_string_to_metric_families

from vigil_core.sidecar_contract import APP_PROBE_PATH
from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import clients
from vigil_dev.testing.broker_log import generations
from vigil_dev.testing.chart import Tools
from vigil_dev.testing.e2e import cond, events_for, status_of, wait_injecting
from vigil_dev.testing.images import TESTAPPS
from vigil_dev.testing.kube_fixtures import Kube, pod_ready
from vigil_dev.testing.release import RunningOperator
from vigil_dev.testing.waiting import wait_for
from vigil_operator.domain.injection import GROUP_ANNOTATION, INJECT_LABEL, SIDECAR_NAME

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.kube]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CONSUMER_GROUP = EXAMPLES / "consumergroups" / "static-statefulset.yaml"
STATEFULSET = EXAMPLES / "consumer" / "statefulset.yaml"
APP = EXAMPLES / "consumer" / "app.py"
DOCKERFILE = EXAMPLES / "consumer" / "Dockerfile"
MANIFESTS = sorted(p for p in EXAMPLES.rglob("*.yaml") if "consumergroups" not in p.relative_to(EXAMPLES).parts)

IMAGE_SCRIPT = "/app/app.py"
SCRIPT_CONFIGMAP = "payments-app"
PARTITIONS = 6
RECORDS = 60
"""Produced twice (before the pods start, then once the group is Stable), spread evenly over the partitions."""
Obj = dict[str, Any]


# -- the documented substitutions -------------------------------------------------------------------------------


def consumer_group(group: str, bootstrap: str) -> Obj:
    cr: Obj = yaml.safe_load(CONSUMER_GROUP.read_text())
    assert {"groupId", "kafka"} <= cr["spec"].keys()
    cr["spec"]["groupId"] = group
    cr["spec"]["kafka"]["bootstrapServers"] = bootstrap
    return cr


def statefulset(group: str, topic: str, bootstrap: str) -> Obj:
    sts: Obj = yaml.safe_load(STATEFULSET.read_text())
    [app] = [c for c in sts["spec"]["template"]["spec"]["containers"] if c["name"] == "app"]
    assert IMAGE_SCRIPT in app["command"], app["command"]
    app["image"], app["imagePullPolicy"] = TESTAPPS, "Never"
    app.setdefault("volumeMounts", []).append({"name": "app", "mountPath": str(Path(IMAGE_SCRIPT).parent)})
    volume = {"name": "app", "configMap": {"name": SCRIPT_CONFIGMAP}}
    sts["spec"]["template"]["spec"].setdefault("volumes", []).append(volume)
    replace = {"KAFKA_BOOTSTRAP_SERVERS": bootstrap, "KAFKA_GROUP_ID": group, "KAFKA_TOPICS": topic}
    env = {e["name"]: e for e in app["env"]}
    assert replace.keys() <= env.keys(), sorted(env)
    for name, value in replace.items():
        env[name]["value"] = value
    return sts


# -- helpers ----------------------------------------------------------------------------------------------------


def kubectl_table(tools: Tools, *args: str) -> list[dict[str, str]]:
    """`kubectl get …` output as rows keyed by the column headers."""
    lines = tools.kubectl("get", *args).check().stdout.splitlines()
    header = lines[0].split()
    return [dict(zip(header, line.split(), strict=True)) for line in lines[1:]]


def sidecar_metrics(pod: Obj) -> dict[str, float]:
    """The injected sidecar's Prometheus samples (unlabelled name, or name{label=value}) from its health port."""
    sidecar = next(c for c in pod["spec"].get("initContainers") or [] if c["name"] == SIDECAR_NAME)
    port = next(p["containerPort"] for p in sidecar["ports"] if p["name"] == "vigil-health")
    with urllib.request.urlopen(f"http://{pod['status']['podIP']}:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    samples: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
            samples[f"{s.name}{{{labels}}}" if labels else s.name] = float(s.value)
    return samples


def broker_view(kafka: KafkaCluster, group: str) -> tuple[str, dict[str, str], int]:
    """(state, client id → instance id, partitions assigned) as the broker describes the group."""
    try:
        desc = clients.describe_group(kafka.connection(), group)
    except KafkaException as exc:  # not there yet: the probe goes on
        return f"unknown: {exc}", {}, 0
    members = {m.client_id: m.group_instance_id or "" for m in desc.members}
    assigned = sum(len(m.assignment.topic_partitions) for m in desc.members)
    return str(desc.state).split(".")[-1].upper(), members, assigned


# -- tests ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: str(p.relative_to(EXAMPLES)))
def test_example_manifest_is_accepted_by_the_apiserver(tools: Tools, crds: None, namespace: str, path: Path) -> None:
    """Exactly as on disk, as `kubectl apply --dry-run=server` sends it (unknown or misplaced fields refused)."""
    done = tools.kubectl("apply", "--dry-run=server", "--validate=strict", "-n", namespace, "-f", str(path)).check()
    assert "(server dry run)" in done.stdout


def test_the_example_files_agree_with_each_other() -> None:
    """The StatefulSet runs what the image holds, for the ConsumerGroup that names it, with the timings it states."""
    cr = yaml.safe_load(CONSUMER_GROUP.read_text())
    sts = yaml.safe_load(STATEFULSET.read_text())
    template = sts["spec"]["template"]
    [app] = template["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in app["env"]}
    client = cr["spec"]["client"]
    assert [env["KAFKA_SESSION_TIMEOUT_MS"], env["KAFKA_HEARTBEAT_INTERVAL_MS"], env["KAFKA_MAX_POLL_INTERVAL_MS"]] == [
        str(client["sessionTimeoutMs"]), str(client["heartbeatIntervalMs"]), str(client["maxPollIntervalMs"])
    ]  # fmt: skip
    assert (env["KAFKA_GROUP_ID"], env["KAFKA_BOOTSTRAP_SERVERS"]) == (
        cr["spec"]["groupId"], cr["spec"]["kafka"]["bootstrapServers"]
    )  # fmt: skip
    assert cr["spec"]["workload"] == {"kind": "StatefulSet", "name": sts["metadata"]["name"]}
    assert template["metadata"]["annotations"][GROUP_ANNOTATION] == cr["metadata"]["name"]
    assert template["metadata"]["labels"][INJECT_LABEL] == "true"
    assert sts["spec"]["updateStrategy"] == {"type": "OnDelete"}  # restart.strategy Coordinated requires it
    copies = [
        line.split() for line in DOCKERFILE.read_text().splitlines() if line.startswith("COPY ") and "app.py" in line
    ]
    assert copies == [["COPY", "examples/consumer/app.py", IMAGE_SCRIPT]]
    assert IMAGE_SCRIPT in app["command"]
    assert STATEFULSET in MANIFESTS  # dry-run above


@dataclass(frozen=True)
class Payments:
    """The example running in `namespace`: its ConsumerGroup and StatefulSet applied with kubectl."""

    namespace: str
    group: str
    topic: str
    tools: Tools

    @property
    def cr(self) -> str:
        return str(yaml.safe_load(CONSUMER_GROUP.read_text())["metadata"]["name"])

    @property
    def pods(self) -> list[str]:
        sts = yaml.safe_load(STATEFULSET.read_text())
        return [f"{sts['metadata']['name']}-{i}" for i in range(sts["spec"]["replicas"])]

    @property
    def instance_ids(self) -> dict[str, str]:
        """client id (= pod name) → instance id, as the webhook wires a static group's app."""
        return {pod: f"{self.namespace}-{pod}" for pod in self.pods}


@pytest.fixture
def payments(kube: Kube, kafka: KafkaCluster, operator: RunningOperator, tools: Tools, namespace: str) -> Payments:
    conn = kafka.connection()
    group, topic = clients.unique("payments"), clients.create_topic(conn, clients.unique("payments"), PARTITIONS)
    clients.produce_spread(conn, topic, [f"before-{i}" for i in range(RECORDS)], PARTITIONS)
    cr = yaml.safe_dump(consumer_group(group, conn.bootstrap_servers))
    tools.kubectl("apply", "-n", namespace, "-f", "-", stdin=cr).check()
    tools.kubectl("create", "configmap", SCRIPT_CONFIGMAP, "-n", namespace, f"--from-file={APP}").check()
    sts = statefulset(group, topic, conn.bootstrap_servers)
    wait_injecting(kube, namespace, sts)  # the webhook knows the ConsumerGroup once it is in the operator's index
    tools.kubectl("apply", "-n", namespace, "-f", "-", stdin=yaml.safe_dump(sts)).check()
    return Payments(namespace, group, topic, tools)


def wait_stable(kube: Kube, kafka: KafkaCluster, p: Payments) -> None:
    """The broker: Stable, one static member per pod (client id = pod name), every partition assigned."""
    logs = kube.container_log(p.namespace, p.pods[0], "app").parent.parent
    wait_for(
        lambda: broker_view(kafka, p.group),
        lambda v: v == ("STABLE", p.instance_ids, PARTITIONS),
        timeout=90,
        what=f"{p.group} Stable on the broker with the pods' instance ids (pod logs: {logs})",
    )


def wait_consumed(kafka: KafkaCluster, p: Payments, produced: int) -> None:
    """Every record produced so far committed: the group's offsets at the end of every partition."""
    wait_for(
        lambda: clients.committed(kafka.connection(), p.group),
        lambda c: c == {partition: produced // PARTITIONS for partition in range(PARTITIONS)},
        timeout=30,
        what=f"{p.group}'s committed offsets at the end of every partition ({produced} records)",
    )


def test_the_example_app_consumes_as_a_static_group_vigil_watches(
    kube: Kube, kafka: KafkaCluster, payments: Payments, operator: RunningOperator
) -> None:
    p = payments
    wait_stable(kube, kafka, p)
    clients.produce_spread(kafka.connection(), p.topic, [f"after-{i}" for i in range(RECORDS)], PARTITIONS)
    wait_consumed(kafka, p, 2 * RECORDS)  # produced before and after the group formed

    # the pods: Ready, the sidecar injected (native), the app's liveness probe on it (action: restart)
    for name in p.pods:
        pod = kube.wait_ready(p.namespace, name, timeout=30)
        sidecars = [c for c in pod["spec"].get("initContainers") or [] if c["name"] == SIDECAR_NAME]
        assert [c.get("restartPolicy") for c in sidecars] == ["Always"]
        [app] = pod["spec"]["containers"]
        assert app["livenessProbe"]["httpGet"]["path"] == APP_PROBE_PATH
        wait_for(  # the helper beacons after each poll, and holds its connection (the proof the bridge needs)
            functools.partial(sidecar_metrics, pod),
            lambda m: (
                m.get("vigil_sidecar_beacons_total{transport=udp}", 0) > 0 and m.get("vigil_sidecar_app_holds") == 1
            ),
            timeout=15,
            what=f"{name}'s sidecar metrics: beacons received, the app's hold open",
        )

    # the ConsumerGroup's status, as the operator wrote it: members mapped to their pods, nothing waiting
    status = wait_for(
        lambda: status_of(kube, p.namespace, p.cr),
        lambda s: s.get("state") == "Stable" and cond(s, "Ready").get("status") == "True",
        timeout=30,
        what=f"ConsumerGroup {p.cr}: Stable, Ready",
    )
    wait_for(
        lambda: operator.reading("vigil_operator_consumergroup_lag", namespace=p.namespace, consumergroup=p.cr),
        lambda lag: lag == 0,
        timeout=30,
        what=f"ConsumerGroup {p.cr}: lag 0 on the operator's /metrics",
    )
    assert {m["pod"]: m["instanceId"] for m in status["members"]} == p.instance_ids
    assert cond(status, "ConfigValid")["status"] == "True", cond(status, "ConfigValid")  # OnDelete, timings fit

    # what the user sees: kubectl get kcg, and the ConsumerGroup's Events
    [row] = kubectl_table(p.tools, "kcg", "-n", p.namespace)
    assert (row["NAME"], row["GROUP"], row["STATE"], row["MEMBERS"], row["STALLED"], row["READY"]) == (
        p.cr, p.group, "Stable", "3", "0", "True"
    )  # fmt: skip
    wait_for(
        lambda: [e["reason"] for e in events_for(kube, p.namespace, p.cr)],
        lambda reasons: "ReadyTrue" in reasons,
        timeout=15,
        what=f"a ReadyTrue Event about ConsumerGroup {p.cr}",
    )


def test_a_deleted_pod_closes_its_app_and_the_replacement_rejoins_without_a_rebalance(
    kube: Kube, kafka: KafkaCluster, payments: Payments
) -> None:
    """SIGTERM → the app finishes its batch, commits and closes; the StatefulSet's new pod has the same name, so
    its app takes the same static member back: the broker stabilizes no new generation."""
    p = payments
    wait_stable(kube, kafka, p)
    victim = p.pods[-1]
    old = {m.group_instance_id: m.member_id for m in clients.describe_group(kafka.connection(), p.group).members}
    before = generations(kafka, p.group)
    uid = kube.wait_ready(p.namespace, victim, timeout=30)["metadata"]["uid"]
    app_log = kube.container_log(p.namespace, victim, "app")

    kube.core.delete_namespaced_pod(victim, p.namespace)
    wait_for(
        app_log.read_text, lambda text: "closed after" in text, timeout=30, what=f"{victim}'s app closing ({app_log})"
    )
    assert "SIGTERM: finishing the batch, then closing" in app_log.read_text()
    kube.wait_pod(p.namespace, victim, lambda pod: pod is not None and pod["metadata"]["uid"] != uid and pod_ready(pod),
                  timeout=60, what="re-created by the StatefulSet, Ready")  # fmt: skip
    instance = p.instance_ids[victim]
    wait_for(
        lambda: {m.group_instance_id: m.member_id for m in clients.describe_group(kafka.connection(), p.group).members},
        lambda now: now.keys() == old.keys() and now[instance] != old[instance],
        timeout=60,
        what=f"{instance} held by the replacement's new member",
    )
    wait_stable(kube, kafka, p)
    clients.produce_spread(kafka.connection(), p.topic, [f"after-{i}" for i in range(RECORDS)], PARTITIONS)
    wait_consumed(kafka, p, 2 * RECORDS)
    assert generations(kafka, p.group) == before, "the restart rebalanced the group"
