"""The images' lock files: every third-party distribution of an image pinned to one version and one file hash.

`images/<set>.lock` is pip's requirements format (`name==version --hash=sha256:…`), one per dependency set: `base`
(the sidecar and vigil-testapps images), `operator`, `report`; `images/pip.lock` pins the pip that installs them
(run from its wheel, so it never lands in an image). Each hash is of the file pip chose for CPython 3.11 on x86_64
glibc Linux (the images' Debian bookworm): a wheel, or an sdist (pyspark publishes no wheel) that the builder
verifies, then builds into a wheel on the host.

`python -m vigil_dev.images lock` (`make lock`) regenerates them with `pip install --dry-run --report`, on a host
whose Python is the images' (3.11, x86_64). The parsing and the checks here are pure;
`tests/unit/dev/test_image_locks.py` proves each lock satisfies pyproject's requirements for its image.
"""

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

#: Lock set -> the pyproject extra it adds to the base install (None: the base install only).
SETS: dict[str, str | None] = {"base": None, "operator": "operator", "report": "report"}
PIP_LOCK = "pip.lock"
#: The environment the locks are resolved for (the images'): markers are evaluated with it.
TARGET_ENV: dict[str, str] = {
    "python_version": "3.11",
    "python_full_version": "3.11.2",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "os_name": "posix",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
}
_LINE = re.compile(r"^(?P<name>[A-Za-z0-9._-]+)==(?P<version>\S+)$")
_HASH = re.compile(r"^--hash=sha256:(?P<hash>[0-9a-f]{64})$")


class LockError(Exception):
    """A lock file is malformed or does not satisfy the requirements; the message names the entry."""


@dataclass(frozen=True)
class Pin:
    name: str
    """Canonical (PEP 503) name."""
    version: str
    hashes: tuple[str, ...]

    def line(self) -> str:
        """The requirements line, hashes included."""
        return " ".join([f"{self.name}=={self.version}", *(f"--hash=sha256:{h}" for h in self.hashes)])


def parse(text: str) -> dict[str, Pin]:
    """A lock file's pins by canonical name. Every entry needs an exact version and at least one hash."""
    pins: dict[str, Pin] = {}
    for logical in text.replace("\\\n", " ").splitlines():
        fields = logical.split("#", 1)[0].split()
        if not fields:
            continue
        match = _LINE.match(fields[0])
        if match is None:
            raise LockError(f"lock entry {fields[0]!r}: expected name==version")
        hashes = []
        for option in fields[1:]:
            found = _HASH.match(option)
            if found is None:
                raise LockError(f"lock entry {fields[0]}: unexpected {option!r} (only --hash=sha256:…)")
            hashes.append(found.group("hash"))
        if not hashes:
            raise LockError(f"lock entry {fields[0]}: no --hash (pip --require-hashes refuses it)")
        name = canonicalize_name(match.group("name"))
        if name in pins:
            raise LockError(f"lock entry {name}: pinned twice")
        pins[name] = Pin(name, match.group("version"), tuple(hashes))
    return pins


def render(pins: Iterable[Pin], header: str) -> str:
    """The lock file's text: a comment header, then the pins sorted by name, one hash per continuation line."""
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    for pin in sorted(pins, key=lambda p: p.name):
        lines.append(" \\\n".join([f"{pin.name}=={pin.version}", *(f"    --hash=sha256:{h}" for h in pin.hashes)]))
    return "\n".join(lines) + "\n"


def requirements(project: Mapping[str, object], extra: str | None) -> list[Requirement]:
    """pyproject's `[project]` requirements of the base install plus `extra`, for the images' environment."""
    deps = list(_strings(project.get("dependencies", [])))
    if extra is not None:
        optional = project.get("optional-dependencies", {})
        if not isinstance(optional, Mapping) or extra not in optional:
            raise LockError(f"pyproject has no extra {extra!r}")
        deps += _strings(optional[extra])
    wanted = [Requirement(text) for text in deps]
    return [r for r in wanted if r.marker is None or r.marker.evaluate(TARGET_ENV)]


def unsatisfied(pins: Mapping[str, Pin], wanted: Iterable[Requirement]) -> list[str]:
    """Why `pins` does not satisfy `wanted`, one line per requirement that is missing or pinned outside its range."""
    problems = []
    for req in wanted:
        pin = pins.get(canonicalize_name(req.name))
        if pin is None:
            problems.append(f"{req}: not in the lock")
        elif not req.specifier.contains(Version(pin.version), prereleases=True):
            problems.append(f"{req}: locked at {pin.version}")
    return problems


def pins_from_report(report: str, skip: Iterable[str] = ()) -> list[Pin]:
    """The pins of `pip install --dry-run --report` output: each chosen distribution with its file's sha256."""
    skipped = {canonicalize_name(name) for name in skip}
    pins = []
    for item in json.loads(report)["install"]:
        name = canonicalize_name(item["metadata"]["name"])
        if name in skipped:
            continue
        archive = item["download_info"].get("archive_info")
        if archive is None:
            raise LockError(f"{name}: pip chose {item['download_info'].get('url')}, not an index file (no hash)")
        hashes = archive.get("hashes") or {}
        digest = hashes.get("sha256") or archive.get("hash", "").removeprefix("sha256=")
        if not re.fullmatch(r"[0-9a-f]{64}", digest):
            raise LockError(f"{name}: pip's report has no sha256 for {item['download_info'].get('url')}")
        pins.append(Pin(name, item["metadata"]["version"], (digest,)))
    return pins


def marker_environment_matches(env: Mapping[str, str]) -> list[str]:
    """Where the host's marker environment differs from the images' in a way that changes resolution."""
    keys = ("python_version", "sys_platform", "platform_machine", "implementation_name")
    return [f"{k}={env.get(k)} (images: {TARGET_ENV[k]})" for k in keys if env.get(k) != TARGET_ENV[k]]


def host_marker_environment() -> dict[str, str]:
    return {k: str(v) for k, v in default_environment().items()}


def _strings(value: object) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise LockError(f"pyproject: expected a list of requirement strings, got {value!r}")
    return list(value)
