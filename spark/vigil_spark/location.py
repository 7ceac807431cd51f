"""Where the report's files live: a local path or any Hadoop-compatible URI (`hdfs://`, `s3a://`, `abfs://`,
`viewfs://`, `file:///`), always reached through Hadoop's FileSystem API of the session's JVM.

One filesystem layer for everything the job writes — Spark's tables and checkpoints, and the report page and
summary beside them — so `--out` may name a place the driver's own Python cannot open. A path without a scheme is on
the cluster's default filesystem (`fs.defaultFS`: the local disk unless the cluster configures another), for Spark's
files and the page alike.
"""

import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:  # the CLI parses its flags into locations before pyspark is imported
    from pyspark.sql import SparkSession

_SCHEME: Final = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


@dataclass(frozen=True)
class Location:
    """A directory or file, as the URI or path string Spark and Hadoop take; `/` joins like `pathlib`."""

    where: str

    @classmethod
    def of(cls, value: "str | os.PathLike[str] | Location") -> "Location":
        """A location from a flag or a path: a URI is kept as given, a local path as Python spells it."""
        if isinstance(value, Location):
            return value
        text = os.fspath(value)
        if not text:
            raise ValueError("expected a path or a URI, got an empty string")
        if _SCHEME.match(text):
            return cls(text if re.fullmatch(r"[^:]+:/+", text) else text.rstrip("/"))
        return cls(os.path.normpath(text))

    def __truediv__(self, child: str) -> "Location":
        return Location(self.where + child if self.where.endswith("/") else f"{self.where}/{child}")

    def __str__(self) -> str:
        return self.where

    def exists(self, spark: "SparkSession") -> bool:
        fs, path = self._hadoop(spark)
        return bool(fs.exists(path))

    def has_parquet(self, spark: "SparkSession") -> bool:
        """Whether any Parquet file lies below (Hadoop's hidden `_…` and `.…` entries, e.g. a failed write's
        `_temporary`, are not the table's)."""
        fs, path = self._hadoop(spark)
        if not fs.exists(path):
            return False
        files = fs.listFiles(path, True)
        base = str(fs.makeQualified(path).toUri().getPath()).rstrip("/")
        while files.hasNext():
            name = str(files.next().getPath().toUri().getPath())
            parts = name[len(base) :].strip("/").split("/")
            if name.endswith(".parquet") and not any(p.startswith(("_", ".")) for p in parts):
                return True
        return False

    def mkdirs(self, spark: "SparkSession") -> None:
        fs, path = self._hadoop(spark)
        fs.mkdirs(path)

    def write_text(self, spark: "SparkSession", text: str) -> None:
        """Replace the file with `text` (UTF-8)."""
        fs, path = self._hadoop(spark)
        _write_and_close(fs.create(path, True), text)

    def create_new(self, spark: "SparkSession", text: str) -> bool:
        """Create the file with `text` unless it exists (then False): Hadoop's create without overwrite."""
        fs, path = self._hadoop(spark)
        try:
            stream = fs.create(path, False)
        except Exception:
            if fs.exists(path):
                return False  # FileAlreadyExistsException (py4j's error carries it): someone else's file
            raise
        _write_and_close(stream, text)
        return True

    def read_text(self, spark: "SparkSession") -> str | None:
        """The file's text (UTF-8), or None when it does not exist."""
        fs, path = self._hadoop(spark)
        if not fs.exists(path):
            return None
        stream = fs.open(path)
        try:
            jvm: Any = spark.sparkContext._jvm  # noqa: SLF001
            return bytes(jvm.org.apache.hadoop.io.IOUtils.readFullyToByteArray(stream)).decode(errors="replace")
        finally:
            stream.close()

    def delete(self, spark: "SparkSession") -> None:
        fs, path = self._hadoop(spark)
        fs.delete(path, False)

    def _hadoop(self, spark: "SparkSession") -> tuple[Any, Any]:
        """Hadoop's FileSystem for this location, and its Path (Hadoop's FileSystem has no Python API)."""
        context: Any = spark.sparkContext
        path = context._jvm.org.apache.hadoop.fs.Path(self.where)  # noqa: SLF001
        return path.getFileSystem(context._jsc.hadoopConfiguration()), path  # noqa: SLF001


def _write_and_close(stream: Any, text: str) -> None:
    """Write `text` (UTF-8) to a Hadoop output stream and close it, written or not."""
    try:
        stream.write(bytearray(text.encode()))
    finally:
        stream.close()
