"""The budget shell (`vigil_operator.shells.budget`) against a fake API server: a Lease it cannot provision is tried
again on every resync but told once per distinct failure (a resync every 30 s must not post an Event each time), and
a provisioned one is not provisioned again until the spec's generation or ServiceAccount changes."""

import asyncio
from collections.abc import Mapping
from typing import Any, cast

from vigil_operator.domain.reconcile import Notice
from vigil_operator.domain.spec import ConsumerGroupSpec, parse_spec
from vigil_operator.k8s.api import KubeApi, KubeError
from vigil_operator.shells.budget import BudgetLeases


class FakeKube:
    def __init__(self, failures: list[str | None]) -> None:
        self.failures = failures
        """What each ensure_budget call does in turn: fail with this message, or (None) succeed."""
        self.calls: list[tuple[str, str, str]] = []

    async def ensure_budget(self, namespace: str, owner: Mapping[str, Any], group_id: str, account: str) -> str:
        self.calls.append((namespace, group_id, account))
        failure = self.failures.pop(0)
        if failure is not None:
            raise KubeError(failure, status=403)
        return "vigil-budget-orders"


def body(generation: int) -> dict[str, Any]:
    return {"metadata": {"uid": "cg-uid", "namespace": "shop", "name": "orders", "generation": generation}}


def spec(account: str = "orders") -> ConsumerGroupSpec:
    workload = {"kind": "StatefulSet", "name": "orders", "serviceAccountName": account}
    return parse_spec({"groupId": "orders", "kafka": {"bootstrapServers": "kafka:9092"}, "workload": workload})


def run(kube: FakeKube, steps: list[tuple[int, str]]) -> list[Notice]:
    leases = BudgetLeases(cast(KubeApi, kube))
    posted: list[Notice] = []
    for generation, account in steps:
        asyncio.run(leases.provision(body(generation), spec(account), posted.append))
    return posted


FORBIDDEN = "Role shop/vigil-budget-orders: forbidden"
OTHER = "Lease shop/vigil-budget-orders: the server is unavailable"


def test_a_failure_is_tried_on_every_resync_and_told_once() -> None:
    kube = FakeKube([FORBIDDEN, FORBIDDEN, FORBIDDEN, None])
    posted = run(kube, [(1, "orders")] * 6)
    assert len(kube.calls) == 4  # tried until it succeeded, then not again for this generation
    assert posted == [Notice("Warning", "BudgetNotProvisioned", FORBIDDEN)]


def test_another_failure_is_told_and_so_is_the_same_one_after_a_success() -> None:
    kube = FakeKube([FORBIDDEN, OTHER, OTHER, None, FORBIDDEN])
    posted = run(kube, [(1, "orders")] * 4 + [(2, "orders")])
    assert [n.message for n in posted] == [FORBIDDEN, OTHER, FORBIDDEN]


def test_a_new_generation_or_service_account_is_provisioned_again() -> None:
    kube = FakeKube([None, None, None])
    assert run(kube, [(1, "orders"), (1, "orders"), (2, "orders"), (2, "orders"), (2, "orders-v2")]) == []
    assert [c[2] for c in kube.calls] == ["orders", "orders", "orders-v2"]
