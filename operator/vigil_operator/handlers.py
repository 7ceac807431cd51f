"""The kopf layer: thin handlers over `runtime` (resync); the webhooks are in `admission`.

Registered when `vigil operator` imports this module. kopf indexes keep what the handlers need in memory —
every ConsumerGroup (claims, the webhook's lookup), the pods naming a group, the nodes' kubelet versions — so
a resync makes no list call and the webhook none at all.

Every resync runs in its ConsumerGroup's loop, a kopf daemon (domain.pacing): kopf stops daemons when the replica
pauses for a peer with a higher priority, and lets handlers of changes and events run on while paused (for the
events that reached it before its watch streams closed). The handlers of a spec change or a pod's event therefore
only ask the loop for a resync.
"""

import asyncio
import copy
import logging
import os
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import kopf

from vigil_core.crd import API_GROUP, PLURAL, VERSION
from vigil_operator import settings as operator_settings
from vigil_operator import webhook_server
from vigil_operator.domain import claims, injection, pacing, pods
from vigil_operator.domain.reconcile import Notice, PodFacts
from vigil_operator.k8s.api import KubeApi
from vigil_operator.runtime import Key, Runtime, StopFlag, SyncStoppedError, stopping

log = logging.getLogger(__name__)
SETTINGS = operator_settings.configured(os.environ)
"""Read once at import: `vigil operator` hands over its validated flags before importing this module."""
CR = (API_GROUP, VERSION, PLURAL)
RECENT_END = timedelta(seconds=60)
"""A pod event within this of an app container's end resyncs its group (the end may still be a departure)."""


@dataclass(frozen=True)
class Record:
    """What the index keeps of a ConsumerGroup."""

    claim: claims.Claim
    spec: Mapping[str, Any]
    body: Mapping[str, Any]
    """The whole object as last seen: a pod's event resyncs the group with it (no read)."""


@kopf.on.startup()
async def startup(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="vigil.dev")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix="vigil.dev", key="last-handled-configuration"
    )
    settings.persistence.finalizer = "vigil.dev/finalizer"
    # frozen watch streams (kopf #787, #1276): the server ends each watch, the client gives up a bit later
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.watching.connect_timeout = 30
    settings.posting.level = logging.ERROR  # our own Events say what matters; kopf's log lines stay in the log
    settings.execution.max_workers = 8
    settings.background.instant_exit_timeout = 2.0  # a stopped loop's resync gives way at its next step: wait for it
    if SETTINGS.webhook:
        settings.admission.server = webhook_server.server(SETTINGS)
        if SETTINGS.webhook_managed:
            settings.admission.managed = "vigil.dev"
    runtime = memo["runtime"] = Runtime(SETTINGS, KubeApi.connect())
    if SETTINGS.metrics_port:
        memo["metrics_server"] = runtime.metrics.serve(SETTINGS.metrics_bind, SETTINGS.metrics_port)


@kopf.on.cleanup()
async def cleanup(memo: kopf.Memo, **_: Any) -> None:
    runtime = memo.get("runtime")
    if isinstance(runtime, Runtime):
        runtime.close()
        runtime.kube.close()
    server = memo.get("metrics_server")
    if server is not None:
        server.shutdown()


# -- indexes ---------------------------------------------------------------------------------------------------


@kopf.index(*CR)
def consumergroups(
    *,
    namespace: str | None,
    name: str,
    spec: kopf.Spec,
    status: kopf.Status,
    meta: kopf.Meta,
    body: kopf.Body,
    **_: Any,
) -> dict[tuple[str, str], Record]:
    namespace = namespace or ""
    claim = claims.Claim(
        str(meta.get("creationTimestamp") or ""),
        namespace,
        name,
        str(status.get("clusterId") or ""),
        str(spec.get("groupId") or ""),
    )
    return {(namespace, name): Record(claim, dict(spec), copy.deepcopy(dict(body)))}


@kopf.index("pods", annotations={injection.GROUP_ANNOTATION: kopf.PRESENT})
def group_pods(
    *, namespace: str | None, annotations: Mapping[str, str], body: kopf.Body, **_: Any
) -> dict[tuple[str, str], PodFacts]:
    return {(namespace or "", annotations[injection.GROUP_ANNOTATION]): pods.pod_facts(body)}


@kopf.index("nodes")
def kubelets(*, status: kopf.Status, **_: Any) -> dict[str, str]:
    return {"kubelet": str((status.get("nodeInfo") or {}).get("kubeletVersion") or "")}


# -- the resync ------------------------------------------------------------------------------------------------


@kopf.daemon(*CR)
async def resync_loop(
    *, body: kopf.Body, memo: Any, namespace: str | None, name: str, uid: str, stopped: kopf.DaemonStopped,
    **kwargs: Any,
) -> None:  # fmt: skip
    """The ConsumerGroup's resyncs (domain.pacing): at once when it starts (the group is new, the replica starts or
    resumes), at once when asked (a spec change, a pod's event), else every --resync-seconds; until kopf stops it."""
    runtime: Runtime = memo["runtime"]
    key = (namespace or "", name)
    requested = runtime.requests(key)
    clock = asyncio.get_running_loop().time
    last: float | None = None
    try:
        while True:
            move = pacing.next_move(stopping=stopping(stopped), requested=requested.is_set(), last_ended=last,
                                    interval=SETTINGS.resync_seconds, now=clock())  # fmt: skip
            if isinstance(move, pacing.End):
                log.info("resyncs of %s/%s end: %s", *key, move.why)
                return
            if isinstance(move, pacing.Wait):
                await _first_of(requested.wait(), stopped.wait(), timeout=move.seconds)
                continue
            requested.clear()
            runtime.resynced(key, int(body.get("metadata", {}).get("generation") or 0))
            try:
                await _sync(runtime, body, key, kwargs["group_pods"], kwargs["consumergroups"], stopped=stopped)
            except Exception:  # one resync's bug must not end the group's resyncs: logged, and on to the next
                log.exception("resync of %s/%s failed", *key)
            last = clock()
    finally:
        runtime.release(key, uid)


@kopf.on.event(*CR)
async def spec_changed(*, namespace: str | None, name: str, meta: kopf.Meta, memo: Any, **_: Any) -> None:
    """A spec change (a new generation) asks the group's loop for a resync now."""
    runtime: Runtime = memo["runtime"]
    key = (namespace or "", name)
    resynced = runtime.resynced(key)
    if resynced is not None and resynced != int(meta.get("generation") or 0):
        runtime.request(key)


@kopf.on.event("pods", annotations={injection.GROUP_ANNOTATION: kopf.PRESENT})
async def pod_changed(
    *, type: str | None, body: kopf.Body, namespace: str | None, annotations: Mapping[str, str], memo: Any,
    **kwargs: Any,
) -> None:  # fmt: skip
    """A pod gone or whose app container ended recently: the group's loop resyncs now, so a departed member is
    removed at once (domain.departures) instead of at the next interval; during a coordinated restart, any pod
    change (a replacement becoming Ready ends a step)."""
    key = (namespace or "", annotations[injection.GROUP_ANNOTATION])
    consumergroups: kopf.Index[tuple[str, str], Record] = kwargs["consumergroups"]
    record = next(iter(consumergroups.get(key, [])), None)
    rolling = record is not None and ((record.body.get("status") or {}).get("rollout") or {}).get("phase") == "Rolling"
    if record is None or not (rolling or _may_have_departed(type, pods.pod_facts(body), datetime.now(UTC))):
        return
    memo["runtime"].request(key)


def _may_have_departed(event: str | None, pod: PodFacts, now: datetime) -> bool:
    """Worth a resync now: the pod is gone, or its app container ended recently."""
    if event == "DELETED":
        return True
    return pod.app_ended_at is not None and now - pod.app_ended_at <= RECENT_END


async def _first_of(*waits: Awaitable[object], timeout: float) -> None:
    """Until one of `waits` ends, or `timeout` seconds."""
    tasks = [asyncio.ensure_future(w) for w in waits]
    try:
        await asyncio.wait(tasks, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()


async def _sync(
    runtime: Runtime, body: Mapping[str, Any], key: Key, group_pods: kopf.Index[tuple[str, str], PodFacts],
    consumergroups: kopf.Index[tuple[str, str], Record], *, stopped: StopFlag,
) -> None:  # fmt: skip
    """One resync of the group `key` with the pods and the other groups' claims from the indexes.

    `stopped`: the loop's stop flag. kopf sets it when the replica pauses, the CR is being deleted or the operator
    exits, and re-checks a daemon still running only after its cancellation polling (a minute): so the resync gives
    way to it while it waits (its turn, a secret, a broker that does not answer) and begins no step after it
    (domain.pacing) — a paused replica writes nothing, and a deletion is not held up."""
    mine: list[PodFacts] = list(group_pods.get(key, []))
    others = [r.claim for k, store in consumergroups.items() if k != key for r in store]

    def post(notice: Notice) -> None:
        kopf.event(cast(kopf.Body, body), type=notice.type, reason=notice.reason, message=notice.message)

    try:
        await runtime.sync(body, mine, others, post, stopped)
    except SyncStoppedError as exc:
        log.info("resync of %s/%s stopped %s: %s", *key, exc, stopping(stopped))


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
