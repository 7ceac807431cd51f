"""Deleting a ConsumerGroup, its namespace or the CRD completes whether the operator runs, is stopped or is
uninstalled: vigil puts no finalizer on ConsumerGroups (one resync loop per Kafka cluster, no kopf daemon or timer
per object), and takes off the one 0.2.0 put there. helm uninstall keeps the CRD and the ConsumerGroups by design:
that is when a finalizer would hang their deletion for good."""

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from vigil_core.crd import API_GROUP, PLURAL
from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import clients
from vigil_dev.testing.e2e import CG, consumer_group, status_of
from vigil_dev.testing.kube_fixtures import Kube, exists, install_crd
from vigil_dev.testing.release import RunningOperator
from vigil_dev.testing.waiting import bound, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.kube]

CRD_NAME = f"{PLURAL}.{API_GROUP}"
OLD_FINALIZER = "vigil.dev/finalizer"
"""What 0.2.0's per-object kopf daemon made kopf put on every ConsumerGroup."""
GONE_WITHIN = 10.0
"""A ConsumerGroup without finalizer is gone at once; a namespace takes the apiserver's own cleanup."""


@pytest.fixture
def scratch(kube: Kube) -> Iterator[str]:
    """A namespace the test deletes itself (checked gone); removed after the test if it did not."""
    name = f"del-{uuid.uuid4().hex[:8]}"
    kube.create_namespace(name)
    yield name
    if kube.core.list_namespace(field_selector=f"metadata.name={name}").items:
        kube.core.delete_namespace(name)


def cr(kube: Kube, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = kube.custom.get_namespaced_custom_object(*CG[:2], namespace, CG[2], name)
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return found


def delete_cr(kube: Kube, namespace: str, name: str) -> None:
    kube.custom.delete_namespaced_custom_object(*CG[:2], namespace, CG[2], name)
    wait_for(lambda: cr(kube, namespace, name), lambda found: found is None, timeout=bound(GONE_WITHIN),
             what=f"ConsumerGroup {namespace}/{name} deleted")  # fmt: skip


def delete_namespace(kube: Kube, namespace: str) -> None:
    kube.core.delete_namespace(namespace)
    wait_for(lambda: exists(lambda: kube.core.read_namespace(namespace)), lambda there: not there, timeout=120,
             what=f"namespace {namespace} deleted (its ConsumerGroup with it)")  # fmt: skip


def resynced(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    """The ConsumerGroup once the operator wrote its status (it acted on it), without a finalizer."""
    wait_for(lambda: status_of(kube, namespace, name), lambda s: bool(s.get("conditions")), timeout=60,
             what=f"the operator resyncing {namespace}/{name}")  # fmt: skip
    found = cr(kube, namespace, name)
    assert found is not None
    assert not found["metadata"].get("finalizers"), found["metadata"].get("finalizers")
    return found


@pytest.mark.usefixtures("crds")
def test_with_the_operator_running_a_group_and_its_namespace_delete_at_once(
    kube: Kube, kafka: KafkaCluster, operator: RunningOperator, scratch: str
) -> None:
    bootstrap = kafka.connection().bootstrap_servers
    for name in ("alone", "with-namespace"):
        kube.apply(consumer_group(name, clients.unique(name), bootstrap), scratch)
        resynced(kube, scratch, name)
    delete_cr(kube, scratch, "alone")
    delete_namespace(kube, scratch)


@pytest.mark.usefixtures("crds")
def test_a_finalizer_of_0_2_0_is_taken_off_and_with_the_operator_stopped_deletions_complete(
    kube: Kube, kafka: KafkaCluster, operator: RunningOperator, scratch: str
) -> None:
    bootstrap = kafka.connection().bootstrap_servers
    old = consumer_group("from-0-2-0", clients.unique("old"), bootstrap)
    old["metadata"]["finalizers"] = [OLD_FINALIZER]
    kube.apply(old, scratch)
    wait_for(lambda: (cr(kube, scratch, "from-0-2-0") or {}).get("metadata", {}).get("finalizers"),
             lambda finalizers: not finalizers, timeout=60,
             what="the running operator taking 0.2.0's finalizer off")  # fmt: skip

    kube.apply(consumer_group("stopped", clients.unique("stopped"), bootstrap), scratch)
    resynced(kube, scratch, "stopped")
    operator.scale(0)
    try:
        delete_cr(kube, scratch, "stopped")
        delete_namespace(kube, scratch)
    finally:
        operator.scale(1)
        operator.wait_ready(1)


@pytest.mark.usefixtures("crds")
def test_with_the_operator_uninstalled_groups_their_namespace_and_the_crd_delete(
    kube: Kube, kafka: KafkaCluster, operator: RunningOperator, scratch: str
) -> None:
    """Last in the module: it uninstalls the module's release and deletes the CRD (the next module installs both)."""
    bootstrap = kafka.connection().bootstrap_servers
    for name in ("kept", "in-namespace", "with-crd"):
        kube.apply(consumer_group(name, clients.unique(name), bootstrap), scratch)
        resynced(kube, scratch, name)
    operator.stop()  # helm uninstall: the CRD and the ConsumerGroups stay
    assert cr(kube, scratch, "kept") is not None
    delete_cr(kube, scratch, "kept")
    other = f"del-{uuid.uuid4().hex[:8]}"
    kube.create_namespace(other)
    kube.apply(consumer_group("in-namespace", clients.unique("in-namespace"), bootstrap), other)
    delete_namespace(kube, other)

    extensions = client.ApiextensionsV1Api(kube.api)
    extensions.delete_custom_resource_definition(CRD_NAME)  # with the ConsumerGroup "with-crd" still in scratch
    wait_for(lambda: exists(lambda: extensions.read_custom_resource_definition(CRD_NAME)), lambda there: not there,
             timeout=bound(60), what="the ConsumerGroup CRD deleted with its ConsumerGroups")  # fmt: skip
    install_crd(kube)  # for whatever runs next in this session
