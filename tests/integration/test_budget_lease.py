"""The eviction budget against the real kube-apiserver: a pre-created Lease, a Role limited to get/update on it,
a service-account token from the TokenRequest API, and sidecars racing for permits by compare-and-swap."""

import asyncio
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from vigil_core.budget import ledger as lg
from vigil_core.budget.lease_api import (
    BudgetPolicy,
    BudgetUnavailable,
    LeaseApi,
    publish,
    request_permit,
    request_removal,
)
from vigil_core.budget.ledger import Permit, Refusal
from vigil_dev.testing.budget import Budget, create_lease, provision_budget
from vigil_dev.testing.kube_fixtures import Kube
from vigil_operator.k8s.api import KubeApi, KubeError

pytestmark = pytest.mark.kube

STALL = 30.0
POLICY = BudgetPolicy(stall_timeout=STALL, max_concurrent=1, cooldown=60.0, systemic_percent=50.0, settle=0.0)


@pytest.fixture
def budget(kube: Kube, namespace: str) -> Budget:
    return provision_budget(kube, namespace, lg.lease_name(f"orders-{namespace}"))


def fake_clock(start: float) -> tuple[list[float], Callable[[], float]]:
    """Wall time under the test's control, so cooldown rounds need no sleeps."""
    now = [start]
    return now, lambda: now[0]


HEALTHY = ("pod-c", "pod-d", "pod-e", "pod-f")


def test_two_sidecars_racing_get_exactly_one_permit_per_round(budget: Budget) -> None:
    rounds = 6
    now, clock = fake_clock(time.time())

    async def race() -> tuple[list[list[Permit | Refusal | BudgetUnavailable]], int, int]:
        async with budget.api() as a, budget.api() as b, budget.api(admin=True) as admin:
            results = []
            for r in range(rounds):
                for pod in HEALTHY:  # healthy peers keep publishing (as admin: client-certificate auth)
                    assert not isinstance(
                        await publish(admin, pod, 0.5, stall_timeout=STALL, clock=clock), BudgetUnavailable
                    )
                answers = await asyncio.gather(
                    request_permit(a, "pod-a", f"member-a-{r}", 40.0, POLICY, clock=clock),
                    request_permit(b, "pod-b", f"member-b-{r}", 41.0, POLICY, clock=clock),
                )
                results.append(list(answers))
                now[0] += POLICY.cooldown  # the next round starts as this round's permit leaves the cooldown
            return results, a.conflicts + b.conflicts, a.writes + b.writes

    results, conflicts, writes = asyncio.run(race())
    for r, answers in enumerate(results):
        permits = [x for x in answers if isinstance(x, Permit)]
        refusals = [x for x in answers if isinstance(x, Refusal)]
        assert len(permits) == 1, f"round {r}: {answers}"
        assert len(refusals) == 1, f"round {r}: {answers}"
        assert refusals[0].cause == "budget", refusals[0].message
    assert conflicts >= 1, "the two sidecars never wrote over the same resourceVersion: the race was not exercised"
    assert writes == 2 * rounds  # every answer, permit or refusal, was written exactly once
    stored = budget.ledger()
    last = next(x for x in results[-1] if isinstance(x, Permit))
    assert stored.permits[-1] == lg.PermitRecord(last.pod, last.member_id, last.granted)
    assert set(stored.members) == {"pod-a", "pod-b", *HEALTHY}


def test_the_lease_keeps_what_the_operator_wrote(budget: Budget) -> None:
    async def one() -> object:
        async with budget.api() as api:
            return await publish(api, "pod-a", 1.0)

    assert isinstance(asyncio.run(one()), lg.Ledger)
    obj = budget.kube.dynamic.resources.get(api_version="coordination.k8s.io/v1", kind="Lease").get(
        name=budget.lease, namespace=budget.namespace
    )
    meta = obj.to_dict()["metadata"]
    assert meta["labels"] == {"app.kubernetes.io/managed-by": "vigil-operator"}
    assert meta["annotations"]["vigil.dev/group"] == "orders"
    assert obj.spec.holderIdentity == "vigil-operator"
    assert set(budget.ledger().members) == {"pod-a"}


class InterleavedApi(LeaseApi):
    """After its first read, another sidecar writes: this one's PUT then carries a stale resourceVersion."""

    def __init__(self, other: LeaseApi, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.other = other
        self.reads = 0

    async def read(self) -> dict[str, Any]:
        lease = await super().read()
        self.reads += 1
        if self.reads == 1:
            assert isinstance(await publish(self.other, "pod-b", 20.0), lg.Ledger)
        return lease


def test_a_conflicting_write_is_refused_by_resource_version_and_retried_on_fresh_content(budget: Budget) -> None:
    pki = budget.kube.cluster.pki

    async def run() -> tuple[object, InterleavedApi]:
        async with budget.api() as other:
            api = InterleavedApi(
                other, server_url=budget.kube.cluster.server, namespace=budget.namespace,
                lease_name=budget.lease, ca_file=pki.ca_cert, token=budget.token,
            )  # fmt: skip
            async with api:
                return await publish(api, "pod-a", 1.0), api

    answer, api = asyncio.run(run())
    assert isinstance(answer, lg.Ledger)
    assert (api.conflicts, api.writes, api.reads) == (1, 1, 2)
    stored = budget.ledger()
    assert stored.members["pod-b"].poll_age == 20.0, "the other sidecar's write was lost"
    assert stored.members["pod-a"].poll_age == 1.0


def test_when_most_members_stall_no_one_gets_a_permit(budget: Budget) -> None:
    async def run() -> list[object]:
        async with budget.api() as api:
            for pod, age in (("pod-x", 35.0), ("pod-y", 31.0), ("pod-h", 0.3)):
                assert isinstance(await publish(api, pod, age, stall_timeout=STALL), lg.Ledger)
            return [await request_permit(api, "pod-z", "member-z", 40.0, POLICY)]

    (answer,) = asyncio.run(run())
    assert isinstance(answer, Refusal)
    assert answer.cause == "systemic-stall", answer.message
    assert (answer.count.stalled, answer.count.members) == (3, 4)
    stored = budget.ledger()
    assert stored.permits == ()
    assert stored.members["pod-z"].poll_age == 40.0  # the refusal's published age was written


def test_without_access_the_budget_is_unavailable_never_a_permit(budget: Budget, tmp_path: Path) -> None:
    other = lg.lease_name("another-group")
    create_lease(budget.kube, budget.namespace, other)

    async def run() -> list[object]:
        async with (
            budget.api(lease=other) as forbidden,
            budget.api(admin=True, lease="vigil-budget-missing") as missing,
            LeaseApi(f"https://127.0.0.1:{closed_port()}", budget.namespace, budget.lease, timeout=2) as down,
        ):
            return [
                await request_permit(forbidden, "pod-a", "m", 40.0, POLICY),
                await request_permit(missing, "pod-a", "m", 40.0, POLICY),
                await request_permit(down, "pod-a", "m", 40.0, POLICY),
            ]

    causes = [(a.cause, a.retriable) if isinstance(a, BudgetUnavailable) else a for a in asyncio.run(run())]
    assert causes == [("no-permission", False), ("no-lease", False), ("unreachable", True)]
    assert budget.ledger().permits == ()

    no_env = LeaseApi.in_cluster(budget.lease, env={}, account_dir=tmp_path)
    assert isinstance(no_env, BudgetUnavailable)
    assert no_env.cause == "no-api"
    no_token = LeaseApi.in_cluster(
        budget.lease,
        env={"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"},
        account_dir=tmp_path,
    )
    assert isinstance(no_token, BudgetUnavailable)
    assert no_token.cause == "no-api"


def test_in_cluster_config_reads_the_mounted_service_account(budget: Budget, tmp_path: Path) -> None:
    """The same files and env a kubelet provides; the token file is re-read per request (rotation)."""
    (tmp_path / "token").write_text("not-a-token\n")
    (tmp_path / "ca.crt").write_bytes(budget.kube.cluster.pki.ca_cert.read_bytes())
    (tmp_path / "namespace").write_text(budget.namespace)
    port = budget.kube.cluster.server.rsplit(":", 1)[1]
    env = {"KUBERNETES_SERVICE_HOST": budget.kube.cluster.network.node_ip, "KUBERNETES_SERVICE_PORT": port}
    api = LeaseApi.in_cluster(budget.lease, env=env, account_dir=tmp_path)
    assert isinstance(api, LeaseApi)

    async def run() -> list[object]:
        async with api:
            rejected = await publish(api, "pod-a", 1.0)
            (tmp_path / "token").write_text(budget.token)  # the kubelet rotated the token
            return [rejected, await publish(api, "pod-a", 2.0)]

    rejected, accepted = asyncio.run(run())
    assert isinstance(rejected, BudgetUnavailable)
    assert rejected.cause == "unreachable"  # 401: a token being rotated, worth retrying
    assert isinstance(accepted, lg.Ledger)
    assert budget.ledger().members["pod-a"].poll_age == 2.0


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_operators_removals_share_the_sidecars_budget(kube: Kube, namespace: str) -> None:
    """The operator writes through its own API client (`KubeApi.budget_store`) into the same Lease: a crash-loop
    removal it records spends the budget a sidecar then asks from, under the same compare-and-swap."""
    group = f"orders-{namespace}"
    budget = provision_budget(kube, namespace, lg.lease_name(group))
    operator = KubeApi(kube.api)
    now, clock = fake_clock(time.time())

    async def run() -> tuple[Any, ...]:
        store = operator.budget_store(namespace, group)
        removal = await request_removal(store, "pod-3", "m-3", proven_gone=False, max_concurrent=1, cooldown=60.0,
                                        clock=clock)  # fmt: skip
        second = await request_removal(store, "pod-2", "m-2", proven_gone=False, max_concurrent=1, cooldown=60.0,
                                       clock=clock)  # fmt: skip
        gone = await request_removal(store, "pod-1", "m-1", proven_gone=True, max_concurrent=1, cooldown=60.0,
                                     clock=clock)  # fmt: skip
        async with budget.api() as sidecar, budget.api(admin=True) as admin:
            for pod in HEALTHY:
                await publish(admin, pod, 0.5, stall_timeout=STALL, clock=clock)
            now[0] += 5
            asked = await request_permit(sidecar, "pod-a", "m-a", 40.0, POLICY, clock=clock)
        missing = await request_removal(operator.budget_store(namespace, "no-such-group"), "pod-0", "m-0",
                                        proven_gone=False, max_concurrent=1, cooldown=60.0, clock=clock)  # fmt: skip
        return removal, second, gone, asked, missing

    removal, second, gone, asked, missing = asyncio.run(run())
    assert isinstance(removal, Permit)
    assert isinstance(second, Refusal)
    assert second.cause == "budget"
    assert isinstance(gone, Permit)  # proven gone: recorded, never refused
    assert isinstance(asked, Refusal)
    assert asked.cause == "budget"
    assert isinstance(missing, BudgetUnavailable)
    assert missing.cause == "no-lease"
    assert [(p.pod, p.member_id) for p in budget.ledger().permits] == [("pod-3", "m-3"), ("pod-1", "m-1")]


def test_an_unreachable_api_server_is_an_answer_for_the_operator_too() -> None:
    """The operator's API client gives up with urllib3's MaxRetryError (not an OSError): still one answer."""
    configuration = client.Configuration()
    configuration.host = "https://127.0.0.1:1"
    configuration.retries = 0
    operator = KubeApi(client.ApiClient(configuration))
    try:
        answer = asyncio.run(request_removal(operator.budget_store("ns", "orders"), "pod-0", "m-0", proven_gone=False,
                                             max_concurrent=1, cooldown=60.0))  # fmt: skip
        assert isinstance(answer, BudgetUnavailable)
        assert answer.cause == "unreachable"
        with pytest.raises(KubeError, match=r"^Node n1: the API server is unreachable \(MaxRetryError\)$"):
            asyncio.run(operator.node("n1"))
    finally:
        operator.close()
