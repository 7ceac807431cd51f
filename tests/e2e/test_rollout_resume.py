"""A coordinated restart survives the operator's own death mid-step: the operator's process is killed
(SIGKILL) 1 s after it deleted a pod, and the kubelet restarts its container. The bridge state it persisted in
`status.rollout` before the deletion is resumed by the restarted one, whose heartbeats keep the member alive (session
15 s, the app needs 15 s to start): no generation bump, counted from the broker's log.

Its own module: the test kills its operator, which must be the only one acting. The injection webhook is `Fail`
here, so the replacement pod created while no operator answers waits for one (with `Ignore` it would start without
the sidecar, and could not be bridged at its own next restart).
"""

import time

import pytest

from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing.broker_log import generations
from vigil_dev.testing.e2e import ConsumerSet, events_for
from vigil_dev.testing.kube_fixtures import Kube
from vigil_dev.testing.release import RunningOperator
from vigil_dev.testing.waiting import let_time_pass, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.kube]

OPERATOR_VALUES = {"webhook": {"failurePolicy": "Fail"}}
SESSION_MS = 15_000
STARTUP = 15.0
REPLICAS = 2


def kill_and_await_restart(operator: RunningOperator) -> float:
    """SIGKILL the operator's process; seconds until the kubelet's restart of it answers on its liveness port."""
    replica = operator.replica()
    restarts = replica.restarts()
    replica.kill()
    killed = time.monotonic()
    wait_for(lambda: replica.restarts() > restarts and replica.alive(), timeout=60, interval=0.1,
             what=f"operator {replica.pod} restarted by the kubelet and alive")  # fmt: skip
    return time.monotonic() - killed


def test_an_operator_killed_mid_step_resumes_the_bridge_without_a_rebalance(
    operator: RunningOperator, kube: Kube, kafka: KafkaCluster
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
        let_time_pass(1.0, since=deleted_at, why="the issue's timing: the operator killed 1 s after the pod's deletion")
        took = kill_and_await_restart(operator)
        print(f"operator restarted by the kubelet in {took:.1f}s")
        # the bridge must be resumed within the member's session; the kubelet restarts a first crash at once
        assert took <= SESSION_MS / 1000 / 2, f"the restarted operator answered only after {took:.1f}s"

        done = wait_for(s.status, lambda st: (st.get("rollout") or {}).get("phase") in ("Complete", "Paused"),
                        timeout=REPLICAS * (STARTUP + 40), interval=1,
                        what=f"{s.group}: the rollout ending under the new operator")  # fmt: skip
        print(f"rollout {done['rollout']}; generations {settled} -> {generations(kafka, s.group)}")
        assert done["rollout"]["phase"] == "Complete", done["rollout"]
        assert done["rollout"]["done"] == REPLICAS
        assert generations(kafka, s.group) == settled, "a rebalance across the operator's restart"
        restarted_run = kube.container_log(operator.namespace, operator.replica().pod, "operator").read_text()
        assert "bridging member" in restarted_run  # the restarted process (its own log file) resumed the bridge
    finally:
        s.close()
