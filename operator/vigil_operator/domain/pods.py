"""Which pods belong to a ConsumerGroup, and the identity each one's member can be proven by (pure)."""

import dataclasses
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from vigil_core.sidecar_contract import DEFAULT_HEALTH_PORT, env_var
from vigil_operator.domain.injection import INJECT_LABEL, NAMESPACE_ENV, POD_NAME_ENV, SIDECAR_NAME, has_sidecar
from vigil_operator.domain.reconcile import PodFacts

_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")
_ORDINAL = re.compile(r"-(0|[1-9][0-9]*)$")
REVISION_LABEL = "controller-revision-hash"
HEALTH_PORT_ENV = env_var("health_port")
SIDECAR_INSTANCE_ID_ENV = env_var("instance_id")


def pod_facts(pod: Mapping[str, Any]) -> PodFacts:
    """The pod's name and the instance id its sidecar was given (static groups), `$(VAR)`s resolved from the
    pod's own name and namespace, also through the downward API (`fieldRef` metadata.name / metadata.namespace,
    directly or in an entry it refers to); an instance id from a Secret or ConfigMap stays unknown (the client.id
    basis still matches the member). Also its StatefulSet ordinal, when its app last ended, and whether it is
    being deleted: what departures are judged by."""
    meta = pod.get("metadata") or {}
    name, namespace = str(meta.get("name") or ""), str(meta.get("namespace") or "")
    status = pod.get("status") or {}
    facts = PodFacts(
        name, None, _ordinal(meta), _app_ended_at(pod), bool(meta.get("deletionTimestamp")),
        api_time(meta.get("creationTimestamp")), str(meta.get("uid") or ""),
        str((meta.get("labels") or {}).get(REVISION_LABEL) or ""),
        any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []),
        _crash_looping(pod), str((pod.get("spec") or {}).get("nodeName") or "") or None,
        sidecar_missing=(meta.get("labels") or {}).get(INJECT_LABEL) == "true" and not has_sidecar(pod),
    )  # fmt: skip
    known = {POD_NAME_ENV: name, NAMESPACE_ENV: namespace}
    spec = pod.get("spec") or {}
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        if container.get("name") != SIDECAR_NAME:
            continue
        env = {str(v.get("name")): v for v in container.get("env") or []}
        port = str((env.get(HEALTH_PORT_ENV) or {}).get("value") or DEFAULT_HEALTH_PORT)
        if status.get("podIP") and port.isdigit():
            facts = dataclasses.replace(facts, sidecar_url=f"http://{status['podIP']}:{port}")
        fields = {"metadata.name": name, "metadata.namespace": namespace}
        for var_name, var in env.items():  # the downward API: what the kubelet would put there
            path = ((var.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
            if path in fields:
                known.setdefault(var_name, fields[path])
        var = env.get(SIDECAR_INSTANCE_ID_ENV) or {}
        if "value" in var:
            value = _REF.sub(lambda m: known.get(m.group(1), m.group(0)), str(var["value"]))
            facts = dataclasses.replace(facts, instance_id=None if "$(" in value else value)
        elif SIDECAR_INSTANCE_ID_ENV in known:
            facts = dataclasses.replace(facts, instance_id=known[SIDECAR_INSTANCE_ID_ENV])
        return facts
    return facts


def _ordinal(meta: Mapping[str, Any]) -> int | None:
    """`<set>-<n>` of a pod a StatefulSet owns (the controller names its pods so); None for any other pod."""
    owners = meta.get("ownerReferences") or []
    owned = [o for o in owners if o.get("kind") == "StatefulSet" and o.get("controller")]
    name = str(meta.get("name") or "")
    if not owned or not name.startswith(f"{owned[0].get('name')}-"):
        return None
    found = _ORDINAL.search(name)
    return int(found.group(1)) if found else None


def _app_ended_at(pod: Mapping[str, Any]) -> datetime | None:
    """The latest `finishedAt` of a terminated app container (its current or last state): regular containers only
    (an init container that finished did its job; the sidecar is not the app)."""
    ended: list[datetime] = []
    for container in (pod.get("status") or {}).get("containerStatuses") or []:
        if container.get("name") == SIDECAR_NAME:
            continue
        for state in (container.get("state") or {}, container.get("lastState") or {}):
            finished = api_time((state.get("terminated") or {}).get("finishedAt"))
            if finished is not None:
                ended.append(finished)
    return max(ended, default=None)


def _crash_looping(pod: Mapping[str, Any]) -> bool:
    """An app container (not the sidecar) waits in CrashLoopBackOff after at least its second end."""
    for container in (pod.get("status") or {}).get("containerStatuses") or []:
        if container.get("name") == SIDECAR_NAME:
            continue
        waiting = (container.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") == "CrashLoopBackOff" and int(container.get("restartCount") or 0) >= 2:
            return True
    return False


def api_time(stamp: object) -> datetime | None:
    """An RFC 3339 timestamp of the API; None when absent or malformed (never raised: it is a fact, not input)."""
    if not stamp:
        return None
    try:
        found = datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
    except ValueError:
        return None
    return found if found.tzinfo is not None else None
