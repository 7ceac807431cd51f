"""vigil's container images, built without Docker and without a registry base image (`make images`).

Four images, defined as data in `spec.IMAGES`: `vigil-sidecar` (the base install), `vigil-operator` (`[operator]`),
`vigil-report` (`[report]`, a JRE, Spark's Kafka source and vigil's byte readers in `$VIGIL_SPARK_JARS`) and the
test image `vigil-testapps` (kafka-vigil + `vigil_testapps`). Each is two layers:

1. a Debian bookworm rootfs by mmdebstrap (essential variant + python3, merged /usr, no docs), built once per
   base and shared: `python` (sidecar, operator, testapps; no shell at all) and `python-jre` (report; keeps bash,
   which Spark's launcher scripts need);
2. the venv `/opt/vigil`: the kafka-vigil wheel built from the working tree (tracked and untracked-not-ignored
   files) and its dependencies from `images/<set>.lock`, installed in a chroot with `--no-index --require-hashes`
   by a pip run from its wheel (so no pip in the image) under `env -i`.

All run as 65532:65532. Same inputs → same manifest digest (see `plan` for how). Outputs per image, under
`$VIGIL_CACHE/images/out/<name>/`: an OCI archive (ref: the bare version tag), a docker archive tagged
`<repository>:<version>` (`ctr -n k8s.io images import` names it `docker.io/library/vigil-sidecar:0.2.0`, what the
chart's repository + appVersion resolve to), `dpkg.txt` (`dpkg-query -W`) and `manifest.json`.

API (what the node setup calls)::

    from vigil_dev import images
    built = images.ensure_images(progress=print)        # all four; or names=["sidecar", "testapps"]
    built["sidecar"].docker_archive                     # Path of the docker archive
    built["sidecar"].ref, .oci_archive, .digest, .compressed_bytes, .uncompressed_bytes, .dpkg_list, .manifest

Warm (nothing changed) it takes seconds: one small request per Debian suite (its InRelease fixes the base and the
epoch), a digest of the wheel's source files, and the cached outputs. Errors are `ImageBuildError` (a `DevError`),
one line naming what is missing (root, mmdebstrap, umoci, skopeo, the mirror, javac, mvn ...).

Commands: `python -m vigil_dev.images [NAME ...]` (`make images`), `python -m vigil_dev.images --lock` (`make lock`).
"""

from vigil_dev.images.build import BuiltImage, ImageBuildError, ensure_images

__all__ = ["BuiltImage", "ImageBuildError", "ensure_images"]
