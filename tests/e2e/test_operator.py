"""The operator end to end: installed by Helm, in a pod on the real node; real consumers in pods with injected
sidecars, in namespaces enforcing the `restricted` Pod Security Standard; real Kafka. One StatefulSet of three
consumers serves most assertions (status, injection, stall, restarts)."""

import functools
import json
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from vigil_core import events
from vigil_core.budget import ledger
from vigil_core.version import VERSION
from vigil_dev.kafka import cluster as kafka_cluster
from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import clients, streams_app
from vigil_dev.testing.e2e import (
    CG,
    cond,
    consumer_group,
    events_for,
    statefulset,
    status_of,
    topic_events,
    wait_injecting,
)
from vigil_dev.testing.images import IMAGE_UID, TESTAPPS
from vigil_dev.testing.kube_fixtures import (
    RESTRICTED_CONTAINER,
    Kube,
    condition,
    exists,
    process_alive,
    process_argv,
    process_uid,
)
from vigil_dev.testing.release import RunningOperator
from vigil_dev.testing.sharer import Sharer
from vigil_dev.testing.silent_broker import silent_broker
from vigil_dev.testing.waiting import bound, let_time_pass, wait_for
from vigil_operator import brokers

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.kube]

RESYNC_SECONDS = 3
RESYNCED = "vigil_operator_consumergroup_last_resync_timestamp_seconds"
"""When the operator last resynced a ConsumerGroup (its /metrics, per group)."""
"""The e2e release's --resync-seconds (`release.install_operator`'s default): each group's timer."""
CONNECT_TIMEOUT = 10
"""The operator's Kafka request timeout: how long a connect to a broker that never answers waits."""


# -- helpers and fixtures --------------------------------------------------------------------------------------


def sidecars(pod: dict[str, Any]) -> list[str]:
    spec = pod["spec"]
    return [
        c["name"] for c in [*(spec.get("initContainers") or []), *spec["containers"]] if c["name"] == "vigil-sidecar"
    ]


def latest_snapshot(kafka: KafkaCluster, topic: str, group: str) -> events.GroupSnapshot | None:
    """The newest group-snapshot event for `group` on the events topic."""
    snapshots = [e for e in topic_events(kafka, topic, group) if isinstance(e, events.GroupSnapshot)]
    return max(snapshots, key=lambda e: e.time, default=None)


def post(pod: dict[str, Any], path: str) -> None:
    url = f"http://{pod['status']['podIP']}:8080{path}"
    with urllib.request.urlopen(urllib.request.Request(url, method="POST"), timeout=5):
        pass


@pytest.fixture(scope="module")
def live_group(kube: Kube, kafka: KafkaCluster, operator: RunningOperator) -> Iterator[tuple[str, str, str]]:
    """A namespace with a ConsumerGroup and its 3-pod StatefulSet, consuming; yields (namespace, name, group)."""
    namespace, name = f"t-{uuid.uuid4().hex[:10]}", "orders"
    group = clients.unique("orders")
    bootstrap = kafka.connection().bootstrap_servers
    topic = clients.create_topic(kafka.connection(), clients.unique("orders"), partitions=6)
    kube.create_namespace(namespace)
    kube.apply(consumer_group(name, group, bootstrap), namespace)
    wait_injecting(kube, namespace, statefulset(name, group, topic, bootstrap))
    kube.apply(statefulset(name, group, topic, bootstrap), namespace)
    clients.produce_spread(kafka.connection(), topic, [f"m{i}" for i in range(60)], 6)
    try:
        yield namespace, name, group
    finally:
        kube.core.delete_namespace(namespace)


def table_row(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    """The ConsumerGroup's columns as `kubectl get kcg -o wide` shows them (the Table API), by column name."""
    response = kube.custom.get_namespaced_custom_object(
        *CG[:2], namespace, CG[2], name, _headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"},
        _preload_content=False,
    )  # fmt: skip
    table = json.loads(response.data)
    return dict(zip([c["name"] for c in table["columnDefinitions"]], table["rows"][0]["cells"], strict=True))


def quiet_resyncs(kube: Kube, operator: RunningOperator, namespace: str, name: str) -> Callable[[], int]:
    """A counter of the ConsumerGroup's resyncs (their times on the operator's /metrics) since its resourceVersion
    last changed: it grows only while resyncs write nothing."""
    seen: dict[str, Any] = {"version": None, "resyncs": set()}

    def count() -> int:
        cr = kube.custom.get_namespaced_custom_object(*CG[:2], namespace, CG[2], name)
        version = cr["metadata"]["resourceVersion"]
        resynced = operator.reading(RESYNCED, namespace=namespace, consumergroup=name)
        if version != seen["version"]:
            seen.update(version=version, resyncs=set())
        elif resynced is not None:
            seen["resyncs"].add(resynced)
        return len(seen["resyncs"])

    return count


# -- tests -----------------------------------------------------------------------------------------------------


def test_a_live_group_is_described_in_status_with_pods_mapped(
    kube: Kube, kafka: KafkaCluster, live_group, events_topic: str, operator: RunningOperator
) -> None:
    namespace, name, group = live_group
    wait_for(lambda: clients.stable_members(kafka.connection(), group), lambda n: n == 3, timeout=90, what="3 members")
    stable_at = time.monotonic()
    status = wait_for(
        lambda: status_of(kube, namespace, name),
        lambda s: (
            s.get("state") == "Stable"
            and s.get("memberCount") == 3
            and cond(s, "Ready").get("status") == "True"
            and sorted(m.get("pod") or "" for m in s.get("members") or []) == [f"{name}-{i}" for i in range(3)]
        ),
        timeout=30,
        what="status Stable, 3 members mapped to the 3 pods, Ready",
    )
    assert time.monotonic() - stable_at <= 10, "Ready more than 10 s after the broker said Stable"
    assert status["clusterId"] == kafka.cluster_id
    assert status["protocol"] == "classic"
    assert {m["clientId"] for m in status["members"]} == {f"{name}-{i}" for i in range(3)}  # KAFKA_CLIENT_ID injected
    assert cond(status, "ConfigValid")["status"] == "True"

    # a group snapshot per resync on the events topic, with the members mapped to their pods
    snapshot = wait_for(
        lambda: latest_snapshot(kafka, events_topic, group),
        lambda e: e is not None and len(e.payload.members) == 3,
        timeout=30,
        what=f"a group-snapshot event for {group} with 3 members",
    )
    assert snapshot is not None
    assert sorted(m.pod or "" for m in snapshot.payload.members) == [f"{name}-{i}" for i in range(3)]
    assert (snapshot.source, snapshot.cluster, snapshot.payload.state) == ("operator", kafka.cluster_id, "Stable")

    # the eviction budget is provisioned for the sidecars: the Lease, and a Role limited to it by name
    lease = ledger.lease_name(group)
    assert kube.dynamic.resources.get(api_version="coordination.k8s.io/v1", kind="Lease").get(
        name=lease, namespace=namespace
    )
    role = kube.dynamic.resources.get(api_version="rbac.authorization.k8s.io/v1", kind="Role").get(
        name=f"vigil-budget-{name}", namespace=namespace
    )
    assert [(r.resourceNames, sorted(r.verbs)) for r in role.rules] == [([lease], ["get", "update"])]
    binding = kube.dynamic.resources.get(api_version="rbac.authorization.k8s.io/v1", kind="RoleBinding").get(
        name=f"vigil-budget-{name}", namespace=namespace
    )
    assert [(b.kind, b.name) for b in binding.subjects] == [("ServiceAccount", "default")]

    # printer columns through the Table API, as `kubectl get kcg` shows them
    row = table_row(kube, namespace, name)
    assert (row["Group"], row["State"], row["Members"], row["Stalled"], row["Ready"]) == (group, "Stable", 3, 0, "True")

    # its readings on the operator's /metrics, labelled by the ConsumerGroup and the Kafka group (never a member)
    labels = {"namespace": namespace, "consumergroup": name, "group": group}
    assert operator.metric("vigil_operator_consumergroup_members", **labels) == 3
    assert operator.metric("vigil_operator_consumergroup_state", **labels, state="Stable") == 1
    assert operator.reading("vigil_operator_consumergroup_lag", **labels) is not None

    # nothing new in the group: its resyncs go on (the time of each on /metrics) and write nothing (resourceVersion)
    quiet = quiet_resyncs(kube, operator, namespace, name)
    assert wait_for(quiet, lambda n: n >= 3, timeout=bound(6 * RESYNC_SECONDS),
                    what=f"3 resyncs of the Stable {name} in a row without a status write")  # fmt: skip


def test_injected_pods_run_exactly_one_sidecar_as_a_container_under_restricted_pod_security(
    kube: Kube, live_group
) -> None:
    namespace, name, _ = live_group
    for i in range(3):
        pod = kube.wait_ready(namespace, f"{name}-{i}", timeout=60)
        assert sidecars(pod) == ["vigil-sidecar"]
        assert pod["metadata"]["annotations"]["vigil.dev/injected"]
        assert kube.core.read_namespace(namespace).metadata.labels["pod-security.kubernetes.io/enforce"] == "restricted"
        pid = kube.container_pid(pod, "vigil-sidecar")
        assert pid is not None
        assert process_alive(pid)
        assert "sidecar" in process_argv(pid)
        assert process_uid(pid) == IMAGE_UID
        sidecar = next(c for c in pod["spec"]["initContainers"] if c["name"] == "vigil-sidecar")
        assert sidecar["image"] == f"vigil-sidecar:{VERSION}"  # the chart's sidecar image, imported on the node
    # re-creating a pod (the StatefulSet makes it again from the same template) does not double the sidecar
    old = kube.pod(namespace, f"{name}-0")
    assert old is not None
    kube.core.delete_namespaced_pod(f"{name}-0", namespace)
    new = kube.wait_pod(
        namespace,
        f"{name}-0",
        lambda p: p is not None and p["metadata"]["uid"] != old["metadata"]["uid"] and condition(p, "Ready"),
        timeout=60,
        what="re-created and Ready",
    )
    assert new is not None
    assert sidecars(new) == ["vigil-sidecar"]


def test_unlabelled_pods_are_untouched_and_an_apps_own_probe_is_kept(kube: Kube, live_group) -> None:
    namespace, name, _ = live_group
    plain = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "plain", "annotations": {"vigil.dev/consumer-group": name}},
        "spec": {"containers": [{"name": "app", "image": TESTAPPS, "securityContext": RESTRICTED_CONTAINER}]},
    }
    created = kube.core.create_namespaced_pod(namespace, plain, dry_run="All").to_dict()
    assert [c["name"] for c in created["spec"]["containers"]] == ["app"]
    assert not created["spec"].get("init_containers")
    assert "vigil.dev/injected" not in (created["metadata"].get("annotations") or {})
    # action restart would add a liveness probe on the sidecar; an app that has one keeps it (and is warned)
    kube.apply(consumer_group("restarting", clients.unique("restarting"), "127.0.0.1:9", action="restart"), namespace)
    probe = {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 7}
    own = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "own-probe",
            "labels": {"vigil.dev/inject": "true"},
            "annotations": {"vigil.dev/consumer-group": "restarting"},
        },
        "spec": {
            "containers": [
                {"name": "app", "image": TESTAPPS, "livenessProbe": probe, "securityContext": RESTRICTED_CONTAINER}
            ]
        },
    }

    def injected() -> dict[str, Any]:
        return kube.core.create_namespaced_pod(namespace, own, dry_run="All").to_dict()

    pod = wait_for(injected, lambda p: bool(p["spec"].get("init_containers")), timeout=30, what="own-probe injected")
    app = pod["spec"]["containers"][0]
    assert app["liveness_probe"]["http_get"]["path"] == "/healthz"
    assert app["liveness_probe"]["period_seconds"] == 7
    sidecar_env = {e["name"]: e.get("value") for e in pod["spec"]["init_containers"][0]["env"]}
    assert sidecar_env["VIGIL_ACTION"] == "alert"


def test_helm_test_proves_the_apiserver_reaches_the_injection_webhook(kube: Kube, operator: RunningOperator) -> None:
    """`helm test`: `vigil check-injection` dry-runs a labelled pod in `default`; the webhook's answer (its warning
    for a ConsumerGroup that does not exist there) is the proof, through the Service, TLS and caBundle."""
    done = operator.tools.helm("test", operator.release, "--namespace", operator.namespace, "--timeout", "120s")
    assert done.returncode == 0, done.output
    pod = f"{operator.release}-check-injection"  # the release's name has "vigil" in it: it is the full name
    said = kube.container_logs(operator.namespace, pod, "check-injection")
    assert "vigil check-injection: the injection webhook answered: vigil: ConsumerGroup" in said


WITHOUT_SIDECAR = "vigil_operator_consumergroup_pods_without_sidecar"


def test_a_labelled_pod_that_slipped_through_without_the_sidecar_is_reported(
    kube: Kube, kafka: KafkaCluster, live_group, operator: RunningOperator
) -> None:
    """A consumer pod created before its ConsumerGroup (the webhook admits it unchanged, with a warning) runs without
    the sidecar: once the ConsumerGroup exists, its status names the pod, an Event warns of it, and the metric counts
    it; deleted, the pod no longer counts."""
    namespace, _, _ = live_group
    name, group = "late", clients.unique("late")
    bootstrap = kafka.connection().bootstrap_servers
    topic = clients.create_topic(kafka.connection(), clients.unique("late"), partitions=1)
    template = statefulset(name, group, topic, bootstrap)["spec"]["template"]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {**template["metadata"], "name": "late-0"},
           "spec": template["spec"]}  # fmt: skip
    created = kube.core.create_namespaced_pod(namespace, pod).to_dict()
    assert sidecars(created) == []  # no ConsumerGroup "late" yet: admitted without the sidecar
    kube.apply(consumer_group(name, group, bootstrap), namespace)
    status = wait_for(
        lambda: status_of(kube, namespace, name),
        lambda s: cond(s, "SidecarMissing").get("status") == "True",
        timeout=bound(RESYNC_SECONDS + 10),
        what="SidecarMissing=True on the late ConsumerGroup",
    )
    assert cond(status, "SidecarMissing")["reason"] == "PodsWithoutSidecar"
    assert "late-0" in cond(status, "SidecarMissing")["message"]
    wait_for(
        lambda: events_for(kube, namespace, name),
        lambda evs: any(e["reason"] == "SidecarMissingTrue" and "late-0" in e["message"] for e in evs),
        timeout=bound(10),
        what="a SidecarMissingTrue Event on the ConsumerGroup",
    )
    wait_for(
        lambda: operator.reading(WITHOUT_SIDECAR, namespace=namespace, consumergroup=name),
        lambda v: v == 1,
        timeout=bound(RESYNC_SECONDS + 5),
        what=f"{WITHOUT_SIDECAR} = 1",
    )
    kube.core.delete_namespaced_pod("late-0", namespace, grace_period_seconds=0)
    status = wait_for(
        lambda: status_of(kube, namespace, name),
        lambda s: cond(s, "SidecarMissing").get("status") == "False",
        timeout=bound(RESYNC_SECONDS + 15),
        what="SidecarMissing=False once the pod is gone",
    )
    assert cond(status, "SidecarMissing")["reason"] == "AllInjected"
    wait_for(  # the metric is set right after the status is written
        lambda: operator.reading(WITHOUT_SIDECAR, namespace=namespace, consumergroup=name),
        lambda v: v == 0,
        timeout=bound(RESYNC_SECONDS + 5),
        what=f"{WITHOUT_SIDECAR} = 0",
    )


def test_a_stalled_member_shows_in_status_and_as_an_event(kube: Kube, kafka: KafkaCluster, live_group) -> None:
    namespace, name, group = live_group
    # stall only a Stable group (a member stalled mid-rebalance holds the group in PreparingRebalance, where
    # the watchdog rightly never acts): the broker says Stable, and the status has caught up with it
    wait_for(lambda: clients.stable_members(kafka.connection(), group), lambda n: n == 3, timeout=90, what="3 members")
    wait_for(
        lambda: status_of(kube, namespace, name),
        lambda s: (
            sorted(m.get("pod") or "" for m in s.get("members") or []) == [f"{name}-{i}" for i in range(3)]
            and cond(s, "Ready").get("status") == "True"
        ),
        timeout=30,
        what="status Ready with the 3 pods",
    )
    victim = kube.wait_ready(namespace, f"{name}-1", timeout=60)
    post(victim, "/stall")
    try:
        status = wait_for(
            lambda: status_of(kube, namespace, name),
            lambda s: s.get("stalledCount") == 1 and cond(s, "Stalled").get("status") == "True",
            timeout=6 + 5 + 3 + 15,  # stall timeout + check + resync + slack
            what="status Stalled with one member",
        )
        assert [m["pod"] for m in status["stalledMembers"]] == [f"{name}-1"]
        assert cond(status, "Ready")["reason"] == "MembersStalled"
        wait_for(
            lambda: events_for(kube, namespace, name),
            lambda evs: any(e["reason"] == "MemberStalled" and f"{name}-1" in e["message"] for e in evs),
            timeout=15,
            what="a MemberStalled Event on the ConsumerGroup",
        )
    finally:
        post(victim, "/resume")
    wait_for(
        lambda: status_of(kube, namespace, name),
        lambda s: s.get("stalledCount") == 0 and cond(s, "Stalled").get("status") == "False",
        timeout=20,
        what="the stall cleared once the app polls again (stall-ended)",
    )


def test_a_second_cr_for_the_same_group_is_refused(kube: Kube, kafka: KafkaCluster, live_group) -> None:
    namespace, name, group = live_group
    bootstrap = kafka.connection().bootstrap_servers
    same = consumer_group("orders-again", group, bootstrap)
    with pytest.raises(ApiException) as refused:  # same group, same bootstrap: the validating webhook says no
        kube.custom.create_namespaced_custom_object(*CG[:2], namespace, CG[2], same)
    assert refused.value.status == 409 or "already observed by ConsumerGroup" in str(refused.value.body)
    # the same cluster through another address (a Service in front of the broker) passes admission, and is
    # refused by cluster id instead
    alias = broker_service(kube, namespace, bootstrap)
    kube.apply(consumer_group("orders-alias", group, alias), namespace)
    status = wait_for(
        lambda: status_of(kube, namespace, "orders-alias"),
        lambda s: cond(s, "Ready").get("reason") == "DuplicateGroup",
        timeout=30,
        what="the alias CR refused as a duplicate",
    )
    assert f"{namespace}/{name}" in cond(status, "Ready")["message"]
    assert cond(status_of(kube, namespace, name), "Ready")["status"] == "True"


def broker_service(kube: Kube, namespace: str, bootstrap: str) -> str:
    """A selector-less Service whose one endpoint is the broker: another address of the same cluster (kube-proxy
    forwards its ClusterIP), as a user's `kafka.<ns>.svc` would be. Returns `<cluster ip>:<port>`."""
    host, port = bootstrap.rsplit(":", 1)
    ports = [{"name": "kafka", "port": int(port), "targetPort": int(port)}]
    kube.apply({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "kafka-alias"}, "spec": {"ports": ports}},
               namespace)  # fmt: skip
    kube.apply(
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {"name": "kafka-alias-1", "labels": {"kubernetes.io/service-name": "kafka-alias"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [host]}],
            "ports": [{"name": "kafka", "port": int(port), "protocol": "TCP"}],
        },
        namespace,
    )
    ip = kube.core.read_namespaced_service("kafka-alias", namespace).spec.cluster_ip
    return f"{ip}:{port}"


def test_the_broker_stopping_and_returning_shows_in_status(
    kube: Kube, operator: RunningOperator, artifacts_dir: Path, namespace: str
) -> None:
    own = kafka_cluster.create(
        artifacts_dir / "kafka-operator-outage", client_host=kube.cluster.network.node_ip, progress=lambda _: None
    )
    try:
        group = clients.unique("outage")
        topic = clients.create_topic(own.connection(), clients.unique("outage"), partitions=2)
        members = clients.start_group(own.connection(), group, [topic], 1)
        kube.apply(consumer_group("outage", group, own.connection().bootstrap_servers), namespace)
        wait_for(
            lambda: cond(status_of(kube, namespace, "outage"), "Ready").get("status"),
            lambda s: s == "True",
            timeout=30,
            what="Ready before the outage",
        )
        own.stop_node(1)
        status = wait_for(
            lambda: status_of(kube, namespace, "outage"),
            lambda s: cond(s, "Ready").get("reason") == "BrokerUnreachable",
            timeout=90,
            what="Ready False BrokerUnreachable",
        )
        assert own.connection().bootstrap_servers in cond(status, "Ready")["message"]
        assert status["state"] == "Unknown"
        own.start_node(1)
        own.wait_healthy()
        wait_for(
            lambda: cond(status_of(kube, namespace, "outage"), "Ready"),
            lambda c: c.get("status") == "True",
            timeout=120,
            what="Ready again once the broker is back",
        )
    finally:
        for member in locals().get("members", []):
            member.close()
        own.stop()


def test_a_missing_secret_and_an_unreachable_broker_are_conditions_not_crashes(
    kube: Kube, operator: RunningOperator, namespace: str
) -> None:
    secretless = consumer_group("secretless", clients.unique("secretless"), "127.0.0.1:9")
    secretless["spec"]["kafka"] |= {
        "securityProtocol": "SASL_PLAINTEXT",
        "sasl": {"mechanism": "SCRAM-SHA-512", "username": "u", "passwordSecretRef": {"name": "nope", "key": "pw"}},
    }
    kube.apply(secretless, namespace)
    kube.apply(consumer_group("nobroker", clients.unique("nobroker"), "127.0.0.1:9"), namespace)
    missing = wait_for(
        lambda: cond(status_of(kube, namespace, "secretless"), "Ready"),
        lambda c: c.get("reason") == "SecretMissing",
        timeout=30,
        what="Ready False SecretMissing",
    )
    assert f"Secret {namespace}/nope" in missing["message"]
    unreachable = wait_for(
        lambda: cond(status_of(kube, namespace, "nobroker"), "Ready"),
        lambda c: c.get("reason") == "BrokerUnreachable",
        timeout=90,
        what="Ready False BrokerUnreachable",
    )
    assert "127.0.0.1:9" in unreachable["message"]
    assert operator.alive()
    assert "Traceback" not in operator.log_text()


def test_an_image_the_chart_does_not_allow_is_refused_naming_the_field_and_never_injected(
    kube: Kube, kafka: KafkaCluster, operator: RunningOperator, namespace: str
) -> None:
    """Write access to a ConsumerGroup is not "run any image": another sidecar image than the release's is refused
    (the e2e release sets no `sidecar.allowedImages`), and the webhook leaves the group's pods alone."""
    bootstrap = kafka.connection().bootstrap_servers
    rogue = consumer_group("rogue", clients.unique("rogue"), bootstrap, spec={"sidecar": {"image": "evil.example/x:1"}})
    kube.apply(rogue, namespace)
    refused = wait_for(
        lambda: cond(status_of(kube, namespace, "rogue"), "ConfigValid"),
        lambda c: c.get("reason") == "NotAllowed",
        timeout=bound(RESYNC_SECONDS + 10),
        what="ConfigValid False NotAllowed",
    )
    assert refused["status"] == "False"
    assert refused["message"].startswith("spec.sidecar.image: 'evil.example/x:1' is not allowed")
    assert cond(status_of(kube, namespace, "rogue"), "Ready")["reason"] == "NotAllowed"
    told = wait_for(
        lambda: [e for e in events_for(kube, namespace, "rogue") if e["reason"] == "ConfigValidFalse"],
        lambda events: len(events) > 0,
        timeout=15,
        what="a ConfigValidFalse Event about ConsumerGroup rogue",
    )
    assert [(e["type"], e["message"]) for e in told] == [("Warning", refused["message"])]
    template = statefulset("rogue", clients.unique("rogue"), "t", bootstrap)["spec"]["template"]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {**template["metadata"], "name": "rogue-0"},
           "spec": template["spec"]}  # fmt: skip
    created = kube.core.create_namespaced_pod(namespace, pod, dry_run="All").to_dict()
    assert sidecars(created) == []
    assert all(c["image"] != "evil.example/x:1" for c in created["spec"]["containers"])


def test_groups_on_a_silent_cluster_are_reported_at_once_and_deleted_without_waiting_for_a_resync(
    kube: Kube, operator: RunningOperator, namespace: str, artifacts_dir: Path
) -> None:
    """Three groups on a cluster whose broker is alive and never answers (its process stopped: connections are
    accepted, requests never answered). A connect waits out the request timeout (10 s), and one worker per cluster
    serves its groups in turn: without the operator's hold on a cluster whose connect just failed, each round would
    take 10 s per group. And kopf stops a timer by a flag, re-checking one still running only after its cancellation
    polling (a minute): a resync waiting for the broker must give way to the flag, so deleting a group takes
    seconds."""
    names = ["silent-a", "silent-b", "silent-c"]
    state_dir = artifacts_dir / clients.unique("kafka-silent")
    with silent_broker(state_dir, kube.cluster.network.node_ip) as silent:
        bootstrap = silent.bootstrap
        started = time.monotonic()
        for name in names:
            kube.apply(consumer_group(name, clients.unique(name), bootstrap), namespace)
        for name in names:
            unreachable = wait_for(
                functools.partial(lambda n: cond(status_of(kube, namespace, n), "Ready"), name),
                lambda c: c.get("reason") == "BrokerUnreachable",
                timeout=60,
                what=f"{name}: Ready False BrokerUnreachable",
            )
            assert bootstrap in unreachable["message"]
        reported = time.monotonic() - started
        assert reported < 25, f"three groups reported unreachable after {reported:.1f} s (one connect timeout: 10 s)"

        # the connect that failed left the cluster on hold; the next one, once the hold is over, is one more
        # connection (the broker answers none of them, so every connect since the freeze is still listed)
        failed = silent.connections()
        assert failed, "the operator never connected to the silent broker"
        wait_for(lambda: silent.connections() - failed, timeout=bound(brokers.DOWN_HOLD_SECONDS + RESYNC_SECONDS),
                 interval=0.1, what="a resync connecting to the silent broker again, after the hold")  # fmt: skip
        connected = time.monotonic()
        # every group's timer fires within its interval of its last resync, which ended at the latest when this
        # connect began (the others' end at once, on hold): each resync waits for the broker now
        let_time_pass(RESYNC_SECONDS + 0.5, since=connected,
                      why="every group's resync timer firing while the connect waits for the broker")  # fmt: skip
        deleting = time.monotonic()
        # a deletion that waited for the connect to time out would take 5 s or more
        assert deleting - connected <= CONNECT_TIMEOUT - 5, "the connect may be over: nothing would wait for it"
        kube.custom.delete_namespaced_custom_object(*CG[:2], namespace, CG[2], "silent-a")
        wait_for(
            lambda: exists(lambda: kube.custom.get_namespaced_custom_object(*CG[:2], namespace, CG[2], "silent-a")),
            lambda there: not there,
            timeout=120,
            what="silent-a deleted",
        )
        took = time.monotonic() - deleting
        assert took < 5, f"deleting took {took:.1f} s"
        # the positive proof that silent-a's resync was waiting for the broker when it was deleted
        assert "resync of " + namespace + "/silent-a stopped before it acted" in operator.log_text()
        assert cond(status_of(kube, namespace, "silent-b"), "Ready").get("reason") == "BrokerUnreachable"
    assert operator.alive()
    assert "Traceback" not in operator.log_text()


@pytest.mark.kafka_min("4.4")  # static membership under the streams protocol (KIP-1071's, in 4.4)
def test_a_streams_group_shows_its_type_members_and_lag(
    kube: Kube, kafka: KafkaCluster, operator: RunningOperator, namespace: str, artifacts_dir: Path
) -> None:
    """A Kafka Streams app on the streams protocol (KIP-1071), static: the operator describes its group by type
    (status, `kubectl get kcg -o wide`) and reads its lag from its commits. Closed, a static streams member leaves
    for now and keeps its task until its session times out (45 s): records produced meanwhile are its lag, read back
    from the operator's /metrics as that exact count."""
    conn = kafka.connection()
    source = clients.create_topic(conn, clients.unique("streams-in"), partitions=2)
    sink = clients.create_topic(conn, clients.unique("streams-out"), partitions=2)
    group, name = clients.unique("g-streams"), "ledger"
    state_dir = artifacts_dir / "streams" / group
    state_dir.mkdir(parents=True)
    app = streams_app.start(
        kafka.libs, conn, application_id=group, input_topic=source, output_topic=sink, name="ledger-0",
        state_dir=state_dir, protocol="streams", instance_id="ledger-0",
    )  # fmt: skip
    labels = {"namespace": namespace, "consumergroup": name, "group": group}
    try:
        app.wait_state("RUNNING", timeout=90)
        kube.apply(consumer_group(name, group, conn.bootstrap_servers), namespace)
        status = wait_for(lambda: status_of(kube, namespace, name),
                          lambda s: s.get("state") == "Stable" and s.get("memberCount") == 1, timeout=90,
                          what=f"{name}'s status: its streams group Stable with one member")  # fmt: skip
        assert status["protocol"] == "streams"
        assert [m.get("instanceId") for m in status["members"]] == ["ledger-0-1"]  # Kafka Streams' thread suffix
        assert [m.get("partitions") for m in status["members"]] == [2]  # both tasks' input partitions
        row = table_row(kube, namespace, name)
        assert (row["Group"], row["Protocol"], row["Members"]) == (group, "streams", 1)

        clients.produce_spread(conn, source, [f"r{i}" for i in range(20)], 2)
        wait_for(lambda: operator.reading("vigil_operator_consumergroup_lag", **labels), lambda lag: lag == 0,
                 timeout=60, what="lag 0 on /metrics: the app processed and committed all 20 records")  # fmt: skip
        app.stop()
        assert app.last("closed") is not None, f"the app did not close (log: {app.log})"
        clients.produce_spread(conn, source, [f"late{i}" for i in range(10)], 2)
        wait_for(lambda: operator.reading("vigil_operator_consumergroup_lag", **labels), lambda lag: lag == 10,
                 timeout=bound(5 * RESYNC_SECONDS, slack=10),
                 what="lag 10 on /metrics: the 10 records produced after the member left for now")  # fmt: skip
        assert operator.metric("vigil_operator_consumergroup_members", **labels) == 1  # kept with its task
    finally:
        app.stop()


@pytest.mark.kafka_min("4.4")  # DescribeShareGroupOffsets v1 (its lag, KIP-1226)
def test_a_share_group_shows_its_type_members_and_lag(
    kube: Kube, kafka: KafkaCluster, operator: RunningOperator, namespace: str
) -> None:
    """A share group (KIP-932, confluent-kafka's ShareConsumer): its type and member in status and on `kubectl get
    kcg -o wide`; its lag is the broker's count of records not yet delivered and acknowledged, read back from the
    operator's /metrics as the exact count produced once its member left."""
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("share-in"), partitions=2)
    group, name = clients.unique("g-share"), "tasks"
    labels = {"namespace": namespace, "consumergroup": name, "group": group}
    member = Sharer(kafka, group, topic)
    try:
        kube.apply(consumer_group(name, group, conn.bootstrap_servers), namespace)
        status = wait_for(
            lambda: status_of(kube, namespace, name),
            lambda s: s.get("state") == "Stable" and [m.get("partitions") for m in s.get("members") or []] == [2],
            timeout=60,
            what=f"{name}'s status: its share group Stable, one member reading both partitions",
        )
        assert status["protocol"] == "share"
        row = table_row(kube, namespace, name)
        assert (row["Group"], row["Protocol"], row["Members"]) == (group, "share", 1)
        # the broker counts a share-partition's lag once records went through it (-1, unknown, before)
        clients.produce_spread(conn, topic, ["first-0", "first-1"], 2)
        wait_for(lambda: operator.reading("vigil_operator_consumergroup_lag", **labels), lambda lag: lag == 0,
                 timeout=60, what="lag 0 on /metrics: the first records delivered and acknowledged")  # fmt: skip
    finally:
        member.close()
    clients.produce_spread(conn, topic, [f"r{i}" for i in range(10)], 2)
    wait_for(lambda: operator.reading("vigil_operator_consumergroup_lag", **labels), lambda lag: lag == 10,
             timeout=bound(5 * RESYNC_SECONDS, slack=10),
             what="lag 10 on /metrics: the 10 records produced after its member left")  # fmt: skip
    assert cond(status_of(kube, namespace, name), "Ready")["status"] == "False"  # Empty: nobody reads them


def test_status_continues_across_an_operator_restart(kube: Kube, operator: RunningOperator, live_group) -> None:
    namespace, name, _ = live_group
    before = wait_for(
        lambda: status_of(kube, namespace, name),
        lambda s: cond(s, "Ready").get("status") == "True",
        timeout=60,
        what="Ready",
    )
    first = operator.replica()
    kube.core.delete_namespaced_pod(first.pod, operator.namespace)  # the Deployment makes a new operator pod
    (again,) = wait_for(
        operator.replicas,
        lambda found: len(found) == 1 and found[0].pod != first.pod and found[0].alive(),
        timeout=120,
        what="the Deployment's replacement operator pod alive",
    )
    wait_for(  # its own /metrics: the group's series exist only where its resync ran
        lambda: again.metric("vigil_operator_consumergroup_members", namespace=namespace, consumergroup=name),
        lambda members: members == 3,
        timeout=30,
        what=f"a resync by the restarted operator {again.pod} (its /metrics: 3 members)",
    )
    after = status_of(kube, namespace, name)
    assert cond(after, "Ready")["lastTransitionTime"] == cond(before, "Ready")["lastTransitionTime"]
