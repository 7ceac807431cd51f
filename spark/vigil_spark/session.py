"""The one place the report's SparkSession is built.

Jars are files resolved at build time (baked into the report image; `make setup` for a checkout), never Maven
coordinates: a job that resolves packages at start needs network access and a writable Ivy cache in every image.
ANSI mode stays on
(the Spark 4 default): the SQL decoders are written not to trip it, and a silent null is worse than a loud
error everywhere else. vigil's byte readers (a jar in the same directory) are registered as SQL functions here.
"""

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from pyspark.sql import SparkSession

from vigil_spark.decode import sql

JARS_ENV = "VIGIL_SPARK_JARS"
APP_NAME = "vigil-report"
#: JVM options of a local session's driver, which runs every task: the throughput collector rather than G1 (the
#: decode benchmark's 10M records: compute 5.5 s instead of 8.1 s, bench/RESULTS.md).
LOCAL_JAVA_OPTIONS = "-XX:+UseParallelGC"
#: Where a local session's driver listens (its RPC and block manager): it only ever talks to itself, and by
#: default Spark binds the first non-loopback interface's address when the host name resolves to loopback.
LOCAL_DRIVER_HOST = "127.0.0.1"


class SessionError(Exception):
    """The session cannot be configured as asked; the message is one line naming what is missing."""


def jar_files(jars_dir: Path | str | None = None) -> list[Path]:
    """The jars to put on the classpath: from `jars_dir`, else `$VIGIL_SPARK_JARS`, else none."""
    chosen = jars_dir if jars_dir is not None else os.environ.get(JARS_ENV) or None
    if chosen is None:
        return []
    directory = Path(chosen)
    jars = sorted(directory.glob("*.jar"))
    if not jars:
        raise SessionError(f"{JARS_ENV}: no jars in {directory} (in a checkout: make setup fills its jars cache)")
    return jars


def build(
    master: str | None = None,
    *,
    jars_dir: Path | str | None = None,
    app_name: str = APP_NAME,
    shuffle_partitions: int | None = None,
    driver_memory: str = "1g",
    java_options: Sequence[str] = (),
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """A session for the report: `local[*]` unless `master` is given; small memory and shuffles, and a driver on
    loopback, when local.

    `java_options` go to the driver JVM this starts (with `LOCAL_JAVA_OPTIONS` when local); like the memory, they
    are read only when the JVM starts, so a running session keeps its own. `conf` is set last: a property given
    there (`--conf`) wins over these defaults.
    """
    master = master or "local[*]"
    local = master.startswith("local")
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.driver.memory", driver_memory)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.ansi.enabled", "true")
        .config("spark.sql.session.timeZone", "UTC")
    )
    options = [*java_options, *([LOCAL_JAVA_OPTIONS] if local else [])]
    if options:
        builder = builder.config("spark.driver.extraJavaOptions", " ".join(options))
    if local:
        builder = builder.config("spark.driver.bindAddress", LOCAL_DRIVER_HOST).config(
            "spark.driver.host", LOCAL_DRIVER_HOST
        )
    partitions = shuffle_partitions if shuffle_partitions is not None else (4 if local else None)
    if partitions is not None:
        builder = builder.config("spark.sql.shuffle.partitions", str(partitions))
    jars = jar_files(jars_dir)
    if jars:
        builder = builder.config("spark.jars", ",".join(str(j) for j in jars))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    sql.register_jvm_readers(spark)  # without their jar the decoder reads integers in pure SQL (slower)
    return spark


def fit_shuffle_partitions(spark: SparkSession) -> int | None:
    """On a cluster, shuffles as wide as its cores (`defaultParallelism`: the executors' cores, at least 2), unless
    someone chose a number (`--conf`, spark-defaults, `build(shuffle_partitions=...)`); the number set, else None.

    Spark's default of 200 partitions on a 1-core worker made the model step 2-4x slower than local. Called once
    executors have run a job (after ingest), when `defaultParallelism` counts their cores.
    """
    if spark.sparkContext.getConf().contains("spark.sql.shuffle.partitions"):
        return None
    cores = max(2, spark.sparkContext.defaultParallelism)
    spark.conf.set("spark.sql.shuffle.partitions", str(cores))
    return cores
