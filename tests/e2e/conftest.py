"""Fixtures of the e2e suites: Kafka where pods reach it (the node IP), the CRDs, an events topic, and vigil as
users install it: one `helm install` of charts/vigil per module, its operator in a pod from the vigil-operator
image. Namespaces enforce the `restricted` Pod Security Standard."""

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes.client.exceptions import ApiException

from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.kafka.config import Security
from vigil_dev.testing import clients
from vigil_dev.testing.chart import Tools
from vigil_dev.testing.e2e import CG
from vigil_dev.testing.fixtures import kafka_cluster
from vigil_dev.testing.kube_fixtures import Kube, fresh_namespace, install_crd
from vigil_dev.testing.release import RunningOperator, install_operator
from vigil_dev.testing.waiting import wait_for


@pytest.fixture(scope="session")
def kafka(kube: Kube, artifacts_dir: Path) -> Iterator[KafkaCluster]:
    """One KRaft node whose client listener is on the node IP: the pods are its clients (and the host too)."""
    yield from kafka_cluster(artifacts_dir, "kafka", 1, Security.PLAINTEXT, client_host=kube.cluster.network.node_ip)


@pytest.fixture(scope="session")
def tools(kube: Kube, artifacts_dir: Path) -> Tools:
    return Tools.from_binaries(kube.cluster.binaries, kube.kubeconfig, artifacts_dir / "helm-home")


@pytest.fixture
def namespace(kube: Kube) -> Iterator[str]:
    """A namespace of its own for each test, enforcing `restricted`; deleted afterwards."""
    yield from fresh_namespace(kube, restricted=True)


@pytest.fixture(scope="module")
def events_topic(kafka: KafkaCluster) -> str:
    return clients.create_topic(kafka.connection(), clients.unique("vigil-events"), partitions=3)


@pytest.fixture(scope="module")
def crds(kube: Kube) -> None:
    install_crd(kube)


@pytest.fixture(scope="module")
def operator(
    kube: Kube, tools: Tools, crds: None, events_topic: str, request: pytest.FixtureRequest
) -> Iterator[RunningOperator]:
    """vigil installed by Helm for one test module (release and namespace `vigil-<module>`), uninstalled after; a
    module's `OPERATOR_VALUES` (chart values) are merged over the test defaults."""
    module = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_").replace("_", "-")
    release = f"vigil-{module}"[:40]
    kube.create_namespace(release)
    values = getattr(request.module, "OPERATOR_VALUES", None)
    running = install_operator(kube, tools, release, namespace=release, events_topic=events_topic, values=values)
    try:
        yield running
    finally:
        finalize_groups(kube)  # the module's deleted groups, while its operator still runs
        running.stop()
        with contextlib.suppress(ApiException):
            kube.core.delete_namespace(release)


def finalize_groups(kube: Kube) -> None:
    """Every ConsumerGroup being deleted (or in a namespace being deleted) gone before the operator goes: vigil puts
    no finalizer on them, so this is the apiserver's own deletion (a namespace's takes a moment)."""

    def leaving() -> list[str]:
        going = {n.metadata.name for n in kube.core.list_namespace().items if n.metadata.deletion_timestamp}
        items = kube.custom.list_cluster_custom_object(*CG)["items"]
        return [f"{i['metadata']['namespace']}/{i['metadata']['name']}" for i in items
                if i["metadata"].get("deletionTimestamp") or i["metadata"]["namespace"] in going]  # fmt: skip

    wait_for(leaving, lambda left: not left, timeout=120, what="the deleted ConsumerGroups finalized")
