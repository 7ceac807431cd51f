"""Operator replicas of one Deployment: `vigil operator --priority-from-pod-name` (what the chart runs when
`operator.replicas` > 1). Two operator pods from the chart's own pod template that differ only in their names peer
through a real ClusterKopfPeering: the one whose pod name hashes higher acts, the other pauses, and takes over when
the first is gone: at once when it stops (pod deleted: SIGTERM, as a rollout or an eviction ends a pod), within
kopf's peering lifetime when it crashes (SIGKILL of its process; the pod is never restarted, as on a lost node).

The chart is installed peered (replicas 2, no webhook) and its Deployment scaled to 0: the replicas are bare pods of
its template, so their names (and so their priorities) are the test's."""

import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import clients
from vigil_dev.testing.e2e import CG, cond, consumer_group, status_of
from vigil_dev.testing.kube_fixtures import Kube
from vigil_dev.testing.release import Replica, RunningOperator
from vigil_dev.testing.silent_broker import silent_broker
from vigil_dev.testing.waiting import bound, wait_for
from vigil_operator.priority import priority_from_pod_name

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.kube]

RESYNC_SECONDS = 3
OPERATOR_VALUES = {"operator": {"replicas": 2, "resyncSeconds": RESYNC_SECONDS}, "webhook": {"enabled": False}}

PEERING_LIFETIME = 60
"""kopf's default peering lifetime (settings.peering.lifetime): a killed replica's keep-alive counts as live for
up to this long, so that is the floor of a takeover after a crash (a stopped replica removes itself at once)."""

RESUME_FLOOR = {"stop": 0, "crash": PEERING_LIFETIME}
"""Until the remaining replica resumes: a stopped replica removes its keep-alive on exit (the other sees it
at once); a crashed one's keep-alive has to reach the end of its lifetime first."""

RESUMING = "Resuming operations after the pause"
"""kopf's log line when a paused replica acts again."""
PAUSING = "Pausing operations in favour of"
"""kopf's log line when a replica sees a live peer with a higher priority."""

CONNECT_TIMEOUT = 10
"""The operator's Kafka request timeout: how long a resync waits for a broker that never answers."""
FREEZE = "vigil-test-freeze"
"""A peer entry as `kopf freeze` writes it: no process behind it, only a priority and a lifetime."""

POD_NAMES = ("vigil-operator-7d4b9c8f6d-x2k9p", "vigil-operator-7d4b9c8f6d-q8r7t")
"""Two replicas of one ReplicaSet, as a Deployment names them."""


@pytest.fixture(scope="module")
def peered(operator: RunningOperator) -> RunningOperator:
    """The peered release with its Deployment at 0: the tests start the replicas."""
    operator.scale(0)
    return operator


def delete_groups(kube: Kube, namespace: str) -> None:
    """The test's ConsumerGroups gone while a replica still acts: one left with vigil's finalizer (no operator
    after the test) would be one more group a later test's cluster-wide replicas resync."""
    for cr in kube.custom.list_namespaced_custom_object(*CG[:2], namespace, CG[2])["items"]:
        kube.custom.delete_namespaced_custom_object(*CG[:2], namespace, CG[2], cr["metadata"]["name"])
    wait_for(lambda: kube.custom.list_namespaced_custom_object(*CG[:2], namespace, CG[2])["items"], lambda i: not i,
             timeout=60, what=f"the ConsumerGroups of {namespace} finalized and gone")  # fmt: skip


def set_peer(kube: Kube, peering: str, identity: str, priority: int | None) -> None:
    """Add (or with None remove) a keep-alive entry in the ClusterKopfPeering's status, as `kopf freeze` does."""
    entry = (
        None if priority is None else {"priority": priority, "lifetime": 300, "lastseen": datetime.now(UTC).isoformat()}
    )
    kube.custom.patch_cluster_custom_object(
        "kopf.dev", "v1", "clusterkopfpeerings", peering, {"status": {identity: entry}}
    )


def peer_priorities(kube: Kube, peering: str) -> list[int]:
    """The priorities of the keep-alives in the ClusterKopfPeering's status (kopf: one entry per live replica)."""
    body = kube.custom.get_cluster_custom_object("kopf.dev", "v1", "clusterkopfpeerings", peering)
    return sorted(int(peer["priority"]) for peer in (body.get("status") or {}).values())


@pytest.mark.usefixtures("crds")
@pytest.mark.parametrize("end", ["stop", "crash"])
def test_of_two_replicas_the_higher_pod_name_priority_acts_and_the_other_takes_over_when_it_is_gone(
    kube: Kube, kafka: KafkaCluster, namespace: str, peered: RunningOperator, end: str
) -> None:
    peering = clients.unique("vigil-peering")  # its own: a killed replica's keep-alive outlives this test
    kube.apply({"apiVersion": "kopf.dev/v1", "kind": "ClusterKopfPeering", "metadata": {"name": peering}})
    kube.apply(consumer_group("peered", clients.unique("peered"), kafka.connection().bootstrap_servers), namespace)
    high_name, low_name = sorted(POD_NAMES, key=priority_from_pod_name, reverse=True)
    low = peered.start_replica(low_name, peering=peering)
    high = peered.start_replica(high_name, peering=peering)
    try:
        for replica in (low, high):
            priority = priority_from_pod_name(replica.name)
            assert f"peering {peering!r} with priority {priority} (from pod {replica.name})" in replica.log_text()
        wait_for(lambda: peer_priorities(kube, peering), lambda p: p == sorted(map(priority_from_pod_name, POD_NAMES)),
                 timeout=30, what="both replicas' keep-alives in the peering")  # fmt: skip
        wait_for(high.resyncs, lambda n: n >= 2, timeout=60, what="the higher-priority replica resyncing")
        wait_for(low.log_text, lambda t: "Pausing operations in favour of" in t, timeout=30, what="low paused")
        settled = low.resyncs()
        wait_for(high.resyncs, lambda n: n >= 4, timeout=60, what="more resyncs by the higher-priority replica")
        assert low.resyncs() == settled
        assert low.alive()  # paused, not unhealthy: the chart's livenessProbe must not restart a standby

        resumes = low.log_text().count(RESUMING)  # kopf logs one at start too, before it sees the peers
        if end == "stop":
            high.stop()  # SIGTERM: kopf removes its keep-alive from the peering on the way out
        else:
            high.kill()  # SIGKILL: no goodbye, the keep-alive stays until its lifetime ends (never restarted)
        gone = time.monotonic()
        wait_for(lambda: low.log_text().count(RESUMING), lambda n: n > resumes,
                 timeout=bound(RESUME_FLOOR[end]), what=f"the remaining replica resuming after a {end}")  # fmt: skip
        resumed = time.monotonic() - gone
        wait_for(low.resyncs, lambda n: n >= settled + 2, timeout=bound(2 * RESYNC_SECONDS),
                 what="the resumed replica resyncing")  # fmt: skip
        print(f"after a {end}: resumed in {resumed:.1f} s, two resyncs {time.monotonic() - gone:.1f} s")
    finally:
        delete_groups(kube, namespace)  # while a replica still acts: it releases the finalizer
        low.stop()
        high.stop()
        kube.custom.delete_cluster_custom_object("kopf.dev", "v1", "clusterkopfpeerings", peering)


@pytest.mark.usefixtures("crds")
def test_a_resync_in_flight_when_the_replica_pauses_writes_nothing_and_none_starts_while_it_is_paused(
    kube: Kube, namespace: str, peered: RunningOperator, artifacts_dir: Path
) -> None:
    """The replica's first resync of a group is waiting for a broker that never answers (after the connect timeout
    it would write `BrokerUnreachable`) when a peer with a higher priority appears: a freeze entry, as `kopf freeze`
    writes it. kopf pauses the replica; the resync in flight gives way and writes nothing, and no resync starts
    while it is paused: a real replica with a higher priority takes over from the freeze and resyncs meanwhile."""
    peering = clients.unique("vigil-peering")
    kube.apply({"apiVersion": "kopf.dev/v1", "kind": "ClusterKopfPeering", "metadata": {"name": peering}})
    high_name, low_name = sorted(POD_NAMES, key=priority_from_pod_name, reverse=True)
    name = "in-flight"
    state_dir = artifacts_dir / clients.unique("kafka-silent")
    with silent_broker(state_dir, kube.cluster.network.node_ip) as silent:
        kube.apply(consumer_group(name, clients.unique(name), silent.bootstrap), namespace)
        low = peered.start_replica(low_name, peering=peering)
        high: Replica | None = None
        try:
            wait_for(silent.connections, timeout=60, interval=0.1,
                     what="the replica's first resync connecting to the silent broker")  # fmt: skip
            connected = time.monotonic()
            set_peer(kube, peering, FREEZE, max(map(priority_from_pod_name, POD_NAMES)) + 1)
            wait_for(low.log_text, lambda t: PAUSING in t, timeout=30, what="the replica pausing for the freeze")
            took = time.monotonic() - connected
            resumes, settled = low.log_text().count(RESUMING), low.resyncs()  # it watches every namespace
            assert status_of(kube, namespace, name) == {}, (
                f"the resync ended before the pause ({took:.1f} s after its connect): nothing was in flight"
            )
            given_way = f"resyncs of {namespace}/{name} end: operator pausing"
            wait_for(
                lambda: (given_way in low.log_text(), status_of(kube, namespace, name)),
                any,
                timeout=bound(CONNECT_TIMEOUT),
                what="the resync in flight at the pause ending (given way, or written)",
            )
            assert status_of(kube, namespace, name) == {}, "the paused replica wrote the group's status"
            assert low.resyncs() == settled
            assert f"resync of {namespace}/{name} stopped before it acted: operator pausing" in low.log_text()

            high = peered.start_replica(high_name, peering=peering)
            wait_for(lambda: peer_priorities(kube, peering), lambda p: priority_from_pod_name(high_name) in p,
                     timeout=30, what="the higher replica's keep-alive in the peering")  # fmt: skip
            set_peer(kube, peering, FREEZE, None)  # the higher replica acts now; the lower one stays paused
            wait_for(high.resyncs, lambda n: n >= 2, timeout=bound(CONNECT_TIMEOUT + 2 * RESYNC_SECONDS),
                     what="two resyncs by the higher replica")  # fmt: skip
            assert cond(status_of(kube, namespace, name), "Ready").get("reason") == "BrokerUnreachable"
            assert low.resyncs() == settled
            assert low.log_text().count(RESUMING) == resumes
            assert "Traceback" not in low.log_text()
        finally:
            delete_groups(kube, namespace)
            low.stop()
            if high is not None:
                high.stop()
            kube.custom.delete_cluster_custom_object("kopf.dev", "v1", "clusterkopfpeerings", peering)
