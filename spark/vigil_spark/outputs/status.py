"""Each matching `ConsumerGroup`'s `status.report`, by server-side apply (field manager `vigil-report`).

The pure part decides which CRs a run's summaries belong to and what is applied to each; the edge (`Writer`,
`kafka_cluster_id`) lists the CRs and applies, importing the `kubernetes` client only when used (it comes with
the `operator` extra, not with `report`).

**Matching rule.** A ConsumerGroup gets the summary of group G of this run's Kafka cluster when its
`spec.groupId` is G and it names the same Kafka cluster, judged by the first of these that both sides know:

1. the Kafka **cluster id**: the CR's `status.clusterId` (written by the operator once it has reached the
   brokers) against the id this run read from the brokers' metadata — equal or no match, whatever the names;
2. the **cluster name**: the CR's `spec.kafka.clusterName` against `--cluster`;
3. the **bootstrap addresses**: the CR's `spec.kafka.bootstrapServers` and this run's
   `VIGIL_KAFKA_BOOTSTRAP_SERVERS` share a `host:port` (host compared without case) — one broker address
   serves one cluster.

Only summaries of this run's cluster (`--cluster`) are applied: rows another run wrote into the same `--out`
under another cluster name are not this cluster's. Every matching CR gets it (the operator lets only the oldest
CR of a group act, but the report is true of all). The applied object carries `status.report` alone, so the
operator's fields (manager `vigil-operator`) are neither owned nor touched; a key of the report with no value
is left out, and server-side apply then removes what an earlier run set there.
"""

import json
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from vigil_core.crd import API_GROUP, KIND, PLURAL, VERSION
from vigil_core.kafka.security import KafkaConnection
from vigil_spark.outputs.summary import GroupSummary

FIELD_MANAGER: Final = "vigil-report"
RESOURCE: Final = f"{PLURAL}.{API_GROUP}"
#: What the job needs from RBAC, per call, to name in a refusal.
NEEDS_LIST: Final = f"`list` on {PLURAL} (apiGroup {API_GROUP})"
NEEDS_PATCH: Final = f"`patch` on {PLURAL}/status (apiGroup {API_GROUP})"
_PAGE: Final = 500


@dataclass(frozen=True)
class KafkaCluster:
    """The cluster this run read."""

    name: str
    """`--cluster`: the `cluster` column of every row, and of every summary."""
    cluster_id: str | None
    """From the brokers' metadata; None if they gave none."""
    bootstrap: frozenset[str]


@dataclass(frozen=True)
class Target:
    """A ConsumerGroup as the matching rule sees it."""

    namespace: str
    name: str
    group_id: str
    cluster_id: str | None = None
    """`status.clusterId`, the operator's."""
    cluster_name: str | None = None
    """`spec.kafka.clusterName`."""
    bootstrap: frozenset[str] = frozenset()

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class Plan:
    updates: tuple[tuple[Target, dict[str, Any]], ...]
    """Each matching CR with the object to apply to its status."""
    summarized: int
    """Groups of this cluster with a summary."""
    without_cr: tuple[str, ...] = ()
    """Group ids of this cluster no ConsumerGroup matched."""
    other_cluster: tuple[str, ...] = field(default=())
    """CRs (namespace/name) with a summarized group id that name another Kafka cluster."""


def addresses(bootstrap: str) -> frozenset[str]:
    """`host:port` entries of a bootstrap list, hosts in lower case."""
    out = set()
    for entry in bootstrap.split(","):
        host, sep, port = entry.strip().rpartition(":")
        if sep and host and port:
            out.add(f"{host.lower()}:{port}")
    return frozenset(out)


def target_of(obj: Mapping[str, Any]) -> Target | None:
    """A ConsumerGroup (as the API returns it) for matching; None when it has no name or group id."""
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    kafka = spec.get("kafka") or {}
    if not meta.get("name") or not meta.get("namespace") or not spec.get("groupId"):
        return None
    return Target(
        namespace=str(meta["namespace"]),
        name=str(meta["name"]),
        group_id=str(spec["groupId"]),
        cluster_id=str(status["clusterId"]) if status.get("clusterId") else None,
        cluster_name=str(kafka["clusterName"]) if kafka.get("clusterName") else None,
        bootstrap=addresses(str(kafka.get("bootstrapServers") or "")),
    )


def same_cluster(target: Target, cluster: KafkaCluster) -> bool:
    """Whether the CR names the cluster this run read (the module's rule: id, else name, else an address)."""
    if target.cluster_id and cluster.cluster_id:
        return target.cluster_id == cluster.cluster_id
    if target.cluster_name:
        return target.cluster_name == cluster.name
    return bool(target.bootstrap & cluster.bootstrap)


def report_of(summary: GroupSummary, now: datetime) -> dict[str, Any]:
    """`status.report`: the summary's `status_report` without empty keys, plus the report's cluster name."""
    found = {k: v for k, v in summary.status_report(now).items() if v is not None}
    return {"cluster": summary.cluster, **found}


def apply_body(target: Target, report: Mapping[str, Any]) -> dict[str, Any]:
    """The object applied to the CR's status subresource: identity and `status.report`, nothing else."""
    return {
        "apiVersion": f"{API_GROUP}/{VERSION}",
        "kind": KIND,
        "metadata": {"name": target.name, "namespace": target.namespace},
        "status": {"report": dict(report)},
    }


def plan(summaries: Iterable[GroupSummary], targets: Iterable[Target], cluster: KafkaCluster, now: datetime) -> Plan:
    """What to apply where: the summaries of `cluster` onto the CRs that match them."""
    mine = {s.group: s for s in summaries if s.cluster == cluster.name}
    by_group: dict[str, list[Target]] = {}
    for t in targets:
        if t.group_id in mine:
            by_group.setdefault(t.group_id, []).append(t)
    updates, without, other = [], [], []
    for group in sorted(mine):
        matched = [t for t in by_group.get(group, []) if same_cluster(t, cluster)]
        other += [t.ref for t in by_group.get(group, []) if t not in matched]
        if not matched:
            without.append(group)
        report = report_of(mine[group], now)
        updates += [(t, apply_body(t, report)) for t in sorted(matched, key=lambda t: t.ref)]
    return Plan(tuple(updates), len(mine), tuple(without), tuple(sorted(other)))


# -- failures, in one line ----------------------------------------------------------------------------------


class StatusError(Exception):
    """Listing or applying failed: one line naming what and, for a refusal, the permission needed."""


class KubeConfigError(StatusError):
    """No usable Kubernetes configuration (a setting, exit 2)."""


def api_message(body: str | bytes | None) -> str:
    """The `message` of a Kubernetes Status body, else the body's first line ('' for none)."""
    if not body:
        return ""
    text = body.decode(errors="replace") if isinstance(body, bytes) else str(body)
    try:
        message = json.loads(text).get("message")
    except (ValueError, AttributeError):
        message = None
    first = str(message or text).strip().splitlines()
    return first[0] if first else ""


def refusal(status: int, reason: str, message: str, *, what: str, needs: str) -> str:
    """One line for an apiserver's error answer to `what`, naming the permission (`needs`) for 403."""
    said = message or reason or "no reason given"
    if status == 403:
        return f"kubernetes: {what}: forbidden ({said}); the report job needs {needs}"
    if status == 401:
        return f"kubernetes: {what}: unauthorized ({said}); check the kubeconfig's credentials"
    if status == 404 and what.startswith("list"):
        return f"kubernetes: {what}: not found ({said}); is the {RESOURCE} CRD installed?"
    return f"kubernetes: {what}: {status} {said}"


def denied(namespace: str, reason: str) -> str:
    """One line for a SelfSubjectAccessReview that says the status patch in `namespace` would be refused."""
    return (f"kubernetes: patch {PLURAL}/status in namespace {namespace}: not allowed"
            f" ({reason or 'no rule grants it'}); the report job needs {NEEDS_PATCH}")  # fmt: skip


_ERRNO: Final = re.compile(r"\[Errno -?\d+\][^'\")]*")


def unreachable(server: str, exc: BaseException) -> str:
    """One line for an apiserver that did not answer (refused, unknown host, TLS, timeout)."""
    reason = getattr(exc, "reason", None) or exc
    text = str(reason)
    found = _ERRNO.search(text)
    why = found.group(0).strip() if found else (text.rsplit(": ", maxsplit=1)[-1].strip() or type(reason).__name__)
    return f"kubernetes: cannot reach the apiserver at {server}: {why}"


# -- the edge -------------------------------------------------------------------------------------------------


def kafka_cluster_id(conn: KafkaConnection, timeout: float) -> str | None:
    """The cluster id in the brokers' metadata (one metadata request); None when they give none."""
    from confluent_kafka import KafkaException  # noqa: PLC0415 - the pure part imports no client
    from confluent_kafka.admin import AdminClient  # noqa: PLC0415

    client = AdminClient(conn.confluent_config() | {"log_level": 0})
    try:
        found = client.list_topics(topic="__consumer_offsets", timeout=timeout).cluster_id
    except KafkaException as exc:
        raise StatusError(f"cluster id: cannot read the metadata from {conn.bootstrap_servers}: {exc}") from exc
    return str(found) if found else None


class Writer:
    """Lists ConsumerGroups and applies `status.report`, through one API client."""

    def __init__(self, api: Any, namespace: str | None, timeout: float) -> None:
        from kubernetes import client  # noqa: PLC0415

        self._api = api
        self._custom = client.CustomObjectsApi(api)
        self.namespace = namespace
        self.server = str(api.configuration.host)
        self._timeout = timeout

    @classmethod
    def connect(
        cls, kubeconfig: Path | None, env: Mapping[str, str], namespace: str | None, timeout: float
    ) -> "Writer":
        """From `kubeconfig`; without one, in-cluster (a pod's service account), else $KUBECONFIG or
        ~/.kube/config. KubeConfigError when none of them is usable."""
        try:
            from kubernetes import client, config  # noqa: PLC0415
            from kubernetes.config.config_exception import ConfigException  # noqa: PLC0415
        except ImportError:
            raise KubeConfigError(
                "--update-status needs the kubernetes client: pip install 'kafka-vigil[report]'"
            ) from None
        loader: Any = config
        if kubeconfig is not None:
            if not kubeconfig.is_file():
                raise KubeConfigError(f"--kubeconfig: no such file: {kubeconfig}")
            try:
                return cls(loader.new_client_from_config(config_file=str(kubeconfig)), namespace, timeout)
            except (ConfigException, ValueError, OSError) as exc:
                raise KubeConfigError(f"--kubeconfig {kubeconfig}: {_first_line(exc)}") from None
        try:
            configuration = client.Configuration()
            loader.load_incluster_config(client_configuration=configuration)
            return cls(client.ApiClient(configuration), namespace, timeout)
        except ConfigException:
            pass  # not in a pod: a kubeconfig then
        where = env.get("KUBECONFIG") or str(Path("~/.kube/config").expanduser())
        try:
            return cls(loader.new_client_from_config(config_file=where), namespace, timeout)
        except (ConfigException, ValueError, OSError) as exc:
            raise KubeConfigError(
                f"--update-status: no Kubernetes configuration: not in a pod, and {where}: {_first_line(exc)}"
                " (give --kubeconfig)"
            ) from None

    @property
    def scope(self) -> str:
        return f"namespace {self.namespace}" if self.namespace else "all namespaces"

    def targets(self) -> list[Target]:
        """Every ConsumerGroup in scope (paged), as the matching rule reads them."""
        what = f"list {RESOURCE} in {self.scope}"
        found: list[Target] = []
        token: str | None = None
        while True:
            page: dict[str, Any] = {"limit": _PAGE, "_request_timeout": self._timeout}
            if token:
                page["_continue"] = token
            answer = self._call(lambda page=page: self._list(page), what=what, needs=NEEDS_LIST)
            found += [t for t in map(target_of, answer.get("items") or []) if t is not None]
            token = (answer.get("metadata") or {}).get("continue") or None
            if not token:
                return found

    def check_patch(self, namespaces: Iterable[str]) -> None:
        """StatusError when the apiserver says the status patch in one of `namespaces` would be refused: asked
        before Spark starts (one SelfSubjectAccessReview per namespace), so missing RBAC fails in seconds, not after
        the job. An apiserver that will not answer the review is no refusal: the patch itself is the proof then."""
        from kubernetes import client  # noqa: PLC0415
        from kubernetes.client.exceptions import ApiException  # noqa: PLC0415

        reviews = client.AuthorizationV1Api(self._api)
        for namespace in sorted(set(namespaces)):
            review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "spec": {
                "resourceAttributes": {"group": API_GROUP, "resource": PLURAL, "subresource": "status",
                                       "verb": "patch", "namespace": namespace}}}  # fmt: skip
            try:
                answer = self._call(
                    lambda review=review: reviews.create_self_subject_access_review(
                        review, _request_timeout=self._timeout
                    ).to_dict(),
                    what=f"review the status patch in namespace {namespace}",
                    needs=NEEDS_PATCH,
                    passthrough=(403, 404),
                )
            except ApiException:
                return  # reviews not served or not allowed here: the patch at the end answers for itself
            verdict = answer.get("status") or {}
            if not verdict.get("allowed"):
                raise StatusError(denied(namespace, str(verdict.get("reason") or "")))

    def _list(self, page: Mapping[str, Any]) -> Any:
        if self.namespace:
            return self._custom.list_namespaced_custom_object(API_GROUP, VERSION, self.namespace, PLURAL, **page)
        return self._custom.list_cluster_custom_object(API_GROUP, VERSION, PLURAL, **page)

    def apply(self, target: Target, body: Mapping[str, Any]) -> bool:
        """Server-side apply `body` to the CR's status (forced: the report's fields are this job's). False when
        the CR is gone (deleted since it was listed)."""
        from kubernetes.client.exceptions import ApiException  # noqa: PLC0415

        try:
            self._call(
                lambda: self._custom.patch_namespaced_custom_object_status(
                    API_GROUP, VERSION, target.namespace, PLURAL, target.name, dict(body),
                    field_manager=FIELD_MANAGER, force=True, _content_type="application/apply-patch+yaml",
                    _request_timeout=self._timeout,
                ),
                what=f"apply status.report of {KIND} {target.ref}",
                needs=NEEDS_PATCH,
                passthrough=(404,),
            )  # fmt: skip
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise  # pragma: no cover - _call turns every other answer into a StatusError
        return True

    def _call(self, call: Any, *, what: str, needs: str, passthrough: Collection[int] = ()) -> Any:
        """`call()`, its failures one line (StatusError); an error answer whose status is in `passthrough` is
        raised as it is, for the caller to read."""
        from kubernetes.client.exceptions import ApiException  # noqa: PLC0415
        from urllib3.exceptions import HTTPError  # noqa: PLC0415

        try:
            return call()
        except ApiException as exc:
            if exc.status in passthrough:
                raise
            raise StatusError(
                refusal(int(exc.status or 0), str(exc.reason or ""), api_message(exc.body), what=what, needs=needs)
            ) from None
        except (HTTPError, OSError) as exc:
            raise StatusError(unreachable(self.server, exc)) from None

    def close(self) -> None:
        self._api.close()


def write(writer: Writer, updates: Sequence[tuple[Target, dict[str, Any]]]) -> tuple[int, list[str]]:
    """Apply each update: (how many were applied, the refs of CRs gone meanwhile). Raises StatusError on the
    first failure (a refusal or an unreachable apiserver is the same for every CR)."""
    applied, gone = 0, []
    for target, body in updates:
        if writer.apply(target, body):
            applied += 1
        else:
            gone.append(target.ref)
    return applied, gone


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
