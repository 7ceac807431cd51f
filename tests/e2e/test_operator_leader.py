"""Operator replicas of one Deployment elect a leader by a Lease (`vigil operator --leader-lease`, what the chart
runs for any replica count): only the holder resyncs ConsumerGroups; the other takes over when it is gone — at once
when it stops (pod deleted: SIGTERM, it releases the Lease on the way out), after the Lease's duration when it
crashes (SIGKILL of its process; the pod is never restarted, as on a lost node). A resync in flight when the replica
stops leading writes nothing.

The chart is installed with 2 replicas and its Deployment scaled to 0: the replicas are bare pods of its template,
each test with a Lease of its own."""

import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import clients
from vigil_dev.testing.e2e import CG, cond, consumer_group, status_of
from vigil_dev.testing.kube_fixtures import Kube
from vigil_dev.testing.release import Replica, RunningOperator
from vigil_dev.testing.silent_broker import silent_broker
from vigil_dev.testing.waiting import bound, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.kube]

RESYNC_SECONDS = 3
OPERATOR_VALUES = {"operator": {"replicas": 2, "resyncSeconds": RESYNC_SECONDS}, "webhook": {"enabled": False}}
LEASE_SECONDS = 15
"""The leader Lease's duration (domain.leadership.Timing): a crashed holder's Lease is taken over after it."""
RETRY_SECONDS = 2
"""How often a standby tries the Lease (domain.leadership.Timing)."""
CONNECT_TIMEOUT = 10
"""The operator's Kafka request timeout: how long a resync waits for a broker that never answers."""
POD_NAMES = ("vigil-operator-7d4b9c8f6d-x2k9p", "vigil-operator-7d4b9c8f6d-q8r7t")
"""Two replicas of one ReplicaSet, as a Deployment names them."""
TAKEOVER = {"stop": (0.0, 5.0), "crash": (LEASE_SECONDS - RETRY_SECONDS, LEASE_SECONDS + 2 * RETRY_SECONDS)}
"""Bounds of a takeover after the holder's end: a stopped holder released the Lease; a crashed one's renewal is
taken as its last sign of life, and it renewed at most one retry period before it died."""


@pytest.fixture(scope="module")
def replicas_of(operator: RunningOperator) -> RunningOperator:
    """The release with its Deployment at 0: the tests start the replicas."""
    operator.scale(0)
    return operator


def lease_holder(kube: Kube, namespace: str, name: str) -> str | None:
    try:
        lease: Any = client.CoordinationV1Api(kube.api).read_namespaced_lease(name, namespace)
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return lease.spec.holder_identity or None


def held_by(holder: str | None, replica: Replica) -> bool:
    """The replica holds it (its identity: its pod name)."""
    return holder == replica.name


def take_lease(kube: Kube, namespace: str, name: str, holder: str | None) -> None:
    """Hand the Lease to `holder` (None: released), as another replica winning it would: renewed now."""
    now = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
    spec = {"holderIdentity": holder, "leaseDurationSeconds": 300, "renewTime": now, "acquireTime": now}
    client.CoordinationV1Api(kube.api).patch_namespaced_lease(name, namespace, {"spec": spec})


def delete_groups(kube: Kube, namespace: str) -> None:
    """No finalizer: a ConsumerGroup goes at once, whether a replica acts or not."""
    for cr in kube.custom.list_namespaced_custom_object(*CG[:2], namespace, CG[2])["items"]:
        kube.custom.delete_namespaced_custom_object(*CG[:2], namespace, CG[2], cr["metadata"]["name"])
    wait_for(lambda: kube.custom.list_namespaced_custom_object(*CG[:2], namespace, CG[2])["items"], lambda i: not i,
             timeout=10, what=f"the ConsumerGroups of {namespace} gone")  # fmt: skip


@pytest.mark.usefixtures("crds")
@pytest.mark.parametrize("end", ["stop", "crash"])
def test_of_two_replicas_the_lease_holder_acts_and_the_other_takes_over_when_it_is_gone(
    kube: Kube, kafka: KafkaCluster, namespace: str, replicas_of: RunningOperator, end: str
) -> None:
    lease = clients.unique("vigil-leader")
    kube.apply(consumer_group("led", clients.unique("led"), kafka.connection().bootstrap_servers), namespace)
    first = replicas_of.start_replica(POD_NAMES[0], lease=lease)
    wait_for(lambda: lease_holder(kube, replicas_of.namespace, lease), lambda h: held_by(h, first), timeout=30,
             what=f"{first.name} holding the Lease {lease}")  # fmt: skip
    second = replicas_of.start_replica(POD_NAMES[1], lease=lease)
    try:
        wait_for(first.resyncs, lambda n: n >= 2, timeout=60, what="the holder resyncing")
        settled = second.resyncs()
        wait_for(first.resyncs, lambda n: n >= 4, timeout=60, what="more resyncs by the holder")
        assert (second.resyncs(), settled) == (0, 0)  # the standby resynced nothing
        assert second.alive()  # standing by, not unhealthy: the chart's livenessProbe must not restart it
        assert held_by(lease_holder(kube, replicas_of.namespace, lease), first)

        if end == "stop":
            first.stop()  # SIGTERM: it releases the Lease on the way out
        else:
            first.kill()  # SIGKILL: no goodbye, the Lease stays held until its duration passes
        gone = time.monotonic()
        low, high = TAKEOVER[end]
        wait_for(lambda: lease_holder(kube, replicas_of.namespace, lease), lambda h: held_by(h, second),
                 timeout=bound(high), interval=0.2, what=f"the standby taking the Lease after a {end}")  # fmt: skip
        took = time.monotonic() - gone
        wait_for(second.resyncs, lambda n: n >= 2, timeout=bound(2 * RESYNC_SECONDS),
                 what="the new holder resyncing")  # fmt: skip
        print(f"after a {end}: the Lease taken over in {took:.1f} s, two resyncs {time.monotonic() - gone:.1f} s")
        assert low <= took <= high, f"taken over {took:.1f} s after the holder's {end}, expected {low}-{high} s"
    finally:
        delete_groups(kube, namespace)
        first.stop()
        second.stop()


@pytest.mark.usefixtures("crds")
def test_a_resync_in_flight_when_the_replica_stops_leading_writes_nothing_and_it_resyncs_once_it_leads_again(
    kube: Kube, namespace: str, replicas_of: RunningOperator, artifacts_dir: Path
) -> None:
    """The holder's first resync of a group is waiting for a broker that never answers (after the connect timeout it
    would write `BrokerUnreachable`) when the Lease goes to another holder (this test, as a replica winning it
    would). The replica stops leading: the resync in flight gives way and writes nothing. Released, the Lease comes
    back to it and it resyncs again."""
    lease = clients.unique("vigil-leader")
    name = "in-flight"
    state_dir = artifacts_dir / clients.unique("kafka-silent")
    with silent_broker(state_dir, kube.cluster.network.node_ip) as silent:
        kube.apply(consumer_group(name, clients.unique(name), silent.bootstrap), namespace)
        replica: Replica = replicas_of.start_replica(POD_NAMES[0], lease=lease)
        try:
            wait_for(silent.connections, timeout=60, interval=0.1,
                     what="the replica's first resync connecting to the silent broker")  # fmt: skip
            connected = time.monotonic()
            take_lease(kube, replicas_of.namespace, lease, "vigil-test-holder")
            given_way = f"resync of {namespace}/{name} stopped before it acted"
            wait_for(lambda: (given_way in replica.log_text(), status_of(kube, namespace, name)), any,
                     timeout=bound(CONNECT_TIMEOUT),
                     what="the resync in flight ending (given way, or written)")  # fmt: skip
            took = time.monotonic() - connected
            assert status_of(kube, namespace, name) == {}, f"the replica wrote the status {took:.1f} s after losing"
            settled = replica.resyncs()
            assert lease_holder(kube, replicas_of.namespace, lease) == "vigil-test-holder"

            take_lease(kube, replicas_of.namespace, lease, None)  # released: the replica leads again
            again = bound(RETRY_SECONDS + CONNECT_TIMEOUT + RESYNC_SECONDS)
            wait_for(lambda: cond(status_of(kube, namespace, name), "Ready").get("reason"),
                     lambda r: r == "BrokerUnreachable", timeout=again,
                     what="the replica leading again and writing the silent broker's condition")  # fmt: skip
            wait_for(replica.resyncs, lambda n: n > settled, timeout=bound(CONNECT_TIMEOUT),
                     what="the resync that wrote it counted (after its budget and events steps)")  # fmt: skip
            assert "Traceback" not in replica.log_text()
        finally:
            delete_groups(kube, namespace)
            replica.stop()
