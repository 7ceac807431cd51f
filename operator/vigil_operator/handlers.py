"""The kopf layer: thin handlers over `runtime` (one resync) and `resyncs` (the loops); the webhooks are in
`admission`.

Registered when `vigil operator` imports this module. What the handlers need is kept in memory, so a resync makes no
list call and the webhook none at all: the ConsumerGroups in the operator's catalog (vigil_operator.catalog: claims,
the webhook's lookup), fed by kopf's events on them — not a kopf index, which at 10,000 of them holds the operator
back for minutes at startup — and the pods naming a group and the nodes' kubelet versions in kopf indexes.

The resyncs run in one loop per Kafka cluster (vigil_operator.resyncs), started with the operator and run while this
replica leads: no kopf daemon or timer per ConsumerGroup, so kopf puts no finalizer on them (and takes off the one
0.2.0's daemons put there). The handlers of a spec change or a pod's event only ask the loops for a resync.
"""

import asyncio
import functools
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import kopf

from vigil_core.crd import API_GROUP, PLURAL, VERSION
from vigil_core.errors import ConfigError
from vigil_operator import settings as operator_settings
from vigil_operator import webhook_server
from vigil_operator.catalog import Catalog, Record
from vigil_operator.domain import injection, pods
from vigil_operator.domain.reconcile import PodFacts
from vigil_operator.k8s.api import KubeApi, KubeError
from vigil_operator.resyncs import Always, Resyncs
from vigil_operator.runtime import Key, Runtime, StopFlag, SyncStoppedError, stopping
from vigil_operator.shells.leadership import Leadership
from vigil_operator.webhook_tls import WebhookTLS

log = logging.getLogger(__name__)
try:
    SETTINGS = operator_settings.configured(os.environ)
    """Read once at import: `vigil operator` hands over its validated flags before importing this module."""
except ConfigError as _exc:  # imported by `kopf run`: a bad env var is one line and exit 2, as a bad flag is
    raise SystemExit(operator_settings.refused(str(_exc))) from None
CR = (API_GROUP, VERSION, PLURAL)
EXIT_WAIT = 5.0
"""Seconds the exiting operator waits for its resyncs to give way (each at its next step)."""
SETTLE = 60.0
"""Seconds after startup when the ConsumerGroups listed then but never shown by kopf are forgotten (catalog)."""
RECENT_END = timedelta(seconds=60)
"""A pod event within this of an app container's end resyncs its group (the end may still be a departure)."""


@dataclass
class Indexes:
    """What the resyncs read: the ConsumerGroups (the catalog), and kopf's index of their pods, handed over by the
    first event handler (kopf calls event handlers once its indexes are filled)."""

    catalog: Catalog
    group_pods: "kopf.Index[Key, PodFacts] | None" = None


@kopf.on.startup()
async def startup(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="vigil.dev")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix="vigil.dev", key="last-handled-configuration"
    )
    settings.persistence.finalizer = "vigil.dev/finalizer"  # 0.2.0's: kopf takes it off (no handler needs one)
    # frozen watch streams (kopf #787, #1276): the server ends each watch, the client gives up a bit later
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.watching.connect_timeout = 30
    settings.posting.level = logging.ERROR  # our own Events say what matters; kopf's log lines stay in the log
    settings.execution.max_workers = 8
    runtime = memo["runtime"] = Runtime(SETTINGS, KubeApi.connect())
    if SETTINGS.webhook:
        context = None
        if SETTINGS.webhook_secret:  # the operator's own certificates: made if missing, reloaded in place
            pod_name = os.environ.get(operator_settings.POD_NAME_ENV)
            tls = memo["webhook_tls"] = WebhookTLS(runtime.kube, SETTINGS, webhook_server.host(SETTINGS), pod_name)
            try:
                context = await tls.context()
            except KubeError as exc:
                raise kopf.TemporaryError(f"webhook TLS: {exc}", delay=10) from None
            memo["webhook_reload"] = asyncio.create_task(tls.reload(context))
        settings.admission.server = webhook_server.server(SETTINGS, runtime.metrics, context=context)
        if SETTINGS.webhook_managed:
            settings.admission.managed = "vigil.dev"
    if SETTINGS.metrics_port:
        memo["metrics_server"] = runtime.metrics.serve(SETTINGS.metrics_bind, SETTINGS.metrics_port)
    catalog = memo["catalog"] = Catalog()
    try:
        catalog.fill(await runtime.kube.consumergroups(tuple(memo.get("watched") or ())))
    except KubeError as exc:
        raise kopf.TemporaryError(f"listing the ConsumerGroups: {exc}", delay=10) from None
    indexes = memo["indexes"] = Indexes(catalog)
    resyncs: Resyncs[Key, Record] = Resyncs(
        functools.partial(_resync, runtime, indexes), _cluster_of,
        lambda key, record: runtime.release(key, _uid(record)), interval=SETTINGS.resync_seconds,
    )  # fmt: skip
    memo["resyncs"] = resyncs
    asyncio.get_running_loop().call_later(SETTLE, _settle, resyncs, indexes)
    leader = memo["leader"] = _leader(runtime)
    if isinstance(leader, Leadership):
        memo["election"] = asyncio.create_task(leader.run())
    memo["loops"] = asyncio.create_task(resyncs.run(leader))
    if isinstance(memo.get("webhook_tls"), WebhookTLS):
        memo["webhook_keep"] = asyncio.create_task(memo["webhook_tls"].keep(leader))


@kopf.on.cleanup()
async def cleanup(memo: kopf.Memo, **_: Any) -> None:
    """The term ends first (every resync in flight gives way at its next step), then the Lease is released, so the
    standby that leads next never overlaps a step begun here."""
    resyncs, leader, election, loops = (memo.get(k) for k in ("resyncs", "leader", "election", "loops"))
    for task in (memo.get("webhook_keep"), memo.get("webhook_reload")):
        if isinstance(task, asyncio.Task):
            task.cancel()  # between steps: each step's write is one request, a plan is made again at the next start
    if isinstance(resyncs, Resyncs):
        resyncs.exit()
    if isinstance(election, asyncio.Task):
        election.cancel()  # the term ends; the Lease stays ours until released below
    elif isinstance(leader, Always):
        leader.end()
    if isinstance(loops, asyncio.Task):
        await asyncio.wait({loops}, timeout=EXIT_WAIT)
        loops.cancel()
    if isinstance(leader, Leadership):
        await leader.release()
    runtime = memo.get("runtime")
    if isinstance(runtime, Runtime):
        await runtime.notices.drain(EXIT_WAIT)
        runtime.close()
        runtime.kube.close()
    server = memo.get("metrics_server")
    if server is not None:
        server.shutdown()


def _leader(runtime: Runtime) -> Leadership | Always:
    """The leadership the loops run under: always this replica with --standalone, else the holder of the Lease."""
    if SETTINGS.standalone:
        return Always()
    # the pod's name, not one per process: the kubelet restarts a crashed operator in the same pod only once it is
    # dead, and the restarted one takes its own Lease back at once (a coordinated restart's bridge resumes before
    # the member's session ends) instead of waiting out its own earlier hold
    return Leadership(runtime.kube, SETTINGS.namespace, SETTINGS.leader_lease, operator_settings.identity(os.environ))


# -- indexes ---------------------------------------------------------------------------------------------------


@kopf.index("pods", annotations={injection.GROUP_ANNOTATION: kopf.PRESENT})
def group_pods(
    *, namespace: str | None, annotations: Mapping[str, str], body: kopf.Body, **_: Any
) -> dict[tuple[str, str], PodFacts]:
    return {(namespace or "", annotations[injection.GROUP_ANNOTATION]): pods.pod_facts(body)}


@kopf.index("nodes")
def kubelets(*, status: kopf.Status, **_: Any) -> dict[str, str]:
    return {"kubelet": str((status.get("nodeInfo") or {}).get("kubeletVersion") or "")}


# -- the resyncs ------------------------------------------------------------------------------------------------


@kopf.on.event(*CR)
async def consumergroup_event(
    *, type: str | None, namespace: str | None, name: str, meta: kopf.Meta, body: kopf.Body, memo: Any, **kwargs: Any
) -> None:  # fmt: skip
    """A ConsumerGroup's event: the catalog keeps what it shows; its deletion ends its resyncs; a new one, or a spec
    change (a new generation), asks for one now (a loop with nothing due sleeps until asked)."""
    catalog: Catalog = memo["catalog"]
    key = (namespace or "", name)
    if type == "DELETED":
        catalog.drop(key)
    else:
        catalog.put(body)
    resyncs = _loops(memo, kwargs)
    if type == "DELETED":
        resyncs.deleted(key)
        return
    resynced = memo["runtime"].resynced(key)
    if resynced is None or resynced != int(meta.get("generation") or 0):  # new to the loops, or a new spec
        resyncs.request(key)


@kopf.on.event("pods", annotations={injection.GROUP_ANNOTATION: kopf.PRESENT})
async def pod_changed(
    *, type: str | None, body: kopf.Body, namespace: str | None, annotations: Mapping[str, str], memo: Any,
    **kwargs: Any,
) -> None:  # fmt: skip
    """A pod gone or whose app container ended recently: the group resyncs now, so a departed member is removed at
    once (domain.departures) instead of at the next interval; during a coordinated restart, any pod change (a
    replacement becoming Ready ends a step)."""
    resyncs = _loops(memo, kwargs)
    key = (namespace or "", annotations[injection.GROUP_ANNOTATION])
    record = memo["catalog"].get(key)
    rolling = record is not None and ((record.body.get("status") or {}).get("rollout") or {}).get("phase") == "Rolling"
    if record is None or not (rolling or _may_have_departed(type, pods.pod_facts(body), datetime.now(UTC))):
        return
    resyncs.request(key)


def _loops(memo: Any, kwargs: Mapping[str, Any]) -> "Resyncs[Key, Record]":
    """The resync loops, handed kopf's filled index of pods by the first event handler, and the catalog once kopf has
    shown every ConsumerGroup listed at startup (or `_settle` forgot the rest): the first round takes them all."""
    resyncs: Resyncs[Key, Record] = memo["resyncs"]
    indexes: Indexes = memo["indexes"]
    if indexes.group_pods is None:
        indexes.group_pods = kwargs["group_pods"]
    _hand_over(resyncs, indexes)
    return resyncs


def _hand_over(resyncs: "Resyncs[Key, Record]", indexes: Indexes) -> None:
    if indexes.group_pods is not None and indexes.catalog.settled:
        resyncs.indexed(indexes.catalog.records)


def _may_have_departed(event: str | None, pod: PodFacts, now: datetime) -> bool:
    """Worth a resync now: the pod is gone, or its app container ended recently."""
    if event == "DELETED":
        return True
    return pod.app_ended_at is not None and now - pod.app_ended_at <= RECENT_END


async def _resync(runtime: Runtime, indexes: "Indexes", key: Key, record: Record, stop: StopFlag) -> None:
    """One resync of the group `key` with the pods and the other groups' claims from kopf's indexes (handed over
    with them: `_loops`). `stop` is set when the replica stops leading, the group is deleted or the operator exits:
    the resync gives way to it while it waits (its turn, a Secret, the broker that does not answer) and begins no
    step after it (domain.pacing) — a replica that lost its leadership writes nothing, and a deletion is not held
    up."""
    body = record.body
    runtime.resynced(key, int(body.get("metadata", {}).get("generation") or 0))
    mine: list[PodFacts] = list(indexes.group_pods.get(key, [])) if indexes.group_pods is not None else []
    others = [c for c in indexes.catalog.claims(record.claim.group_id) if (c.namespace, c.name) != key]

    try:
        await runtime.sync(body, mine, others, runtime.notices.poster(body), stop)
    except SyncStoppedError as exc:
        log.info("resync of %s/%s stopped %s: %s", *key, exc, stopping(stop))


def _settle(resyncs: "Resyncs[Key, Record]", indexes: Indexes) -> None:
    gone = indexes.catalog.settle()
    if gone:
        log.info("%d ConsumerGroups listed at startup were deleted before kopf listed them: forgotten", gone)
    _hand_over(resyncs, indexes)


def _cluster_of(record: Record) -> str:
    """The Kafka cluster a ConsumerGroup names (its loop): its bootstrap servers, in order."""
    servers = str((record.spec.get("kafka") or {}).get("bootstrapServers") or "")
    return ",".join(sorted(s.strip() for s in servers.split(",") if s.strip()))


def _uid(record: Record) -> str:
    return str((record.body.get("metadata") or {}).get("uid") or "")


# -- liveness probe extras: `GET <liveness URL>` shows them next to kopf's own "ok" -----------------------------


@kopf.on.probe(id="resyncs")
def resyncs(*, memo: Any, **_: Any) -> int:
    runtime = memo.get("runtime")
    return runtime.syncs if isinstance(runtime, Runtime) else 0


@kopf.on.probe(id="departures_removed")
def departures_removed(*, memo: Any, **_: Any) -> int:
    """Members removed at once because their pod was gone or their app container ended."""
    runtime = memo.get("runtime")
    return runtime.departures.removals if isinstance(runtime, Runtime) else 0


@kopf.on.probe(id="departures_deferred")
def departures_deferred(*, memo: Any, **_: Any) -> int:
    """Removals the eviction budget held back: a crash-looping static member while the group's budget is spent."""
    runtime = memo.get("runtime")
    return runtime.departures.deferrals if isinstance(runtime, Runtime) else 0


@kopf.on.probe(id="departures_released")
def departures_released(*, memo: Any, **_: Any) -> int:
    """KIP-848 static members of gone consumers whose instance id was released at once (domain.departures)."""
    runtime = memo.get("runtime")
    return runtime.departures.releases if isinstance(runtime, Runtime) else 0


@kopf.on.probe(id="kafka_requests")
def kafka_requests(*, memo: Any, **_: Any) -> int:
    """Broker requests vigil asked for since start: describe, offset fetch and end offsets per resync, cluster id and
    limits when refreshed. The admin client's own FindCoordinator lookups are not counted: the broker sees one more
    request per group per resync (bench/RESULTS.md, "Operator at scale")."""
    runtime = memo.get("runtime")
    return runtime.brokers.requests() if isinstance(runtime, Runtime) else 0
