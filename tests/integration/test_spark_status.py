"""`vigil report --update-status` on the real apiserver: a ConsumerGroup of a real group that rebalanced on the
real broker gets `status.report` (its rebalance count from the broker's own log), applied by field manager
`vigil-report` beside the operator's fields (manager `vigil-operator`), which stay as they were; CRs of another
group or another Kafka cluster get nothing. An unreachable apiserver is one line and exit 1, before Spark."""

import contextlib
import io
import json
import socket
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from pyspark.sql import SparkSession

from vigil_core.crd import API_GROUP, KIND, PLURAL, VERSION
from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import broker_log, clients
from vigil_dev.testing.kube_fixtures import Kube, install_crd
from vigil_dev.testing.waiting import wait_for
from vigil_spark import cli

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.kube]
pytest_plugins = ["vigil_dev.testing.spark_fixtures"]

CG = (API_GROUP, VERSION, PLURAL)


@pytest.fixture(scope="module")
def crds(kube: Kube) -> None:
    install_crd(kube)


def consumer_group(namespace: str, name: str, group: str, bootstrap: str) -> dict[str, Any]:
    return {"apiVersion": f"{API_GROUP}/{VERSION}", "kind": KIND, "metadata": {"name": name, "namespace": namespace},
            "spec": {"groupId": group, "kafka": {"bootstrapServers": bootstrap},
                     "workload": {"kind": "Deployment", "name": "app"}}}  # fmt: skip


def operator_status(kube: Kube, namespace: str, name: str, cluster_id: str, reason: str) -> None:
    """What the operator writes (a part of it), as it writes it: server-side apply by `vigil-operator`."""
    body = {"apiVersion": f"{API_GROUP}/{VERSION}", "kind": KIND, "metadata": {"name": name},
            "status": {"observedGeneration": 1, "clusterId": cluster_id, "state": "Stable", "memberCount": 1,
                       "conditions": [{"type": "Ready", "status": "True", "reason": reason, "message": "",
                                       "lastTransitionTime": "2026-11-21T10:00:00Z"}]}}  # fmt: skip
    kube.custom.patch_namespaced_custom_object_status(
        API_GROUP, VERSION, namespace, PLURAL, name, body, field_manager="vigil-operator", force=True,
        _content_type="application/apply-patch+yaml",
    )  # fmt: skip


def read(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    found: dict[str, Any] = kube.custom.get_namespaced_custom_object(API_GROUP, VERSION, namespace, PLURAL, name)
    return found


def owned(obj: dict[str, Any], manager: str) -> dict[str, Any]:
    """The status fields `manager` owns (fieldsV1 under f:status), merged over its entries."""
    fields: dict[str, Any] = {}
    for entry in obj["metadata"].get("managedFields") or []:
        if entry["manager"] == manager:
            fields |= (entry.get("fieldsV1") or {}).get("f:status") or {}
    return fields


def run_report(args: list[str], env: dict[str, str]) -> tuple[int, list[str]]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = cli.main(args, env)
    return code, err.getvalue().splitlines()


def test_the_report_lands_in_the_status_of_the_matching_consumer_group(  # noqa: PLR0917 - fixtures
    spark_kafka: SparkSession, kafka: KafkaCluster, kube: Kube, crds: None, namespace: str, tmp_path: Path
) -> None:
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("status"), partitions=2)
    group = clients.unique("g-status")
    admin = AdminClient(conn.confluent_config())
    cluster_id = str(admin.describe_cluster().result().cluster_id)

    def stable(n: int) -> None:
        wait_for(lambda: clients.stable_members(conn, group), lambda m: m == n, timeout=60,
                 what=f"{group}: {n} members Stable")  # fmt: skip

    first = clients.Member(conn, group, [topic], "status-a").start()
    stable(1)
    second = clients.Member(conn, group, [topic], "status-b").start()
    stable(2)
    second.close()
    stable(1)
    try:
        boot = conn.bootstrap_servers
        for name, gid in (("mine", group), ("elsewhere", group), ("another", clients.unique("g-none"))):
            kube.custom.create_namespaced_custom_object(API_GROUP, VERSION, namespace, PLURAL,
                                                        consumer_group(namespace, name, gid, boot))  # fmt: skip
        operator_status(kube, namespace, "mine", cluster_id, "GroupStable")
        operator_status(kube, namespace, "elsewhere", "another-kafka-cluster", "GroupStable")
        before = read(kube, namespace, "mine")["status"]

        logs = [str(kafka.server_log(node.node_id)) for node in kafka.nodes]
        code, lines = run_report(["--out", str(tmp_path / "out"), "--cluster", "itest-status", "--master",
                                  "local[2]", "--broker-logs", *logs, "--update-status", "--kubeconfig",
                                  str(kube.kubeconfig)], conn.to_env())  # fmt: skip
        assert code == 0, lines
        assert any(line.startswith("vigil report: kubernetes at https://") for line in lines), lines
        assert any(f"Kafka cluster id {cluster_id}" in line for line in lines), lines
        assert any(line.startswith("vigil report: status: report of ") for line in lines), lines

        generations = broker_log.generations(kafka, group)  # ground truth: the coordinator's own log
        mine = read(kube, namespace, "mine")
        report = mine["status"]["report"]
        assert report["rebalances24h"] == len(generations), (report, generations)
        assert report["cluster"] == "itest-status"
        assert report["topCause"] in {"joined", "left"}
        assert "reportTime" in report
        summary = json.loads((tmp_path / "out" / "summary.json").read_text())
        assert next(g for g in summary["groups"] if g["group"] == group)["rebalances_24h"] == len(generations)
        # the operator's fields are as the operator wrote them, and still its own
        assert {k: v for k, v in mine["status"].items() if k != "report"} == before
        assert "f:report" in owned(mine, "vigil-report")
        assert set(owned(mine, "vigil-report")) <= {"f:report", "."}
        assert "f:report" not in owned(mine, "vigil-operator")
        assert {"f:conditions", "f:clusterId", "f:state"} <= set(owned(mine, "vigil-operator"))
        report_entry = next(e for e in mine["metadata"]["managedFields"] if e["manager"] == "vigil-report")
        assert (report_entry["operation"], report_entry.get("subresource")) == ("Apply", "status")
        # another Kafka cluster (by the id the operator recorded) and another group id: nothing
        assert "report" not in (read(kube, namespace, "elsewhere").get("status") or {})
        assert "report" not in (read(kube, namespace, "another").get("status") or {})

        # the operator's next apply (its own fields only) keeps the report
        operator_status(kube, namespace, "mine", cluster_id, "GroupStableAgain")
        again = read(kube, namespace, "mine")["status"]
        assert again["report"] == report
        assert again["conditions"][0]["reason"] == "GroupStableAgain"
    finally:
        first.close()


def test_an_unreachable_apiserver_is_one_line_and_exit_1_before_spark(kafka: KafkaCluster, tmp_path: Path) -> None:
    closed = _free_port()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{closed}",
                                               "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
    }))  # fmt: skip
    code, lines = run_report(["--out", str(tmp_path / "out"), "--update-status", "--kubeconfig", str(kubeconfig),
                              "--connect-timeout", "5"], kafka.connection().to_env())  # fmt: skip
    assert code == 1, lines
    assert lines[-1].startswith(f"vigil report: kubernetes: cannot reach the apiserver at https://127.0.0.1:{closed}")
    assert "Connection refused" in lines[-1], lines
    assert not any("Traceback" in line or "spark" in line.lower() for line in lines), lines
    assert not (tmp_path / "out").exists()  # failed before Spark: nothing started, nothing written

    code, lines = run_report(["--out", str(tmp_path / "out"), "--update-status", "--kubeconfig",
                              str(tmp_path / "missing")], kafka.connection().to_env())  # fmt: skip
    assert (code, lines[-1]) == (2, f"vigil report: --kubeconfig: no such file: {tmp_path / 'missing'}")
    code, lines = run_report(["--out", str(tmp_path / "out"), "--namespace", "x"], kafka.connection().to_env())
    assert (code, lines[-1]) == (2, "vigil report: --namespace: only with --update-status")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def service_account_kubeconfig(kube: Kube, namespace: str, path: Path) -> Path:
    """A kubeconfig acting as ServiceAccount `namespace/default` (a TokenRequest token), nothing more."""
    answer = kube.core.create_namespaced_service_account_token(
        "default", namespace, {"spec": {"expirationSeconds": 3600}}
    )
    admin: dict[str, Any] = json.loads(kube.kubeconfig.read_text())
    path.write_text(json.dumps({
        **admin,
        "users": [{"name": "sa", "user": {"token": answer.status.token}}],
        "contexts": [{"name": "sa", "context": {"cluster": admin["clusters"][0]["name"], "user": "sa"}}],
        "current-context": "sa",
    }))  # fmt: skip
    return path


def test_missing_rbac_names_the_verb_and_resource_needed(  # noqa: PLR0917 - fixtures
    spark_kafka: SparkSession, kafka: KafkaCluster, kube: Kube, crds: None, namespace: str, tmp_path: Path
) -> None:
    conn = kafka.connection()
    topic = clients.create_topic(conn, clients.unique("status-rbac"), partitions=1)
    group = clients.unique("g-status-rbac")
    member = clients.Member(conn, group, [topic], "rbac-a").start()
    try:
        wait_for(lambda: clients.stable_members(conn, group), lambda m: m == 1, timeout=60, what=f"{group} Stable")
        cr = consumer_group(namespace, "mine", group, conn.bootstrap_servers)
        kube.custom.create_namespaced_custom_object(API_GROUP, VERSION, namespace, PLURAL, cr)
        kubeconfig = service_account_kubeconfig(kube, namespace, tmp_path / "sa.kubeconfig")
        args = ["--out", str(tmp_path / "out"), "--cluster", "itest-rbac", "--master", "local[2]", "--update-status",
                "--kubeconfig", str(kubeconfig)]  # fmt: skip

        code, lines = run_report(args, conn.to_env())  # no permission at all: listing across namespaces fails
        assert code == 1, lines
        assert lines[-1].startswith("vigil report: kubernetes: list consumergroups.vigil.dev in all namespaces:"
                                    " forbidden ("), lines  # fmt: skip
        assert lines[-1].endswith("the report job needs `list` on consumergroups (apiGroup vigil.dev)"), lines
        assert not (tmp_path / "out").exists()  # before Spark

        rbac = {"apiVersion": "rbac.authorization.k8s.io/v1", "metadata": {"name": "report", "namespace": namespace}}
        kube.apply(
            {
                **rbac,
                "kind": "Role",
                "rules": [{"apiGroups": [API_GROUP], "resources": [PLURAL], "verbs": ["list", "get"]}],
            }
        )
        kube.apply({**rbac, "kind": "RoleBinding",
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "report"},
                    "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": namespace}]})  # fmt: skip
        as_sa = client.CustomObjectsApi(config.new_client_from_config(config_file=str(kubeconfig)))

        def may_list() -> bool:
            try:
                as_sa.list_namespaced_custom_object(API_GROUP, VERSION, namespace, PLURAL)
            except ApiException as exc:
                if exc.status == 403:
                    return False
                raise
            return True

        wait_for(may_list, timeout=30, what="the Role in force")

        code, lines = run_report([*args, "--namespace", namespace], conn.to_env())  # list yes, patch no
        assert code == 1, lines
        assert lines[-1] == (f"vigil report: kubernetes: patch consumergroups/status in namespace {namespace}: not"
                             " allowed (no rule grants it); the report job needs `patch` on consumergroups/status"
                             " (apiGroup vigil.dev)"), lines  # fmt: skip
        assert not (tmp_path / "out").exists()  # asked before Spark, not after the job
        assert not any("Traceback" in line for line in lines), lines
    finally:
        member.close()
