"""`vigil report` run in the test process on a test cluster's history, as the integration tests drive it."""

import contextlib
import io
from pathlib import Path

from vigil_core.kafka.security import KafkaConnection
from vigil_dev.kafka.cluster import KafkaCluster
from vigil_spark import cli


def run_report(conn: KafkaConnection, kafka: KafkaCluster, out: Path, cluster: str) -> tuple[int, list[str]]:
    """Ingest `__consumer_offsets` and every node's server.log into `out` and model them (local[2]); the exit
    code and the lines written to stderr."""
    logs = [str(kafka.server_log(node.node_id)) for node in kafka.nodes]
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = cli.main(["--out", str(out), "--cluster", cluster, "--master", "local[2]", "--broker-logs", *logs],
                        conn.to_env())  # fmt: skip
    return code, err.getvalue().splitlines()
