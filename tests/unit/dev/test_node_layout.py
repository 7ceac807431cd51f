"""The real node's addresses, configs and command lines (pure): what keeps every address on this machine and every
file of the node under its own directory."""

import hashlib
import io
import ipaddress
import json
import tarfile
from pathlib import Path

import pytest
import yaml  # type: ignore[import-untyped]

from vigil_dev.kube.node import agent, host, layout, pause
from vigil_dev.kube.node.layout import Network, NodeLayout, NodePorts

HOME = Path("/state/kube/node")
LAYOUT = NodeLayout(
    home=HOME,
    log_dir=Path("/state/logs"),
    network=Network(),
    ports=NodePorts(kubelet=20250, kubelet_healthz=20248, proxy_healthz=20256, proxy_metrics=20249, scheduler=20259),
    ca_cert=Path("/state/kube/pki/ca.crt"),
    apiserver_port=6443,
)


@pytest.mark.parametrize(
    ("cidr", "expected"),
    [
        ("10.77.0.0/16", ("10.77.0.1", "10.77.64.0/24", "10.77.64.1", "10.77.128.0/24", "10.77.128.1")),
        ("172.20.0.0/16", ("172.20.0.1", "172.20.64.0/24", "172.20.64.1", "172.20.128.0/24", "172.20.128.1")),
    ],
)
def test_every_address_is_carved_from_the_stacks_own_16(cidr: str, expected: tuple[str, ...]) -> None:
    net = Network(cidr)
    assert (net.node_ip, net.service_cidr, net.service_ip, net.pod_cidr, net.pod_gateway) == expected
    whole = ipaddress.IPv4Network(cidr)
    for sub in (net.service_cidr, net.pod_cidr):
        assert ipaddress.IPv4Network(sub).subnet_of(whole)
    assert not ipaddress.IPv4Network(net.service_cidr).overlaps(ipaddress.IPv4Network(net.pod_cidr))


@pytest.mark.parametrize("cidr", ["10.77.0.0/24", "10.0.0.0/8"])
def test_a_network_that_is_not_a_16_is_refused_naming_the_expected_shape(cidr: str) -> None:
    with pytest.raises(ValueError, match="expected a /16"):
        _ = Network(cidr).node_ip


def test_pods_route_to_the_node_and_the_services_only_never_a_default_route() -> None:
    plugin = json.loads(layout.cni_conflist(LAYOUT))["plugins"][0]
    assert plugin["type"] == "bridge"
    assert plugin["bridge"] == layout.BRIDGE_INTERFACE
    assert plugin["ipMasq"] is False
    assert plugin["isDefaultGateway"] is False
    routes = [r["dst"] for r in plugin["ipam"]["routes"]]
    assert routes == ["10.77.0.1/32", "10.77.64.0/24"]
    assert "0.0.0.0/0" not in routes
    assert plugin["ipam"]["dataDir"].startswith(str(HOME))


def test_containerd_keeps_everything_under_the_node_home_and_clamps_oom_scores() -> None:
    text = layout.containerd_config(LAYOUT)
    for path in ("root", "state", "containerd.sock", "runc", "opt", "cni/net.d"):
        assert f'"{HOME}/' in text
        assert path in text
    assert "restrict_oom_score_adj = true" in text  # the sandbox asks for -998: no CAP_SYS_RESOURCE here
    assert f'sandbox_image = "{layout.PAUSE_IMAGE}"' in text
    assert "SystemdCgroup = false" in text


def test_unix_sockets_stay_short_wherever_the_state_directory_is() -> None:
    """containerd refuses a socket path over 104 characters ("unix socket path too long"): a test's tmp_path is
    longer. Sockets go through the node's short link, whatever `home` is."""
    deep = NodeLayout(**{**LAYOUT.__dict__, "home": Path("/tmp/pytest-of-root/pytest-71/" + "x" * 80 + "/kube/node")})
    assert len(f"{deep.containerd_socket}.ttrpc") <= 104
    assert len(f"{deep.kubelet_root}/pod-resources/kubelet.sock") <= 104
    assert f"--root-dir={deep.kubelet_root}" in layout.kubelet_argv(deep, "kubelet")
    assert f'address = "{deep.containerd_socket}"' in layout.containerd_config(deep)


def test_the_kubelet_authenticates_callers_and_never_collects_images_or_uses_the_host_resolver() -> None:
    config = yaml.safe_load(layout.kubelet_config(LAYOUT, Path("/c.crt"), Path("/c.key")))
    assert config["authentication"]["anonymous"]["enabled"] is False
    assert config["authentication"]["webhook"]["enabled"] is True
    assert config["authorization"]["mode"] == "Webhook"
    assert config["address"] == "10.77.0.1"
    assert config["healthzBindAddress"] == "127.0.0.1"
    assert config["readOnlyPort"] == 0
    assert config["imageGCHighThresholdPercent"] == 100  # an image collected could never be pulled again
    assert config["resolvConf"] == ""
    assert config["clusterDNS"] == []
    assert config["failCgroupV1"] is False
    assert config["podLogsDir"] == "/state/logs/pods"


def test_kube_proxy_leaves_the_hosts_sysctls_and_serves_node_ports_on_the_node_ip_only() -> None:
    config = yaml.safe_load(layout.kube_proxy_config(LAYOUT))
    assert config["conntrack"] == {
        "maxPerCore": 0,
        "min": 0,
        "tcpEstablishedTimeout": "0s",
        "tcpCloseWaitTimeout": "0s",
    }
    assert config["nodePortAddresses"] == ["10.77.0.1/32"]
    assert config["iptables"]["localhostNodePorts"] is False
    assert config["healthzBindAddress"].startswith("127.0.0.1:")
    assert config["metricsBindAddress"].startswith("127.0.0.1:")


def test_every_agent_names_its_own_config_so_its_pid_can_be_checked() -> None:
    assert str(LAYOUT.containerd_config) in layout.containerd_argv(LAYOUT, "containerd")
    assert f"--config={LAYOUT.kubelet_config}" in layout.kubelet_argv(LAYOUT, "kubelet")
    assert f"--config={LAYOUT.proxy_config}" in layout.kube_proxy_argv(LAYOUT, "kube-proxy")
    assert f"--kubeconfig={LAYOUT.kubeconfig('kube-scheduler')}" in layout.scheduler_argv(LAYOUT, "kube-scheduler")


def test_the_pause_archive_is_one_layer_the_same_bytes_every_time() -> None:
    first = pause.docker_archive(b"\x7fELF-binary", layout.PAUSE_IMAGE)
    assert first == pause.docker_archive(b"\x7fELF-binary", layout.PAUSE_IMAGE)
    with tarfile.open(fileobj=io.BytesIO(first)) as tar:
        manifest = json.loads(tar.extractfile("manifest.json").read())  # type: ignore[union-attr]
        assert manifest[0]["RepoTags"] == [layout.PAUSE_IMAGE]
        (layer_name,) = manifest[0]["Layers"]
        layer = tar.extractfile(layer_name).read()  # type: ignore[union-attr]
        config = json.loads(tar.extractfile(manifest[0]["Config"]).read())  # type: ignore[union-attr]
    assert config["rootfs"]["diff_ids"] == [f"sha256:{hashlib.sha256(layer).hexdigest()}"]
    assert config["config"]["Entrypoint"] == ["/pause"]
    with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
        assert [(m.name, m.mode, m.mtime) for m in tar.getmembers()] == [("pause", 0o755, 0)]


# -- what the machine must have (host.missing: the facts in, one line out) ----------------------------------------

ALL = {
    "euid": 0,
    "commands": set(host.COMMANDS),
    "cni_plugins": set(host.CNI_PLUGINS),
    "cgroup_controllers": set(host.CGROUP_CONTROLLERS),
    "filesystems": "nodev\tsysfs\nnodev\toverlay\n",
}


@pytest.mark.parametrize(
    ("lacking", "message"),
    [
        ({}, ""),
        ({"euid": 1000}, "the real node needs root (containerd, network namespaces, iptables, cgroups)"),
        ({"commands": set(host.COMMANDS) - {"runc"}}, "the real node needs runc: apt-get install runc"),
        (
            {"commands": set(host.COMMANDS) - {"ctr", "iptables-save"}, "cni_plugins": {"bridge"}},
            "the real node needs containerd, iptables, containernetworking-plugins: "
            "apt-get install containerd iptables containernetworking-plugins",
        ),
        (
            {"cgroup_controllers": set(host.CGROUP_CONTROLLERS) - {"pids"}},
            "the real node needs the cgroup controllers pids mounted under /sys/fs/cgroup",
        ),
        (
            {"filesystems": "nodev\tsysfs\n"},
            "the real node needs overlayfs (containerd's snapshotter): modprobe overlay",
        ),
    ],
)
def test_what_the_machine_lacks_is_one_line_naming_it_and_how_to_get_it(
    lacking: dict[str, object], message: str
) -> None:
    assert host.missing(**(ALL | lacking)) == message  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("ref", "held_as"),
    [
        ("vigil-sidecar:0.2.0", "docker.io/library/vigil-sidecar:0.2.0"),
        ("vigil-sidecar", "docker.io/library/vigil-sidecar:latest"),
        ("acme/app:1", "docker.io/acme/app:1"),
        ("registry.example.com/vigil/vigil-operator:0.2.0", "registry.example.com/vigil/vigil-operator:0.2.0"),
        ("localhost/vigil-pause:3.10.1", "localhost/vigil-pause:3.10.1"),
        ("localhost:5000/x:1", "localhost:5000/x:1"),
    ],
)
def test_an_image_reference_is_named_as_containerd_holds_it(ref: str, held_as: str) -> None:
    assert agent.normalized(ref) == held_as


# -- whose processes a cleanup may kill (host.process_markers) -----------------------------------------------------

NODE_HOME = Path("/srv/runs/a/kube/node")


@pytest.mark.parametrize(
    ("home", "link", "counts_link"),
    [
        (NODE_HOME, NODE_HOME, True),  # the link is this node's: its shims name only the link
        (NODE_HOME.parent, NODE_HOME, True),  # the stack's directory, above the node's
        (NODE_HOME, None, False),  # no link: nobody's shims through it
        (NODE_HOME, Path("/srv/runs/b/kube/node"), False),  # another run's node holds the machine: never its pids
        (Path("/srv/runs/a/kube/no"), NODE_HOME, False),  # a path that is only a prefix of the text is not above
    ],
)
def test_a_cleanup_counts_the_short_links_processes_only_while_the_link_is_its_own(
    home: Path, link: Path | None, counts_link: bool
) -> None:
    markers = host.process_markers(home, link)
    assert str(home) in markers
    assert (str(layout.SHORT_PATH) in markers) is counts_link
