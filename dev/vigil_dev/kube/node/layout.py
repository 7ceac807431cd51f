"""The real node's layout and every file and command line it runs with: pure, so a unit test reads them all.

One node per machine (`node-real`): a kubelet on containerd + runc, CNI bridge networking and kube-proxy, all
beside the control plane in `controlplane.py`. Why each setting is what it is (measured on this machine kind,
see `../NOTES.md`):
- every address lives on interfaces the stack creates: the node IP on a port-less bridge of its own (the kernel
  here has no dummy driver), the pod gateway on the pod bridge; pods get routes to the node IP and the service
  range only (no default route), and the stack's whole /16 is routed into the node interface on the host, so
  nothing addressed to the cluster ever leaves;
- containerd gets a private root, state, socket and runc root; `restrict_oom_score_adj` because the sandbox
  asks for -998 and this root has no CAP_SYS_RESOURCE;
- the kubelet runs on cgroup v1 (hybrid hosts count as v1: `failCgroupV1: false`), never garbage-collects images
  (nothing can be pulled again) and gives pods no DNS (`resolvConf: ""`: the host's resolver is not ours);
- kube-proxy leaves the host's sysctls alone (conntrack limits and timeouts 0) and serves NodePorts on the node
  IP only.
"""

import ipaddress
import json
from dataclasses import dataclass
from pathlib import Path

NODE_NAME = "node-real"
NODE_INTERFACE = "vigil-node"
BRIDGE_INTERFACE = "vigil-pods"
CNI_NETWORK = "vigil"
DEFAULT_NETWORK = "10.77.0.0/16"
"""The stack's own /16: node IP, services and pods are carved out of it (`VIGIL_DEV_NODE_NETWORK` overrides)."""
PAUSE_IMAGE = "localhost/vigil-pause:3.10.1"
"""The sandbox image, built from the release's pause.c (`node.pause`): imported under exactly this name."""
CNI_BIN_DIR = Path("/usr/lib/cni")
"""Debian's containernetworking-plugins."""
SHORT_PATH = Path("/run/vigil-node")
"""A symlink to the node's directory: unix sockets (containerd's, the kubelet's under its root dir) are limited to
~104 characters, and a state directory under a test's tmp_path is longer than that (containerd: "unix socket path
too long"). The node is one per machine, so one fixed link serves."""


@dataclass(frozen=True)
class Network:
    """The addresses the stack owns, all inside one /16 it checked nobody else routes."""

    cidr: str = DEFAULT_NETWORK

    @property
    def _net(self) -> ipaddress.IPv4Network:
        net = ipaddress.IPv4Network(self.cidr)
        if net.prefixlen != 16:
            raise ValueError(f"node network {self.cidr}: expected a /16 (e.g. {DEFAULT_NETWORK})")
        return net

    @property
    def node_ip(self) -> str:
        """On the node interface: the kubelet, the apiserver and Kafka listen here (reachable from pods)."""
        return str(self._net.network_address + 1)

    @property
    def service_cidr(self) -> str:
        return str(ipaddress.IPv4Network((int(self._net.network_address) + (64 << 8), 24)))

    @property
    def service_ip(self) -> str:
        """The `kubernetes` Service: the first address of the service range."""
        return str(ipaddress.IPv4Network(self.service_cidr).network_address + 1)

    @property
    def pod_cidr(self) -> str:
        return str(ipaddress.IPv4Network((int(self._net.network_address) + (128 << 8), 24)))

    @property
    def pod_gateway(self) -> str:
        return str(ipaddress.IPv4Network(self.pod_cidr).network_address + 1)


@dataclass(frozen=True)
class NodePorts:
    kubelet: int
    kubelet_healthz: int
    proxy_healthz: int
    proxy_metrics: int
    scheduler: int


@dataclass(frozen=True)
class NodeLayout:
    """Where the node keeps its state: `<state>/kube/node/...`, its logs under `<state>/logs/`."""

    home: Path
    log_dir: Path
    network: Network
    ports: NodePorts
    ca_cert: Path
    apiserver_port: int

    @property
    def containerd_dir(self) -> Path:
        return self.home / "containerd"

    @property
    def containerd_socket(self) -> Path:
        return SHORT_PATH / "containerd" / "containerd.sock"

    @property
    def containerd_config(self) -> Path:
        return self.containerd_dir / "config.toml"

    @property
    def runc_root(self) -> Path:
        return self.home / "runc"

    @property
    def cni_conf_dir(self) -> Path:
        return self.home / "cni" / "net.d"

    @property
    def cni_ipam_dir(self) -> Path:
        return self.home / "cni" / "ipam"

    @property
    def kubelet_dir(self) -> Path:
        """The kubelet's own directory; it bind-mounts it onto itself, so teardown unmounts it first."""
        return self.home / "kubelet"

    @property
    def kubelet_root(self) -> Path:
        """The kubelet's --root-dir: `kubelet_dir` through the short link (its sockets live there)."""
        return SHORT_PATH / "kubelet"

    @property
    def kubelet_config(self) -> Path:
        return self.home / "kubelet-config.yaml"

    @property
    def pod_log_dir(self) -> Path:
        """`<ns>_<pod>_<uid>/<container>/<restart>.log`, written by the kubelet (podLogsDir)."""
        return self.log_dir / "pods"

    @property
    def proxy_config(self) -> Path:
        return self.home / "kube-proxy-config.yaml"

    def kubeconfig(self, who: str) -> Path:
        return self.home / f"{who}.kubeconfig"

    @property
    def server(self) -> str:
        """The apiserver as the node's agents reach it: on the node IP, like pods through the Service."""
        return f"https://{self.network.node_ip}:{self.apiserver_port}"


def containerd_config(layout: NodeLayout) -> str:
    """containerd 1.6 (Debian) config: everything private to this node, CRI on runc with cgroupfs."""
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    d = layout.containerd_dir
    return "\n".join(
        [
            "version = 2",
            f'root = "{d / "root"}"',
            f'state = "{d / "state"}"',
            'disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",'
            ' "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs",'
            ' "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]',
            "",
            "[grpc]",
            f'  address = "{layout.containerd_socket}"',
            "",
            '[plugins."io.containerd.internal.v1.opt"]',
            f'  path = "{d / "opt"}"',
            "",
            f"[{cri}]",
            f'  sandbox_image = "{PAUSE_IMAGE}"',
            "  restrict_oom_score_adj = true",
            "  enable_selinux = false",
            "  disable_apparmor = true",
            "  max_container_log_line_size = 16384",
            f"[{cri}.containerd]",
            '  snapshotter = "overlayfs"',
            '  default_runtime_name = "runc"',
            f"[{cri}.containerd.runtimes.runc]",
            '  runtime_type = "io.containerd.runc.v2"',
            f"[{cri}.containerd.runtimes.runc.options]",
            "  SystemdCgroup = false",
            f'  Root = "{layout.runc_root}"',
            f"[{cri}.cni]",
            f'  bin_dir = "{CNI_BIN_DIR}"',
            f'  conf_dir = "{layout.cni_conf_dir}"',
            "  max_conf_num = 1",
            "",
        ]
    )


def cni_conflist(layout: NodeLayout) -> str:
    """A bridge with the pods' gateway, host-local addresses, routes to the node IP and services only."""
    net = layout.network
    conf = {
        "cniVersion": "1.0.0",
        "name": CNI_NETWORK,
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE_INTERFACE,
                "isGateway": True,
                "isDefaultGateway": False,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": net.pod_cidr, "gateway": net.pod_gateway}]],
                    "routes": [{"dst": f"{net.node_ip}/32"}, {"dst": net.service_cidr}],
                    "dataDir": str(layout.cni_ipam_dir),
                },
            }
        ],
    }
    return json.dumps(conf, indent=2) + "\n"


def kubelet_config(layout: NodeLayout, serving_cert: Path, serving_key: Path) -> str:
    """KubeletConfiguration (JSON is YAML): webhook authn/authz against the apiserver, x509 for its client cert."""
    config = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": layout.network.node_ip,
        "port": layout.ports.kubelet,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": layout.ports.kubelet_healthz,
        "tlsCertFile": str(serving_cert),
        "tlsPrivateKeyFile": str(serving_key),
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(layout.ca_cert)},
        },
        "authorization": {"mode": "Webhook"},
        "containerRuntimeEndpoint": f"unix://{layout.containerd_socket}",
        "imageServiceEndpoint": f"unix://{layout.containerd_socket}",
        "cgroupDriver": "cgroupfs",
        "failCgroupV1": False,
        "clusterDomain": "cluster.local",
        "clusterDNS": [],
        "resolvConf": "",
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
        "podLogsDir": str(layout.pod_log_dir),
        "volumePluginDir": str(layout.home / "volume-plugins"),
        "serializeImagePulls": False,
        "shutdownGracePeriod": "0s",
        "syncFrequency": "10s",
        "fileCheckFrequency": "20s",
        "nodeStatusReportFrequency": "10s",
        "maxPods": 110,
    }
    return json.dumps(config, indent=2) + "\n"


def kube_proxy_config(layout: NodeLayout) -> str:
    """KubeProxyConfiguration: iptables mode, host sysctls untouched, NodePorts on the node IP only."""
    config = {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(layout.kubeconfig("kube-proxy"))},
        "hostnameOverride": NODE_NAME,
        "bindAddress": layout.network.node_ip,
        "healthzBindAddress": f"127.0.0.1:{layout.ports.proxy_healthz}",
        "metricsBindAddress": f"127.0.0.1:{layout.ports.proxy_metrics}",
        "mode": "iptables",
        "clusterCIDR": layout.network.pod_cidr,
        "nodePortAddresses": [f"{layout.network.node_ip}/32"],
        "iptables": {"localhostNodePorts": False, "syncPeriod": "10s", "minSyncPeriod": "0s"},
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
        },
    }
    return json.dumps(config, indent=2) + "\n"


def containerd_argv(layout: NodeLayout, binary: str) -> list[str]:
    return [binary, "--config", str(layout.containerd_config)]


def kubelet_argv(layout: NodeLayout, binary: str) -> list[str]:
    return [
        binary,
        f"--config={layout.kubelet_config}",
        f"--kubeconfig={layout.kubeconfig('kubelet')}",
        f"--root-dir={layout.kubelet_root}",
        f"--node-ip={layout.network.node_ip}",
        f"--hostname-override={NODE_NAME}",
        "--v=1",
    ]


def kube_proxy_argv(layout: NodeLayout, binary: str) -> list[str]:
    return [binary, f"--config={layout.proxy_config}", "--v=1"]


def kube_proxy_cleanup_argv(binary: str) -> list[str]:
    """Removes every rule kube-proxy's modes install (KUBE-* chains); run after it stops."""
    return [binary, "--cleanup"]


def scheduler_argv(layout: NodeLayout, binary: str) -> list[str]:
    kubeconfig = str(layout.kubeconfig("kube-scheduler"))
    return [
        binary,
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--leader-elect=false",
        "--bind-address=127.0.0.1",
        f"--secure-port={layout.ports.scheduler}",
        "--profiling=false",
    ]
