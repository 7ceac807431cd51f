"""The injection webhook through a disruption of the operator: two replicas serve it (one of them leads), and the
chart's PodDisruptionBudget keeps one through evictions. A StatefulSet scaling up while a replica is evicted ends
with every labelled pod either injected or reported by its ConsumerGroup (`SidecarMissing` names it): none is
missed silently, whatever the apiserver met when it called the webhook (failurePolicy Ignore)."""

import threading
import time
import uuid

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import clients
from vigil_dev.testing.e2e import cond, consumer_group, statefulset, status_of, wait_injecting
from vigil_dev.testing.kube_fixtures import Kube
from vigil_dev.testing.release import Replica, RunningOperator
from vigil_dev.testing.waiting import bound, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.kube]

RESYNC_SECONDS = 3
OPERATOR_VALUES = {"operator": {"replicas": 2, "resyncSeconds": RESYNC_SECONDS}}
PODS = 6
STEP_SECONDS = 0.5
"""The StatefulSet grows by one pod this often: the pods' admissions span the eviction and the replica's exit."""


def evict(kube: Kube, replica: Replica) -> None:
    """The Eviction API, as `kubectl drain` calls it: refused (429) when the pod's budget allows no disruption."""
    body = client.V1Eviction(metadata=client.V1ObjectMeta(name=replica.pod, namespace=replica.namespace))
    kube.core.create_namespaced_pod_eviction(replica.pod, replica.namespace, body)


def budget_allows(kube: Kube, operator: RunningOperator) -> int | None:
    budget = client.PolicyV1Api(kube.api).read_namespaced_pod_disruption_budget(
        f"{operator.release}-operator", operator.namespace
    )
    status, generation = budget.status, budget.metadata.generation if budget.metadata else None
    if status is None or generation is None or (status.observed_generation or 0) < generation:
        return None
    return status.disruptions_allowed


def sidecar_of(pod: client.V1Pod) -> bool:
    spec = pod.spec
    assert spec is not None
    return any(c.name == "vigil-sidecar" for c in [*(spec.init_containers or []), *spec.containers])


def test_a_replica_evicted_while_a_statefulset_scales_up_leaves_every_pod_injected_or_reported(
    kube: Kube, kafka: KafkaCluster, operator: RunningOperator
) -> None:
    operator.wait_ready(2)
    wait_for(lambda: budget_allows(kube, operator), lambda n: n == 1, timeout=60,
             what="the operator's PodDisruptionBudget allowing one disruption of its 2 replicas")  # fmt: skip
    namespace, name = f"t-{uuid.uuid4().hex[:10]}", "scale"
    group = clients.unique("scale")
    bootstrap = kafka.connection().bootstrap_servers
    topic = clients.create_topic(kafka.connection(), clients.unique("scale"), partitions=PODS)
    kube.create_namespace(namespace)
    try:
        kube.apply(consumer_group(name, group, bootstrap), namespace)
        workload = statefulset(name, group, topic, bootstrap, replicas=0, parallel=True)
        wait_injecting(kube, namespace, workload)
        kube.apply(workload, namespace)

        def scale_up() -> None:
            for count in range(1, PODS + 1):
                kube.apps.patch_namespaced_stateful_set_scale(name, namespace, {"spec": {"replicas": count}})
                time.sleep(STEP_SECONDS)  # pacing the scale-up, not waiting for an outcome

        scaler = threading.Thread(target=scale_up, daemon=True)
        scaler.start()
        wait_for(lambda: len(kube.core.list_namespaced_pod(namespace).items), lambda n: n >= 2, timeout=30,
                 what="the scale-up under way")  # fmt: skip
        first, second = operator.replicas()
        evict(kube, first)
        with pytest.raises(ApiException) as refused:
            evict(kube, second)  # the budget: the last replica serving the webhook stays
        assert refused.value.status == 429, refused.value
        scaler.join(timeout=PODS * STEP_SECONDS + 30)
        assert not scaler.is_alive()

        pods = wait_for(lambda: kube.core.list_namespaced_pod(namespace).items, lambda p: len(p) == PODS,
                        timeout=60, what=f"{PODS} pods of the StatefulSet")  # fmt: skip
        operator.wait_ready(2)  # the evicted replica's replacement
        without = sorted(p.metadata.name for p in pods if not sidecar_of(p))
        if without:  # admitted while the apiserver met the evicted replica: reported, never silent
            wait_for(
                lambda: cond(status_of(kube, namespace, name), "SidecarMissing"),
                lambda c: c.get("status") == "True" and all(p in c.get("message", "") for p in without),
                timeout=bound(RESYNC_SECONDS * 3 + 30),
                what=f"SidecarMissing naming {without}",
            )
        else:
            status = wait_for(lambda: status_of(kube, namespace, name),
                              lambda s: cond(s, "SidecarMissing").get("status") == "False",
                              timeout=bound(RESYNC_SECONDS * 3 + 30), what="SidecarMissing=False")  # fmt: skip
            assert cond(status, "SidecarMissing")["reason"] == "AllInjected"
        print(f"{PODS - len(without)} of {PODS} pods injected, {len(without)} reported: {without}")
    finally:
        kube.core.delete_namespace(namespace)
