"""A real Kubernetes control plane on loopback: etcd, kube-apiserver, kube-controller-manager, fakelet nodes.

Started envtest-style from the binaries `build.py` compiles (no kubelet, no scheduler: a fakelet registers a
node, binds pending pods to it and runs their containers as local processes). Every server is a `procs`
process group recorded by pid; the layout is saved as JSON under `<state>/kube/cluster.json`, so
`vigil dev status|down` and test fixtures in other processes find and stop exactly what was started.
"""

import base64
import contextlib
import json
import shutil
import ssl
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from vigil_dev import ports, procs
from vigil_dev.errors import DevError
from vigil_dev.kube import build
from vigil_dev.kube.certs import ControlPlanePki, write_control_plane_pki

SERVICE_CIDR = "10.0.0.0/24"
SERVICE_IP = "10.0.0.1"  # the `kubernetes` Service: first address of SERVICE_CIDR, in the apiserver's SANs
START_TIMEOUT = 60.0
CONTROL_PLANE = ("etcd", "kube-apiserver", "kube-controller-manager")

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


@dataclass(frozen=True)
class KubeCluster:
    """A control plane laid out under `state_dir/kube` with logs under `state_dir/logs/<component>/`."""

    state_dir: Path
    version: str
    ports: KubePorts
    binaries: dict[str, str]
    nodes: tuple[str, ...] = ()

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
    def server(self) -> str:
        return f"https://127.0.0.1:{self.ports.apiserver}"

    def component_log(self, name: str) -> Path:
        return self.log_dir / name / f"{name}.log"

    def pod_log_dir(self) -> Path:
        """Where fakelets write container output: `<ns>_<pod>/<container>.log`."""
        return self.log_dir / "pods"

    def fakelet_dir(self, node: str) -> Path:
        return self.home / f"fakelet-{node}"

    def process(self, name: str) -> procs.Managed:
        """The managed process of a control-plane component (`CONTROL_PLANE`) or `fakelet-<node>`."""
        if name.startswith("fakelet-"):
            node = name.removeprefix("fakelet-")
            return procs.Managed(name, self.fakelet_dir(node) / "pid", _fakelet_marker(self.state_dir, node))
        return procs.Managed(name, self.home / f"{name}.pid", self._markers()[name])

    def parts(self) -> list[str]:
        """Every process this layout starts, in start order."""
        return [*CONTROL_PLANE, *(f"fakelet-{n}" for n in self.nodes)]

    def _markers(self) -> dict[str, str]:
        """A path unique to this stack in each command line (procs refuses to signal a process without it)."""
        return {
            "etcd": str(self.home / "etcd"),
            "kube-apiserver": str(self.pki.cert("apiserver")[0]),
            "kube-controller-manager": str(self.home / "controller-manager.kubeconfig"),
        }

    # -- persistence ------------------------------------------------------------------------------------
    def save(self) -> None:
        data = asdict(self)
        data["state_dir"] = str(self.state_dir)
        self.home.mkdir(parents=True, exist_ok=True)
        (self.home / "cluster.json").write_text(json.dumps(data, indent=2))

    @classmethod
    def load(cls, state_dir: Path) -> "KubeCluster | None":
        try:
            data = json.loads((state_dir / "kube" / "cluster.json").read_text())
        except FileNotFoundError:
            return None
        return cls(
            state_dir=Path(data["state_dir"]),
            version=data["version"],
            ports=KubePorts(**data["ports"]),
            binaries=data["binaries"],
            nodes=tuple(data["nodes"]),
        )

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
        if name == "kube-apiserver":
            return [
                self.binaries["kube-apiserver"], f"--etcd-servers=http://127.0.0.1:{p.etcd}",
                "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={p.apiserver}",
                f"--tls-cert-file={apiserver_cert}", f"--tls-private-key-file={apiserver_key}",
                f"--client-ca-file={pki_files.ca_cert}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={pki_files.sa_pub}",
                f"--service-account-signing-key-file={pki_files.sa_key}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                f"--requestheader-client-ca-file={pki_files.path('front-proxy-ca.crt')}",
                "--requestheader-allowed-names=front-proxy-client", "--requestheader-username-headers=X-Remote-User",
                "--requestheader-group-headers=X-Remote-Group", "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                f"--proxy-client-cert-file={pki_files.cert('front-proxy-client')[0]}",
                f"--proxy-client-key-file={pki_files.cert('front-proxy-client')[1]}",
                "--authorization-mode=Node,RBAC", f"--enable-admission-plugins={ADMISSION_PLUGINS}",
                "--allow-privileged=true", "--endpoint-reconciler-type=none", "--profiling=false",
            ]  # fmt: skip
        kubeconfig = str(home / "controller-manager.kubeconfig")
        return [
            self.binaries["kube-controller-manager"], f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}", f"--authorization-kubeconfig={kubeconfig}",
            "--leader-elect=false", "--bind-address=127.0.0.1", f"--secure-port={p.controller_manager}",
            "--controllers=*", "--use-service-account-credentials=true", "--kube-api-qps=100", "--kube-api-burst=200",
            f"--service-account-private-key-file={pki_files.sa_key}", f"--root-ca-file={pki_files.ca_cert}",
            f"--cluster-signing-cert-file={pki_files.ca_cert}", f"--cluster-signing-key-file={pki_files.ca_key}",
            f"--service-cluster-ip-range={SERVICE_CIDR}", "--cluster-name=vigil",
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
        """etcd /health, apiserver /readyz; controller-manager /healthz, then the `default` ServiceAccount
        (created by a controller: proves the controllers act, and pods can be admitted)."""
        checks: dict[str, Callable[[], bool]] = {
            "etcd": lambda: _get(f"http://127.0.0.1:{self.ports.etcd}/health", None)[1].find(b'"health":"true"') >= 0,
            "kube-apiserver": lambda: _get(f"{self.server}/readyz", self.ssl_context())[0] == 200,
            "kube-controller-manager": lambda: (
                _get(f"https://127.0.0.1:{self.ports.controller_manager}/healthz", _insecure())[0] == 200
            ),
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

    def start_fakelet(self, node: str, timeout: float = START_TIMEOUT) -> "KubeCluster":
        """Start a fakelet for `node`, wait until the Node is Ready; returns the layout that records it."""
        if node in self.nodes and self.process(f"fakelet-{node}").running():
            raise DevError(f"fakelet {node}: already running")
        name = f"fakelet-{node}"
        argv = [
            sys.executable, "-m", "vigil_dev.kube.fakelet", "--kubeconfig", str(self.kubeconfig),
            *_fakelet_marker(self.state_dir, node).split(" "),
        ]  # fmt: skip
        log = self.log_dir / name / "fakelet.log"
        managed = procs.start(
            name,
            argv,
            pid_file=self.fakelet_dir(node) / "pid",
            marker=_fakelet_marker(self.state_dir, node),
            log_file=log,
        )
        cluster = replace(self, nodes=tuple(dict.fromkeys([*self.nodes, node])))
        cluster.save()
        try:
            procs.wait_until(
                lambda: _node_ready(self.get(f"/api/v1/nodes/{node}")),
                timeout=timeout, what=f"{name}: Node {node} Ready ({log})", exited=managed.exited, log=log,
            )  # fmt: skip
        except DevError:
            cluster.stop_part(name)
            raise
        return cluster

    def stop_part(self, name: str) -> list[str]:
        """Stop one process (its name if it ran); for a fakelet also the container processes a killed
        fakelet left behind (named `<ns>_<pod>_<uid>/<container>`)."""
        stopped = [name] if self.process(name).stop(grace=30.0 if name.startswith("fakelet-") else 15.0) else []
        if name.startswith("fakelet-"):
            from vigil_dev.kube.fakelet import runtime  # noqa: PLC0415 - only needed here

            stopped += runtime.stop_leftovers(self.fakelet_dir(name.removeprefix("fakelet-")))
        return stopped

    def stop(self) -> list[str]:
        """Stop every process this layout started, in reverse start order (fakelets first); logs stay."""
        return [stopped for name in reversed(self.parts()) for stopped in self.stop_part(name)]

    def running(self) -> list[str]:
        return [name for name in self.parts() if self.process(name).running()]


def create(state_dir: Path, *, progress: Callable[[str], None] = print) -> KubeCluster:
    """Build the binaries if needed, write certificates and kubeconfigs, start the control plane, wait for it."""
    existing = KubeCluster.load(state_dir)
    if existing is not None and existing.running():
        raise DevError(f"kubernetes: a control plane is already running from {state_dir} (run `vigil dev down` first)")
    try:
        binaries = build.ensure_kube_binaries(progress)
    except build.KubeBuildError as exc:
        raise DevError(f"kubernetes binaries: {exc}") from exc
    etcd, peer, apiserver, controller_manager = ports.free_ports(4)
    cluster = KubeCluster(
        state_dir=state_dir,
        version=build.K8S_VERSION,
        ports=KubePorts(etcd=etcd, etcd_peer=peer, apiserver=apiserver, controller_manager=controller_manager),
        binaries={name: str(path) for name, path in binaries.items()},
    )
    shutil.rmtree(cluster.home, ignore_errors=True)  # a fresh cluster each time: new CA, empty etcd
    write_control_plane_pki(cluster.pki.directory, SERVICE_IP)
    _write_kubeconfig(cluster, cluster.kubeconfig, "admin")
    _write_kubeconfig(cluster, cluster.home / "controller-manager.kubeconfig", "controller-manager")
    cluster.save()
    progress(f"kubernetes: starting etcd, kube-apiserver, kube-controller-manager {cluster.version} ...")
    started = time.monotonic()
    try:
        # etcd and the apiserver at once (the apiserver retries etcd); the controller-manager only once the
        # apiserver is ready: before its RBAC bootstrap the controller-manager is refused and exits.
        cluster.start_component("etcd")
        cluster.start_component("kube-apiserver")
        cluster.wait_ready(["etcd", "kube-apiserver"])
        cluster.start_component("kube-controller-manager")
        cluster.wait_ready(["kube-controller-manager"])
    except DevError:
        cluster.stop()
        raise
    progress(f"kubernetes: up at {cluster.server} in {time.monotonic() - started:.1f}s; logs in {cluster.log_dir}")
    return cluster


def _fakelet_marker(state_dir: Path, node: str) -> str:
    """`--node N --state-dir D`: unique per stack and node, and how the fakelet's own argv ends."""
    return f"--node {node} --state-dir {state_dir}"


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
