"""A group's eviction budget on the real apiserver, provisioned as the operator will: the Lease, a ServiceAccount
with a Role limited to get/update on it, and a TokenRequest token — for the budget tests and for sidecars."""

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vigil_core.budget import ledger as lg
from vigil_core.budget.lease_api import BudgetUnavailable, LeaseApi
from vigil_dev.testing.kube_fixtures import Kube
from vigil_dev.testing.waiting import wait_for

ACCOUNT = "vigil-sidecar"


@dataclass
class Budget:
    """One group's budget Lease, created as the operator would, and a token limited to get/update on it."""

    kube: Kube
    namespace: str
    lease: str
    token: str

    def api(self, *, admin: bool = False, lease: str | None = None) -> LeaseApi:
        pki = self.kube.cluster.pki
        auth: dict[str, Any] = {"client_cert": pki.cert("admin")} if admin else {"token": self.token}
        return LeaseApi(self.kube.cluster.server, self.namespace, lease or self.lease, ca_file=pki.ca_cert, **auth)

    def service_account_dir(self, path: Path) -> Path:
        """What the kubelet mounts for a pod: `token` and `ca.crt` (for `LeaseApi.in_cluster` out of a cluster)."""
        path.mkdir(parents=True, exist_ok=True)
        (path / "token").write_text(self.token)
        (path / "ca.crt").write_bytes(self.kube.cluster.pki.ca_cert.read_bytes())
        (path / "namespace").write_text(self.namespace)
        return path

    def ledger(self) -> lg.Ledger:
        return read_ledger(self.kube, self.namespace, self.lease)


def read_ledger(kube: Kube, namespace: str, lease: str) -> lg.Ledger:
    """The budget ledger stored in a Lease, as the sidecars and the operator wrote it."""
    obj = kube.dynamic.resources.get(api_version="coordination.k8s.io/v1", kind="Lease").get(
        name=lease, namespace=namespace
    )
    return lg.loads((obj.to_dict()["metadata"].get("annotations") or {}).get(lg.ANNOTATION))


def create_lease(kube: Kube, namespace: str, name: str) -> None:
    kube.apply(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {"app.kubernetes.io/managed-by": "vigil-operator"},
                "annotations": {"vigil.dev/group": "orders"},
            },
            "spec": {"holderIdentity": "vigil-operator"},
        }
    )


def provision_budget(kube: Kube, namespace: str, lease: str) -> "Budget":
    """The Lease, the ServiceAccount, its Role and binding, and a token; waits until RBAC lets the token in."""
    create_lease(kube, namespace, lease)
    kube.apply(
        f"""
apiVersion: v1
kind: ServiceAccount
metadata: {{name: {ACCOUNT}, namespace: {namespace}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: vigil-budget, namespace: {namespace}}}
rules:
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  resourceNames: [{lease}]
  verbs: [get, update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: vigil-budget, namespace: {namespace}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: vigil-budget}}
subjects:
- {{kind: ServiceAccount, name: {ACCOUNT}, namespace: {namespace}}}
"""
    )
    answer = kube.core.create_namespaced_service_account_token(ACCOUNT, namespace, {"spec": {"expirationSeconds": 600}})
    found = Budget(kube, namespace, lease, answer.status.token)

    async def readable() -> bool:
        async with found.api() as api:
            return not isinstance(await api.update(lambda ledger, _: (ledger, True), time.time), BudgetUnavailable)

    # the RBAC authorizer learns of new bindings through an informer: poll until it has
    wait_for(lambda: asyncio.run(readable()), timeout=30, what=f"the {ACCOUNT} token may get the Lease")
    return found
