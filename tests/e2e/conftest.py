"""Fixtures of the e2e suites: the CRDs, an events topic and one operator per module (a real process)."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes.client.exceptions import ApiException

from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import clients
from vigil_dev.testing.e2e import CG
from vigil_dev.testing.kube_fixtures import Kube
from vigil_dev.testing.operator import RunningOperator, start_operator
from vigil_dev.testing.waiting import wait_for
from vigil_operator import crd


@pytest.fixture(scope="module")
def events_topic(kafka: KafkaCluster) -> str:
    return clients.create_topic(kafka.connection(), clients.unique("vigil-events"), partitions=3)


@pytest.fixture(scope="module")
def crds(kube: Kube) -> None:
    kube.apply(crd.load())
    kube.apply((Path(__file__).parents[2] / "crds" / "kopf-peering.yaml").read_text())

    def served() -> bool:
        try:
            kube.custom.list_cluster_custom_object(*CG)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    wait_for(served, timeout=30, what="the ConsumerGroup CRD served")


@pytest.fixture(scope="module")
def operator(
    kube: Kube, crds: None, events_topic: str, artifacts_dir: Path, request: pytest.FixtureRequest
) -> Iterator[RunningOperator]:
    """One per test module, its log under test-artifacts/<run>/operator/<module>/."""
    module = request.module.__name__.rsplit(".", 1)[-1]
    running = start_operator(kube.kubeconfig, artifacts_dir / "operator" / module, events_topic=events_topic)
    try:
        yield running
    finally:
        running.stop()
