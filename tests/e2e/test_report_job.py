"""The report as users run it: the chart's CronJob (report.enabled), its Job run once (`kubectl create job
--from=cronjob/...`), one pod from the vigil-report image on the real node, in a namespace that enforces the
`restricted` Pod Security Standard (non-root, read-only root, no privileges): it reads __consumer_offsets and the
events topic from Kafka on the node IP and writes `status.report` into the ConsumerGroups it covers."""

import json
import re

import pytest

from vigil_core.version import VERSION
from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import clients, images
from vigil_dev.testing.chart import CHART, Tools
from vigil_dev.testing.e2e import ConsumerSet, Producing
from vigil_dev.testing.images import IMAGE_UID
from vigil_dev.testing.kube_fixtures import Kube, container_status
from vigil_dev.testing.release import RunningOperator
from vigil_dev.testing.waiting import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.kube]

JOB = "report-now"
REPORT_VALUES = {
    "master": "local[2]",
    # a 2-core node: what a one-pod Spark needs here, not the production defaults (1 CPU, 2 GiB requested)
    "resources": {"requests": {"cpu": "100m", "memory": "512Mi"}, "limits": {"memory": "2Gi"}},
}


def test_the_reports_job_runs_in_a_restricted_pod_and_writes_the_groups_status(
    kube: Kube, kafka: KafkaCluster, tools: Tools, operator: RunningOperator
) -> None:
    kube.cluster.import_images(images.archives(progress=print, names=["report"]))  # the node starts without it
    s = ConsumerSet(kube, kafka, replicas=1, membership="dynamic", session_ms=10_000, partitions=2)
    producing = Producing(s)
    try:
        s.mapped(1)
        wait_for(lambda: clients.committed(s.conn, s.group), lambda c: len(c) == s.partitions, timeout=60,
                 what=f"{s.group}: a commit on every partition (the report's input)")  # fmt: skip
        values = {
            "report": {"enabled": True, "image": {"pullPolicy": "Never"}, **REPORT_VALUES},
            "kafka": {"bootstrapServers": kafka.connection().bootstrap_servers},
        }
        upgraded = tools.helm(
            "upgrade", operator.release, str(CHART), "--namespace", operator.namespace, "--reuse-values",
            "-f", str(tools.values_file(f"{operator.release}-report", values)), "--wait", "--timeout", "120s",
            timeout=180,
        )  # fmt: skip
        assert upgraded.returncode == 0, upgraded.output
        created = tools.kubectl("create", "job", JOB, f"--from=cronjob/{operator.release}-report",
                                "--namespace", operator.namespace)  # fmt: skip
        assert created.returncode == 0, created.output

        def job_status() -> dict[str, object]:
            return dict(kube.dynamic.resources.get(api_version="batch/v1", kind="Job")
                        .get(name=JOB, namespace=operator.namespace).to_dict().get("status") or {})  # fmt: skip

        done = wait_for(job_status, lambda st: bool(st.get("succeeded") or st.get("failed")), timeout=600,
                        interval=2, what=f"Job {JOB} finished")  # fmt: skip
        [pod] = kube.core.list_namespaced_pod(operator.namespace, label_selector=f"job-name={JOB}").items
        log = kube.container_logs(operator.namespace, pod.metadata.name, "report")
        assert done.get("succeeded") == 1, log[-3000:]
        spec = pod.spec
        assert spec.containers[0].image == f"vigil-report:{VERSION}"
        assert spec.containers[0].security_context.read_only_root_filesystem is True
        assert spec.containers[0].security_context.run_as_non_root is True
        ns_labels = kube.core.read_namespace(operator.namespace).metadata.labels
        assert ns_labels["pod-security.kubernetes.io/enforce"] == "restricted"  # admitted under it
        terminated = (container_status(kube.pod(operator.namespace, pod.metadata.name), "report") or {}).get("state")
        assert (terminated or {}).get("terminated", {}).get("exitCode") == 0
        assert "report: /data/report.html" in log, log[-2000:]
        assert re.search(r"status: report of [1-9]\d* ConsumerGroup\(s\) applied", log), log[-2000:]
        assert spec.security_context.run_as_user in (None, IMAGE_UID)  # the image's own non-root user

        report = wait_for(lambda: s.status().get("report") or {}, bool, timeout=30,
                          what=f"ConsumerGroup {s.namespace}/{s.name}: status.report")  # fmt: skip
        assert report["cluster"] == "default", json.dumps(report)
        assert report["reportTime"], json.dumps(report)
        assert report["rebalances24h"] >= 1, json.dumps(report)  # at least the group's own join
    finally:
        producing.stop()
        s.close()
