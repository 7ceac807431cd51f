"""What the real node needs from this machine, and what it changes on it: checked before anything starts, undone
after it stops, and listed by `leftovers` (which `vigil dev down` and a test use to prove nothing stayed).

The node is root-only and machine-wide: network namespaces, the pod bridge, iptables (kube-proxy), cgroups and a
few fixed kubelet paths cannot be shared by two nodes, so one lock per machine guards it.
"""

import contextlib
import fcntl
import ipaddress
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from vigil_dev.errors import DevError
from vigil_dev.kube.node.layout import BRIDGE_INTERFACE, CNI_BIN_DIR, NODE_INTERFACE, SHORT_PATH, Network

LOCK_FILE = Path("/run/vigil-dev-node.lock")
#: Debian packages that provide each command the node runs (the one-line hint of a failed preflight).
COMMANDS = {
    "containerd": "containerd",
    "containerd-shim-runc-v2": "containerd",
    "ctr": "containerd",
    "runc": "runc",
    "iptables": "iptables",
    "iptables-save": "iptables",
    "ip": "iproute2",
    "gcc": "gcc",
}
CNI_PLUGINS = ("bridge", "host-local", "loopback")
CGROUP_CONTROLLERS = ("cpu", "cpuacct", "memory", "pids", "devices", "freezer", "cpuset", "blkio")
#: Where the kubelet writes no matter its --root-dir: removed at teardown when the node created them.
KUBELET_FIXED_PATHS = (Path("/var/log/containers"), Path("/var/lib/kubelet"))
NETNS_DIR = Path("/run/netns")
MACHINE_STATE = Path("/run/vigil-dev-node.json")
"""What the node changes on the machine, as it was before: written by `network_up`, restored by `network_down`."""
IP_FORWARD = Path("/proc/sys/net/ipv4/ip_forward")


def preflight(network: Network) -> None:
    """Refuse to start half-way: root, every command, the CNI plugins, the cgroup controllers, overlayfs, the
    stack's /16 unused by anyone else. Raises DevError with one line naming what is missing and how to get it."""
    problem = missing(
        euid=os.geteuid(),
        commands={cmd for cmd in COMMANDS if shutil.which(cmd) is not None},
        cni_plugins={p for p in CNI_PLUGINS if (CNI_BIN_DIR / p).is_file()},
        cgroup_controllers=_cgroup_v1_controllers(),
        filesystems=Path("/proc/filesystems").read_text(),
    )
    if problem:
        raise DevError(problem)
    if clash := foreign_routes(network):
        raise DevError(
            f"the node network {network.cidr} is already used on this machine ({clash}): "
            "set VIGIL_DEV_NODE_NETWORK to a free /16 (e.g. 10.78.0.0/16)"
        )


def missing(
    *, euid: int, commands: set[str], cni_plugins: set[str], cgroup_controllers: set[str], filesystems: str
) -> str:
    """What this machine lacks to run the node, as one line with the way to get it ('' if nothing): pure."""
    if euid != 0:
        return "the real node needs root (containerd, network namespaces, iptables, cgroups)"
    packages = sorted({pkg for cmd, pkg in COMMANDS.items() if cmd not in commands})
    if not set(CNI_PLUGINS) <= cni_plugins:
        packages.append("containernetworking-plugins")
    if packages:
        return f"the real node needs {', '.join(packages)}: apt-get install {' '.join(packages)}"
    if absent := [c for c in CGROUP_CONTROLLERS if c not in cgroup_controllers]:
        return f"the real node needs the cgroup controllers {', '.join(absent)} mounted under /sys/fs/cgroup"
    if not any(line.split()[-1:] == ["overlay"] for line in filesystems.splitlines()):
        return "the real node needs overlayfs (containerd's snapshotter): modprobe overlay"
    return ""


@contextlib.contextmanager
def machine_lock() -> Iterator[None]:
    """Hold the machine's node lock while starting; `held_by` tells who runs the node now."""
    fd = os.open(LOCK_FILE, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise DevError(f"another real node is starting on this machine ({held_by() or '?'})") from None
        yield
    finally:
        os.close(fd)


def held_by() -> str:
    """The state directory of the node running on this machine ('' if none): recorded beside the lock."""
    try:
        return LOCK_FILE.with_suffix(".owner").read_text().strip()
    except OSError:
        return ""


def claim(owner: Path) -> None:
    LOCK_FILE.with_suffix(".owner").write_text(f"{owner}\n")


def release(owner: Path) -> None:
    if held_by() == str(owner):
        LOCK_FILE.with_suffix(".owner").unlink(missing_ok=True)


# -- network ---------------------------------------------------------------------------------------------------


def foreign_routes(network: Network) -> str:
    """An address or route of this machine inside the stack's /16 that is not on its own interfaces ('' if none)."""
    ours = ipaddress.IPv4Network(network.cidr)
    for route in _ip_json(["route", "show", "table", "all"]):
        dst = route.get("dst", "")
        if route.get("dev") in (NODE_INTERFACE, BRIDGE_INTERFACE) or dst in ("", "default"):
            continue
        with contextlib.suppress(ValueError):
            if ipaddress.IPv4Network(dst, strict=False).overlaps(ours):
                return f"route {dst} dev {route.get('dev')}"
    for link in _ip_json(["addr", "show"]):
        if link.get("ifname") in (NODE_INTERFACE, BRIDGE_INTERFACE):
            continue
        for addr in link.get("addr_info", []):
            if addr.get("family") == "inet" and ipaddress.IPv4Address(addr["local"]) in ours:
                return f"address {addr['local']} on {link.get('ifname')}"
    return ""


def network_up(network: Network) -> None:
    """The node IP on an interface of its own, the whole /16 routed into it: what nothing more specific claims
    (a ClusterIP without endpoints, an unassigned pod address) goes nowhere. The interface is a bridge without
    ports, not a `dummy`: this machine kind's kernel has no dummy driver ("Unknown device type"). First records
    what the node will change on the machine (IP forwarding, the kubelet's fixed paths) so `network_down` can
    put it back."""
    if not MACHINE_STATE.exists():
        before = {
            "ip_forward": IP_FORWARD.read_text().strip(),
            "paths": [str(p) for p in KUBELET_FIXED_PATHS if p.exists()],
        }
        MACHINE_STATE.write_text(json.dumps(before) + "\n")
    _ip(["link", "add", NODE_INTERFACE, "type", "bridge"], ok_if="File exists")
    _ip(["addr", "replace", f"{network.node_ip}/32", "dev", NODE_INTERFACE])
    _ip(["link", "set", NODE_INTERFACE, "up"])
    _ip(["route", "replace", network.cidr, "dev", NODE_INTERFACE, "src", network.node_ip])


def network_down() -> list[str]:
    """Remove the pod bridge, every veth still on it and the node interface (their routes go with them), every
    KUBE-/CNI- iptables chain (kube-proxy's and the kubelet's own), and restore what `network_up` recorded."""
    removed = []
    for link in _ip_json(["link", "show"]):
        name = link.get("ifname", "")
        if link.get("master") == BRIDGE_INTERFACE or name in (BRIDGE_INTERFACE, NODE_INTERFACE):
            _ip(["link", "del", name], ok_if="Cannot find device")
            removed.append(name)
    remove_kube_rules()
    try:
        before = json.loads(MACHINE_STATE.read_text())
    except (OSError, ValueError):
        return removed
    IP_FORWARD.write_text(f"{before['ip_forward']}\n")
    for path in KUBELET_FIXED_PATHS:
        if str(path) not in before["paths"]:
            shutil.rmtree(path, ignore_errors=True)
    MACHINE_STATE.unlink(missing_ok=True)
    return removed


def _ip(args: Sequence[str], ok_if: str = "") -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False, timeout=30)
    if done.returncode != 0 and not (ok_if and ok_if in done.stderr):
        raise DevError(f"ip {' '.join(args)}: {done.stderr.strip()}")


def _ip_json(args: Sequence[str]) -> list[dict[str, Any]]:
    done = subprocess.run(["ip", "-j", *args], capture_output=True, text=True, check=False, timeout=30)
    if done.returncode != 0:
        raise DevError(f"ip -j {' '.join(args)}: {done.stderr.strip()}")
    parsed = json.loads(done.stdout or "[]")
    return [dict(item) for item in parsed if isinstance(item, dict)]


# -- what stays behind -----------------------------------------------------------------------------------------


def leftovers(home: Path, network: Network) -> list[str]:
    """Everything of a node rooted at `home` still on this machine: processes, mounts, network namespaces,
    interfaces, iptables rules and cgroups. Empty after a clean `down`."""
    found = [f"process {pid} {argv}" for pid, argv in node_processes(home)]
    found += [f"mount {m}" for m in mounts_under(home)]
    found += [f"netns {n.name}" for n in _our_netns()]
    found += [
        f"interface {link.get('ifname')}"
        for link in _ip_json(["link", "show"])
        if link.get("ifname") in (NODE_INTERFACE, BRIDGE_INTERFACE) or link.get("master") == BRIDGE_INTERFACE
    ]
    found += [f"iptables {rule}" for rule in iptables_rules(network)]
    found += [f"cgroup {c}" for c in kubepods_cgroups()]
    found += [f"link {SHORT_PATH}"] if SHORT_PATH.is_symlink() and SHORT_PATH.readlink() == home else []
    return found


def process_markers(home: Path, short_link_target: Path | None) -> tuple[str, ...]:
    """What names a process of the node at `home`: its paths, and the short link only while that link is this
    node's. Another stack's cleanup (a `vigil dev down` of a stopped stack, a killed run's leftovers) must never
    take the machine's running node for its own: its kubelet and shims name the link too."""
    ours = short_link_target is not None and (short_link_target == home or home in short_link_target.parents)
    return (str(home), str(SHORT_PATH)) if ours else (str(home),)


def node_processes(home: Path) -> list[tuple[int, str]]:
    """Processes whose command line names a path under `home` (containerd, kubelet, kube-proxy) or the node's
    short link while it points under `home` (the shims name only containerd's socket, through it)."""
    markers = process_markers(home, SHORT_PATH.readlink() if SHORT_PATH.is_symlink() else None)
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        if any(m in argv for m in markers) and int(entry.name) != os.getpid():
            found.append((int(entry.name), argv[:160]))
    return found


def link_short_path(home: Path) -> None:
    """Point `layout.SHORT_PATH` at the node's directory (replacing a link a killed node left)."""
    SHORT_PATH.unlink(missing_ok=True)
    SHORT_PATH.symlink_to(home)


def unlink_short_path(home: Path) -> None:
    if SHORT_PATH.is_symlink() and SHORT_PATH.readlink() == home:
        SHORT_PATH.unlink()


def mounts_under(home: Path) -> list[str]:
    """Mount points under `home`, deepest first (the order to unmount them in)."""
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = _unescape(line.split()[4])
        if point == str(home) or point.startswith(f"{home}/"):
            points.append(point)
    return sorted(set(points), key=lambda p: -p.count("/"))


def unmount_all(home: Path) -> None:
    for point in mounts_under(home):
        subprocess.run(["umount", "-l", point], capture_output=True, check=False, timeout=30)


def _our_netns() -> list[Path]:
    """Network namespaces containerd's CRI made (`cni-<uuid>`): on a machine with one node, all of them are ours."""
    return sorted(NETNS_DIR.glob("cni-*")) if NETNS_DIR.is_dir() else []


def remove_netns() -> None:
    for ns in _our_netns():
        subprocess.run(["umount", "-l", str(ns)], capture_output=True, check=False, timeout=30)
        ns.unlink(missing_ok=True)


def iptables_rules(network: Network) -> list[str]:
    """Rules and chains kube-proxy, the kubelet or CNI left (KUBE-*, CNI-*, or naming the stack's addresses), in
    every family and backend this machine has."""
    net = network.cidr.split("/")[0].rsplit(".", 2)[0]  # "10.77"
    pattern = re.compile(rf"KUBE-|CNI-|\b{re.escape(net)}\.")
    found = []
    for save, _restore in _iptables_backends():
        found += [f"{save}: {line}" for line in _saved(save) if pattern.search(line)]
    return found


def remove_kube_rules() -> None:
    """Drop every KUBE-/CNI- chain and every rule that jumps to one, table by table, with one atomic restore per
    backend (the machine's other rules are written back as they were)."""
    for save, restore in _iptables_backends():
        lines = _saved(save)
        if not any(_KUBE_CHAIN.search(line) for line in lines):
            continue
        kept = [line for line in lines if not _KUBE_CHAIN.search(line)]
        subprocess.run([restore], input="\n".join(kept) + "\n", text=True, capture_output=True, check=False, timeout=60)


_KUBE_CHAIN = re.compile(r"\b(KUBE|CNI)-[A-Z0-9-]+")


def _iptables_backends() -> list[tuple[str, str]]:
    """(save, restore) commands of both families, nft and (when present) legacy."""
    pairs = []
    for family in ("iptables", "ip6tables"):
        for backend in ("", "-legacy"):
            save, restore = f"{family}{backend}-save", f"{family}{backend}-restore"
            if shutil.which(save) and shutil.which(restore):
                pairs.append((save, restore))
    return pairs


def _saved(save: str) -> list[str]:
    done = subprocess.run([save], capture_output=True, text=True, check=False, timeout=30)
    return [line for line in done.stdout.splitlines() if line and not line.startswith("#")]


def kubepods_cgroups() -> list[str]:
    """The kubelet's cgroup hierarchy (`kubepods*`) under every v1 controller."""
    found = []
    for controller in _cgroup_v1_controllers():
        found += [str(p) for p in Path("/sys/fs/cgroup", controller).glob("kubepods*")]
    return found


def remove_cgroups() -> None:
    """rmdir the kubelet's cgroups deepest first (an empty cgroup directory is removed by rmdir, not rm)."""
    for top in kubepods_cgroups():
        for path in sorted(Path(top).rglob("*"), key=lambda p: -len(p.parts)):
            if path.is_dir():
                with contextlib.suppress(OSError):
                    path.rmdir()
        with contextlib.suppress(OSError):
            Path(top).rmdir()


def _cgroup_v1_controllers() -> set[str]:
    found = set()
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split(" - ", 1)
        if len(fields) == 2 and fields[1].startswith("cgroup "):
            point = line.split()[4]
            found.add(Path(point).name)
    return found


def _unescape(path: str) -> str:
    """mountinfo escapes spaces and friends as octal."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), path)
