"""`vigil_spark.session.build`: what a local session's driver JVM is started with."""

import pytest
from pyspark.sql import SparkSession

from vigil_spark import session

pytest_plugins = ["vigil_dev.testing.spark_fixtures"]
pytestmark = pytest.mark.spark


def test_a_local_session_runs_the_throughput_collector(spark: SparkSession) -> None:
    """LOCAL_JAVA_OPTIONS reach the JVM pyspark starts (they are read only at its start, so not a no-op conf)."""
    assert session.LOCAL_JAVA_OPTIONS in spark.sparkContext.getConf().get("spark.driver.extraJavaOptions", "")
    jvm = spark.sparkContext._jvm  # noqa: SLF001 - py4j: the one way to ask the JVM itself
    assert jvm is not None
    collectors = {bean.getName() for bean in jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()}
    assert collectors == {"PS Scavenge", "PS MarkSweep"}  # G1 would be "G1 Young Generation", ...


def test_a_local_session_s_driver_listens_on_loopback_only(spark: SparkSession) -> None:
    """Its RPC endpoint and block manager (the two servers a local driver opens) are bound to loopback, not to
    the address Spark picks when the host name resolves to loopback (the first interface's)."""
    jvm = spark.sparkContext._jvm  # noqa: SLF001 - py4j: the one way to ask the JVM itself
    assert jvm is not None
    env = jvm.org.apache.spark.SparkEnv.get()
    assert env.rpcEnv().address().host() == session.LOCAL_DRIVER_HOST
    assert env.blockManager().blockManagerId().host() == session.LOCAL_DRIVER_HOST
    assert spark.sparkContext.getConf().get("spark.driver.bindAddress") == session.LOCAL_DRIVER_HOST
