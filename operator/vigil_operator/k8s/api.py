"""Kubernetes calls the operator makes itself: status by server-side apply, the budget Lease and its RBAC,
Secrets for the Kafka credentials, the leader-election Lease. The `kubernetes` client is blocking: each call runs
in a thread.

Status is written with server-side apply under the field manager `vigil-operator`, so the fields the report
job applies (`status.report`, manager `vigil-report`) are never overwritten, and vice versa.
"""

import asyncio
import base64
import json
from collections.abc import Mapping
from concurrent.futures import Executor
from datetime import UTC, datetime
from typing import Any, Final

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from vigil_core.budget import ledger
from vigil_core.budget.lease_api import BudgetUnavailable, UnavailableError, answer_for
from vigil_core.crd import API_GROUP, KIND, PLURAL, VERSION
from vigil_operator.domain.rollout import RESTART_ANNOTATION, SetFacts

FIELD_MANAGER: Final = "vigil-operator"
MAX_EVENT_MESSAGE: Final = 1024
"""Characters of an Event's message kept (kubectl shows Events one per line)."""
MANAGED_BY: Final = {"app.kubernetes.io/managed-by": "vigil-operator"}


LIST_PAGE: Final = 500
"""Objects per page of a list call (the apiserver's own default page for kubectl)."""


class KubeError(Exception):
    """An API call failed: one line naming the object and the server's reason."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        """The HTTP status the API server answered with; None when it did not answer."""


class KubeApi:
    def __init__(self, api: Any) -> None:
        self._api = api
        self._custom = client.CustomObjectsApi(api)
        self._core = client.CoreV1Api(api)
        self._coordination = client.CoordinationV1Api(api)
        self._rbac = client.RbacAuthorizationV1Api(api)
        self._apps = client.AppsV1Api(api)
        self._admission = client.AdmissionregistrationV1Api(api)

    @classmethod
    def connect(cls, kubeconfig: str | None = None) -> "KubeApi":
        """In-cluster when there is a service account, else the kubeconfig (KUBECONFIG or ~/.kube/config)."""
        loader: Any = config
        try:
            loader.load_incluster_config()
            return cls(client.ApiClient())
        except loader.ConfigException:
            return cls(loader.new_client_from_config(config_file=kubeconfig))

    def close(self) -> None:
        self._api.close()

    async def apply_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> None:
        body = {"apiVersion": f"{API_GROUP}/{VERSION}", "kind": KIND, "metadata": {"name": name}, "status": status}
        await self._call(
            f"status of ConsumerGroup {namespace}/{name}",
            lambda: self._custom.patch_namespaced_custom_object_status(
                API_GROUP, VERSION, namespace, PLURAL, name, body,
                field_manager=FIELD_MANAGER, force=True, _content_type="application/apply-patch+yaml",
            ),
        )  # fmt: skip

    async def ensure_budget(self, namespace: str, owner: Mapping[str, Any], group_id: str, service_account: str) -> str:
        """The group's eviction-budget Lease, a Role limited to get/update on it (`resourceNames`: `create`
        cannot be limited that way, so the Lease is made here), bound to the workload's ServiceAccount. All
        owned by the ConsumerGroup, so deleting it removes them. Returns the Lease name."""
        lease = ledger.lease_name(group_id)
        cr_name = owner["metadata"]["name"]
        refs = [
            {
                "apiVersion": f"{API_GROUP}/{VERSION}",
                "kind": KIND,
                "name": cr_name,
                "uid": owner["metadata"]["uid"],
                "controller": True,
                "blockOwnerDeletion": False,
            }
        ]
        meta = {"namespace": namespace, "labels": MANAGED_BY, "ownerReferences": refs}
        role = f"vigil-budget-{cr_name}"[:253]
        objects = [
            (
                "Lease",
                lambda: self._coordination.patch_namespaced_lease(
                    lease, namespace,
                    {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                     "metadata": {**meta, "name": lease, "annotations": {"vigil.dev/group": group_id}},
                     "spec": {"holderIdentity": FIELD_MANAGER}},
                    field_manager=FIELD_MANAGER, force=True, _content_type="application/apply-patch+yaml",
                ),
            ),
            (
                "Role",
                lambda: self._rbac.patch_namespaced_role(
                    role, namespace,
                    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                     "metadata": {**meta, "name": role},
                     "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                                "resourceNames": [lease], "verbs": ["get", "update"]}]},
                    field_manager=FIELD_MANAGER, force=True, _content_type="application/apply-patch+yaml",
                ),
            ),
            (
                "RoleBinding",
                lambda: self._rbac.patch_namespaced_role_binding(
                    role, namespace,
                    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                     "metadata": {**meta, "name": role},
                     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
                     "subjects": [{"kind": "ServiceAccount", "name": service_account, "namespace": namespace}]},
                    field_manager=FIELD_MANAGER, force=True, _content_type="application/apply-patch+yaml",
                ),
            ),
        ]  # fmt: skip
        for kind, call in objects:
            await self._call(f"{kind} for the eviction budget of ConsumerGroup {namespace}/{cr_name}", call)
        return lease

    def budget_store(self, namespace: str, group_id: str) -> "BudgetLease":
        """The group's budget Lease, read and replaced with the operator's credentials (`lease_api.LeaseStore`)."""
        return BudgetLease(self._coordination, namespace, ledger.lease_name(group_id))

    async def secret_value(self, namespace: str, name: str, key: str) -> bytes:
        """One key of a Secret; KubeError names the Secret and key when either is missing."""
        secret = await self._call(
            f"Secret {namespace}/{name}",
            lambda: self._core.read_namespaced_secret(name, namespace, _preload_content=False),
        )
        data = json.loads(secret.data).get("data") or {}
        if key not in data:
            raise KubeError(f"Secret {namespace}/{name} has no key {key!r} (keys: {', '.join(sorted(data)) or 'none'})")
        return base64.b64decode(data[key])

    async def secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A Secret as stored (`data` base64), None when it does not exist."""
        return await self._read(
            f"Secret {namespace}/{name}",
            lambda: self._core.read_namespaced_secret(name, namespace, _preload_content=False),
        )

    async def pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A Pod as stored, None when it does not exist."""
        return await self._read(
            f"Pod {namespace}/{name}", lambda: self._core.read_namespaced_pod(name, namespace, _preload_content=False)
        )

    async def pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        """The Pods of `namespace` matching the label `selector` (one page: a release's replicas)."""
        found = await self._call(
            f"list Pods in {namespace} ({selector})",
            lambda: self._core.list_namespaced_pod(namespace, label_selector=selector, _preload_content=False),
        )
        return list(_json(found.data).get("items") or [])

    async def update_secret(
        self, namespace: str, name: str, *, data: Mapping[str, str], annotations: Mapping[str, str | None],
        resource_version: str,
    ) -> dict[str, Any] | None:  # fmt: skip
        """Merge `data` (base64 values) and `annotations` (None: removed) into the Secret if it is still at
        `resource_version` (a compare-and-swap): the stored object, or None on 409 Conflict (another writer changed
        it since)."""
        patch = {
            "metadata": {"resourceVersion": resource_version, "annotations": dict(annotations)},
            "data": dict(data),
        }
        try:
            written = await self._call(
                f"update Secret {namespace}/{name}",
                lambda: self._core.patch_namespaced_secret(
                    name, namespace, patch, _content_type="application/merge-patch+json", _preload_content=False
                ),
            )
        except KubeError as exc:
            if exc.status == 409:
                return None
            raise
        return _json(written.data)

    async def webhook_bundles(self, name: str) -> list[str] | None:
        """The `caBundle` (base64, "" when unset) of each webhook of the Mutating- and ValidatingWebhookConfiguration
        `name`; None when either is missing."""
        bundles: list[str] = []
        for kind, read, _ in self._webhook_configurations():
            found = await self._read(f"{kind} {name}", lambda r=read: r(name, _preload_content=False))
            if found is None:
                return None
            bundles += [(w.get("clientConfig") or {}).get("caBundle") or "" for w in found.get("webhooks") or []]
        return bundles

    async def set_webhook_bundles(self, name: str, bundle: str) -> None:
        """Every webhook's `caBundle` (base64) in both configurations `name`, each by a JSON patch that applies only
        to the configuration as read (its resourceVersion tested): a concurrent change fails it, for a retry."""
        for kind, read, patch in self._webhook_configurations():
            found = await self._read(f"{kind} {name}", lambda r=read: r(name, _preload_content=False))
            if found is None:
                raise KubeError(f"{kind} {name}: 404 Not Found", 404)
            ops: list[dict[str, Any]] = [
                {"op": "test", "path": "/metadata/resourceVersion", "value": found["metadata"]["resourceVersion"]}
            ]
            ops += [
                {"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": bundle}
                for i in range(len(found.get("webhooks") or []))
            ]
            await self._call(
                f"set the caBundle of {kind} {name}",
                lambda p=patch, body=ops: p(
                    name, body, _content_type="application/json-patch+json", _preload_content=False
                ),
            )

    def _webhook_configurations(self) -> list[tuple[str, Any, Any]]:
        """(kind, read, patch) of both webhook configuration kinds."""
        admission = self._admission
        return [
            ("MutatingWebhookConfiguration", admission.read_mutating_webhook_configuration,
             admission.patch_mutating_webhook_configuration),
            ("ValidatingWebhookConfiguration", admission.read_validating_webhook_configuration,
             admission.patch_validating_webhook_configuration),
        ]  # fmt: skip

    async def consumergroups(self, namespaces: tuple[str, ...]) -> list[dict[str, Any]]:
        """Every ConsumerGroup in `namespaces` (none: in every namespace), listed LIST_PAGE at a time."""
        found: list[dict[str, Any]] = []
        for namespace in namespaces or (None,):
            token: str | None = None
            while True:
                page = _json((await self._call(
                    f"ConsumerGroups in {namespace or 'every namespace'}",
                    lambda ns=namespace, t=token: self._list_consumergroups(ns, t),
                )).data)  # fmt: skip
                found.extend(page.get("items") or [])
                token = (page.get("metadata") or {}).get("continue") or None
                if token is None:
                    break
        return found

    def _list_consumergroups(self, namespace: str | None, token: str | None) -> Any:
        paging: dict[str, Any] = {"limit": LIST_PAGE, "_preload_content": False}
        if token:
            paging["_continue"] = token
        if namespace is None:
            return self._custom.list_cluster_custom_object(API_GROUP, VERSION, PLURAL, **paging)
        return self._custom.list_namespaced_custom_object(API_GROUP, VERSION, namespace, PLURAL, **paging)

    async def crd(self, name: str) -> dict[str, Any] | None:
        """A CustomResourceDefinition, None when it does not exist. Listed by name, not read: `list` is what the
        operator's RBAC grants on CRDs (kopf discovers its resources by listing them)."""
        extensions = client.ApiextensionsV1Api(self._api)
        found = _json((await self._call(
            f"CustomResourceDefinition {name}",
            lambda: extensions.list_custom_resource_definition(
                field_selector=f"metadata.name={name}", _preload_content=False
            ),
        )).data)  # fmt: skip
        items: list[dict[str, Any]] = found.get("items") or []
        return items[0] if items else None

    async def dry_run_pod(self, namespace: str, pod: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
        """The pod as admission left it, created with dryRun=All (every webhook runs, nothing is stored), and the
        apiserver's `Warning` header (the webhooks' warnings)."""
        body: Any = dict(pod)  # the client takes a dict as it takes its V1Pod
        response = await self._call(
            f"a dry-run pod in {namespace}",
            lambda: self._core.create_namespaced_pod(namespace, body, dry_run="All", _preload_content=False),
        )
        return _json(response.data), response.headers.get("Warning")

    async def node(self, name: str) -> dict[str, Any] | None:
        """A Node object (cluster-scoped: `get` on nodes); None when it does not exist."""
        return await self._read(f"Node {name}", lambda: self._core.read_node(name, _preload_content=False))

    async def statefulset(self, namespace: str, name: str) -> SetFacts | None:
        """What rollouts and departures need of a StatefulSet; None when it does not exist."""
        obj = await self._read(
            f"StatefulSet {namespace}/{name}",
            lambda: self._apps.read_namespaced_stateful_set(name, namespace, _preload_content=False),
        )
        if obj is None:
            return None
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        requested = None
        if annotations.get(RESTART_ANNOTATION):
            try:
                requested = datetime.fromisoformat(str(annotations[RESTART_ANNOTATION]).replace("Z", "+00:00"))
            except ValueError:
                requested = None
        return SetFacts(
            update_strategy=str((spec.get("updateStrategy") or {}).get("type") or "RollingUpdate"),
            update_revision=str(status.get("updateRevision") or ""),
            replicas=1 if spec.get("replicas") is None else int(spec["replicas"]),
            restart_requested_at=requested if requested is None or requested.tzinfo else None,
        )

    async def delete_pod(self, namespace: str, name: str, uid: str) -> None:
        """Delete exactly this pod (uid precondition: never its replacement under the same name)."""
        options = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=uid))
        await self._call(
            f"delete pod {namespace}/{name}", lambda: self._core.delete_namespaced_pod(name, namespace, body=options)
        )

    async def lease(
        self, namespace: str, name: str, *, timeout: float | None = None, executor: Executor | None = None
    ) -> dict[str, Any] | None:
        """A Lease as stored (JSON, `metadata.resourceVersion` included); None when it does not exist."""
        return await self._read(
            f"Lease {namespace}/{name}",
            lambda: self._coordination.read_namespaced_lease(
                name, namespace, _preload_content=False, _request_timeout=timeout
            ),
            executor,
        )

    async def create_lease(
        self, namespace: str, name: str, spec: Mapping[str, Any], *, timeout: float | None = None,
        executor: Executor | None = None,
    ) -> dict[str, Any] | None:  # fmt: skip
        """Create the Lease `name` with `spec` (None values left out) and the operator's label; the stored object,
        or None when one of that name exists already (409: another writer created it first).

        The client sends it through its models (create takes no raw body): a time whose microseconds are 0 goes
        without them and is refused (400), once in a million creates; the caller's next try succeeds."""
        lease = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": name, "namespace": namespace, "labels": MANAGED_BY},
            "spec": {key: value for key, value in spec.items() if value is not None},
        }
        return await self._write_lease(
            f"create Lease {namespace}/{name}",
            lambda: self._coordination.create_namespaced_lease(
                namespace, client.V1Lease.model_validate(lease), _preload_content=False, _request_timeout=timeout
            ),
            executor,
        )

    async def update_lease(
        self, namespace: str, name: str, spec: Mapping[str, Any], *, resource_version: str,
        timeout: float | None = None, executor: Executor | None = None,
    ) -> dict[str, Any] | None:  # fmt: skip
        """Merge `spec` into the Lease (JSON merge patch: a None value removes its field) if it is still at
        `resource_version`: a compare-and-swap. The stored object, or None on 409 Conflict (another writer changed
        it since). A Lease deleted meanwhile is a KubeError with status 404.

        A merge patch, not a PUT of the object read: the `kubernetes` client would re-serialize a PUT through its
        models, dropping fields it does not know and writing a `MicroTime` without its microseconds when they are
        0, which the API server refuses."""
        patch = {"metadata": {"resourceVersion": resource_version}, "spec": dict(spec)}
        return await self._write_lease(
            f"update Lease {namespace}/{name}",
            lambda: self._coordination.patch_namespaced_lease(
                name, namespace, patch, _content_type="application/merge-patch+json", _preload_content=False,
                _request_timeout=timeout,
            ),
            executor,
        )  # fmt: skip

    async def _write_lease(self, what: str, call: Any, executor: Executor | None) -> dict[str, Any] | None:
        try:
            written = await self._call(what, call, executor)
        except KubeError as exc:
            if exc.status == 409:
                return None
            raise
        return _json(written.data)

    async def post_event(self, about: Mapping[str, Any], type_: str, reason: str, message: str, *, source: str) -> None:
        """A core/v1 Event about the object `about` (its body): what `kubectl describe` lists under it."""
        meta = about["metadata"]
        now = datetime.now(UTC)
        event: Any = {
            "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
            "involvedObject": {
                "apiVersion": about.get("apiVersion") or f"{API_GROUP}/{VERSION}", "kind": about.get("kind") or KIND,
                "name": meta["name"], "namespace": meta["namespace"], "uid": meta.get("uid"),
                "resourceVersion": meta.get("resourceVersion"),
            },
            "type": type_, "reason": reason, "message": message[:MAX_EVENT_MESSAGE],
            "source": {"component": FIELD_MANAGER}, "reportingComponent": FIELD_MANAGER, "reportingInstance": source,
            "firstTimestamp": now, "lastTimestamp": now, "count": 1,
        }  # fmt: skip
        await self._call(
            f"Event {reason} on {meta['namespace']}/{meta['name']}",
            lambda: self._core.create_namespaced_event(meta["namespace"], event),
        )

    async def _read(self, what: str, call: Any, executor: Executor | None = None) -> dict[str, Any] | None:
        """An object read by `call` (unparsed: `_preload_content=False`) as JSON; None when it does not exist."""
        try:
            found = await self._call(what, call, executor)
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise
        return _json(found.data)

    async def _call(self, what: str, call: Any, executor: Executor | None = None) -> Any:
        """`call` in a thread (`executor`'s, else asyncio's default pool); its failure as one-line KubeError."""
        try:
            if executor is not None:
                return await asyncio.get_running_loop().run_in_executor(executor, call)
            return await asyncio.to_thread(call)
        except ApiException as exc:
            raise KubeError(f"{what}: {exc.status} {_reason(exc)}", exc.status) from None
        except (OSError, urllib3.exceptions.HTTPError) as exc:  # urllib3 gives up with MaxRetryError, not OSError
            raise KubeError(f"{what}: the API server is unreachable ({type(exc).__name__})") from None


class BudgetLease:
    """`lease_api.LeaseStore` over the kubernetes client: the operator's removals share the sidecars' budget."""

    def __init__(self, coordination: Any, namespace: str, lease_name: str) -> None:
        self._coordination = coordination
        self.namespace = namespace
        self.lease_name = lease_name

    async def read(self) -> dict[str, Any]:
        read = self._coordination.read_namespaced_lease
        return await self._raw(lambda: read(self.lease_name, self.namespace, _preload_content=False)) or {}

    async def replace(self, lease: dict[str, Any]) -> dict[str, Any] | None:
        put = self._coordination.replace_namespaced_lease
        return await self._raw(lambda: put(self.lease_name, self.namespace, lease, _preload_content=False))

    async def _raw(self, call: Any) -> dict[str, Any] | None:
        try:
            response = await asyncio.to_thread(call)
        except ApiException as exc:
            if exc.status == 409:
                return None
            body = _json(exc.body)
            raise UnavailableError(answer_for(int(exc.status or 0), body, self)) from None
        except (OSError, urllib3.exceptions.HTTPError) as exc:
            where = f"lease {self.namespace}/{self.lease_name}"
            raise UnavailableError(BudgetUnavailable("unreachable", f"{where}: {exc}")) from None
        return _json(response.data)


def _json(data: bytes | str | None) -> dict[str, Any]:
    try:
        value = json.loads(data or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _reason(exc: ApiException) -> str:
    try:
        return str(json.loads(exc.body or "{}").get("message") or exc.reason)
    except ValueError:
        return str(exc.reason)
