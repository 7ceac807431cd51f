"""What the e2e suites share: the manifests they apply (a ConsumerGroup, the consumers' StatefulSet) and how
they read back what the operator wrote (status, conditions, Events). Fixtures are in tests/e2e/conftest.py."""

import copy
import json
import threading
import uuid
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from kubernetes.client.exceptions import ApiException

from vigil_core import events
from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import clients
from vigil_dev.testing.images import TESTAPPS
from vigil_dev.testing.kube_fixtures import RESTRICTED_CONTAINER, Kube
from vigil_dev.testing.waiting import wait_for
from vigil_operator.domain.injection import CLIENT_ID_ENV, INSTANCE_ID_ENV

CG = ("vigil.dev", "v1alpha1", "consumergroups")
APP = ["python", "-m", "vigil_testapps.consumerapp"]


def consumer_group(name: str, group: str, bootstrap: str, *, spec: dict[str, Any] | None = None,
                   **liveness: Any) -> dict[str, Any]:  # fmt: skip
    """A ConsumerGroup for `group` on the StatefulSet `name`; `liveness` fields and other `spec` fields added."""
    return {
        "apiVersion": "vigil.dev/v1alpha1",
        "kind": "ConsumerGroup",
        "metadata": {"name": name},
        "spec": {
            "groupId": group,
            "kafka": {"bootstrapServers": bootstrap},
            "workload": {"kind": "StatefulSet", "name": name},
            "liveness": {"stallTimeoutSeconds": 6, "action": "alert", **liveness},
            **(spec or {}),
        },
    }


def statefulset(
    name: str, group: str, topic: str, bootstrap: str, replicas: int = 3, *, env: dict[str, str] | None = None,
    parallel: bool = False,
) -> dict[str, Any]:  # fmt: skip
    """The consumers: `replicas` pods labelled for injection, each running `consumerapp` on `topic`; `env` goes
    to the app container (e.g. KAFKA_SESSION_TIMEOUT_MS); `parallel` starts and deletes pods all at once."""
    app_env = [{"name": "VIGIL_KAFKA_BOOTSTRAP_SERVERS", "value": bootstrap}]
    app_env += [{"name": k, "value": v} for k, v in (env or {}).items()]
    manifest: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {
                    "labels": {"app": name, "vigil.dev/inject": "true"},
                    "annotations": {"vigil.dev/consumer-group": name},
                },
                "spec": {
                    "terminationGracePeriodSeconds": 5,
                    "containers": [
                        {
                            "name": "app",
                            "image": TESTAPPS,
                            "imagePullPolicy": "Never",
                            "command": APP,
                            "args": ["--group", group, "--topic", topic],
                            "env": app_env,
                            "securityContext": RESTRICTED_CONTAINER,
                        }
                    ],
                },
            },
        },
    }
    if parallel:
        manifest["spec"]["podManagementPolicy"] = "Parallel"
    return manifest


def wait_injecting(kube: Kube, namespace: str, workload: dict[str, Any]) -> None:
    """Until the webhook injects a dry-run pod of `workload`: it knows the CR once it is in the operator's index."""
    template = copy.deepcopy(workload["spec"]["template"])
    template["metadata"]["name"] = "probe"

    def dry_run() -> dict[str, Any]:
        try:
            pod: dict[str, Any] = kube.core.create_namespaced_pod(namespace, template, dry_run="All").to_dict()
        except ApiException as exc:  # the webhook's Service has no ready endpoint yet (a failurePolicy Fail refusal)
            if exc.status == 500 and "failed calling webhook" in str(exc.body):
                return {"spec": {}}
            raise
        return pod

    wait_for(
        dry_run,
        lambda pod: any(c["name"] == "vigil-sidecar" for c in (pod["spec"].get("init_containers") or [])),
        timeout=30,
        what="the webhook injecting a dry-run pod",
    )


def status_of(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    obj = kube.custom.get_namespaced_custom_object(*CG[:2], namespace, CG[2], name)
    return dict(obj.get("status") or {})


def cond(status: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in status.get("conditions") or [] if c["type"] == kind), {})


def events_for(kube: Kube, namespace: str, name: str) -> list[dict[str, Any]]:
    """The Events about `name`, oldest first (the API lists them in no particular order)."""
    listed = kube.core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}")
    ordered = sorted(listed.items, key=lambda e: e.first_timestamp or e.event_time or e.metadata.creation_timestamp)
    return [{"reason": e.reason, "type": e.type, "message": e.message} for e in ordered]


def topic_events(kafka: KafkaCluster, topic: str, group: str) -> list[events.Event]:
    """Every vigil event about `group` on the events topic, oldest first per partition (read from the start,
    no group joined)."""
    consumer = Consumer(kafka.connection().confluent_config() | {"group.id": "e2e-reader", "enable.auto.commit": False})
    found: list[events.Event] = []
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        while batch := consumer.consume(500, timeout=2):
            found += [events.parse_event(m.value() or b"") for m in batch
                      if m.error() is None and m.key() == group.encode()]  # fmt: skip
        return found
    finally:
        consumer.close()


class ConsumerSet:
    """A ConsumerGroup and the StatefulSet of real consumers it watches, in a fresh namespace (deleted by `close`):
    `partitions` on a new topic, the consumers' session timeout `session_ms` (heartbeat 1 s), `spec` added to the
    CR's, `env` to the app containers', `on_delete` for `updateStrategy: OnDelete`. `sidecar=False`: the pods are
    started before the ConsumerGroup exists, so the webhook admits them unchanged (no sidecar), and their client id
    and static instance id (the pod's name) are set by the test, as the webhook would."""

    def __init__(
        self, kube: Kube, kafka: KafkaCluster, *, replicas: int, membership: str, session_ms: int,
        partitions: int = 6, spec: dict[str, Any] | None = None, env: dict[str, str] | None = None,
        on_delete: bool = False, sidecar: bool = True,
    ) -> None:  # fmt: skip
        self.kube, self.kafka, self.partitions = kube, kafka, partitions
        self.namespace, self.name = f"t-{uuid.uuid4().hex[:10]}", "orders"
        self.group = clients.unique(f"set-{membership}")
        self.conn = kafka.connection()
        self.topic = clients.create_topic(self.conn, clients.unique("set"), partitions=partitions)
        kube.create_namespace(self.namespace)
        cr_spec = {"membership": membership, "client": {"sessionTimeoutMs": session_ms, "heartbeatIntervalMs": 1000}}
        app_env = {"KAFKA_SESSION_TIMEOUT_MS": str(session_ms), "KAFKA_HEARTBEAT_INTERVAL_MS": "1000", **(env or {})}
        self.workload = statefulset(self.name, self.group, self.topic, self.conn.bootstrap_servers, replicas,
                                    env=app_env, parallel=True)  # fmt: skip
        if on_delete:
            self.workload["spec"]["updateStrategy"] = {"type": "OnDelete"}
        cr = consumer_group(self.name, self.group, self.conn.bootstrap_servers, spec=cr_spec | (spec or {}))
        if sidecar:
            kube.apply(cr, self.namespace)
            wait_injecting(kube, self.namespace, self.workload)
            kube.apply(self.workload, self.namespace)
            return
        pod_name = {"valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
        identity = [CLIENT_ID_ENV] + ([INSTANCE_ID_ENV] if membership == "static" else [])
        self.workload["spec"]["template"]["spec"]["containers"][0]["env"] += [{"name": n, **pod_name} for n in identity]
        kube.apply(self.workload, self.namespace)
        for pod in self.pods(replicas):
            started = kube.wait_ready(self.namespace, pod, timeout=60)
            if "vigil-sidecar" in json.dumps(started["spec"]):
                raise AssertionError(f"{pod} got a sidecar although its ConsumerGroup did not exist yet")
        kube.apply(cr, self.namespace)

    def pods(self, replicas: int) -> list[str]:
        return [f"{self.name}-{i}" for i in range(replicas)]

    def mapped(self, replicas: int, *, timeout: float = 120) -> dict[str, dict[str, Any]]:
        """pod → member as the operator's status maps them, once Stable with every pod's member mapped."""
        status = wait_for(
            lambda: status_of(self.kube, self.namespace, self.name),
            lambda s: (
                s.get("state") == "Stable"
                and sorted(m.get("pod") or "" for m in s.get("members") or []) == self.pods(replicas)
            ),
            timeout=timeout,
            what=f"{self.group}: Stable in status with {replicas} members mapped to their pods",
        )
        return {m["pod"]: m for m in status["members"]}

    def settled_without(self, gone: set[str]) -> bool:
        """The broker's view: Stable, none of `gone` (member ids) present, every partition assigned."""
        desc = clients.describe_group(self.conn, self.group)
        if str(desc.state).split(".")[-1].upper() != "STABLE":
            return False
        if gone & {m.member_id for m in desc.members}:
            return False
        return sum(len(m.assignment.topic_partitions) for m in desc.members) == self.partitions

    def status(self) -> dict[str, Any]:
        return status_of(self.kube, self.namespace, self.name)

    def close(self) -> None:
        self.kube.core.delete_namespace(self.namespace)


class Producing:
    """Records keep arriving on every partition of a ConsumerSet's topic (one round per `interval`), so a member
    that stops consuming has records waiting."""

    def __init__(self, s: ConsumerSet, *, interval: float = 0.5) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(s, interval), daemon=True)
        self._thread.start()

    def _run(self, s: ConsumerSet, interval: float) -> None:
        n = 0
        while not self._stop.wait(interval):
            n += 1
            clients.produce_spread(s.conn, s.topic, [f"r{n}-{p}" for p in range(s.partitions)], s.partitions)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
