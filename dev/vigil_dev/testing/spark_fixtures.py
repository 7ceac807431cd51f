"""The one SparkSession of a test run (a pytest plugin: `pytest_plugins = ["vigil_dev.testing.spark_fixtures"]`).

`spark.jars` is read when the JVM starts, so the session is built with the Kafka source jars whichever test
asks first: `$VIGIL_SPARK_JARS` when set, else the dev cache (`vigil_dev.spark.install`: the Kafka source and
vigil's byte readers). If some cannot be had, the session starts without them so the other tests still run,
and `spark_kafka` / `spark_jvm_readers` fail with the one line that says why (fixtures never skip).
"""

import os
import sys
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from vigil_dev.errors import DevError
from vigil_dev.spark import install
from vigil_spark import session
from vigil_spark.decode import sql

_missing: list[str] = []
_missing_readers: list[str] = []


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """`local[2]`, two shuffle partitions, ANSI on (as in production), the Kafka source when available. Python
    workers run this interpreter (Spark would start `python3` from PATH, which cannot import vigil_spark)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    jars = os.environ.get(session.JARS_ENV) or None
    if jars is None:
        try:
            jars = str(install.ensure_spark_kafka(progress=lambda _: None))
        except DevError as exc:
            _missing.append(str(exc))
        try:
            jars = str(install.ensure_readers(progress=lambda _: None).parent)
        except DevError as exc:
            _missing_readers.append(str(exc))
        if jars is not None:  # `vigil report` processes the tests start find the same jars (vigil_spark has no default)
            os.environ[session.JARS_ENV] = jars
    try:
        spark = session.build("local[2]", jars_dir=jars, app_name="vigil-tests", shuffle_partitions=2)
    except session.SessionError as exc:
        pytest.fail(f"Spark could not start: {exc}", pytrace=False)
    yield spark
    spark.stop()


@pytest.fixture(scope="session")
def spark_kafka(spark: SparkSession) -> SparkSession:
    """The session, failing the test in one line when Spark's Kafka source is not on its classpath."""
    if _missing:
        pytest.fail(f"Spark's Kafka source is not installed: {_missing[0]}", pytrace=False)
    return spark


@pytest.fixture(scope="session")
def spark_jvm_readers(spark: SparkSession) -> SparkSession:
    """The session, failing the test in one line when vigil's byte readers are not registered in it."""
    if _missing_readers:
        pytest.fail(f"vigil's Spark byte readers are not built: {_missing_readers[0]}", pytrace=False)
    if sql.readers_for(spark) is not sql.JVM:
        pytest.fail("vigil's Spark byte readers are not registered in the session (jar not on its classpath)")
    return spark
