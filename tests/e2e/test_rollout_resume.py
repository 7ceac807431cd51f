"""A coordinated restart survives the operator's own death mid-step (issue #8): the operator is killed (SIGKILL) 1 s
after it deleted a pod, and another starts within 3 s. The bridge state it persisted in `status.rollout` before the
deletion is resumed by the new one, whose heartbeats keep the member alive (session 15 s, the app needs 15 s to
start): no generation bump, counted from the broker's log.

Its own module: the test kills and replaces its operator, which must be the only one acting. The injection webhook
is `Fail` here, so the replacement pod created while no operator answers waits for one (with `Ignore` it would
start without the sidecar, and could not be bridged at its own next restart).
"""

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing.broker_log import generations
from vigil_dev.testing.e2e import ConsumerSet, events_for
from vigil_dev.testing.kube_fixtures import Fakelet, Kube
from vigil_dev.testing.operator import RunningOperator, start_operator
from vigil_dev.testing.waiting import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.kube]

SESSION_MS = 15_000
STARTUP = 15.0
REPLICAS = 2


class Operators:
    """The operator of this test, replaceable."""

    def __init__(self, kube: Kube, state_dir: Path, events_topic: str) -> None:
        self.kube, self.state_dir, self.events_topic = kube, state_dir, events_topic
        self.count = 0
        self.current = self.start()

    def start(self) -> RunningOperator:
        self.count += 1
        return start_operator(self.kube.kubeconfig, self.state_dir, name=f"operator-{self.count}",
                              events_topic=self.events_topic, args=["--webhook-failure-policy", "Fail"])  # fmt: skip

    def replace_after_kill(self) -> float:
        """SIGKILL the current operator, start another; seconds from the kill to the new one's liveness."""
        self.current.process.kill()
        killed = time.monotonic()
        self.current = self.start()
        return time.monotonic() - killed


@pytest.fixture
def operators(kube: Kube, crds: None, fakelet: Fakelet, events_topic: str, artifacts_dir: Path) -> Iterator[Operators]:
    made = Operators(kube, artifacts_dir / "operator" / "test_rollout_resume", events_topic)
    try:
        yield made
    finally:
        made.current.stop()


def test_an_operator_killed_mid_step_resumes_the_bridge_without_a_rebalance(
    operators: Operators, kube: Kube, kafka: KafkaCluster
) -> None:
    s = ConsumerSet(kube, kafka, replicas=REPLICAS, membership="static", session_ms=SESSION_MS,
                    env={"STARTUP_DELAY_SECONDS": str(STARTUP)}, on_delete=True,
                    spec={"restart": {"strategy": "Coordinated", "maxRestartSeconds": 120}})  # fmt: skip
    try:
        s.mapped(REPLICAS)
        settled = generations(kafka, s.group)
        patch = {"spec": {"template": {"metadata": {"annotations": {"vigil.dev/test-revision": "2"}}}}}
        kube.apps.patch_namespaced_stateful_set(s.name, s.namespace, patch)
        wait_for(lambda: events_for(kube, s.namespace, s.name),
                 lambda es: any(e["reason"] == "RolloutStep" and e["message"].startswith("deleted ") for e in es),
                 timeout=60, interval=0.2, what=f"{s.group}: the first pod deleted")  # fmt: skip
        persisted = s.status()["rollout"]
        assert persisted["bridge"], persisted  # the bridge was persisted before the deletion
        deleted_at = time.monotonic()  # the timing: the kill comes 1 s after the deletion
        wait_for(lambda: time.monotonic() - deleted_at, lambda t: t >= 1.0, timeout=2, interval=0.1,
                 what="1 s after the deletion")  # fmt: skip
        took = operators.replace_after_kill()
        print(f"operator replaced in {took:.1f}s")
        assert took <= 3.0 + 2.0, f"the new operator answered only after {took:.1f}s"

        done = wait_for(s.status, lambda st: (st.get("rollout") or {}).get("phase") in ("Complete", "Paused"),
                        timeout=REPLICAS * (STARTUP + 40), interval=1,
                        what=f"{s.group}: the rollout ending under the new operator")  # fmt: skip
        print(f"rollout {done['rollout']}; generations {settled} -> {generations(kafka, s.group)}")
        assert done["rollout"]["phase"] == "Complete", done["rollout"]
        assert done["rollout"]["done"] == REPLICAS
        assert generations(kafka, s.group) == settled, "a rebalance across the operator's restart"
        assert "bridging member" in operators.current.log_text()  # the new operator resumed the persisted bridge
    finally:
        s.close()
