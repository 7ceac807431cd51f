"""Which local command an image stands for: the fakelet pulls nothing, it runs host programs.

An image is matched by its repository path, registry and tag/digest stripped
(`ghcr.io/acme/vigil-sidecar:0.1@sha256:…` → `acme/vigil-sidecar`, `docker.io/library/busybox:1.36` →
`busybox`), against the glob patterns of `TABLE` in order; `*/name` patterns catch any owner. The entry gives
the image's ENTRYPOINT and CMD, and the container's own command/args apply on top exactly as in Kubernetes.
A leading `python`/`python3` (or `/usr/bin/python3`…) in the final command means this virtualenv's
interpreter, so vigil's own packages and the test apps import. An image not in the table makes the
container wait with reason `ErrImagePull`, as a real node would.
"""

import fnmatch
import re
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Image:
    """What a real image would contribute: its ENTRYPOINT and CMD."""

    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()


_VIGIL = ("python", "-m", "vigil_core.cli")

#: (repository glob, image). First match wins.
TABLE: tuple[tuple[str, Image], ...] = (
    ("vigil-sidecar", Image(entrypoint=(*_VIGIL, "sidecar"))),
    ("*/vigil-sidecar", Image(entrypoint=(*_VIGIL, "sidecar"))),
    ("vigil-operator", Image(entrypoint=(*_VIGIL, "operator"))),
    ("*/vigil-operator", Image(entrypoint=(*_VIGIL, "operator"))),
    ("vigil-test/*", Image(cmd=("python",))),  # test apps: the pod gives `command: [python, -m, ...]`
    ("python", Image(cmd=("python",))),
    ("busybox", Image(cmd=("sh",))),  # host sh, sleep, cat ...: enough for shell one-liners
    ("alpine", Image(cmd=("sh",))),
    ("debian", Image(cmd=("bash",))),
    ("ubuntu", Image(cmd=("bash",))),
)

_PYTHON = re.compile(r"(/usr(/local)?/bin/)?python(3(\.\d+)?)?")


def repository(image: str) -> str:
    """The repository path of an image reference: no registry, tag or digest; Docker Hub's `library/` dropped."""
    name = image.split("@", 1)[0]
    slash, colon = name.rfind("/"), name.rfind(":")
    if colon > slash:
        name = name[:colon]
    first, sep, rest = name.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        name = rest
    return name.removeprefix("library/")


def lookup(image: str) -> Image | None:
    repo = repository(image)
    return next((img for pattern, img in TABLE if fnmatch.fnmatchcase(repo, pattern)), None)


def command_line(image: Image, command: Sequence[str], args: Sequence[str]) -> list[str]:
    """Kubernetes' rule: `command` replaces ENTRYPOINT (and drops CMD); `args` replaces CMD."""
    if command:
        return [*command, *args]
    return [*image.entrypoint, *(args if args else image.cmd)]


def localize(argv: Sequence[str], python: str) -> list[str]:
    """Run a leading python with `python` (this interpreter); other programs are looked up on PATH."""
    if argv and _PYTHON.fullmatch(argv[0]):
        return [python, *argv[1:]]
    return list(argv)
