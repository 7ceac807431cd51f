"""Start and stop the real node's processes: containerd, the kubelet and kube-proxy (managed by pid, like every
server of the stack), import images into containerd, and undo everything the node did to the machine.

Stopping is ordered so the kubelet itself tears the pods down (CNI DEL, netns unmounted, cgroups removed): pods
are force-deleted while it still runs; only what a killed node left behind is removed by hand afterwards.
"""

import contextlib
import json
import subprocess
import tarfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from vigil_dev import procs
from vigil_dev.errors import DevError
from vigil_dev.kube.node import host, layout
from vigil_dev.kube.node.layout import NodeLayout

PARTS = ("containerd", "kubelet", "kube-proxy")
START_TIMEOUT = 60.0
CRI_NAMESPACE = "k8s.io"
IP_FORWARD = Path("/proc/sys/net/ipv4/ip_forward")


@dataclass(frozen=True)
class RealNode:
    """The node's processes and files; `binaries` maps kubelet/kube-proxy/kubectl to their built paths."""

    layout: NodeLayout
    binaries: dict[str, str]

    @property
    def home(self) -> Path:
        return self.layout.home

    def log(self, name: str) -> Path:
        return self.layout.log_dir / name / f"{name}.log"

    def process(self, name: str) -> procs.Managed:
        marker = {
            "containerd": str(self.layout.containerd_config),
            "kubelet": str(self.layout.kubelet_config),
            "kube-proxy": str(self.layout.proxy_config),
        }[name]
        return procs.Managed(name, self.home / f"{name}.pid", marker)

    def argv(self, name: str) -> list[str]:
        if name == "containerd":
            return layout.containerd_argv(self.layout, "containerd")
        if name == "kubelet":
            return layout.kubelet_argv(self.layout, self.binaries["kubelet"])
        return layout.kube_proxy_argv(self.layout, self.binaries["kube-proxy"])

    def running(self) -> list[str]:
        return [name for name in PARTS if self.process(name).running()]

    # -- start ---------------------------------------------------------------------------------------------

    def write_config(self) -> None:
        """containerd's, the kubelet's, kube-proxy's and the CNI config (kubeconfigs and certs: controlplane)."""
        lay = self.layout
        for directory in (lay.containerd_dir, lay.cni_conf_dir, lay.cni_ipam_dir, lay.kubelet_dir, lay.pod_log_dir):
            directory.mkdir(parents=True, exist_ok=True)
        host.link_short_path(lay.home)
        lay.containerd_config.write_text(layout.containerd_config(lay))
        (lay.cni_conf_dir / "10-vigil.conflist").write_text(layout.cni_conflist(lay))
        cert, key = lay.home / "kubelet-serving.crt", lay.home / "kubelet-serving.key"
        lay.kubelet_config.write_text(layout.kubelet_config(lay, cert, key))
        lay.proxy_config.write_text(layout.kube_proxy_config(lay))

    def start_runtime(self, archives: Sequence[Path], progress: Callable[[str], None]) -> None:
        """containerd, then every image archive imported (and unpacked) into its CRI namespace."""
        self._start("containerd")
        procs.wait_until(
            lambda: self.ctr(["version"], check=False).returncode == 0,
            timeout=START_TIMEOUT,
            what=f"containerd ({self.log('containerd')})",
            exited=self.process("containerd").exited,
            log=self.log("containerd"),
        )
        self.import_archives(archives, progress)

    def import_archives(self, archives: Sequence[Path], progress: Callable[[str], None]) -> None:
        """Docker archives into containerd's CRI namespace (unpacked), each checked by name once imported."""
        for archive in archives:
            began = time.monotonic()
            self.ctr(["images", "import", "--no-unpack=false", str(archive)])
            tags = archive_tags(archive)
            self.require_images(tags)  # ctr 1.6 imports a misnamed archive as nothing, silently
            progress(f"node: imported {', '.join(tags)} in {time.monotonic() - began:.1f}s")

    def start_agents(self, node_ready: Callable[[], bool]) -> None:
        """The kubelet (until the Node is Ready), then kube-proxy (until it serves /healthz)."""
        self._start("kubelet")
        procs.wait_until(
            node_ready,
            timeout=START_TIMEOUT,
            what=f"kubelet: Node {layout.NODE_NAME} Ready ({self.log('kubelet')})",
            exited=self.process("kubelet").exited,
            log=self.log("kubelet"),
        )
        self._start("kube-proxy")
        procs.wait_until(
            lambda: _http_ok(f"http://127.0.0.1:{self.layout.ports.proxy_healthz}/healthz"),
            timeout=START_TIMEOUT,
            what=f"kube-proxy ({self.log('kube-proxy')})",
            exited=self.process("kube-proxy").exited,
            log=self.log("kube-proxy"),
        )

    def _start(self, name: str) -> procs.Managed:
        return procs.start(
            name,
            self.argv(name),
            pid_file=self.home / f"{name}.pid",
            marker=self.process(name).marker,
            log_file=self.log(name),
            env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": str(self.home)},
        )

    def ctr(self, args: Sequence[str], *, check: bool = True) -> "subprocess.CompletedProcess[str]":
        argv = ["ctr", "--address", str(self.layout.containerd_socket), "--namespace", CRI_NAMESPACE, *args]
        done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=300)
        if check and done.returncode != 0:
            raise DevError(f"ctr {' '.join(args)}: {(done.stderr.strip().splitlines() or ['failed'])[-1]}")
        return done

    def task_pid(self, container_id: str) -> int | None:
        """The host pid of a running container (`ctr tasks ls`: TASK PID STATUS), None if it runs no longer."""
        for line in self.ctr(["tasks", "ls"], check=False).stdout.splitlines()[1:]:
            fields = line.split()
            if len(fields) >= 3 and fields[0] == container_id and fields[2] == "RUNNING":
                return int(fields[1])
        return None

    def images(self) -> list[str]:
        """The image references containerd holds for the kubelet."""
        return self.ctr(["images", "ls", "-q"]).stdout.split()

    def require_images(self, refs: Sequence[str]) -> None:
        """DevError naming the first of `refs` (as a pod spec names it) the node does not hold, and how to get it:
        the kubelet would only say ErrImageNeverPull, pod by pod."""
        held = set(self.images())
        for ref in refs:
            if normalized(ref) not in held:
                raise DevError(
                    f"image {ref} is not in the node's containerd: build it (make images) and restart the stack "
                    f"(vigil dev down; vigil dev up), or import it: ctr --address {self.layout.containerd_socket} "
                    f"-n {CRI_NAMESPACE} images import <archive>"
                )

    # -- stop ----------------------------------------------------------------------------------------------

    def tasks(self) -> list[str]:
        """Running containers (pods' and sandboxes') as containerd sees them; [] when containerd is down."""
        if not self.process("containerd").running():
            return []
        done = self.ctr(["tasks", "ls", "-q"], check=False)
        return done.stdout.split() if done.returncode == 0 else []

    def stop(self, delete_pods: Callable[[], None], *, owns_machine: bool, timeout: float = 60.0) -> list[str]:
        """Pods deleted while the kubelet runs (it tears their sandboxes down), then kube-proxy and its rules,
        the kubelet, containerd; then whatever a killed node left: tasks, shims, mounts, netns, cgroups,
        interfaces. Returns the names of the parts that were running."""
        stopped = self.running()
        if self.process("kubelet").running() and self.tasks():
            with contextlib.suppress(DevError):
                delete_pods()
                deadline = time.monotonic() + timeout
                while self.tasks() and time.monotonic() < deadline:
                    time.sleep(0.5)
        self.process("kube-proxy").stop(grace=10)
        # its rules are the machine's: dropped only by the node that holds it (else network_down drops them by name)
        if owns_machine and Path(self.binaries.get("kube-proxy", "")).is_file():
            subprocess.run(
                layout.kube_proxy_cleanup_argv(self.binaries["kube-proxy"]),
                capture_output=True, check=False, timeout=60,
            )  # fmt: skip
        self.process("kubelet").stop(grace=15)
        for task in self.tasks():  # a pod the kubelet did not get to: kill it, so its shim exits
            self.ctr(["tasks", "kill", "--signal", "SIGKILL", task], check=False)
            self.ctr(["tasks", "delete", "--force", task], check=False)
        self.process("containerd").stop(grace=15)
        self.cleanup(owns_machine=owns_machine)
        return stopped

    def cleanup(self, *, owns_machine: bool) -> None:
        """Undo the node's traces on the machine, whatever state it was left in (idempotent). What cannot be told
        apart from another node's (network namespaces, the kubelet's cgroups) only when this node held the machine."""
        for pid, _argv in host.node_processes(self.home):  # shims outlive containerd
            with contextlib.suppress(ProcessLookupError, PermissionError):
                procs.kill_pid(pid)
        host.unmount_all(self.home)
        if owns_machine:
            host.remove_netns()
            host.remove_cgroups()
            host.unlink_short_path(self.home)
        for link in Path("/var/log/containers").glob("*.log") if Path("/var/log/containers").is_dir() else []:
            with contextlib.suppress(OSError):
                if str(link.readlink()).startswith(str(self.layout.pod_log_dir)):
                    link.unlink()


def archive_tags(archive: Path) -> list[str]:
    """The references a docker archive (`docker save` format: manifest.json) carries."""
    try:
        with tarfile.open(archive) as tar:
            member = tar.extractfile("manifest.json")
            manifest = json.loads(member.read()) if member is not None else []
    except (OSError, tarfile.TarError, KeyError, ValueError) as exc:
        raise DevError(f"{archive}: not a docker archive ({exc}); rebuild it with make images") from exc
    return [str(tag) for entry in manifest for tag in entry.get("RepoTags") or []]


def normalized(ref: str) -> str:
    """A reference as containerd names it: `vigil-sidecar:0.2.0` -> `docker.io/library/vigil-sidecar:0.2.0`."""
    name = ref.split("@", 1)[0]
    first = name.split("/", 1)[0]
    if "/" not in name:
        ref = f"docker.io/library/{ref}"
    elif "." not in first and ":" not in first and first != "localhost":
        ref = f"docker.io/{ref}"
    return ref if ":" in ref.rsplit("/", 1)[-1] or "@" in ref else f"{ref}:latest"


def keep_logs(live: Path, kept: Path) -> int:
    """Hard-link every container log file under `live` (the kubelet's podLogsDir) into the same place under
    `kept`: the kubelet deletes a pod's logs with the pod, a link keeps their content (it appends to the same
    inode until it rotates to a new file, which is linked on the next call). Returns the number of new links."""
    linked = 0
    for source in live.glob("*/*/*.log"):
        target = kept / source.relative_to(live)
        if target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):  # gone meanwhile, or rotated
            target.hardlink_to(source)
            linked += 1
    return linked


def _http_ok(url: str) -> bool:
    import urllib.request  # noqa: PLC0415 - only for the readiness check

    try:
        with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - a loopback URL we built
            return bool(response.status == 200)
    except OSError:
        return False
