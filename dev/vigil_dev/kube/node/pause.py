"""The pod sandbox ("pause") image, built from the Kubernetes release's own `build/pause/linux/pause.c`.

No registry is reachable, and every pod needs a sandbox image: the C source ships in the k8s.io/kubernetes module
the control plane is built from, so it is compiled statically (as upstream's Makefile does) and wrapped as a
one-layer docker archive that `ctr images import` takes. Cached beside the kube binaries; rebuilt only when absent.
"""

import hashlib
import io
import json
import subprocess
import tarfile
from pathlib import Path

from vigil_dev.errors import DevError
from vigil_dev.kube import build
from vigil_dev.kube.node.layout import PAUSE_IMAGE
from vigil_dev.paths import cache_dir

PAUSE_TAG = PAUSE_IMAGE.rsplit(":", 1)[1]
#: Upstream's CFLAGS (build/pause/Makefile), with our suffix instead of its git revision.
CFLAGS = ("-Os", "-Wall", "-Werror", "-static", f"-DVERSION=v{PAUSE_TAG}-vigil")
EPOCH = 0
"""Fixed mtimes: the same source gives the same archive, byte for byte."""


def archive() -> Path:
    """The docker archive of the pause image, building it on first use."""
    out = cache_dir() / build.KUBE_TOOL / build.K8S_VERSION / "pause"
    tar = out / f"pause-{PAUSE_TAG}.docker.tar"
    if tar.is_file():
        return tar
    source = cache_dir() / "go" / "mod" / f"k8s.io/kubernetes@{build.K8S_VERSION}" / "build/pause/linux/pause.c"
    if not source.is_file():
        raise DevError(f"{source} is missing: build the Kubernetes binaries first (python -m vigil_dev.kube.build)")
    out.mkdir(parents=True, exist_ok=True)
    binary = out / "pause"
    done = subprocess.run(
        ["gcc", *CFLAGS, "-o", str(binary), str(source)], capture_output=True, text=True, check=False, timeout=120
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["?"])[-1]
        raise DevError(f"gcc could not build the pause binary: {last} (static libc: apt-get install libc6-dev)")
    partial = tar.with_suffix(".tmp")
    partial.write_bytes(docker_archive(binary.read_bytes(), PAUSE_IMAGE))
    partial.replace(tar)
    return tar


def docker_archive(pause_binary: bytes, ref: str) -> bytes:
    """A `docker save`-format archive of one layer holding `/pause`, run as nobody (65535, as upstream)."""
    layer = _tar({"pause": (pause_binary, 0o755)})
    layer_digest = hashlib.sha256(layer).hexdigest()
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Entrypoint": ["/pause"], "User": "65535:65535", "WorkingDir": "/"},
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{layer_digest}"]},
        "history": [{"created_by": f"gcc {' '.join(CFLAGS)} build/pause/linux/pause.c (k8s {build.K8S_VERSION})"}],
    }
    config_bytes = json.dumps(config, sort_keys=True).encode()
    config_name = f"{hashlib.sha256(config_bytes).hexdigest()}.json"
    manifest = [{"Config": config_name, "RepoTags": [ref], "Layers": [f"{layer_digest}/layer.tar"]}]
    return _tar(
        {
            config_name: (config_bytes, 0o644),
            f"{layer_digest}/layer.tar": (layer, 0o644),
            "manifest.json": (json.dumps(manifest).encode(), 0o644),
        }
    )


def _tar(files: dict[str, tuple[bytes, int]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(files):
            data, mode = files[name]
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime, info.uid, info.gid = len(data), mode, EPOCH, 0, 0
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()
