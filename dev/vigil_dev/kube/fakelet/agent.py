"""The fakelet's event loop: register the Node, bind pending pods to it, run one worker per bound pod.

Thin on purpose: decisions are in `lifecycle` (what to start/stop/kill, when), `status` (what to report)
and `spec` (what to run); this module only watches the apiserver, acts on processes and publishes.
Everything runs on one asyncio loop, so records are only touched from here.
"""

import asyncio
import base64
import contextlib
import logging
import os
import platform
import shutil
import signal
import time
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from vigil_dev.errors import DevError
from vigil_dev.kube.fakelet import lifecycle, network, runtime, spec, status
from vigil_dev.kube.fakelet.api import Api, ApiError, Obj
from vigil_dev.kube.fakelet.lifecycle import Kill, Record, Start, Stop
from vigil_dev.kube.fakelet.runtime import ContainerProcess

log = logging.getLogger("fakelet")

HOST_IP = "127.0.0.1"
SHUTDOWN_GRACE = 10.0
"""When the fakelet itself stops (`vigil dev down`), its containers get this long after SIGTERM."""
CAPACITY = {"cpu": "32", "memory": "128Gi", "pods": "250", "ephemeral-storage": "200Gi"}
BASE_ENV_KEYS = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR")


@dataclass(frozen=True)
class Settings:
    node: str
    state_dir: Path  # the stack's state directory
    python: str  # the interpreter `python` commands run with
    backoff: lifecycle.Backoff = field(default_factory=lifecycle.Backoff)
    heartbeat: float = 10.0
    version: str = "v0.0.0"

    @property
    def home(self) -> Path:
        return self.state_dir / "kube" / f"fakelet-{self.node}"

    @property
    def pod_logs(self) -> Path:
        return self.state_dir / "logs" / "pods"


class Agent:
    def __init__(self, api: Api, settings: Settings, block: int) -> None:
        self.api = api
        self.settings = settings
        self.block = block
        self.workers: dict[str, PodWorker] = {}  # by pod uid
        self.finished: set[str] = set()  # uids whose deletion this fakelet finalized
        self.addresses: dict[str, str] = {}  # uid → pod IP in use
        self.last_index = -1
        self.stopping = asyncio.Event()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._http: aiohttp.ClientSession | None = None

    @property
    def http(self) -> aiohttp.ClientSession:
        """For httpGet probes: no connection reuse (the kubelet opens one per probe, too)."""
        if self._http is None:
            self._http = aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True))
        return self._http

    def spawn_task(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def run(self) -> int:
        """Until asked to stop (0) or until a watch loop fails for good (1); containers are stopped either way."""
        removed = runtime.stop_leftovers(self.settings.home)
        if removed:
            log.info("stopped container processes a previous fakelet left: %s", ", ".join(removed))
        await self.register_node()
        loops = [
            self.spawn_task(self.heartbeat()),
            self.spawn_task(self.bind_pending()),
            self.spawn_task(self.watch_pods()),
        ]
        log.info("node %s ready; pod addresses from %s", self.settings.node, network.cidr(self.block))
        stop = asyncio.create_task(self.stopping.wait())
        await asyncio.wait([stop, *loops], return_when=asyncio.FIRST_COMPLETED)
        failed = [task for task in loops if task.done() and task.exception()]
        for task in failed:
            log.error("fakelet loop failed: %r", task.exception())
        await self.shutdown()
        return 1 if failed else 0

    async def shutdown(self) -> None:
        """Stop every container (SIGTERM, SHUTDOWN_GRACE, SIGKILL); pod objects are left as they are."""
        running = [p for w in self.workers.values() for p in w.procs.values()]  # before cancelling forgets them
        tasks = [*self._tasks, *(w.task for w in self.workers.values())]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for proc in running:
            proc.signal(signal.SIGTERM)
        deadline = time.monotonic() + SHUTDOWN_GRACE
        while time.monotonic() < deadline and not all(p.has_exited() for p in running):
            await asyncio.sleep(0.1)
        for proc in running:
            proc.reap()
        log.info("stopped %d container process(es)", len(running))
        if self._http is not None:
            await self._http.close()
        await self.api.close()

    # -- the node ---------------------------------------------------------------------------------------
    def node_status(self) -> Obj:
        now = status.timestamp(time.time())
        ready = ("Ready", "True", "KubeletReady", "fakelet is posting ready status")
        fine = [
            (kind, "False", f"KubeletHasNo{kind}", f"fakelet has no {kind}")
            for kind in ("MemoryPressure", "DiskPressure", "PIDPressure")
        ]
        return {
            "capacity": CAPACITY,
            "allocatable": CAPACITY,
            "conditions": [
                {"type": t, "status": s, "reason": r, "message": m, "lastHeartbeatTime": now}
                for t, s, r, m in [*fine, ready]
            ],
            "addresses": [
                {"type": "InternalIP", "address": HOST_IP},
                {"type": "Hostname", "address": self.settings.node},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 0}},
            "nodeInfo": {
                "machineID": "",
                "systemUUID": "",
                "bootID": "",
                "kernelVersion": platform.release(),
                "osImage": "fakelet",
                "containerRuntimeVersion": "fakelet://1",
                "kubeletVersion": self.settings.version,
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        }

    def labels(self) -> dict[str, str]:
        """The Node's labels; a pod's nodeSelector must match them to be bound here."""
        node = self.settings.node
        return {
            "kubernetes.io/hostname": node,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "vigil.dev/fakelet": "true",
        }

    async def register_node(self) -> None:
        node = self.settings.node
        body: Obj = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": node,
                "labels": {
                    "kubernetes.io/hostname": node,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "vigil.dev/fakelet": "true",
                },
                "annotations": {"vigil.dev/pod-addresses": network.cidr(self.block)},
            },
            "status": self.node_status(),
        }
        try:
            await self.api.create("/api/v1/nodes", body)
        except ApiError as exc:
            if exc.status != 409:
                raise
            meta = {"metadata": {"annotations": body["metadata"]["annotations"]}}
            await self.api.patch(f"/api/v1/nodes/{node}", meta)
        await self.api.patch(f"/api/v1/nodes/{node}/status", {"status": self.node_status()})

    async def heartbeat(self) -> None:
        """What the node lifecycle controller watches: without it the node turns NotReady and pods are evicted."""
        while True:
            await asyncio.sleep(self.settings.heartbeat)
            try:
                await self.api.patch(f"/api/v1/nodes/{self.settings.node}/status", {"status": self.node_status()})
            except ApiError as exc:
                if exc.status != 404:
                    log.warning("node heartbeat failed: %s", exc)
                    continue
                log.warning("node %s was deleted: registering it again", self.settings.node)
                with contextlib.suppress(ApiError, aiohttp.ClientError, TimeoutError):
                    await self.register_node()
            except (aiohttp.ClientError, TimeoutError) as exc:
                log.warning("node heartbeat failed: %s", exc)

    # -- binding (we run no scheduler) -------------------------------------------------------------------
    def _should_bind(self, pod: Obj) -> bool:
        meta, pod_spec = pod["metadata"], pod["spec"]
        labels = {
            "kubernetes.io/hostname": self.settings.node,
            "kubernetes.io/os": "linux",
            "vigil.dev/fakelet": "true",
        }
        return (
            not pod_spec.get("nodeName")
            and "deletionTimestamp" not in meta
            and pod_spec.get("schedulerName", "default-scheduler") == "default-scheduler"
            and not pod_spec.get("schedulingGates")
            and all(labels.get(k) == v for k, v in (pod_spec.get("nodeSelector") or {}).items())
        )

    async def bind_pending(self) -> None:
        async for kind, obj in self.api.list_watch("/api/v1/pods", {"fieldSelector": "spec.nodeName="}):
            pods = obj["items"] if kind == "SYNC" else [obj] if kind in ("ADDED", "MODIFIED") else []
            for pod in pods:
                if self._should_bind(pod):
                    self.spawn_task(self._bind(pod))

    async def _bind(self, pod: Obj) -> None:
        meta = pod["metadata"]
        ns, name = meta["namespace"], meta["name"]
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": ns, "uid": meta["uid"]},
            "target": {"apiVersion": "v1", "kind": "Node", "name": self.settings.node},
        }
        try:
            await self.api.create(f"/api/v1/namespaces/{ns}/pods/{name}/binding", binding)
        except ApiError as exc:
            if exc.status not in (404, 409):  # gone, or bound meanwhile (by another fakelet)
                log.warning("binding %s/%s: %s", ns, name, exc)
            return
        log.info("bound %s/%s", ns, name)
        self.event(pod, "Scheduled", f"Successfully assigned {ns}/{name} to {self.settings.node}")

    # -- pods on this node -------------------------------------------------------------------------------
    async def watch_pods(self) -> None:
        selector = {"fieldSelector": f"spec.nodeName={self.settings.node}"}
        async for kind, obj in self.api.list_watch("/api/v1/pods", selector):
            if kind == "SYNC":
                listed = {p["metadata"]["uid"]: p for p in obj["items"]}
                for uid, running in list(self.workers.items()):
                    if uid not in listed:
                        running.deleted(None)
                for pod in listed.values():
                    self._upsert(pod)
            elif kind == "DELETED":
                if gone := self.workers.get(obj["metadata"]["uid"]):
                    gone.deleted(obj)
            else:
                self._upsert(obj)

    def _upsert(self, pod: Obj) -> None:
        uid = pod["metadata"]["uid"]
        if uid in self.finished:
            return
        if existing := self.workers.get(uid):
            existing.update(pod)
            return
        if pod.get("status", {}).get("phase") in lifecycle.TERMINAL:  # ran to completion before we started
            if "deletionTimestamp" in pod["metadata"]:
                self.spawn_task(self.finalize(pod))
            return
        worker = PodWorker(self, pod)
        self.workers[uid] = worker
        worker.task.add_done_callback(lambda _: self._forget(uid))

    def _forget(self, uid: str) -> None:
        self.workers.pop(uid, None)
        self.addresses.pop(uid, None)

    def allocate_ip(self, pod: Obj) -> str:
        """The pod's address: the one its status has (a fakelet restart) if free, else the next free one."""
        uid = pod["metadata"]["uid"]
        existing: str = pod.get("status", {}).get("podIP", "")
        in_use = set(self.addresses.values())
        if existing and existing not in in_use:
            ip = existing
        else:
            ip, self.last_index = network.allocate(self.block, in_use, self.last_index)
        self.addresses[uid] = ip
        return ip

    async def finalize(self, pod: Obj) -> None:
        """Delete the pod object for good once nothing of it runs (what the kubelet does last)."""
        meta = pod["metadata"]
        self.finished.add(meta["uid"])
        body = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "gracePeriodSeconds": 0,
            "preconditions": {"uid": meta["uid"]},
        }
        try:
            await self.api.delete(f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}", body)
        except ApiError as exc:
            if exc.status not in (404, 409):
                log.warning("finalizing %s/%s: %s", meta["namespace"], meta["name"], exc)
            return
        log.info("deleted %s/%s", meta["namespace"], meta["name"])

    def event(
        self, pod: Obj, reason: str, message: str, *, container: str | None = None, warning: bool = False
    ) -> None:
        """Post a core/v1 Event about a pod, as the kubelet does (Started, Killing, Unhealthy, BackOff ...)."""
        meta = pod["metadata"]
        now = status.timestamp(time.time())
        involved = {
            "apiVersion": "v1",
            "kind": "Pod",
            "namespace": meta["namespace"],
            "name": meta["name"],
            "uid": meta["uid"],
        }
        if container:
            involved["fieldPath"] = f"spec.containers{{{container}}}"
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
            "involvedObject": involved,
            "reason": reason,
            "message": message,
            "type": "Warning" if warning else "Normal",
            "source": {"component": "fakelet", "host": self.settings.node},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }

        async def post() -> None:
            with contextlib.suppress(ApiError, aiohttp.ClientError, TimeoutError):
                await self.api.create(f"/api/v1/namespaces/{meta['namespace']}/events", body)

        self.spawn_task(post())


class PodWorker:
    """Runs one pod: plan → act → publish, woken by process exits, probe results and pod updates."""

    def __init__(self, agent: Agent, pod: Obj) -> None:
        self.agent = agent
        self.obj = pod
        meta = pod["metadata"]
        self.uid: str = meta["uid"]
        self.label = f"{meta['namespace']}/{meta['name']}"
        slug = f"{meta['namespace']}_{meta['name']}"
        self.pid_dir = agent.settings.home / "containers" / f"{slug}_{self.uid[:8]}"
        self.scratch = agent.settings.home / "pods" / f"{slug}_{self.uid[:8]}"
        self.log_dir = agent.settings.pod_logs / slug
        self.wake = asyncio.Event()
        self.deadline: float | None = None  # set when the deletion is seen: SIGKILL by then
        self.gone = False  # the object is already deleted from the API
        self.procs: dict[str, ContainerProcess] = {}
        self.recs: dict[str, Record] = {}
        self.published: Obj | None = None
        self.ip = ""
        self._note_deletion(pod)
        self.task = asyncio.create_task(self.run())

    def update(self, pod: Obj) -> None:
        self.obj = pod
        self._note_deletion(pod)
        self.wake.set()

    def deleted(self, pod: Obj | None) -> None:
        self.gone = True
        if pod is not None:
            self.obj = pod
        if self.deadline is None:
            self.deadline = time.time() + float(self.obj["metadata"].get("deletionGracePeriodSeconds", 0))
        self.wake.set()

    def _note_deletion(self, pod: Obj) -> None:
        meta = pod["metadata"]
        if "deletionTimestamp" in meta and self.deadline is None:
            grace = meta.get("deletionGracePeriodSeconds", pod["spec"].get("terminationGracePeriodSeconds", 30))
            self.deadline = time.time() + float(grace)
            log.info("%s: deleting, grace %ss", self.label, grace)

    async def run(self) -> None:
        try:
            await self._run()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("%s: worker failed; killing its containers", self.label)
            for proc in self.procs.values():  # their exit watchers reap them
                proc.signal(signal.SIGKILL)

    async def _run(self) -> None:
        self.ip = self.agent.allocate_ip(self.obj)
        self.start_time = self.obj.get("status", {}).get("startTime") or status.timestamp(time.time())
        self.pod = await self._parse()
        before = {
            s["name"]: s
            for key in ("initContainerStatuses", "containerStatuses")
            for s in self.obj.get("status", {}).get(key) or []
        }
        for c in self.pod.containers:
            old = before.get(c.name, {})
            self.recs[c.name] = lifecycle.initial(c, int(old.get("restartCount", 0)), ran="containerID" in old)
            if c.problem:
                self.agent.event(self.obj, "Failed", f"Error: {c.problem[1]}", container=c.name, warning=True)
        self.scratch.mkdir(parents=True, exist_ok=True)
        while True:
            now = time.time()
            plan = lifecycle.plan(self.pod, self.recs, now, terminate_by=self.deadline)
            for action in plan.actions:
                self._act(action, now)
            if plan.actions:
                continue  # act until the plan is stable, then publish once
            await self._publish(plan.phase, now)
            if plan.finished:
                if not self.gone:
                    await self.agent.finalize(self.obj)
                shutil.rmtree(self.pid_dir, ignore_errors=True)  # the pod's scratch files go with it; logs stay
                shutil.rmtree(self.scratch, ignore_errors=True)
                return
            timeout = max(0.0, plan.wake_at - now) if plan.wake_at is not None else None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), timeout)
            self.wake.clear()

    async def _parse(self) -> spec.Pod:
        """The pod as the fakelet runs it, with the ConfigMaps and Secrets its environment reads."""
        ns = self.obj["metadata"]["namespace"]
        names_cm, names_secret = spec.referenced(self.obj)
        config_maps = {
            n: d for n in names_cm if (d := await self._data(f"/api/v1/namespaces/{ns}/configmaps/{n}")) is not None
        }
        secrets = {
            n: {k: base64.b64decode(v).decode(errors="replace") for k, v in d.items()}
            for n in names_secret
            if (d := await self._data(f"/api/v1/namespaces/{ns}/secrets/{n}")) is not None
        }
        base = {k: os.environ[k] for k in BASE_ENV_KEYS if k in os.environ}
        base |= {
            "HOSTNAME": self.obj["spec"].get("hostname") or self.obj["metadata"]["name"],
            "VIGIL_POD_IP": self.ip,
            "PYTHONUNBUFFERED": "1",
        }
        ctx = spec.Context(
            pod_ip=self.ip,
            host_ip=HOST_IP,
            node=self.agent.settings.node,
            python=self.agent.settings.python,
            base_env=base,
            config_maps=config_maps,
            secrets=secrets,
        )
        return spec.parse_pod(self.obj, ctx)

    async def _data(self, path: str) -> Mapping[str, str] | None:
        try:
            return dict((await self.agent.api.get(path)).get("data") or {})
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def _act(self, action: Start | Stop | Kill, now: float) -> None:
        name = action.name
        rec = self.recs[name]
        if isinstance(action, Start):
            self._start(name, now)
        elif isinstance(action, Stop):
            if proc := self.procs.get(name):
                proc.signal(signal.SIGTERM)
            self.recs[name] = lifecycle.on_stop(rec, now, action.grace)
            self.agent.event(self.obj, "Killing", action.reason, container=name)
            log.info("%s: SIGTERM %s (%s)", self.label, name, action.reason)
        else:
            if proc := self.procs.get(name):
                proc.signal(signal.SIGKILL)
            self.recs[name] = lifecycle.on_kill(rec)
            log.info("%s: SIGKILL %s (grace period over)", self.label, name)

    def _start(self, name: str, now: float) -> None:
        c = self.pod.container(name)
        rec = self.recs[name]
        if rec.ran and rec.crashes > 1:
            delay = self.agent.settings.backoff.delay(rec.crashes)
            self.agent.event(
                self.obj, "BackOff", f"Back-off {delay:.0f}s restarting failed container", container=name, warning=True
            )
        try:
            proc = runtime.spawn(
                c, pid_file=self.pid_dir / f"{name}.pid", log_file=self.log_dir / f"{name}.log", cwd=self.scratch
            )
        except DevError as exc:
            log.warning("%s: %s", self.label, exc)
            started = lifecycle.on_start(rec, c, 0, now)
            self.recs[name] = lifecycle.on_exit(started, 128, now, self.agent.settings.backoff, reason="StartError")
            self.agent.event(self.obj, "Failed", f"Error: {exc}", container=name, warning=True)
            return
        self.procs[name] = proc
        self.recs[name] = lifecycle.on_start(rec, c, proc.pid, now)
        log.info("%s: started %s pid %d: %s", self.label, name, proc.pid, " ".join(c.argv))
        self.agent.event(self.obj, "Started", f"Started container {name}", container=name)
        kinds: tuple[tuple[lifecycle.ProbeKind, spec.Probe | None], ...] = (
            ("startup", c.startup),
            ("liveness", c.liveness),
            ("readiness", c.readiness),
        )
        probes = [
            self.agent.spawn_task(self._probe_loop(name, kind, probe, proc.pid))
            for kind, probe in kinds
            if probe is not None
        ]
        self.agent.spawn_task(self._watch_exit(name, proc, probes))

    async def _watch_exit(self, name: str, proc: ContainerProcess, probes: list[asyncio.Task[Any]]) -> None:
        try:
            code = await proc.wait()
        finally:
            for task in probes:
                task.cancel()
        self.procs.pop(name, None)
        self.recs[name] = lifecycle.on_exit(self.recs[name], code, time.time(), self.agent.settings.backoff)
        log.info("%s: %s pid %d exited %d", self.label, name, proc.pid, code)
        self.wake.set()

    async def _probe_loop(self, name: str, kind: lifecycle.ProbeKind, probe: spec.Probe, pid: int) -> None:
        c = self.pod.container(name)
        env = dict(c.env)
        await asyncio.sleep(probe.initial_delay)
        while self._is_run(name, pid):
            if lifecycle.probing(self.recs[name], kind):
                ok = await runtime.probe(probe, env, self.scratch, self.agent.http)
                if ok is None and isinstance(probe.action, spec.HttpGet | spec.TcpSocket):
                    log.warning("%s: %s probe of %s names an undeclared port: result Unknown", self.label, kind, name)
                if not self._is_run(name, pid):
                    return
                before = self.recs[name]
                after = lifecycle.on_probe(before, c, kind, ok)
                if ok is False and getattr(after, kind).failures == 1:
                    self.agent.event(
                        self.obj, "Unhealthy", f"{kind.capitalize()} probe failed", container=name, warning=True
                    )
                if after != before:
                    self.recs[name] = after
                    self.wake.set()
            await asyncio.sleep(probe.period)

    def _is_run(self, name: str, pid: int) -> bool:
        state = self.recs[name].state
        return isinstance(state, lifecycle.Running) and state.pid == pid

    async def _publish(self, phase: str, now: float) -> None:
        """Patch the pod's status if it changed (strategic merge: conditions others own are kept)."""
        if self.gone:
            return
        previous = {c["type"]: c for c in self.obj.get("status", {}).get("conditions") or []}
        if self.published:
            previous |= {c["type"]: c for c in self.published["conditions"]}
        new = status.pod_status(
            self.pod,
            self.recs,
            phase=phase,
            pod_ip=self.ip,
            host_ip=HOST_IP,
            start_time=self.start_time,
            previous=list(previous.values()),
            now=now,
        )
        if new == self.published:
            return
        meta = self.obj["metadata"]
        body = {"metadata": {"uid": self.uid}, "status": new}
        try:
            await self.agent.api.patch(f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status", body)
        except ApiError as exc:
            if exc.status in (404, 409):
                return  # deleted (or replaced by a pod of the same name): the watch tells us
            log.warning("%s: status update failed: %s", self.label, exc)
            return
        self.published = new


async def main(kubeconfig: Path, settings: Settings) -> int:
    """Run until SIGTERM/SIGINT; then stop every container process and exit."""
    block, _lock = runtime.claim_block(f"{settings.state_dir}:{settings.node}")
    api = Api.from_kubeconfig(kubeconfig)
    agent = Agent(api, settings, block)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, agent.stopping.set)
    return await agent.run()
