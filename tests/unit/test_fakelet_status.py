"""Container records → pod status as a kubelet reports it (pure)."""

from typing import Any

from vigil_dev.kube.fakelet import lifecycle, status
from vigil_dev.kube.fakelet.lifecycle import Backoff, Record
from vigil_dev.kube.fakelet.spec import Container, HttpGet, Kind, Pod, Probe

T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z


def ctr(name: str, kind: Kind = Kind.APP, **fields: Any) -> Container:
    return Container(name=name, kind=kind, image=f"img/{name}", argv=("x",), env=(), **fields)


POD = Pod(
    "ns", "web-0", "u1", "Always", 30, (ctr("side", Kind.SIDECAR),), (ctr("app", readiness=Probe(HttpGet("h", 1))),)
)


def render(
    recs: dict[str, Record], now: float = T0, previous: list[dict[str, Any]] | None = None, pod: Pod = POD
) -> dict[str, Any]:
    phase = lifecycle.phase(pod, recs)
    return status.pod_status(
        pod,
        recs,
        phase=phase,
        pod_ip="127.20.0.1",
        host_ip="127.0.0.1",
        start_time="t",
        previous=previous or [],
        now=now,
    )


def conds(st: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in st["conditions"]}


def started(pod: Pod, now: float = T0) -> dict[str, Record]:
    return {c.name: lifecycle.on_start(lifecycle.initial(c), c, 10 + i, now) for i, c in enumerate(pod.containers)}


def test_timestamp_and_container_ids() -> None:
    assert status.timestamp(T0) == "2027-01-15T08:00:00Z"
    assert status.pid_of(status.container_id(4242)) == 4242
    assert status.pid_of("containerd://abc") is None


def test_running_not_ready_then_ready() -> None:
    recs = started(POD)
    st = render(recs)
    assert st["phase"] == "Running"
    assert (st["podIP"], st["podIPs"], st["hostIP"]) == ("127.20.0.1", [{"ip": "127.20.0.1"}], "127.0.0.1")
    app = st["containerStatuses"][0]
    assert app == {
        "name": "app",
        "image": "img/app",
        "imageID": "",
        "ready": False,
        "started": True,
        "restartCount": 0,
        "state": {"running": {"startedAt": "2027-01-15T08:00:00Z"}},
        "lastState": {},
        "containerID": "fakelet://11",
    }
    assert st["initContainerStatuses"][0]["ready"]  # a sidecar without readiness probe is ready once started
    assert conds(st) == {
        "PodReadyToStartContainers": "True",
        "Initialized": "True",
        "Ready": "False",
        "ContainersReady": "False",
        "PodScheduled": "True",
    }
    ready_cond = next(c for c in st["conditions"] if c["type"] == "Ready")
    assert (ready_cond["reason"], ready_cond["message"]) == (
        "ContainersNotReady",
        "containers with unready status: [app]",
    )
    recs["app"] = lifecycle.on_probe(recs["app"], POD.apps[0], "readiness", True)
    later = render(recs, now=T0 + 5, previous=st["conditions"])
    assert conds(later)["Ready"] == "True"
    ready_now = next(c for c in later["conditions"] if c["type"] == "Ready")
    assert ready_now["reason"] is None  # null: the strategic merge patch removes the stale reason
    assert ready_now["lastTransitionTime"] == "2027-01-15T08:00:05Z"
    scheduled = next(c for c in later["conditions"] if c["type"] == "PodScheduled")
    assert scheduled["lastTransitionTime"] == "2027-01-15T08:00:00Z"  # unchanged status keeps its time


def test_crash_loop_back_off_then_terminated_after_the_wait() -> None:
    pod = Pod("ns", "p", "u", "Always", 30, (), (ctr("app"),))
    c = pod.apps[0]
    rec = lifecycle.on_start(lifecycle.initial(c), c, 7, T0)
    for i in range(3):  # three quick crashes: the next restart waits
        rec = lifecycle.on_exit(rec, 1, T0 + i, Backoff(1, 8))
        if i < 2:
            rec = lifecycle.on_start(rec, c, 8 + i, T0 + i)
    st = render({"app": rec}, now=T0 + 2, pod=pod)["containerStatuses"][0]
    assert st["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert st["state"]["waiting"]["message"].startswith("back-off 2s restarting failed container=app pod=p_ns(u)")
    assert st["lastState"]["terminated"]["exitCode"] == 1
    assert st["restartCount"] == 2


def test_completed_pod() -> None:
    pod = Pod("ns", "job", "u", "Never", 30, (), (ctr("run"),))
    c = pod.apps[0]
    rec = lifecycle.on_exit(lifecycle.on_start(lifecycle.initial(c), c, 5, T0), 0, T0 + 3, Backoff())
    st = render({"run": rec}, pod=pod)
    assert st["phase"] == "Succeeded"
    assert st["containerStatuses"][0]["state"]["terminated"] == {
        "exitCode": 0,
        "reason": "Completed",
        "startedAt": "2027-01-15T08:00:00Z",
        "finishedAt": "2027-01-15T08:00:03Z",
        "containerID": "fakelet://5",
    }
    ready = next(x for x in st["conditions"] if x["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "PodCompleted")


def test_waiting_for_init_and_image_problems() -> None:
    pod = Pod("ns", "p", "u", "Always", 30, (ctr("init", Kind.INIT),), (ctr("app", problem=("ErrImagePull", "no")),))
    recs = {c.name: lifecycle.initial(c) for c in pod.containers}
    st = render(recs, pod=pod)
    assert st["phase"] == "Pending"
    assert st["containerStatuses"][0]["state"] == {"waiting": {"reason": "ErrImagePull", "message": "no"}}
    init_cond = next(x for x in st["conditions"] if x["type"] == "Initialized")
    assert (init_cond["status"], init_cond["message"]) == ("False", "containers with incomplete status: [init]")


def test_readiness_gates_hold_ready() -> None:
    pod = Pod("ns", "p", "u", "Always", 30, (), (ctr("app"),), readiness_gates=("vigil.dev/ok",))
    recs = started(pod)
    assert conds(render(recs, pod=pod))["Ready"] == "False"
    gate = [{"type": "vigil.dev/ok", "status": "True"}]
    assert conds(render(recs, pod=pod, previous=gate))["Ready"] == "True"
