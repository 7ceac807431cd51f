"""A real Kubernetes cluster on this machine: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
one real node (containerd, kubelet, kube-proxy; `node/`), from the binaries `build.py` compiles.

The apiserver listens on the node IP (an address on an interface the stack creates, `node.host.network_up`), so
pods reach it through the `kubernetes` Service with in-cluster config, and the host reaches it too. Every server
is a `procs` process group recorded by pid; the layout is saved as JSON under `<state>/kube/cluster.json`, so
`vigil dev status|down` and test fixtures in other processes find and stop exactly what was started.
"""

import base64
import contextlib
import json
import os
import shutil
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pydantic import TypeAdapter

from vigil_core import codec
from vigil_dev import ports, procs
from vigil_dev.errors import DevError
from vigil_dev.kube import build
from vigil_dev.kube.certs import ControlPlanePki, write_control_plane_pki
from vigil_dev.kube.node import agent, host, layout, pause
from vigil_dev.kube.node.agent import RealNode

START_TIMEOUT = 60.0
CONTROL_PLANE = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
NETWORK_ENV = "VIGIL_DEV_NODE_NETWORK"
"""A /16 of the stack's own (node IP, services, pods) when the default one is taken on this machine."""

#: Admission plugins on top of the release's defaults (which already include NamespaceLifecycle,
#: LimitRanger, ServiceAccount, TaintNodesByCondition, PodSecurity, Priority, DefaultTolerationSeconds,
#: MutatingAdmissionWebhook, ValidatingAdmissionPolicy, ValidatingAdmissionWebhook, ResourceQuota, ...):
#: kubeadm adds NodeRestriction. Listing the webhooks again documents that they are relied on.
ADMISSION_PLUGINS = "NodeRestriction,MutatingAdmissionWebhook,ValidatingAdmissionWebhook,ServiceAccount"


@dataclass(frozen=True)
class KubePorts:
    etcd: int
    etcd_peer: int
    apiserver: int
    controller_manager: int
    scheduler: int
    kubelet: int
    kubelet_healthz: int
    proxy_healthz: int
    proxy_metrics: int


@dataclass(frozen=True)
class KubeCluster:
    """A control plane laid out under `state_dir/kube` with logs under `state_dir/logs/<component>/`."""

    state_dir: Path
    version: str
    ports: KubePorts
    binaries: dict[str, str]
    network_cidr: str = layout.DEFAULT_NETWORK

    # -- layout -----------------------------------------------------------------------------------------
    @property
    def home(self) -> Path:
        return self.state_dir / "kube"

    @property
    def log_dir(self) -> Path:
        return self.state_dir / "logs"

    @property
    def pki(self) -> ControlPlanePki:
        return ControlPlanePki(self.home / "pki")

    @property
    def kubeconfig(self) -> Path:
        """The admin kubeconfig (`O=system:masters`), certificates embedded: what KUBECONFIG points at."""
        return self.home / "admin.kubeconfig"

    @property
    def network(self) -> layout.Network:
        return layout.Network(self.network_cidr)

    @property
    def server(self) -> str:
        """On the node IP: the host and the node's pods reach the same address."""
        return f"https://{self.network.node_ip}:{self.ports.apiserver}"

    @property
    def node_name(self) -> str:
        return layout.NODE_NAME

    def component_log(self, name: str) -> Path:
        return self.log_dir / name / f"{name}.log"

    def pod_log_dir(self) -> Path:
        """Where the kubelet writes container output: `<ns>_<pod>_<uid>/<container>/<restart>.log`."""
        return self.node.layout.pod_log_dir

    def kept_pod_log_dir(self) -> Path:
        """Links to the pod logs (`agent.keep_logs`), which outlive the pods: test artifacts."""
        return self.log_dir / "pods-kept"

    @property
    def node(self) -> RealNode:
        ports = self.ports
        node_layout = layout.NodeLayout(
            home=self.home / "node",
            log_dir=self.log_dir,
            network=self.network,
            ports=layout.NodePorts(
                kubelet=ports.kubelet, kubelet_healthz=ports.kubelet_healthz, proxy_healthz=ports.proxy_healthz,
                proxy_metrics=ports.proxy_metrics, scheduler=ports.scheduler,
            ),
            ca_cert=self.pki.ca_cert,
            apiserver_port=ports.apiserver,
        )  # fmt: skip
        return RealNode(node_layout, self.binaries)

    def process(self, name: str) -> procs.Managed:
        """The managed process of a control-plane component (`CONTROL_PLANE`) or a node part (`agent.PARTS`)."""
        if name in agent.PARTS:
            return self.node.process(name)
        return procs.Managed(name, self.home / f"{name}.pid", self._markers()[name])

    def parts(self) -> list[str]:
        """Every process this layout starts, in start order."""
        return [*CONTROL_PLANE, *agent.PARTS]

    def _markers(self) -> dict[str, str]:
        """A path unique to this stack in each command line (procs refuses to signal a process without it)."""
        return {
            "etcd": str(self.home / "etcd"),
            "kube-apiserver": str(self.pki.cert("apiserver")[0]),
            "kube-controller-manager": str(self.home / "controller-manager.kubeconfig"),
            "kube-scheduler": str(self.node.layout.kubeconfig("kube-scheduler")),
        }

    # -- persistence ------------------------------------------------------------------------------------
    def save(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        (self.home / "cluster.json").write_text(codec.dumps(_LAYOUT.dump_python(self, mode="json"), indent=2))

    @classmethod
    def load(cls, state_dir: Path) -> "KubeCluster | None":
        """The layout `save` wrote under `state_dir`; None when there is none, or when it is not this layout (an
        older vigil_dev's: nothing of it is ours to run); DevError (one line) for a file that is not JSON."""
        path = state_dir / "kube" / "cluster.json"
        try:
            text = path.read_text()
        except FileNotFoundError:
            return None
        try:
            return codec.decode(_LAYOUT, text, str(path), DevError)
        except DevError:
            if codec.is_json(text):
                return None  # written by an older vigil_dev (the fakelet's layout)
            raise

    # -- lifecycle --------------------------------------------------------------------------------------
    def argv(self, name: str) -> list[str]:
        """The command line of a control-plane component (the flag choices are explained in NOTES.md)."""
        p, pki_files, home = self.ports, self.pki, self.home
        apiserver_cert, apiserver_key = pki_files.cert("apiserver")
        if name == "etcd":
            peer = f"http://127.0.0.1:{p.etcd_peer}"
            return [
                self.binaries["etcd"], "--name=vigil", f"--data-dir={home / 'etcd'}",
                f"--listen-client-urls=http://127.0.0.1:{p.etcd}", f"--advertise-client-urls=http://127.0.0.1:{p.etcd}",
                f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=vigil={peer}", "--unsafe-no-fsync", "--log-level=warn",
            ]  # fmt: skip
        net = self.network
        if name == "kube-apiserver":
            kubelet_cert, kubelet_key = pki_files.cert("apiserver-kubelet-client")
            return [
                self.binaries["kube-apiserver"], f"--etcd-servers=http://127.0.0.1:{p.etcd}",
                f"--bind-address={net.node_ip}", f"--advertise-address={net.node_ip}", f"--secure-port={p.apiserver}",
                f"--tls-cert-file={apiserver_cert}", f"--tls-private-key-file={apiserver_key}",
                f"--client-ca-file={pki_files.ca_cert}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={pki_files.sa_pub}",
                f"--service-account-signing-key-file={pki_files.sa_key}",
                f"--service-cluster-ip-range={net.service_cidr}",
                f"--kubelet-client-certificate={kubelet_cert}", f"--kubelet-client-key={kubelet_key}",
                "--kubelet-preferred-address-types=InternalIP",
                f"--requestheader-client-ca-file={pki_files.path('front-proxy-ca.crt')}",
                "--requestheader-allowed-names=front-proxy-client", "--requestheader-username-headers=X-Remote-User",
                "--requestheader-group-headers=X-Remote-Group", "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                f"--proxy-client-cert-file={pki_files.cert('front-proxy-client')[0]}",
                f"--proxy-client-key-file={pki_files.cert('front-proxy-client')[1]}",
                "--authorization-mode=Node,RBAC", f"--enable-admission-plugins={ADMISSION_PLUGINS}",
                "--allow-privileged=true", "--profiling=false",
            ]  # fmt: skip
        if name == "kube-scheduler":
            return layout.scheduler_argv(self.node.layout, self.binaries["kube-scheduler"])
        kubeconfig = str(home / "controller-manager.kubeconfig")
        return [
            self.binaries["kube-controller-manager"], f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}", f"--authorization-kubeconfig={kubeconfig}",
            "--leader-elect=false", "--bind-address=127.0.0.1", f"--secure-port={p.controller_manager}",
            "--controllers=*", "--use-service-account-credentials=true", "--kube-api-qps=100", "--kube-api-burst=200",
            f"--service-account-private-key-file={pki_files.sa_key}", f"--root-ca-file={pki_files.ca_cert}",
            f"--cluster-signing-cert-file={pki_files.ca_cert}", f"--cluster-signing-key-file={pki_files.ca_key}",
            f"--service-cluster-ip-range={net.service_cidr}", "--cluster-name=vigil",
            f"--flex-volume-plugin-dir={home / 'flexvolume'}", "--profiling=false",
        ]  # fmt: skip

    def start_component(self, name: str) -> procs.Managed:
        return procs.start(
            name,
            self.argv(name),
            pid_file=self.home / f"{name}.pid",
            marker=self._markers()[name],
            log_file=self.component_log(name),
        )

    def wait_ready(self, names: Sequence[str] = CONTROL_PLANE, timeout: float = START_TIMEOUT) -> None:
        """etcd /health, apiserver /readyz; controller-manager and scheduler /healthz, then the `default`
        ServiceAccount (created by a controller: proves the controllers act, and pods can be admitted)."""
        checks: dict[str, Callable[[], bool]] = {
            "etcd": lambda: _get(f"http://127.0.0.1:{self.ports.etcd}/health", None)[1].find(b'"health":"true"') >= 0,
            "kube-apiserver": lambda: _get(f"{self.server}/readyz", self.ssl_context())[0] == 200,
            "kube-controller-manager": lambda: (
                _get(f"https://127.0.0.1:{self.ports.controller_manager}/healthz", _insecure())[0] == 200
            ),
            "kube-scheduler": lambda: _get(f"https://127.0.0.1:{self.ports.scheduler}/healthz", _insecure())[0] == 200,
        }
        for name in names:
            check = checks[name]
            procs.wait_until(
                check, timeout=timeout, what=f"{name} ({self.component_log(name)})",
                exited=self.process(name).exited, log=self.component_log(name),
            )  # fmt: skip
        if "kube-controller-manager" not in names:
            return
        procs.wait_until(
            lambda: self.get("/api/v1/namespaces/default/serviceaccounts/default")[0] == 200,
            timeout=timeout,
            what=f"the default ServiceAccount (log: {self.component_log('kube-controller-manager')})",
        )

    def ssl_context(self, *, client: bool = False) -> ssl.SSLContext:
        """Trusts the cluster CA; with `client`, presents the admin certificate."""
        ctx = ssl.create_default_context(cafile=str(self.pki.ca_cert))
        if client:
            ctx.load_cert_chain(*map(str, self.pki.cert("admin")))
        return ctx

    def get(self, path: str) -> tuple[int, bytes]:
        """GET an apiserver path as the admin: for readiness checks without the kubernetes client."""
        return _get(f"{self.server}{path}", self.ssl_context(client=True))

    def node_ready(self) -> bool:
        return _node_ready(self.get(f"/api/v1/nodes/{self.node_name}"))

    def kubectl(
        self, *args: str, input_text: str | None = None, timeout: float = 60
    ) -> "subprocess.CompletedProcess[str]":
        """kubectl as the admin (for the few steps that are one command: deleting every pod at teardown)."""
        argv = [self.binaries["kubectl"], f"--kubeconfig={self.kubeconfig}", *args]
        return subprocess.run(argv, input=input_text, capture_output=True, text=True, check=False, timeout=timeout)

    def start_node(self, archives: Sequence[Path], progress: Callable[[str], None]) -> None:
        """containerd with the images imported, the kubelet (until its Node is Ready), kube-proxy."""
        node = self.node
        node.write_config()
        began = time.monotonic()
        node.start_runtime([pause.archive(), *archives], progress)
        node.start_agents(self.node_ready)
        progress(f"kubernetes: node {self.node_name} Ready in {time.monotonic() - began:.1f}s (kubelet, containerd,"
                 f" kube-proxy; pods on {self.network.pod_cidr}, logs in {node.layout.pod_log_dir})")  # fmt: skip

    def import_images(self, archives: Sequence[Path], progress: Callable[[str], None] = print) -> None:
        """More images into the running node's containerd (the report's, on demand)."""
        self.node.import_archives(archives, progress)

    def stop_node(self) -> list[str]:
        """Pods first (the kubelet tears them down while the apiserver still answers), then the node's agents;
        the controllers go first so nothing re-creates a pod meanwhile."""
        stopped = [n for n in ("kube-controller-manager", "kube-scheduler") if self.process(n).stop(grace=15.0)]
        node = self.node
        delete = ["delete", "pods", "--all", "--all-namespaces", "--grace-period=0", "--force", "--wait=false"]
        stopped += node.stop(lambda: _checked(self.kubectl(*delete)), owns_machine=self.owns_machine())
        return stopped

    def owns_machine(self) -> bool:
        """Whether this stack's node holds the machine (or nobody does): only then are machine-wide traces ours."""
        return host.held_by() in ("", str(self.home))

    def stop_part(self, name: str) -> list[str]:
        """Stop one process (its name if it ran)."""
        return [name] if self.process(name).stop(grace=15.0) else []

    def stop(self) -> list[str]:
        """Stop the node (pods first), then the control plane in reverse start order, then remove the network
        and the machine's node claim; logs stay."""
        stopped = self.stop_node()
        stopped += [s for name in reversed(CONTROL_PLANE) for s in self.stop_part(name)]
        if self.owns_machine():  # never the network of another stack's running node
            host.network_down()
            host.release(self.home)
        return stopped

    def running(self) -> list[str]:
        return [name for name in self.parts() if self.process(name).running()]

    def leftovers(self) -> list[str]:
        """What this stack still has on the machine (processes, mounts, netns, interfaces, rules, cgroups)."""
        running = [f"process {name}" for name in self.running()]
        return running + host.leftovers(self.node.home, self.network)


_LAYOUT: Final = TypeAdapter(KubeCluster)
"""`cluster.json`: the dataclass's fields, in order."""


def create(state_dir: Path, *, archives: Sequence[Path] = (), progress: Callable[[str], None] = print) -> KubeCluster:
    """Build the binaries if needed, claim the machine's node, set up its network, write certificates and
    configs, start the control plane and the node with `archives` (docker/OCI image archives) imported."""
    existing = KubeCluster.load(state_dir)
    if existing is not None and existing.running():
        raise DevError(f"kubernetes: a cluster is already running from {state_dir} (run `vigil dev down` first)")
    network = network_from_env()
    with host.machine_lock():
        owner = host.held_by()
        if owner and owner != str(state_dir / "kube") and host.node_processes(Path(owner)):
            raise DevError(
                f"a real node already runs on this machine from {Path(owner).parent} (one per machine: "
                f"`vigil dev down --state-dir {Path(owner).parent}`, or stop that test run)"
            )
        if owner:  # a node that was killed: undo what it left before taking the machine
            stale = KubeCluster.load(Path(owner).parent)
            if stale is not None:
                stale.stop()
            else:
                host.network_down()
                host.release(Path(owner))
        host.preflight(network)
        try:
            binaries = build.ensure_kube_binaries(progress)
        except build.KubeBuildError as exc:
            raise DevError(f"kubernetes binaries: {exc}") from exc
        names = ("etcd", "etcd_peer", "apiserver", "controller_manager", "scheduler", "kubelet", "kubelet_healthz",
                 "proxy_healthz", "proxy_metrics")  # fmt: skip
        cluster = KubeCluster(
            state_dir=state_dir,
            version=build.K8S_VERSION,
            ports=KubePorts(**dict(zip(names, ports.free_ports(len(names)), strict=True))),
            binaries={name: str(path) for name, path in binaries.items()},
            network_cidr=network.cidr,
        )
        shutil.rmtree(cluster.home, ignore_errors=True)  # a fresh cluster each time: new CA, empty etcd
        host.claim(cluster.home)
        cluster.save()
    try:
        host.network_up(network)
        write_control_plane_pki(cluster.pki.directory, network.service_ip, network.node_ip)
        _write_kubeconfig(cluster, cluster.kubeconfig, "admin")
        _write_kubeconfig(cluster, cluster.home / "controller-manager.kubeconfig", "controller-manager")
        node_layout = cluster.node.layout
        node_layout.home.mkdir(parents=True, exist_ok=True)
        for who in ("kube-scheduler", "kube-proxy", "kubelet"):
            _write_kubeconfig(cluster, node_layout.kubeconfig(who), who)
        for suffix, source in zip(("crt", "key"), cluster.pki.cert("kubelet-serving"), strict=True):
            shutil.copy(source, node_layout.home / f"kubelet-serving.{suffix}")
        progress(f"kubernetes: starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler "
                 f"{cluster.version} on {network.node_ip} ...")  # fmt: skip
        started = time.monotonic()
        # etcd and the apiserver at once (the apiserver retries etcd); the controllers only once the
        # apiserver is ready: before its RBAC bootstrap they are refused and exit.
        cluster.start_component("etcd")
        cluster.start_component("kube-apiserver")
        cluster.wait_ready(["etcd", "kube-apiserver"])
        cluster.start_component("kube-controller-manager")
        cluster.start_component("kube-scheduler")
        cluster.wait_ready(["kube-controller-manager", "kube-scheduler"])
        progress(f"kubernetes: control plane up at {cluster.server} in {time.monotonic() - started:.1f}s")
        cluster.start_node(archives, progress)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def network_from_env() -> layout.Network:
    """The stack's /16: `$VIGIL_DEV_NODE_NETWORK`, else the default; a bad value is one line naming the variable."""
    value = os.environ.get(NETWORK_ENV) or layout.DEFAULT_NETWORK
    network = layout.Network(value)
    try:
        _ = network.node_ip
    except ValueError as exc:
        raise DevError(f"{NETWORK_ENV}: {exc}") from None
    return network


def _checked(done: "subprocess.CompletedProcess[str]") -> None:
    if done.returncode != 0:
        raise DevError((done.stderr.strip().splitlines() or ["kubectl failed"])[-1])


def _write_kubeconfig(cluster: KubeCluster, path: Path, who: str) -> None:
    """A kubeconfig with everything embedded (JSON is YAML): usable by kubectl, helm, kopf, the client."""

    def b64(p: Path) -> str:
        return base64.b64encode(p.read_bytes()).decode()

    cert, key = cluster.pki.cert(who)
    ca = b64(cluster.pki.ca_cert)
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "vigil",
                "cluster": {"server": cluster.server, "certificate-authority-data": ca},
            }
        ],
        "users": [{"name": who, "user": {"client-certificate-data": b64(cert), "client-key-data": b64(key)}}],
        "contexts": [{"name": f"{who}@vigil", "context": {"cluster": "vigil", "user": who}}],
        "current-context": f"{who}@vigil",
    }
    path.write_text(json.dumps(config, indent=2) + "\n")
    path.chmod(0o600)


def _get(url: str, ctx: ssl.SSLContext | None) -> tuple[int, bytes]:
    """(status, body) of a GET; (0, b"") if nothing answers yet."""
    try:
        with urllib.request.urlopen(url, timeout=2, context=ctx) as resp:  # noqa: S310 - fixed loopback URLs
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        with contextlib.closing(exc):
            return exc.code, b""
    except (OSError, ValueError):
        return 0, b""


def _insecure() -> ssl.SSLContext:
    """kube-controller-manager serves /healthz with a self-signed certificate made in memory."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def _node_ready(response: tuple[int, bytes]) -> bool:
    status, body = response
    if status != 200:
        return False
    conditions = json.loads(body).get("status", {}).get("conditions", [])
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
