"""The image archives a test cluster's node imports: vigil's images as `make images` builds them.

`VIGIL_DEV_IMAGE_ARCHIVES` (paths separated by `:`) replaces the build, for trying an image by hand.
"""

import os
from collections.abc import Callable, Sequence
from pathlib import Path

from vigil_core.version import VERSION
from vigil_dev.errors import DevError

ARCHIVES_ENV = "VIGIL_DEV_IMAGE_ARCHIVES"
TESTAPPS = f"vigil-testapps:{VERSION}"
"""The test apps' image (`vigil_testapps`): what test pods run, with `imagePullPolicy: Never`."""
IMAGE_UID = 65532
"""The user every vigil image runs as."""
NODE_IMAGES = ("sidecar", "operator", "testapps")
"""What a node imports at start: what vigil and the test pods run. The report image (1 GB, most of a start's import
time: 18 s of 40 s measured) is imported when asked for (`--report-image`, `KubeCluster.import_images`)."""


def archives(progress: Callable[[str], None], names: Sequence[str] = NODE_IMAGES) -> list[Path]:
    """Docker archives of the named images (by default what a node imports at start), built or found cached."""
    if given := os.environ.get(ARCHIVES_ENV):
        paths = [Path(p) for p in given.split(":") if p]
        if missing := [str(p) for p in paths if not p.is_file()]:
            raise DevError(f"{ARCHIVES_ENV}: no such file {', '.join(missing)}")
        return paths
    from vigil_dev import images as build  # noqa: PLC0415 - the builder only when no archives are given

    return [image.docker_archive for image in build.ensure_images(progress, names=list(names)).values()]
