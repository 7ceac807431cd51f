"""Operator replicas of one Deployment: `vigil operator --priority-from-pod-name` (what the chart runs when
`operator.replicas` > 1). Two real operator processes that differ only in `VIGIL_POD_NAME` peer through a real
ClusterKopfPeering: the one whose pod name hashes higher acts, the other pauses, and takes over when the first
is gone: at once when it stops (SIGTERM, as a rollout or an eviction ends a pod), within kopf's peering
lifetime when it crashes (SIGKILL)."""

import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import clients
from vigil_dev.testing.e2e import cond, consumer_group, silent_broker, status_of
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
PAUSING = "Pausing operations in favour of"
"""kopf's log line when a replica sees a live peer with a higher priority."""

CONNECT_TIMEOUT = 10
"""The operator's Kafka request timeout: how long a resync waits for a broker that never answers."""
FREEZE = "vigil-test-freeze"
"""A peer entry as `kopf freeze` writes it: no process behind it, only a priority and a lifetime."""

POD_NAMES = ("vigil-operator-7d4b9c8f6d-x2k9p", "vigil-operator-7d4b9c8f6d-q8r7t")
"""Two replicas of one ReplicaSet, as a Deployment names them."""


def start_replica(kubeconfig: Path, state_dir: Path, pod_name: str, peering: str) -> RunningOperator:
    """An operator as one replica of the chart's Deployment runs it: peered, its priority from `VIGIL_POD_NAME`."""
    return start_operator(
        kubeconfig, state_dir, name=pod_name, resync_seconds=RESYNC_SECONDS, standalone=False, webhook=False,
        args=["--peering", peering, "--priority-from-pod-name"], env={POD_NAME_ENV: pod_name},
    )  # fmt: skip


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
            high.process.kill()  # SIGKILL: no goodbye, the keep-alive stays until its lifetime ends
        gone = time.monotonic()
        wait_for(lambda: low.log_text().count(RESUMING), lambda n: n > resumes,
                 timeout=bound(RESUME_FLOOR[end]), what=f"the remaining replica resuming after a {end}")  # fmt: skip
        resumed = time.monotonic() - gone
        wait_for(low.resyncs, lambda n: n >= settled + 2, timeout=bound(2 * RESYNC_SECONDS),
                 what="the resumed replica resyncing")  # fmt: skip
        print(f"after a {end}: resumed in {resumed:.1f} s, two resyncs {time.monotonic() - gone:.1f} s")
    finally:
        low.stop()
        high.stop()
        kube.custom.delete_cluster_custom_object("kopf.dev", "v1", "clusterkopfpeerings", peering)


@pytest.mark.usefixtures("crds")
def test_a_resync_in_flight_when_the_replica_pauses_writes_nothing_and_none_starts_while_it_is_paused(
    kube: Kube, namespace: str, artifacts_dir: Path
) -> None:
    """The replica's first resync of a group is waiting for a broker that never answers (after the connect timeout
    it would write `BrokerUnreachable`) when a peer with a higher priority appears: a freeze entry, as `kopf freeze`
    writes it. kopf pauses the replica; the resync in flight gives way and writes nothing, and no resync starts
    while it is paused: a real replica with a higher priority takes over from the freeze and resyncs meanwhile."""
    peering = clients.unique("vigil-peering")
    kube.apply({"apiVersion": "kopf.dev/v1", "kind": "ClusterKopfPeering", "metadata": {"name": peering}})
    high_name, low_name = sorted(POD_NAMES, key=priority_from_pod_name, reverse=True)
    state = artifacts_dir / "peering-replicas" / "in-flight"
    name = "in-flight"
    with silent_broker() as (bootstrap, accepted):
        kube.apply(consumer_group(name, clients.unique(name), bootstrap), namespace)
        low = start_replica(kube.kubeconfig, state, low_name, peering)
        high: RunningOperator | None = None
        try:
            wait_for(accepted.is_set, timeout=60, what="the replica's first resync connecting to the silent broker")
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

            high = start_replica(kube.kubeconfig, state, high_name, peering)
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
            low.stop()
            if high is not None:
                high.stop()
            kube.custom.delete_cluster_custom_object("kopf.dev", "v1", "clusterkopfpeerings", peering)
