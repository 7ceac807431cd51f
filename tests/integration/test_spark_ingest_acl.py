"""The ACLs the README documents for `vigil report` are enough, and without them the report says so in one line.

A SASL/SCRAM broker with StandardAuthorizer: `admin` is a super user, `app` starts with no ACLs.
"""

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType
from pyspark.sql import SparkSession

from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import clients
from vigil_dev.testing.waiting import wait_for
from vigil_spark import cli, tables

pytest_plugins = ["vigil_dev.testing.spark_fixtures"]
pytestmark = [pytest.mark.integration, pytest.mark.kafka_secure, pytest.mark.spark]

# Python workers decode the rare records and must import vigil_spark (see test_spark_ingest.py).


def test_report_needs_read_and_describe_on_its_topics_only(
    spark_kafka: SparkSession, kafka_secure: KafkaCluster, tmp_path: Path
) -> None:
    admin_conn = kafka_secure.connection("admin")
    topic = clients.create_topic(admin_conn, clients.unique("acl-report"), partitions=1)
    events_topic = clients.create_topic(admin_conn, clients.unique("vigil.events"), partitions=1)
    group = clients.unique("g-acl-report")
    clients.produce(admin_conn, topic, [f"r{i}" for i in range(4)])
    members = clients.start_group(admin_conn, group, [topic], size=1)
    wait_for(lambda: members[0].consumed, lambda c: len(c) == 4, timeout=30, what=f"{group} consumed 4")
    members[0].close()
    app = kafka_secure.connection("app")

    # no ACLs: one line naming the refusal, before any JVM starts
    command = [sys.executable, "-m", "vigil_spark", "--out", str(tmp_path / "denied"), "--events-topic", events_topic]
    done = subprocess.run(command, env={**os.environ, **app.to_env()}, capture_output=True, text=True, timeout=120,
                          check=False)  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines() == [
        "vigil report: __consumer_offsets: TOPIC_AUTHORIZATION_FAILED: Broker: Topic authorization failed"
    ]

    # the documented grants: TOPIC __consumer_offsets and the events topic READ + DESCRIBE, GROUP
    # vigil-report-<cluster> DESCRIBE (Spark's consumers look their group up, though they join none)
    operations = (AclOperation.READ, AclOperation.DESCRIBE)
    grants = [(ResourceType.TOPIC, name, op) for name in ("__consumer_offsets", events_topic) for op in operations]
    grants.append((ResourceType.GROUP, f"{cli.GROUP_ID_PREFIX}-default", AclOperation.DESCRIBE))  # cluster "default"
    bindings = [
        AclBinding(kind, name, ResourcePatternType.LITERAL, "User:app", "*", op, AclPermissionType.ALLOW)
        for kind, name, op in grants
    ]
    acl_admin = clients.admin(admin_conn)
    for future in acl_admin.create_acls(bindings).values():
        future.result(timeout=30)
    out = tmp_path / "granted"
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = cli.main(["--out", str(out), "--events-topic", events_topic, "--ingest-only"], app.to_env())
    assert code == 0, err.getvalue()
    commits = [r for r in tables.read(spark_kafka, out / "tables", "offset_commits").collect() if r.group == group]
    assert max(r.committed_offset for r in commits) == 4
    assert f"ingest {events_topic}: 0 new records" in err.getvalue()
