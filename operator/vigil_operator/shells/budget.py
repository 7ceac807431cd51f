"""The group's eviction budget Lease and its Role, provisioned once per spec generation (owned by the CR)."""

from collections.abc import Mapping
from typing import Any

from vigil_operator.domain.reconcile import Notice
from vigil_operator.domain.spec import ConsumerGroupSpec
from vigil_operator.k8s.api import KubeApi, KubeError
from vigil_operator.shells.base import Post


class BudgetLeases:
    def __init__(self, kube: KubeApi) -> None:
        self.kube = kube
        self._provisioned: dict[str, tuple[int, str]] = {}
        """Per CR uid: the spec generation and service account its Lease and Role were provisioned for."""
        self._told: dict[str, tuple[int, str, str]] = {}
        """Per CR uid: the failure last posted (generation, account, message): tried again every resync, told once."""

    def forget(self, uid: str) -> None:
        """The ConsumerGroup's loop ended: provisioned again (idempotently) if it resumes."""
        self._provisioned.pop(uid, None)
        self._told.pop(uid, None)

    async def provision(self, body: Mapping[str, Any], spec: ConsumerGroupSpec, post: Post) -> None:
        """The budget Lease and its Role, once per spec generation (they are owned by the CR)."""
        uid, generation = str(body["metadata"]["uid"]), int(body["metadata"].get("generation") or 0)
        account = spec.workload.service_account_name
        if self._provisioned.get(uid) == (generation, account):
            return
        try:
            await self.kube.ensure_budget(body["metadata"]["namespace"], body, spec.group_id, account)
        except KubeError as exc:
            failure = (generation, account, str(exc))
            if self._told.get(uid) != failure:
                post(Notice("Warning", "BudgetNotProvisioned", str(exc)))
                self._told[uid] = failure
            return
        self._provisioned[uid] = (generation, account)
        self._told.pop(uid, None)
