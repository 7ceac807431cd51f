"""What each image weighs, layer by layer: the base (Debian) and the app venv, compressed as a registry stores them
and as a node unpacks them.

Reads the images `make images` built (`$VIGIL_CACHE/images/out`; builds what is missing), each OCI archive's manifest
and its layer blobs. Ratios compare the sidecar with the 50.9 MB it weighed before the base was cut to its runtime
(2026-11-26, 34.5 MB base + 16.4 MB venv) and with issue #20's target (≤ 40 MB compressed).

    .venv/bin/python bench/image_layers.py [--image sidecar ...]
"""

import argparse
import gzip
import json
import tarfile
from pathlib import Path

from vigil_dev.images import BuiltImage, ensure_images, spec

BEFORE_MB = 50.9
TARGET_MB = 40.0
LAYER_NAMES = ("base", "venv")


def layers(archive: Path) -> list[tuple[int, int]]:
    """(compressed, uncompressed) bytes of each layer of an OCI archive, bottom first."""
    with tarfile.open(archive) as tar:
        index = json.loads(blob_of(tar, "index.json"))
        manifest = json.loads(blob_of(tar, _blob_name(index["manifests"][0]["digest"])))
        out = []
        for layer in manifest["layers"]:
            data = blob_of(tar, _blob_name(layer["digest"]))
            out.append((len(data), len(gzip.decompress(data))))
        return out


def _blob_name(digest: str) -> str:
    return f"blobs/sha256/{digest.removeprefix('sha256:')}"


def blob_of(tar: tarfile.TarFile, name: str) -> bytes:
    member = tar.extractfile(name)
    if member is None:
        raise SystemExit(f"{tar.name}: {name} missing")
    return member.read()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", action="append", choices=[i.name for i in spec.IMAGES], help="default: all")
    args = parser.parse_args()
    names = args.image or [i.name for i in spec.IMAGES]
    built: dict[str, BuiltImage] = ensure_images(progress=print, names=names)
    print("| image | layer | compressed | uncompressed |")
    print("|---|---|---|---|")
    for name in names:
        sizes = layers(built[name].oci_archive)
        for label, (packed, unpacked) in zip(LAYER_NAMES, sizes, strict=True):
            print(f"| {name} | {label} | {packed / 1e6:.1f} MB | {unpacked / 1e6:.1f} MB |")
        total = sum(p for p, _ in sizes) / 1e6
        ratios = f" ({total / BEFORE_MB:.2f}× the {BEFORE_MB} MB before, {total / TARGET_MB:.2f}× the target)"
        print(f"| {name} | total | {total:.1f} MB{ratios if name == 'sidecar' else ''} | |")


if __name__ == "__main__":
    main()
