"""Sidecars sharing a group's eviction budget through the real kube-apiserver (the Lease the operator will
pre-create, a token limited to it) while watching a real consumer group: do no harm."""

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from vigil_core import events
from vigil_core.budget import ledger
from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import clients
from vigil_dev.testing.budget import Budget, provision_budget
from vigil_dev.testing.e2e import topic_events
from vigil_dev.testing.kube_fixtures import Kube
from vigil_dev.testing.sidecar import RunningSidecar, start_sidecar
from vigil_dev.testing.waiting import bound, wait_for
from vigil_sidecar.client import Consumer as BeaconingConsumer

STALL = 6.0
CHECK = 1.0


@pytest.fixture
def group_budget(kube: Kube, namespace: str) -> tuple[str, Budget]:
    group = clients.unique("g-budget")
    return group, provision_budget(kube, namespace, ledger.lease_name(group))


@pytest.fixture
def watched_pods(
    kafka: KafkaCluster, kube: Kube, group_budget: tuple[str, Budget], tmp_path: Path
) -> Iterator[Callable[..., list[tuple[RunningSidecar, clients.Member]]]]:
    """Pods = (sidecar process with the budget, beaconing consumer) in one group."""
    group, budget = group_budget
    server = urlsplit(kube.cluster.server)
    env = {
        "KUBERNETES_SERVICE_HOST": server.hostname or "127.0.0.1",
        "KUBERNETES_SERVICE_PORT": str(server.port),
    }
    conn = kafka.connection()
    started: list[tuple[RunningSidecar, clients.Member]] = []

    def start(
        pods: list[str], *, topic: str | None = None, events_topic: str = "", **fields: Any
    ) -> list[tuple[RunningSidecar, clients.Member]]:
        """`topic`: default a new one of 3 partitions; `fields`: more `clients.Member` fields."""
        topic = topic or clients.create_topic(conn, clients.unique("budget"), partitions=3)
        for pod in pods:
            sidecar = start_sidecar(
                conn, group, pod, tmp_path, env=env,
                stall_timeout_seconds=STALL, check_interval_seconds=CHECK, session_timeout_seconds=6,
                events_topic=events_topic, namespace=budget.namespace,
                service_account_dir=str(budget.service_account_dir(tmp_path / f"sa-{pod}")),
            )  # fmt: skip
            member = clients.Member(
                conn, group, [topic], client_id=pod,
                consumer_factory=lambda conf, s=sidecar: BeaconingConsumer(conf, beacon_addr=s.beacon_addr),
                **fields,
            ).start()  # fmt: skip
            started.append((sidecar, member))
        wait_for(lambda: clients.stable_members(conn, group), lambda n: n == len(pods), timeout=60,
                 what=f"{len(pods)} members stable")  # fmt: skip
        for sidecar, _ in started:
            wait_for(
                lambda s=sidecar: s.get("/v1/status")[1],
                lambda s: '"member": {' in s and '"budget": "lease"' in s,
                timeout=30,
                what="each sidecar identifying its member, with the budget",
            )
        return started

    yield start
    for sidecar, member in started:
        member.close()
        sidecar.stop()


def _metric(sidecar: RunningSidecar, name: str) -> float:
    match = re.search(rf"^{re.escape(name)} ([0-9.e+]+)$", sidecar.get("/metrics")[1], re.MULTILINE)
    return float(match.group(1)) if match else 0.0


EVICTED = 'vigil_sidecar_actions_total{action="leave-group",outcome="NONE"}'
SYSTEMIC = 'vigil_sidecar_alerts_total{kind="budget-systemic-stall"}'


def _stall_handled(sidecar: RunningSidecar) -> bool:
    """The sidecar's watchdog has taken in the answer to its eviction (done, or refused for good: not a `settle` or
    `budget` refusal, which it retries): the episode is over and nothing more is done for this silence, so /v1/status
    names no member until the app polls again. The positive signal that the decision was taken, after which an
    absence of eviction is one."""
    return sidecar.status().get("member", "no answer") is None


@pytest.mark.kube
def test_one_stalled_member_gets_a_permit_and_is_evicted(
    kafka: KafkaCluster, watched_pods, group_budget: tuple[str, Budget]
) -> None:
    pods = watched_pods(["pod-a", "pod-b", "pod-c"])
    (sidecar, stalled), others = pods[0], pods[1:]
    stalled.paused_polling.set()
    wait_for(lambda: _metric(sidecar, EVICTED), lambda n: n == 1, timeout=bound(STALL + CHECK + 2.0),
             what="the stalled member evicted under a permit")  # fmt: skip
    permits = group_budget[1].ledger().permits
    assert [(p.pod, p.member_id) for p in permits] == [("pod-a", stalled.member_id)]
    assert all(_metric(s, EVICTED) == 0 for s, _ in others)


@pytest.mark.kube
def test_all_members_stalled_together_is_a_systemic_stall_and_no_one_is_evicted(
    kafka: KafkaCluster, watched_pods, group_budget: tuple[str, Budget]
) -> None:
    pods = watched_pods(["pod-a", "pod-b", "pod-c"])
    for _, member in pods:
        member.paused_polling.set()  # e.g. their shared database is down: evicting would only add rebalances
    wait_for(lambda: sum(_metric(s, SYSTEMIC) for s, _ in pods), lambda n: n >= 1,
             timeout=bound(STALL + 3 * CHECK + 2.0), what="a systemic-stall refusal")  # fmt: skip
    # every sidecar has decided (each a refusal, or an eviction: the wrong answer), however late its decision came
    wait_for(lambda: [_stall_handled(s) for s, _ in pods], all, timeout=bound(STALL + 3 * CHECK + 2.0),
             what="every sidecar's watchdog done with the stall")  # fmt: skip
    assert [_metric(s, SYSTEMIC) >= 1 for s, _ in pods] == [True] * 3
    assert all(_metric(s, EVICTED) == 0 for s, _ in pods)
    assert group_budget[1].ledger().permits == ()
    group = group_budget[0]
    assert len(clients.describe_group(kafka.connection(), group).members) == 3


POISONED = 'vigil_sidecar_alerts_total{kind="budget-poison-suspected"}'


@pytest.mark.kube
def test_the_next_owner_stalling_on_a_handed_over_partition_is_a_poison_pill_not_evicted(
    kafka: KafkaCluster, watched_pods, group_budget: tuple[str, Budget]
) -> None:
    """A record that hangs whoever processes it, on partition 0: vigil evicts the first owner, then refuses to
    evict the next one (poison-suspected, naming the partition and the committed offset where the record is)."""
    conn = kafka.connection()
    group, budget = group_budget
    topic = clients.create_topic(conn, clients.unique("poison"), partitions=3)
    events_topic = clients.create_topic(conn, clients.unique("poison-events"), partitions=1)
    pods = watched_pods(["pod-a", "pod-b", "pod-c"], topic=topic, events_topic=events_topic, stall_on="pill",
                        extra={"enable.auto.offset.store": False})  # fmt: skip
    clients.produce(conn, topic, [*(f"ok-{i}" for i in range(5)), "pill", "after"], partition=0)
    first = wait_for(lambda: [p for p in pods if p[1].paused_polling.is_set()], lambda hung: len(hung) == 1,
                     timeout=30, what="the partition's owner hanging on the pill")[0]  # fmt: skip
    wait_for(lambda: clients.committed(conn, group), lambda c: c.get(0) == 5, timeout=10,
             what="the five records before the pill committed")  # fmt: skip
    wait_for(lambda: _metric(first[0], EVICTED), lambda n: n == 1, timeout=bound(STALL + CHECK + 2.0),
             what="the first owner evicted under a permit")  # fmt: skip
    # its app is restarted (here: closed): the partition goes to one of the two others, which reads the pill again
    first[1].close()
    first[0].stop()
    rest = [p for p in pods if p is not first]
    second = wait_for(lambda: [p for p in rest if p[1].paused_polling.is_set()], lambda hung: len(hung) == 1,
                      timeout=bound(10.0), what="the next owner hanging on the same pill")[0]  # fmt: skip
    wait_for(lambda: _metric(second[0], POISONED), lambda n: n >= 1, timeout=bound(STALL + 3 * CHECK),
             what="the next owner's eviction refused as a poison pill")  # fmt: skip
    wait_for(
        lambda: _stall_handled(second[0]), timeout=bound(CHECK), what="the next owner's watchdog done with the stall"
    )
    assert _metric(second[0], EVICTED) == 0
    assert second[1].member_id in {m.member_id for m in clients.describe_group(conn, group).members}
    assert [(m.topic, m.partition, m.offset) for m in budget.ledger().poison] == [(topic, 0, 5)]
    found = [e for e in topic_events(kafka, events_topic, group) if isinstance(e, events.PoisonSuspected)]
    assert [(p.topic, p.partition, p.committed_offset) for e in found for p in e.payload.partitions] == [(topic, 0, 5)]
    assert found[0].pod == second[1].client_id
    assert found[0].payload.member.member_id == second[1].member_id


@pytest.mark.integration
def test_without_api_access_the_sidecar_only_alerts(kafka: KafkaCluster, tmp_path: Path) -> None:
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("noapi"), partitions=3)
    group = clients.unique("g-noapi")
    sidecar = start_sidecar(
        conn, group, "pod-a", tmp_path, stall_timeout_seconds=STALL, check_interval_seconds=CHECK,
        session_timeout_seconds=6, events_topic="", service_account_dir=str(tmp_path / "none"),
    )  # fmt: skip
    members = [
        clients.Member(conn, group, [topic], "pod-a",
                       consumer_factory=lambda conf: BeaconingConsumer(conf, beacon_addr=sidecar.beacon_addr)).start(),
        clients.Member(conn, group, [topic], "pod-b").start(),
    ]  # fmt: skip
    try:
        wait_for(lambda: clients.stable_members(conn, group), lambda n: n == 2, timeout=60, what="2 members stable")
        assert '"budget": "unavailable (no-api): alert only"' in sidecar.get("/v1/status")[1]
        wait_for(lambda: sidecar.status().get("member"), timeout=30, what="the sidecar proving its member")
        members[0].paused_polling.set()
        refused = 'vigil_sidecar_alerts_total{kind="budget-no-api"}'  # the cause as itself: no token mounted
        wait_for(lambda: _metric(sidecar, refused), lambda n: n >= 1, timeout=bound(STALL + 2 * CHECK),
                 what="the refusal for lack of API access")  # fmt: skip
        wait_for(lambda: _stall_handled(sidecar), timeout=bound(CHECK), what="the watchdog done with the stall")
        assert _metric(sidecar, EVICTED) == 0
        assert len(clients.describe_group(conn, group).members) == 2
    finally:
        for m in members:
            m.close()
        sidecar.stop()
