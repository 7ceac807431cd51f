"""Fill the report's jars directory once: `spark-sql-kafka-0-10` for the installed pyspark (Maven) and vigil's
byte readers for the SQL decoder (built by the report's own step, `vigil_spark.jvm`).

The job never resolves jars itself (`spark.jars.packages` would reach Maven Central at every start and in
production images): `spark.jars` points at the directory this fills. Only jars pyspark does not already
ship are kept, so no class is on the classpath twice.
"""

import hashlib
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from vigil_dev import paths
from vigil_dev.errors import DevError
from vigil_dev.kafka import install as kafka_install
from vigil_spark import jvm

POM = Path(__file__).with_name("pom.xml")
#: Resolve this connector version instead of the pinned one (e.g. while Maven Central lacks the pinned release).
OVERRIDE_ENV = "VIGIL_SPARK_KAFKA_VERSION"
_ARTIFACT = re.compile(r"^(?P<name>.+?)-\d[^/]*\.jar$")


def pinned_version() -> str:
    """The Spark version the pom pins."""
    match = re.search(r"<spark\.version>([^<]+)</spark\.version>", POM.read_text())
    if match is None:
        raise DevError(f"{POM}: no <spark.version> property")
    return match.group(1)


def pyspark_jars() -> tuple[str, Path]:
    """The installed pyspark's version and its bundled jars directory (importing pyspark starts no JVM)."""
    try:
        import pyspark  # noqa: PLC0415 - only the installer needs it, and only here
    except ImportError as exc:
        raise DevError("pyspark is not installed: pip install -e '.[report]'") from exc
    return pyspark.__version__, Path(pyspark.__file__).parent / "jars"


def artifact_name(jar: str) -> str:
    """`kafka-clients-4.1.0.jar` -> `kafka-clients` (what identifies a jar across versions)."""
    match = _ARTIFACT.match(jar)
    return match.group("name") if match else jar.removesuffix(".jar")


def jars_dir(version: str | None = None) -> Path:
    return paths.cache_dir() / "spark" / (version or pinned_version()) / "jars"


def ensure_spark_kafka(progress: Callable[[str], None] = print) -> Path:
    """The directory holding the Kafka source jars; resolves them on first use, fast and silent when warm.

    `$VIGIL_SPARK_KAFKA_VERSION` resolves another connector release for the installed pyspark: an explicit,
    announced mismatch (Spark's connectors use internal APIs), never a silent one.
    """
    version = pinned_version()
    installed, bundled = pyspark_jars()
    if installed != version:
        raise DevError(f"spark: {POM.name} pins Spark {version} but pyspark {installed} is installed")
    connector = os.environ.get(OVERRIDE_ENV) or version
    digest = hashlib.sha256(POM.read_bytes() + connector.encode()).hexdigest()[:12]
    jars = jars_dir(version)
    home = jars.parent
    stamp = home / "complete"
    if stamp.exists() and stamp.read_text().strip() == digest:
        return jars
    kafka_install.check_java()
    mvn = shutil.which("mvn")
    if mvn is None:
        raise DevError("mvn not found on PATH: install Maven (Debian: apt-get install maven)")
    if connector != version:
        progress(f"spark: {OVERRIDE_ENV}={connector}: spark-sql-kafka {connector} on pyspark {version} (untested)")
    progress(f"spark: resolving spark-sql-kafka-0-10 {connector} from Maven Central into {jars} ...")
    started = time.monotonic()
    staging = home / "jars.partial"
    shutil.rmtree(staging, ignore_errors=True)
    home.mkdir(parents=True, exist_ok=True)
    cmd = [
        mvn, "-B", "-q", "-U", "-f", str(POM),
        f"-Dmaven.repo.local={paths.cache_dir() / 'm2'}",
        "dependency:copy-dependencies",
        f"-DoutputDirectory={staging}",
        "-DincludeScope=runtime",
        f"-Dspark.version={connector}",
    ]  # fmt: skip
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise DevError(f"spark: Maven could not resolve spark-sql-kafka {connector}: {_maven_reason(result.stdout)}")
    shipped = {artifact_name(j.name) for j in bundled.glob("*.jar")}
    dropped = sorted(j.name for j in staging.glob("*.jar") if artifact_name(j.name) in shipped)
    for name in dropped:
        (staging / name).unlink()
    kept = sorted(staging.glob("*.jar"))
    if not any(j.name.startswith("spark-sql-kafka") for j in kept):
        raise DevError(f"spark: Maven finished but no spark-sql-kafka jar is in {staging}")
    size_mb = sum(j.stat().st_size for j in kept) / 1e6
    shutil.rmtree(jars, ignore_errors=True)
    staging.rename(jars)
    stamp.write_text(f"{digest}\n")
    also = f"; dropped as shipped by pyspark: {', '.join(dropped)}" if dropped else ""
    progress(f"spark: {len(kept)} jars ({size_mb:.1f} MB) in {time.monotonic() - started:.0f}s{also}")
    return jars


def ensure_readers(progress: Callable[[str], None] = print) -> Path:
    """vigil's byte-reader jar in the jars directory, built by the report's own step (`vigil_spark.jvm`, which the
    image build calls too). Call it after `ensure_spark_kafka`, which replaces the directory when it resolves again.
    """
    try:
        installed, _ = jvm.pyspark_jars()
        return jvm.build(jars_dir(installed), progress)
    except jvm.BuildError as exc:
        raise DevError(f"spark: {exc}") from exc


def ensure_jars(progress: Callable[[str], None] = print) -> Path:
    """The whole jars directory: the Kafka source, then vigil's byte readers."""
    jars = ensure_spark_kafka(progress)
    ensure_readers(progress)
    return jars


def _maven_reason(output: str) -> str:
    """The one line of Maven's output that says why."""
    plain = re.sub(r"\x1b\[[0-9;]*m", "", output)  # Maven colours even with -B on some terminals
    errors = [line.removeprefix("[ERROR] ").strip() for line in plain.splitlines() if "[ERROR]" in line]
    for line in errors:
        missing = re.search(r"(?:Could not find artifact (\S+) in|(\S+) was not found in) (\S+(?: \(\S+\))?)", line)
        if missing:
            return f"{missing.group(1) or missing.group(2)} is not published in {missing.group(3)}"
        if "Could not transfer" in line or "Unknown host" in line or "Connect" in line:
            return f"Maven Central unreachable ({line[:200]})"
    return errors[0][:300] if errors else (output.strip().splitlines() or ["no output"])[-1][:300]


if __name__ == "__main__":
    import sys

    try:
        path = ensure_jars(progress=lambda line: print(line, file=sys.stderr))
    except DevError as exc:
        print(f"vigil setup: {exc}", file=sys.stderr)
        sys.exit(1)
    print(path)
