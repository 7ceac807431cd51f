"""Operator replicas of one Deployment: `vigil operator --priority-from-pod-name` (what the chart runs when
`operator.replicas` > 1). Two real operator processes that differ only in `VIGIL_POD_NAME` peer through a real
ClusterKopfPeering: the one whose pod name hashes higher acts, the other pauses, and takes over when the first
is gone: at once when it stops (SIGTERM, as a rollout or an eviction ends a pod), within kopf's peering
lifetime when it crashes (SIGKILL)."""

import time
from pathlib import Path

import pytest

from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import clients
from vigil_dev.testing.e2e import consumer_group
from vigil_dev.testing.kube_fixtures import Kube
from vigil_dev.testing.operator import RunningOperator, start_operator
from vigil_dev.testing.waiting import bound, wait_for
from vigil_operator.priority import POD_NAME_ENV, priority_from_pod_name

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.kube]

PEERING_LIFETIME = 60
"""kopf's default peering lifetime (settings.peering.lifetime): a killed replica's keep-alive counts as live for
up to this long, so that is the floor of a takeover after a crash (a stopped replica removes itself at once)."""

RESYNC_SECONDS = 3
RESUME_FLOOR = {"stop": 0, "crash": PEERING_LIFETIME}
"""Until the remaining replica resumes: a stopped replica removes its keep-alive on exit (the other sees it
at once); a crashed one's keep-alive has to reach the end of its lifetime first."""

RESUMING = "Resuming operations after the pause"
"""kopf's log line when a paused replica acts again."""

POD_NAMES = ("vigil-operator-7d4b9c8f6d-x2k9p", "vigil-operator-7d4b9c8f6d-q8r7t")
"""Two replicas of one ReplicaSet, as a Deployment names them."""


def start_replica(kubeconfig: Path, state_dir: Path, pod_name: str, peering: str) -> RunningOperator:
    """An operator as one replica of the chart's Deployment runs it: peered, its priority from `VIGIL_POD_NAME`."""
    return start_operator(
        kubeconfig, state_dir, name=pod_name, resync_seconds=RESYNC_SECONDS, standalone=False, webhook=False,
        args=["--peering", peering, "--priority-from-pod-name"], env={POD_NAME_ENV: pod_name},
    )  # fmt: skip


def resyncs(replica: RunningOperator) -> float:
    """Its resyncs so far, from /metrics: live, unlike kopf's liveness probes (cached for 10 s)."""
    return replica.metric("vigil_operator_resyncs_total")


def peer_priorities(kube: Kube, peering: str) -> list[int]:
    """The priorities of the keep-alives in the ClusterKopfPeering's status (kopf: one entry per live replica)."""
    body = kube.custom.get_cluster_custom_object("kopf.dev", "v1", "clusterkopfpeerings", peering)
    return sorted(int(peer["priority"]) for peer in (body.get("status") or {}).values())


@pytest.mark.usefixtures("crds")
@pytest.mark.parametrize("end", ["stop", "crash"])
def test_of_two_replicas_the_higher_pod_name_priority_acts_and_the_other_takes_over_when_it_is_gone(
    kube: Kube, kafka: KafkaCluster, namespace: str, artifacts_dir: Path, end: str
) -> None:
    peering = clients.unique("vigil-peering")  # its own: a killed replica's keep-alive outlives this test
    kube.apply({"apiVersion": "kopf.dev/v1", "kind": "ClusterKopfPeering", "metadata": {"name": peering}})
    kube.apply(consumer_group("peered", clients.unique("peered"), kafka.connection().bootstrap_servers), namespace)
    high_name, low_name = sorted(POD_NAMES, key=priority_from_pod_name, reverse=True)
    state = artifacts_dir / "peering-replicas" / end
    low = start_replica(kube.kubeconfig, state, low_name, peering)
    high = start_replica(kube.kubeconfig, state, high_name, peering)
    try:
        for replica in (low, high):
            priority = priority_from_pod_name(replica.name)
            assert f"peering {peering!r} with priority {priority} (from pod {replica.name})" in replica.log_text()
        wait_for(lambda: peer_priorities(kube, peering), lambda p: p == sorted(map(priority_from_pod_name, POD_NAMES)),
                 timeout=30, what="both replicas' keep-alives in the peering")  # fmt: skip
        wait_for(lambda: resyncs(high), lambda n: n >= 2, timeout=60, what="the higher-priority replica resyncing")
        wait_for(low.log_text, lambda t: "Pausing operations in favour of" in t, timeout=30, what="low paused")
        settled = resyncs(low)
        wait_for(
            lambda: resyncs(high), lambda n: n >= 4, timeout=60, what="more resyncs by the higher-priority replica"
        )
        assert resyncs(low) == settled
        assert low.alive()  # paused, not unhealthy: the chart's livenessProbe must not restart a standby

        resumes = low.log_text().count(RESUMING)  # kopf logs one at start too, before it sees the peers
        if end == "stop":
            high.stop()  # SIGTERM: kopf removes its keep-alive from the peering on the way out
        else:
            high.process.kill()  # SIGKILL: no goodbye, the keep-alive stays until its lifetime ends
        gone = time.monotonic()
        wait_for(lambda: low.log_text().count(RESUMING), lambda n: n > resumes,
                 timeout=bound(RESUME_FLOOR[end]), what=f"the remaining replica resuming after a {end}")  # fmt: skip
        resumed = time.monotonic() - gone
        wait_for(lambda: resyncs(low), lambda n: n >= settled + 2, timeout=bound(2 * RESYNC_SECONDS),
                 what="the resumed replica resyncing")  # fmt: skip
        print(f"after a {end}: resumed in {resumed:.1f} s, two resyncs {time.monotonic() - gone:.1f} s")
    finally:
        low.stop()
        high.stop()
        kube.custom.delete_cluster_custom_object("kopf.dev", "v1", "clusterkopfpeerings", peering)
