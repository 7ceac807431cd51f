"""Run a command in a built image with runc, no container engine: `umoci unpack` the OCI archive into a bundle,
tighten its config (read-only root, the host network, the image's own uid, a tmpfs /tmp), `runc run`.

For the images' integration tests and for a quick look (`run(built.oci_archive, ["vigil", "--help"])`). Each run
gets its own runc state directory, so it never meets a containerd's containers.
"""

import copy
import json
import subprocess
import tempfile
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from vigil_core.version import VERSION
from vigil_dev.images.build import ImageBuildError

#: The container's scratch directory (an emptyDir in the chart): a tmpfs here.
TMP = "/tmp"  # noqa: S108 - a path inside the container, not the host's
HOSTNAME = "vigil-image-test"


def bundle_config(
    config: Mapping[str, Any],
    *,
    args: Sequence[str] | None = None,
    env: Mapping[str, str] | None = None,
    hosts_file: str | None = None,
) -> dict[str, Any]:
    """umoci's generated runtime config, made like a locked-down pod: read-only root, no terminal, the host's
    network namespace (nothing to set up), a tmpfs /tmp, `args` replacing the entrypoint and `env` added, and,
    like the kubelet, an /etc/hosts that resolves the container's hostname (`hosts_file`, mounted read-only; the
    JVM's InetAddress.getLocalHost fails without it)."""
    out = copy.deepcopy(dict(config))
    out["hostname"] = HOSTNAME
    process = out["process"]
    process["terminal"] = False
    if args is not None:
        process["args"] = list(args)
    if env:
        process["env"] = [*process.get("env", []), *(f"{k}={v}" for k, v in env.items())]
    out["root"] = {**out.get("root", {}), "readonly": True}
    linux = out.setdefault("linux", {})
    linux["namespaces"] = [ns for ns in linux.get("namespaces", []) if ns.get("type") != "network"]
    tmp = {"destination": TMP, "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "nodev", "size=256m"]}
    mounts = [m for m in out.get("mounts", []) if m.get("destination") not in {TMP, "/etc/hosts"}]
    mounts.append(tmp)
    if hosts_file is not None:
        mounts.append({"destination": "/etc/hosts", "type": "bind", "source": hosts_file, "options": ["rbind", "ro"]})
    out["mounts"] = mounts
    return out


def run(
    oci_archive: Path,
    args: Sequence[str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    tag: str = VERSION,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """Run the image's entrypoint (or `args`) to completion; stdout and stderr captured."""
    with tempfile.TemporaryDirectory(prefix="vigil-runc-") as tmp:
        layout, bundle, state = Path(tmp) / "oci", Path(tmp) / "bundle", Path(tmp) / "state"
        layout.mkdir()
        _check(["tar", "-C", str(layout), "-xf", str(oci_archive)], "tar -x (oci archive)")
        _check(["umoci", "unpack", "--image", f"{layout}:{tag}", str(bundle)], "umoci unpack")
        config_path = bundle / "config.json"
        hosts = Path(tmp) / "hosts"
        hosts.write_text(f"127.0.0.1\tlocalhost {HOSTNAME}\n::1\tlocalhost\n")
        config = bundle_config(json.loads(config_path.read_text()), args=args, env=env, hosts_file=str(hosts))
        config_path.write_text(json.dumps(config))
        name = f"vigil-image-test-{uuid.uuid4().hex[:8]}"
        argv = ["runc", "--root", str(state), "run", "--bundle", str(bundle), name]
        try:
            return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False,
                                  stdin=subprocess.DEVNULL)  # fmt: skip
        finally:
            subprocess.run(["runc", "--root", str(state), "delete", "--force", name], capture_output=True, check=False)


def _check(argv: Sequence[str], what: str) -> None:
    done = subprocess.run(list(argv), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or ["no output"])[-1][:300]
        raise ImageBuildError(f"images: {what} failed: {reason}")
