"""pytest fixtures over the real local stack (loaded by tests/conftest.py as a plugin).

Fixtures never skip: a component that cannot start is an error naming what is missing, in CI and
locally alike. Broker logs stay under `test-artifacts/` (the CI artifact directory) after the run.
"""

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from vigil_dev import procs
from vigil_dev.errors import DevError
from vigil_dev.kafka import cluster as kafka_cluster_module
from vigil_dev.kafka import install as kafka_install
from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.kafka.config import Security


@pytest.fixture(scope="session", autouse=True)
def servers_die_with_the_test_run() -> Iterator[None]:
    """Every server this pytest process starts is SIGKILLed by the kernel if pytest dies without teardown."""
    os.environ[procs.DIE_WITH_PARENT_ENV] = str(os.getpid())
    yield
    os.environ.pop(procs.DIE_WITH_PARENT_ENV, None)


@pytest.fixture(scope="session")
def artifacts_dir(request: pytest.FixtureRequest) -> Path:
    """`test-artifacts/<run>`: where every stack of this test run keeps its logs."""
    path = request.config.rootpath / "test-artifacts" / time.strftime("%Y%m%d-%H%M%S")
    path.mkdir(parents=True, exist_ok=True)
    return path


KAFKA_VERSION_ENV = "VIGIL_TEST_KAFKA_VERSION"
"""The broker release every Kafka of a test run is (the pom's when unset): `make test-kafka-39` sets it."""


def run_kafka_version() -> str:
    """The broker release of this test run; an unsupported one fails the run in one line before any test."""
    try:
        return kafka_install.check_version(os.environ.get(KAFKA_VERSION_ENV) or kafka_install.pinned_version())
    except DevError as exc:
        raise pytest.UsageError(f"${KAFKA_VERSION_ENV}: {exc}") from None


def release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "kafka_min(version): needs at least that broker release; deselected, and counted, on an older one"
    )
    config.addinivalue_line(
        "markers", "kafka_before(version): about a broker older than that release; deselected, and counted, on others"
    )


def pytest_report_header() -> str:
    return f"kafka: Apache Kafka {run_kafka_version()} (${KAFKA_VERSION_ENV} chooses another)"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect, never skip silently: the terminal summary names how many tests the run's broker cannot serve."""
    running = release(run_kafka_version())
    keep: list[pytest.Item] = []
    other: list[pytest.Item] = []
    for item in items:
        at_least = item.get_closest_marker("kafka_min")
        before = item.get_closest_marker("kafka_before")
        unfit = (at_least is not None and running < release(str(at_least.args[0]))) or (
            before is not None and running >= release(str(before.args[0]))
        )
        (other if unfit else keep).append(item)
    if other:
        config.hook.pytest_deselected(items=other)
        items[:] = keep
        config.stash[_OTHER] = len(other)


_OTHER = pytest.StashKey[int]()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    if config.stash.get(_OTHER, 0):
        terminalreporter.write_line(
            f"kafka {run_kafka_version()}: {config.stash[_OTHER]} test(s) for other releases deselected"
            " (kafka_min, kafka_before)"
        )


def kafka_cluster(
    artifacts: Path, name: str, brokers: int, security: Security, *, client_host: str = "127.0.0.1"
) -> Iterator[KafkaCluster]:
    """A session's Kafka: fails the test (one line) if it cannot start; stopped and its data removed after."""
    state = artifacts / name
    try:
        cluster = kafka_cluster_module.create(
            state,
            brokers=brokers,
            security=security,
            client_host=client_host,
            version=run_kafka_version(),
            progress=lambda _: None,
        )
    except DevError as exc:
        pytest.fail(f"the real Kafka stack ({name}) could not start: {exc}", pytrace=False)
    try:
        yield cluster
    finally:
        cluster.stop()
        for node in cluster.nodes:  # data is large and rebuilt each run; logs are the artifact
            shutil.rmtree(cluster.node_dir(node.node_id) / "data", ignore_errors=True)


@pytest.fixture(scope="session")
def kafka(artifacts_dir: Path) -> Iterator[KafkaCluster]:
    """One combined KRaft node, PLAINTEXT."""
    yield from kafka_cluster(artifacts_dir, "kafka", 1, Security.PLAINTEXT)


@pytest.fixture(scope="session")
def kafka3(artifacts_dir: Path) -> Iterator[KafkaCluster]:
    """Three combined nodes, offsets topic RF 3: coordinator failover can really happen."""
    yield from kafka_cluster(artifacts_dir, "kafka3", 3, Security.PLAINTEXT)


@pytest.fixture(scope="session")
def kafka_secure(artifacts_dir: Path) -> Iterator[KafkaCluster]:
    """One node with SASL/SCRAM on the client listener and StandardAuthorizer ACLs."""
    yield from kafka_cluster(artifacts_dir, "kafka-secure", 1, Security.SASL_SCRAM)


@pytest.fixture(scope="session")
def kafka_sasl_tls(artifacts_dir: Path) -> Iterator[KafkaCluster]:
    """One node with SASL/SCRAM over TLS (SASL_SSL) on the client listener, StandardAuthorizer ACLs (marker
    `kafka_secure`)."""
    yield from kafka_cluster(artifacts_dir, "kafka-sasl-tls", 1, Security.SASL_SCRAM_TLS)
