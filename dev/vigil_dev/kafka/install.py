"""Resolve the pinned Kafka broker jars with Maven into the cache, once."""

import hashlib
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from vigil_dev import paths
from vigil_dev.errors import DevError

POM = Path(__file__).with_name("pom.xml")
LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")


@dataclass(frozen=True)
class KafkaDist:
    """An installed broker: its version and the directory holding every runtime jar."""

    version: str
    libs: Path

    @property
    def classpath(self) -> str:
        return f"{self.libs}/*"


def pinned_version() -> str:
    """The default Kafka version: the one the pom pins (the pom is the single source of truth)."""
    match = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", POM.read_text())
    if match is None:
        raise DevError(f"{POM}: no <kafka.version> property")
    return match.group(1)


SUPPORTED_VERSIONS: tuple[str, ...] = ("4.4.0", "3.9.1")
"""The broker versions the dev stack runs and the suites are run on (docs/kafka-versions.md)."""


def check_version(version: str) -> str:
    """`version` if the dev stack supports it; one line naming the supported ones if not."""
    if version not in SUPPORTED_VERSIONS:
        raise DevError(f"Kafka {version!r} is not a release the dev stack runs: one of {', '.join(SUPPORTED_VERSIONS)}")
    return version


def _require_tool(tool: str, hint: str) -> str:
    found = shutil.which(tool)
    if found is None:
        raise DevError(f"{tool} not found on PATH: {hint}")
    return found


def check_java() -> str:
    """The java binary, after checking it is 17 or newer (Kafka 4 needs 17)."""
    java = _require_tool("java", "install a JDK 17+ (Debian: apt-get install openjdk-17-jdk-headless)")
    out = subprocess.run([java, "-version"], capture_output=True, text=True, check=False).stderr
    match = re.search(r'version "(\d+)', out)
    if match is None or int(match.group(1)) < 17:
        raise DevError(f"java 17+ needed for Kafka 4, found: {out.splitlines()[0] if out else 'nothing'}")
    return java


def ensure_kafka(version: str | None = None, progress: Callable[[str], None] = print) -> KafkaDist:
    """Install (or find in the cache) a broker, the pinned one by default; idempotent and fast when warm."""
    version = check_version(version or pinned_version())
    check_java()
    libs = resolve_jars(POM, f"Apache Kafka {version} broker jars", version, {"kafka.version": version}, progress)
    return KafkaDist(version=version, libs=libs)


def resolve_jars(
    pom: Path, what: str, name: str, properties: Mapping[str, str], progress: Callable[[str], None] = print
) -> Path:
    """The directory of `pom`'s runtime jars with these Maven `properties`, resolved from Maven Central into the
    cache once (`<cache>/<pom's directory name>/<name>-<pom digest>/libs`); fast when warm."""
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()[:12]
    home = paths.cache_dir() / pom.parent.name / f"{name}-{digest}"
    libs = home / "libs"
    stamp = home / "complete"
    if stamp.exists():
        return libs
    mvn = _require_tool("mvn", "install Maven (Debian: apt-get install maven)")
    label = pom.parent.name
    progress(f"{label}: resolving {what} from Maven Central into {home} ...")
    started = time.monotonic()
    staging = home / "libs.partial"
    shutil.rmtree(staging, ignore_errors=True)
    home.mkdir(parents=True, exist_ok=True)
    cmd = [
        mvn, "-B", "-q", "-f", str(pom),
        f"-Dmaven.repo.local={paths.cache_dir() / 'm2'}",
        "dependency:copy-dependencies",
        f"-DoutputDirectory={staging}",
        "-DincludeScope=runtime",
        *(f"-D{key}={value}" for key, value in properties.items()),
    ]  # fmt: skip
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise DevError(f"{label}: Maven could not resolve the {what}: {_maven_reason(result.stdout)}")
    shutil.rmtree(libs, ignore_errors=True)
    staging.rename(libs)
    stamp.write_text(f"{name}\n")
    jars = list(libs.glob("*.jar"))
    size_mb = sum(j.stat().st_size for j in jars) / 1e6
    progress(f"{label}: {len(jars)} jars ({size_mb:.0f} MB) in {time.monotonic() - started:.0f}s")
    return libs


def _maven_reason(output: str) -> str:
    """The one line of Maven's output that says why, or its last error line."""
    errors = [line.removeprefix("[ERROR] ").strip() for line in output.splitlines() if "[ERROR]" in line]
    for line in errors:
        if "Could not transfer" in line or "Unknown host" in line or "Connect" in line:
            return f"Maven Central unreachable ({line[:200]})"
    return errors[0][:300] if errors else (output.strip().splitlines() or ["no output"])[-1][:300]


if __name__ == "__main__":
    import sys

    try:  # every supported release by default: `make test` runs a subset on each
        for wanted in sys.argv[1:] or SUPPORTED_VERSIONS:
            dist = ensure_kafka(wanted)
            print(f"kafka {dist.version}: {dist.libs}")
    except DevError as exc:
        print(f"vigil setup: {exc}", file=sys.stderr)
        sys.exit(1)
