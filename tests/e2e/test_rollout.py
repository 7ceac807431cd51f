"""Coordinated restarts of a static group end to end: the operator installed by Helm, a 4-pod static
StatefulSet (`updateStrategy: OnDelete`) of real consumers with injected sidecars, real Kafka.

Each consumer needs 15 s to start and its session timeout is 10 s: a pod restart outlasts the session, so
without vigil every restarted pod's member expires and the group rebalances. With vigil the operator restarts
the pods one at a time and heartbeats for each member while its pod is replaced: generations are counted from the
broker's log, never from vigil.
"""

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator

import pytest

from vigil_core import events
from vigil_core.kafka.group_client import GroupClient
from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import clients
from vigil_dev.testing.broker_log import broker_lines, generations
from vigil_dev.testing.e2e import ConsumerSet, cond, consumer_group, events_for, statefulset, topic_events
from vigil_dev.testing.kube_fixtures import Kube
from vigil_dev.testing.release import RunningOperator
from vigil_dev.testing.waiting import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.kube]

SESSION_MS = 10_000
STARTUP = 15.0
REPLICAS = 4


@pytest.fixture
def make_set(kube: Kube, kafka: KafkaCluster, operator: RunningOperator) -> Iterator[Callable[..., ConsumerSet]]:
    made: list[ConsumerSet] = []

    def make(**options: object) -> ConsumerSet:
        settings: dict[str, object] = {"replicas": REPLICAS, "membership": "static", "session_ms": SESSION_MS,
                                       "env": {"STARTUP_DELAY_SECONDS": str(STARTUP)}} | options  # fmt: skip
        made.append(ConsumerSet(kube, kafka, **settings))  # type: ignore[arg-type]
        return made[-1]

    yield make
    for made_set in made:
        made_set.close()


def new_revision(kube: Kube, s: ConsumerSet) -> None:
    """A template change: a new StatefulSet revision (the pods keep running: OnDelete)."""
    patch = {"spec": {"template": {"metadata": {"annotations": {"vigil.dev/test-revision": str(time.time())}}}}}
    kube.apps.patch_namespaced_stateful_set(s.name, s.namespace, patch)


def test_a_coordinated_rollout_restarts_every_pod_without_a_rebalance(
    make_set: Callable[..., ConsumerSet], kube: Kube, kafka: KafkaCluster
) -> None:
    s = make_set(spec={"restart": {"strategy": "Coordinated", "maxRestartSeconds": 90}}, on_delete=True)
    before = s.mapped(REPLICAS)
    settled = generations(kafka, s.group)
    uids = {p: kube.pod(s.namespace, p)["metadata"]["uid"] for p in s.pods(REPLICAS)}  # type: ignore[index]

    new_revision(kube, s)
    began = time.monotonic()
    # the CI pipeline's wait: `vigil rollout status` (helm upgrade --wait does not wait for OnDelete sets)
    waited = subprocess.run(
        [sys.executable, "-m", "vigil_cli", "rollout", "status", s.name, "-n", s.namespace,
         "--timeout", str(REPLICAS * (STARTUP + 30)), "--kubeconfig", str(kube.kubeconfig)],
        capture_output=True, text=True, timeout=REPLICAS * (STARTUP + 30) + 30, check=False,
    )  # fmt: skip
    took = time.monotonic() - began
    print(waited.stdout, waited.stderr)
    assert waited.returncode == 0, waited.stderr
    lines = waited.stdout.splitlines()
    assert "rolled out orders-" in lines[-1]
    assert any(f"{REPLICAS - 1}/{REPLICAS} restarted" in line for line in lines), lines  # progress, line per change
    done = s.status()
    rollout = done["rollout"]
    print(
        f"rollout of {REPLICAS} pods: {rollout} in {took:.0f}s; generations {settled} -> {generations(kafka, s.group)}"
    )
    assert rollout["phase"] == "Complete", rollout
    assert (rollout["done"], rollout["total"]) == (REPLICAS, REPLICAS)
    # every pod was replaced (a new uid), highest ordinal first, and the members came back in the same generation
    after = s.mapped(REPLICAS)
    for pod in s.pods(REPLICAS):
        assert kube.pod(s.namespace, pod)["metadata"]["uid"] != uids[pod], pod  # type: ignore[index]
        assert after[pod]["instanceId"] == before[pod]["instanceId"]
        assert after[pod]["memberId"] != before[pod]["memberId"]  # the restarted app, under a new member id
    assert generations(kafka, s.group) == settled, "a rebalance during the rollout"
    steps = [e["message"] for e in events_for(kube, s.namespace, s.name) if e["reason"] == "RolloutStep"]
    deleted = [m.split()[1].rstrip(";") for m in steps if m.startswith("deleted ")]
    assert deleted == [f"{s.name}-{i}" for i in reversed(range(REPLICAS))], steps
    assert cond(done, "RestartInProgress")["reason"] == "RolloutComplete"


def test_without_coordination_the_same_restart_rebalances(
    make_set: Callable[..., ConsumerSet], kube: Kube, kafka: KafkaCluster
) -> None:
    """Stock: the StatefulSet controller rolls the pods itself (RollingUpdate); each restart outlasts the session."""
    s = make_set()
    s.mapped(REPLICAS)
    settled = generations(kafka, s.group)
    new_revision(kube, s)
    bumped = wait_for(lambda: generations(kafka, s.group), lambda g: len(g) > len(settled),
                      timeout=SESSION_MS / 1000 + STARTUP + 30, interval=1,
                      what=f"{s.group}: a rebalance after the template change")  # fmt: skip
    print(f"stock rolling update: generations {settled} -> {bumped}")
    assert len(bumped) > len(settled)


def test_a_statefulset_that_is_not_on_delete_is_a_config_error(make_set: Callable[..., ConsumerSet]) -> None:
    s = make_set(spec={"restart": {"strategy": "Coordinated"}})
    status = wait_for(s.status, lambda st: cond(st, "ConfigValid").get("reason") == "UpdateStrategyNotOnDelete",
                      timeout=60, what=f"{s.group}: ConfigValid=False UpdateStrategyNotOnDelete")  # fmt: skip
    assert cond(status, "ConfigValid")["status"] == "False"
    assert "OnDelete" in cond(status, "ConfigValid")["message"]
    assert "rollout" not in status


def test_a_rollout_that_adds_a_topic_ends_with_one_deliberate_rebalance(
    make_set: Callable[..., ConsumerSet], kube: Kube, kafka: KafkaCluster, events_topic: str
) -> None:
    """A static rejoin in a Stable group keeps the old assignment: the new topic would stay unconsumed. vigil
    removes one member at the end (it rejoins at once): exactly one generation, and the topic is consumed."""
    replicas = 2
    s = make_set(replicas=replicas, spec={"restart": {"strategy": "Coordinated", "maxRestartSeconds": 90}},
                 on_delete=True)  # fmt: skip
    s.mapped(replicas)
    settled = generations(kafka, s.group)
    added = clients.create_topic(s.conn, clients.unique("added"), partitions=2)
    patch = {"spec": {"template": {"spec": {"containers": [
        {"name": "app", "args": ["--group", s.group, "--topic", f"{s.topic},{added}"]}]}}}}  # fmt: skip
    kube.apps.patch_namespaced_stateful_set(s.name, s.namespace, patch,
                                            _content_type="application/strategic-merge-patch+json")  # fmt: skip
    waited = subprocess.run(
        [sys.executable, "-m", "vigil_cli", "rollout", "status", s.name, "-n", s.namespace,
         "--timeout", str(replicas * (STARTUP + 30)), "--kubeconfig", str(kube.kubeconfig)],
        capture_output=True, text=True, timeout=replicas * (STARTUP + 30) + 30, check=False,
    )  # fmt: skip
    assert waited.returncode == 0, (waited.stdout, waited.stderr)

    def assigned_topics() -> set[str]:
        desc = clients.describe_group(s.conn, s.group)
        if str(desc.state).split(".")[-1].upper() != "STABLE":
            return set()
        return {tp.topic for m in desc.members for tp in m.assignment.topic_partitions}

    wait_for(assigned_topics, lambda topics: added in topics, timeout=60,
             what=f"{s.group}: the added topic {added} assigned")  # fmt: skip
    after = generations(kafka, s.group)
    print(f"rollout adding {added}: generations {settled} -> {after}")
    assert len(after) == len(settled) + 1, (settled, after)
    rebalanced = [e for e in events_for(kube, s.namespace, s.name) if e["reason"] == "SubscriptionRebalance"]
    assert len(rebalanced) == 1, rebalanced
    assert f"+{added}" in rebalanced[0]["message"]
    assert "it rejoined within the same rebalance" in rebalanced[0]["message"]
    removed = wait_for(lambda: [e for e in topic_events(kafka, events_topic, s.group)
                                if isinstance(e, events.MemberRemoved)],
                       lambda found: len(found) == 1, timeout=15,
                       what="one member-removed event on the events topic")  # fmt: skip
    assert removed[0].payload.cause == "subscription-change"


def test_a_kip848_group_rolls_with_its_session_timeout_raised_and_restored(
    make_set: Callable[..., ConsumerSet], kube: Kube, kafka: KafkaCluster
) -> None:
    """KIP-848 has no classic heartbeat to bridge with: the operator raises the group's own
    consumer.session.timeout.ms (the broker's is 10 s here, the app needs 15 s) for the rollout and restores it after.
    Epoch bumps are counted from the broker's log (`Bumped group epoch to N`)."""
    replicas = 2
    s = make_set(replicas=replicas, on_delete=True,
                 spec={"restart": {"strategy": "Coordinated", "maxRestartSeconds": 45},
                       "client": {"groupProtocol": "consumer"}},
                 env={"STARTUP_DELAY_SECONDS": str(STARTUP), "KAFKA_GROUP_PROTOCOL": "consumer"})  # fmt: skip
    before = s.mapped(replicas)
    bumps = broker_lines(kafka, s.group, r"\[GroupId {g}\] Bumped group epoch to (\d+)")
    new_revision(kube, s)
    waited = subprocess.run(
        [sys.executable, "-m", "vigil_cli", "rollout", "status", s.name, "-n", s.namespace,
         "--timeout", str(replicas * (STARTUP + 30)), "--kubeconfig", str(kube.kubeconfig)],
        capture_output=True, text=True, timeout=replicas * (STARTUP + 30) + 30, check=False,
    )  # fmt: skip
    print(waited.stdout, waited.stderr)
    assert waited.returncode == 0, (waited.stdout, waited.stderr)
    after = s.mapped(replicas)
    for pod in s.pods(replicas):
        assert after[pod]["instanceId"] == before[pod]["instanceId"]
        assert after[pod]["memberId"] != before[pod]["memberId"]
    bumped = broker_lines(kafka, s.group, r"\[GroupId {g}\] Bumped group epoch to (\d+)")[len(bumps) :]
    print(f"KIP-848 rollout: epoch bumps during it: {bumped}")
    assert bumped == [], "the group epoch moved during the rollout"
    raised = [e["message"] for e in events_for(kube, s.namespace, s.name) if e["reason"] == "RolloutStep"]
    assert any("session timeout is raised to 45000 ms" in m for m in raised), raised
    assert GroupClient(s.conn).group_timings(s.group).session_override_ms is None  # restored: the broker's default


def test_without_coordination_a_kip848_restart_moves_the_epoch(
    make_set: Callable[..., ConsumerSet], kube: Kube, kafka: KafkaCluster
) -> None:
    """Stock, for the test above: the same KIP-848 static set rolled by the StatefulSet controller; the restart
    (15 s) outlasts the broker's session (10 s), the member expires and the epoch moves."""
    s = make_set(replicas=2, spec={"client": {"groupProtocol": "consumer"}},
                 env={"STARTUP_DELAY_SECONDS": str(STARTUP), "KAFKA_GROUP_PROTOCOL": "consumer"})  # fmt: skip
    s.mapped(2)
    pattern = r"\[GroupId {g}\] Bumped group epoch to (\d+)"
    settled = len(broker_lines(kafka, s.group, pattern))
    new_revision(kube, s)
    bumped = wait_for(lambda: broker_lines(kafka, s.group, pattern)[settled:], lambda b: len(b) > 0,
                      timeout=SESSION_MS / 1000 + STARTUP + 30, interval=1,
                      what=f"{s.group}: an epoch bump after the template change")  # fmt: skip
    print(f"stock KIP-848 rolling update: epoch bumps {bumped}")


def test_pods_without_the_sidecar_are_re_rolled_to_get_it(
    kube: Kube, kafka: KafkaCluster, operator: RunningOperator
) -> None:
    """The consumers started before their ConsumerGroup existed, so the webhook admitted them unchanged: no sidecar.
    A Coordinated group re-rolls them (without a bridge: there is no sidecar to learn the generation from)."""
    namespace, name, replicas = f"t-{uuid.uuid4().hex[:10]}", "orders", 2
    conn = kafka.connection()
    group, topic = clients.unique("reroll"), clients.create_topic(conn, clients.unique("reroll"), partitions=4)
    kube.create_namespace(namespace)
    try:
        workload = statefulset(name, group, topic, conn.bootstrap_servers, replicas, parallel=True)
        workload["spec"]["updateStrategy"] = {"type": "OnDelete"}
        kube.apply(workload, namespace)
        for i in range(replicas):
            pod = kube.wait_ready(namespace, f"{name}-{i}", timeout=60)
            assert "vigil-sidecar" not in json.dumps(pod["spec"])  # admitted unchanged: no ConsumerGroup yet
        spec = {"membership": "static", "restart": {"strategy": "Coordinated", "maxRestartSeconds": 60}}
        kube.apply(consumer_group(name, group, conn.bootstrap_servers, spec=spec), namespace)
        waited = subprocess.run(
            [sys.executable, "-m", "vigil_cli", "rollout", "status", name, "-n", namespace, "--timeout", "150",
             "--kubeconfig", str(kube.kubeconfig)],
            capture_output=True, text=True, timeout=180, check=False,
        )  # fmt: skip
        assert waited.returncode == 0, (waited.stdout, waited.stderr)
        for i in range(replicas):
            pod = kube.wait_ready(namespace, f"{name}-{i}", timeout=60)
            assert "vigil-sidecar" in json.dumps(pod["spec"]), f"{name}-{i} still has no sidecar"
        steps = [e["message"] for e in events_for(kube, namespace, name) if e["reason"] == "RolloutStep"]
        assert sum("it has no sidecar" in m for m in steps) == replicas, steps
    finally:
        kube.core.delete_namespace(namespace)
