"""Fixtures of the e2e suites: the CRDs, an events topic and one operator per module (a real process)."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import clients
from vigil_dev.testing.kube_fixtures import Kube, install_crd
from vigil_dev.testing.operator import RunningOperator, start_operator


@pytest.fixture(scope="module")
def events_topic(kafka: KafkaCluster) -> str:
    return clients.create_topic(kafka.connection(), clients.unique("vigil-events"), partitions=3)


@pytest.fixture(scope="module")
def crds(kube: Kube) -> None:
    install_crd(kube)
    kube.apply((Path(__file__).parents[2] / "crds" / "kopf-peering.yaml").read_text())


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
