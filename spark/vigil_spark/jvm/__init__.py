"""vigil's byte readers for the SQL decoder: `KafkaBytes.java` compiled into a jar — the report's own build step.

`python -m vigil_spark.jvm DIR` (or `build(DIR)`) compiles the source shipped in this package with javac against
the installed pyspark's jars and writes `vigil-kafka-bytes-<digest>.jar` into DIR. Both consumers call it, so there
is one way to build it: the development jars cache (`make setup`) and the report image (`make images`, which puts
it in the image's `$VIGIL_SPARK_JARS`). The name carries a digest of the source and the pyspark version, and the
jar's bytes are reproducible (entries sorted, timestamps fixed), so an unchanged source never changes an image's
digest. It lives here, not in the dev tooling, because the report owns it: `vigil_spark` never imports `vigil_dev`.
"""

import hashlib
import importlib.metadata
import importlib.util
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from importlib import resources
from pathlib import Path

SOURCE = "KafkaBytes.java"
#: The jar's name: this prefix, then a digest of the source and the pyspark it was compiled against.
PREFIX = "vigil-kafka-bytes"
#: Zip entries' timestamp (the zip format's earliest): the jar's bytes depend only on the classes.
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)


class BuildError(Exception):
    """The jar cannot be built; the message is one line naming what is missing."""


def pyspark_jars() -> tuple[str, Path]:
    """The installed pyspark's version and its bundled jars directory, found without importing pyspark."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise BuildError("pyspark is not installed: pip install 'kafka-vigil[report]'")
    return importlib.metadata.version("pyspark"), Path(spec.origin).parent / "jars"


def source() -> str:
    return resources.files(__name__).joinpath(SOURCE).read_text()


def jar_name(text: str, pyspark_version: str) -> str:
    digest = hashlib.sha256(text.encode() + pyspark_version.encode()).hexdigest()[:12]
    return f"{PREFIX}-{digest}.jar"


def build(out_dir: Path, progress: Callable[[str], None] = print, *, text: str | None = None) -> Path:
    """The jar in `out_dir`: compiled on first use (a second or two), a lookup when warm. Older builds of it in
    `out_dir` are removed, so a classpath of `out_dir/*` never holds two versions of the readers."""
    installed, bundled = pyspark_jars()
    text = source() if text is None else text
    jar = out_dir / jar_name(text, installed)
    if jar.exists():
        return jar
    javac = shutil.which("javac")
    if javac is None:
        raise BuildError("javac not found on PATH: vigil's Spark byte readers need a JDK (openjdk-17-jdk-headless)")
    started = time.monotonic()
    out_dir.mkdir(parents=True, exist_ok=True)
    partial = jar.with_suffix(".partial")
    with tempfile.TemporaryDirectory(prefix="vigil-readers-") as tmp:
        src = Path(tmp) / SOURCE
        src.write_text(text)
        classes = Path(tmp) / "classes"
        cmd = [javac, "--release", "17", "-nowarn", "-cp", str(bundled / "*"), "-d", str(classes), str(src)]
        result = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            reason = (result.stderr.strip().splitlines() or ["no output"])[0][:300]
            raise BuildError(f"javac could not compile {SOURCE}: {reason}")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as out:
            for cls in sorted(classes.rglob("*.class")):
                entry = zipfile.ZipInfo(cls.relative_to(classes).as_posix(), date_time=_ZIP_EPOCH)
                entry.external_attr = 0o644 << 16
                out.writestr(entry, cls.read_bytes(), compress_type=zipfile.ZIP_DEFLATED)
    for old in out_dir.glob(f"{PREFIX}-*.jar"):
        old.unlink()
    partial.rename(jar)
    progress(f"spark: byte readers compiled into {jar} in {time.monotonic() - started:.1f}s")
    return jar


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m vigil_spark.jvm OUT_DIR", file=sys.stderr)
        return 2
    try:
        print(build(Path(args[0]), progress=lambda line: print(line, file=sys.stderr)))
    except BuildError as exc:
        print(f"vigil_spark.jvm: {exc}", file=sys.stderr)
        return 1
    return 0
