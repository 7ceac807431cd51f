"""`vigil_spark.executor.command`: the JVM command of a Spark executor pod of the report image, from the variables
Spark sets in the pod (what Spark's own images do in a shell entrypoint, which the report image has not)."""

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vigil_spark.executor import BACKEND, ExecutorError, command

JARS = Path("/opt/vigil/lib/python3.11/site-packages/pyspark/jars")
POD = {
    "SPARK_DRIVER_URL": "spark://CoarseGrainedScheduler@10.88.0.7:41000",
    "SPARK_EXECUTOR_ID": "2",
    "SPARK_EXECUTOR_CORES": "1",
    "SPARK_APPLICATION_ID": "spark-1a2b",
    "SPARK_EXECUTOR_POD_IP": "10.88.0.9",
    "SPARK_RESOURCE_PROFILE_ID": "0",
    "SPARK_EXECUTOR_MEMORY": "512m",
    "JAVA_HOME": "/usr/lib/jvm/java-17-openjdk-amd64",
}


def test_a_pod_spark_made_becomes_the_executor_backend_with_every_flag() -> None:
    env = {**POD, "SPARK_EXECUTOR_POD_NAME": "vigil-report-exec-2", "SPARK_JAVA_OPT_1": "-Dspark.driver.port=41000",
           "SPARK_JAVA_OPT_0": "-Djava.net.preferIPv6Addresses=false", "SPARK_CLASSPATH": "/extra/*"}  # fmt: skip
    assert command(["executor"], env, JARS) == [
        "/usr/lib/jvm/java-17-openjdk-amd64/bin/java",
        "-Djava.net.preferIPv6Addresses=false",
        "-Dspark.driver.port=41000",
        "-Xms512m",
        "-Xmx512m",
        "-cp",
        f"/extra/*:{JARS}/*",
        BACKEND,
        "--driver-url", "spark://CoarseGrainedScheduler@10.88.0.7:41000",
        "--executor-id", "2",
        "--cores", "1",
        "--app-id", "spark-1a2b",
        "--hostname", "10.88.0.9",
        "--resourceProfileId", "0",
        "--podName", "vigil-report-exec-2",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "env", "expected"),
    [
        ([], POD, "expected the argument 'executor'"),
        (["driver"], POD, "expected the argument 'executor'"),
        (["executor"], {k: v for k, v in POD.items() if k != "SPARK_DRIVER_URL"}, "SPARK_DRIVER_URL unset"),
        (["executor"], {**POD, "SPARK_EXECUTOR_MEMORY": ""}, "SPARK_EXECUTOR_MEMORY unset"),
        (["executor"], {"JAVA_HOME": "/j"}, "SPARK_DRIVER_URL, SPARK_EXECUTOR_ID"),
    ],
)
def test_anything_but_a_spark_executor_pod_is_one_line(argv: list[str], env: dict[str, str], expected: str) -> None:
    with pytest.raises(ExecutorError, match=expected) as raised:
        command(argv, env, JARS)
    assert "\n" not in str(raised.value)


def test_without_java_home_or_pod_name_java_is_from_path_and_no_pod_name_is_passed() -> None:
    env = {k: v for k, v in POD.items() if k != "JAVA_HOME"}
    argv = command(["executor"], env, JARS)
    assert argv[0] == "java"
    assert "--podName" not in argv
    assert argv[argv.index("-cp") + 1] == f"{JARS}/*"


@given(st.lists(st.integers(min_value=0, max_value=40), unique=True, max_size=12))
def test_the_driver_s_jvm_options_keep_their_index_order(indexes: list[int]) -> None:
    env = {**POD, **{f"SPARK_JAVA_OPT_{i}": f"-Dopt{i}" for i in indexes}}
    argv = command(["executor"], env, JARS)
    assert argv[1 : 1 + len(indexes)] == [f"-Dopt{i}" for i in sorted(indexes)]
    assert argv[1 + len(indexes)] == "-Xms512m"
