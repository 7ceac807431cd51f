"""A Spark executor in a pod of the report image: what `--master k8s://…` starts for each executor.

Spark creates each executor pod with the argument `executor` and describes the executor in environment variables
(`SPARK_DRIVER_URL`, `SPARK_EXECUTOR_ID`, …); Spark's own images turn them into the executor's JVM command in a
shell entrypoint. The report image has no shell, so this module does it: the chart's executor pod template runs
`python -m vigil_spark.executor`, which becomes (exec) `java … KubernetesExecutorBackend` with pyspark's bundled
jars on the classpath. The jars the driver adds (Spark's Kafka source, vigil's byte readers) are fetched from the
driver, and the Python workers are the image's `python3`, where `vigil_spark` is installed.

`command` is pure (the environment in, the argv out); `main` execs it.
"""

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from vigil_spark.jvm import BuildError, pyspark_jars

BACKEND: Final = "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend"
#: The variables Spark sets in every executor pod, and the backend's flag for each.
REQUIRED: Final = (
    ("SPARK_DRIVER_URL", "--driver-url"),
    ("SPARK_EXECUTOR_ID", "--executor-id"),
    ("SPARK_EXECUTOR_CORES", "--cores"),
    ("SPARK_APPLICATION_ID", "--app-id"),
    ("SPARK_EXECUTOR_POD_IP", "--hostname"),
    ("SPARK_RESOURCE_PROFILE_ID", "--resourceProfileId"),
)
JAVA_OPT_PREFIX: Final = "SPARK_JAVA_OPT_"


class ExecutorError(Exception):
    """The pod is not a Spark executor's; the message is one line naming what is missing."""


def command(argv: list[str], env: Mapping[str, str], spark_jars: Path) -> list[str]:
    """The executor's JVM command, as Spark's own images build it: the driver's JVM options (`SPARK_JAVA_OPT_<n>`,
    in index order), the heap as `SPARK_EXECUTOR_MEMORY`, `SPARK_CLASSPATH` (spark.executor.extraClassPath) then
    pyspark's jars, and the backend's flags from the pod's variables (`--podName` when Spark set it)."""
    if argv[:1] != ["executor"]:
        raise ExecutorError(f"vigil_spark.executor: expected the argument 'executor' (Spark's), got {argv!r}")
    missing = [name for name in (*(name for name, _ in REQUIRED), "SPARK_EXECUTOR_MEMORY") if not env.get(name)]
    if missing:
        raise ExecutorError(f"vigil_spark.executor: not a Spark executor pod: {', '.join(missing)} unset")
    options = sorted(
        ((name, value) for name, value in env.items() if name.startswith(JAVA_OPT_PREFIX)),
        key=lambda item: _index(item[0]),
    )
    memory = env["SPARK_EXECUTOR_MEMORY"]
    classpath = ":".join(part for part in (env.get("SPARK_CLASSPATH", ""), f"{spark_jars}/*") if part)
    java = f"{env['JAVA_HOME']}/bin/java" if env.get("JAVA_HOME") else "java"
    flags = [item for name, flag in REQUIRED for item in (flag, env[name])]
    if env.get("SPARK_EXECUTOR_POD_NAME"):
        flags += ["--podName", env["SPARK_EXECUTOR_POD_NAME"]]
    return [java, *(value for _, value in options), f"-Xms{memory}", f"-Xmx{memory}", "-cp", classpath, BACKEND,
            *flags]  # fmt: skip


def _index(name: str) -> int:
    suffix = name[len(JAVA_OPT_PREFIX) :]
    return int(suffix) if suffix.isdigit() else sys.maxsize


def main() -> int:
    try:
        _, jars = pyspark_jars()
        argv = command(sys.argv[1:], os.environ, jars)
    except (ExecutorError, BuildError) as exc:
        print(exc, file=sys.stderr)
        return 2
    # the Python workers' pyspark: the installed package (Spark reads SPARK_HOME to find it)
    os.environ.setdefault("SPARK_HOME", str(jars.parent))
    try:
        os.execvp(argv[0], argv)  # noqa: S606 - the executor's command, built from the pod Spark made
    except OSError as exc:
        print(f"vigil_spark.executor: cannot start {argv[0]}: {exc.strerror}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
