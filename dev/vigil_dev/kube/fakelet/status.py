"""Container records → the pod's `status`, shaped as a kubelet reports it; pure (takes `now`).

Condition `lastTransitionTime`s are carried over from the pod's previous conditions while their status does
not change, so re-publishing an unchanged status is a no-op. `containerID` is `fakelet://<pid>`: tests read
the container's real process from it.
"""

import time
from collections.abc import Mapping, Sequence
from typing import Any

from vigil_dev.kube.fakelet import lifecycle
from vigil_dev.kube.fakelet.lifecycle import Record, Running, Terminated, Waiting
from vigil_dev.kube.fakelet.spec import Container, Kind, Pod

Obj = dict[str, Any]


def timestamp(t: float) -> str:
    """RFC 3339 in UTC with seconds, as the API serializes metav1.Time."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def container_id(pid: int) -> str:
    return f"fakelet://{pid}"


def pid_of(container_id_value: str) -> int | None:
    """The process behind a `containerID` this fakelet reported."""
    prefix = "fakelet://"
    value = container_id_value.removeprefix(prefix)
    return int(value) if container_id_value.startswith(prefix) and value.isdigit() else None


def pod_status(
    pod: Pod,
    recs: Mapping[str, Record],
    *,
    phase: str,
    pod_ip: str,
    host_ip: str,
    start_time: str,
    previous: Sequence[Mapping[str, Any]],
    now: float,
) -> Obj:
    status: Obj = {
        "phase": phase,
        "conditions": conditions(pod, recs, phase=phase, previous=previous, now=now),
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}],
        "startTime": start_time,
        "containerStatuses": [container_status(pod, c, recs[c.name], now) for c in pod.apps],
    }
    if pod.init:
        status["initContainerStatuses"] = [container_status(pod, c, recs[c.name], now) for c in pod.init]
    return status


def container_status(pod: Pod, c: Container, rec: Record, now: float) -> Obj:
    out: Obj = {
        "name": c.name,
        "image": c.image,
        "imageID": "",
        "ready": rec.ready,
        "started": rec.running and rec.started,
        "restartCount": rec.restarts,
        "state": {},
        "lastState": {"terminated": _terminated(rec.last)} if rec.last else {},
    }
    state = rec.state
    if isinstance(state, Running):
        out["containerID"] = container_id(state.pid)
        out["state"] = {"running": {"startedAt": timestamp(state.started_at)}}
    elif isinstance(state, Terminated):
        out["containerID"] = container_id(state.pid)
        if lifecycle.will_restart(pod, c, rec) and rec.retry_at > now:
            delay = round(rec.retry_at - state.finished_at)
            message = (
                f"back-off {delay}s restarting failed container={c.name} pod={pod.name}_{pod.namespace}({pod.uid})"
            )
            out["state"] = {"waiting": {"reason": "CrashLoopBackOff", "message": message}}
            out["lastState"] = {"terminated": _terminated(state)}
        else:
            out["state"] = {"terminated": _terminated(state)}
    elif isinstance(state, Waiting):
        out["state"] = {"waiting": {"reason": state.reason, **({"message": state.message} if state.message else {})}}
    return out


def _terminated(t: Terminated) -> Obj:
    out: Obj = {
        "exitCode": t.exit_code,
        "reason": t.reason,
        "startedAt": timestamp(t.started_at),
        "finishedAt": timestamp(t.finished_at),
        "containerID": container_id(t.pid),
    }
    if t.signal is not None:
        out["signal"] = t.signal
    return out


def conditions(
    pod: Pod, recs: Mapping[str, Record], *, phase: str, previous: Sequence[Mapping[str, Any]], now: float
) -> list[Obj]:
    """PodReadyToStartContainers, Initialized, Ready, ContainersReady, PodScheduled (the kubelet's set)."""
    before = {c.get("type"): c for c in previous}
    incomplete = [c.name for c in pod.init if not _init_done(c, recs[c.name])]
    counted = [c for c in pod.containers if c.kind is not Kind.INIT]  # a native sidecar's readiness counts
    unready = [c.name for c in counted if not recs[c.name].ready]
    gates_open = all(before.get(g, {}).get("status") == "True" for g in pod.readiness_gates)
    terminal = phase in lifecycle.TERMINAL
    rows: list[tuple[str, bool, str, str]] = [
        ("PodReadyToStartContainers", True, "", ""),
        (
            "Initialized",
            lifecycle.initialized(pod, recs),
            "ContainersNotInitialized",
            f"containers with incomplete status: [{' '.join(incomplete)}]",
        ),
        (
            "Ready",
            not terminal and not unready and gates_open,
            "PodCompleted" if terminal else "ContainersNotReady" if unready else "ReadinessGatesNotReady",
            "" if terminal else f"containers with unready status: [{' '.join(unready)}]" if unready else "",
        ),
        (
            "ContainersReady",
            not terminal and not unready,
            "PodCompleted" if terminal else "ContainersNotReady",
            "" if terminal else f"containers with unready status: [{' '.join(unready)}]",
        ),
        ("PodScheduled", True, "", ""),
    ]
    out = []
    for kind, ok, reason, message in rows:
        status = "True" if ok else "False"
        old = before.get(kind, {})
        since = old.get("lastTransitionTime") if old.get("status") == status else None
        cond: Obj = {
            "type": kind,
            "status": status,
            "lastProbeTime": None,
            "lastTransitionTime": since or timestamp(now),
        }
        # null removes a key in a strategic merge patch: a True condition keeps no stale reason
        cond["reason"] = None if ok else reason
        cond["message"] = message if not ok and message else None
        out.append(cond)
    return out


def _init_done(c: Container, rec: Record) -> bool:
    if c.kind is Kind.SIDECAR:
        return rec.ran
    return isinstance(rec.state, Terminated) and rec.state.exit_code == 0
