"""`vigil dev up|status|down` as a user runs them: real processes, the env file, and the TLS listener."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import KafkaException

from vigil_core.kafka.security import KafkaConnection
from vigil_dev import stack
from vigil_dev.kube.controlplane import KubeCluster
from vigil_dev.testing import clients
from vigil_dev.testing.images import TESTAPPS
from vigil_dev.testing.waiting import wait_for

pytestmark = pytest.mark.integration


def _vigil(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vigil_cli", "dev", *args], capture_output=True, text=True, timeout=180, check=False
    )


def test_ssl_stack_from_the_command_line(tmp_path: Path) -> None:
    state = tmp_path / "stack"
    up = _vigil("up", "--no-kube", "--security", "ssl", "--state-dir", str(state))
    assert up.returncode == 0, up.stderr
    try:
        env = stack.read_env(state)
        conn = KafkaConnection.from_env(env)
        assert conn.security_protocol.value == "SSL"
        assert conn.ssl_cert_file is not None
        assert Path(env["VIGIL_DEV_KAFKA_LOG_DIR"], "kafka-1", "server.log").exists()

        topic = clients.create_topic(conn, clients.unique("tls"), partitions=1)
        clients.produce(conn, topic, ["over-tls"])
        member = clients.Member(conn, clients.unique("g-tls"), [topic], "tls-client").start()
        try:
            wait_for(lambda: [v for _, _, v in member.consumed], lambda v: v == ["over-tls"], timeout=30,
                     what="a message consumed over mutual TLS")  # fmt: skip
        finally:
            member.close()

        # the broker requires a client certificate: without one, nothing works
        anonymous = conn.model_copy(update={"ssl_cert_file": None, "ssl_key_file": None})
        with pytest.raises(KafkaException):
            clients.admin(anonymous).list_topics(timeout=5)

        status = _vigil("status", "--state-dir", str(state))
        assert status.returncode == 0
        assert "kafka-1      running" in status.stdout
    finally:
        down = _vigil("down", "--state-dir", str(state))
    assert down.returncode == 0
    assert "kafka-1" in down.stdout
    after = _vigil("status", "--state-dir", str(state))
    assert after.returncode == 1


def test_a_node_from_the_command_line_runs_a_pod_and_leaves_nothing_behind(tmp_path: Path) -> None:
    """`vigil dev up` (Kubernetes only): a real node holding vigil's images runs a pod in a network namespace of
    its own; `vigil dev down` stops everything, and no process, mount, network namespace, interface, iptables rule
    or cgroup of the node stays on the machine."""
    state = tmp_path / "stack"
    up = _vigil("up", "--no-kafka", "--state-dir", str(state))
    assert up.returncode == 0, up.stderr
    cluster = KubeCluster.load(state)
    assert cluster is not None
    try:
        status = _vigil("status", "--state-dir", str(state))
        assert status.returncode == 0, status.stdout
        for part in ("kube-scheduler", "containerd", "kubelet", "kube-proxy"):
            assert re.search(rf"^{part}\s+running ", status.stdout, re.MULTILINE), status.stdout
        app = {"name": "app", "image": TESTAPPS, "imagePullPolicy": "Never", "command": ["python", "-c", "print(1)"]}
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "hello"},
               "spec": {"restartPolicy": "Never", "containers": [app]}}  # fmt: skip
        done = cluster.kubectl("apply", "-f", "-", input_text=json.dumps(pod))
        assert done.returncode == 0, done.stderr
        wait_for(lambda: cluster.kubectl("get", "pod", "hello", "-o", "jsonpath={.status.phase}").stdout,
                 lambda phase: phase == "Succeeded", timeout=60, what="pod hello Succeeded")  # fmt: skip
        assert cluster.leftovers() != []  # while up, the node is there to find: the check below can fail
    finally:
        down = _vigil("down", "--state-dir", str(state))
    assert down.returncode == 0, down.stderr
    assert "kubelet" in down.stdout
    assert cluster.leftovers() == []
    assert _vigil("status", "--state-dir", str(state)).returncode == 1
