"""The report as users run it: the chart's CronJob (report.enabled), its Job run once (`kubectl create job
--from=cronjob/...`), from the vigil-report image on the real node, in a namespace that enforces the `restricted`
Pod Security Standard (non-root, read-only root, no privileges): it reads __consumer_offsets and the events topic
from Kafka on the node IP and writes `status.report` into the ConsumerGroups it covers.

Spark on Kubernetes (`report.master: kubernetes`): the job pod is Spark's driver and two executor pods of the same
image run the tasks, admitted under the same standard; the model tables they write on the report's claim equal
those of a local run (`local[2]` in this process) over the same history. The chart's default, Spark inside the one
job pod, runs in the demo (`tests/e2e/test_demo.py`)."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from vigil_core.version import VERSION
from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.spark import install as spark_install
from vigil_dev.testing import clients, images
from vigil_dev.testing.chart import CHART, Tools
from vigil_dev.testing.e2e import ConsumerSet, Producing
from vigil_dev.testing.images import IMAGE_UID
from vigil_dev.testing.kube_fixtures import Kube, container_status
from vigil_dev.testing.release import RunningOperator
from vigil_dev.testing.waiting import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.kube]

JOB = "report-now"
EXECUTORS = 2
REPORT_VALUES = {
    # no scheduled run beside the test's own: two runs at once share the checkpoints and tables (the schedule's
    # minute 17 once fired 6 s after the test's job started, and the test's run failed reading the tables)
    "suspend": True,
    "master": "kubernetes",
    # a 2-core node: what a driver and two executors need here, not the production defaults
    "resources": {"requests": {"cpu": "100m", "memory": "512Mi"}, "limits": {"memory": "2Gi"}},
    "kubernetes": {"executors": EXECUTORS, "executorCores": 1, "executorMemory": "512m",
                   "executorRequestCores": "100m"},
    "extraArgs": ["--verbose"],  # Spark's warnings in the job pod's log (a lost task, a lost executor)
}  # fmt: skip
EVENTS_TOPIC = "vigil.events"  # the chart's operator.eventsTopic


def test_the_reports_job_runs_spark_on_kubernetes_in_restricted_pods_and_matches_a_local_run(
    kube: Kube, kafka: KafkaCluster, tools: Tools, operator: RunningOperator, tmp_path: Path
) -> None:
    kube.cluster.import_images(images.archives(progress=print, names=["report"]))  # the node starts without it
    s = ConsumerSet(kube, kafka, replicas=1, membership="dynamic", session_ms=10_000, partitions=2)
    producing = Producing(s)
    claim = _claim(kube, operator.namespace, tmp_path / "report-claim")
    try:
        s.mapped(1)
        wait_for(lambda: clients.committed(s.conn, s.group), lambda c: len(c) == s.partitions, timeout=60,
                 what=f"{s.group}: a commit on every partition (the report's input)")  # fmt: skip
        producing.stop()
        # the group's history ends here (its member leaves): both runs read the same records of it
        kube.apps.patch_namespaced_stateful_set_scale(s.name, s.namespace, {"spec": {"replicas": 0}})
        wait_for(lambda: clients.describe_group(s.conn, s.group), lambda d: not d.members, timeout=60,
                 what=f"{s.group}: no member left")  # fmt: skip
        values = {
            "report": {"enabled": True, "image": {"pullPolicy": "Never"}, "persistence": {"existingClaim": claim},
                       **REPORT_VALUES},
            "kafka": {"bootstrapServers": kafka.connection().bootstrap_servers},
        }  # fmt: skip
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

        def executors() -> list[Any]:
            return list(kube.core.list_namespaced_pod(operator.namespace, label_selector="spark-role=executor").items)

        names: set[str] = set()  # every executor pod seen: their logs say why a task failed

        def running_executors() -> list[Any]:
            if job_status().get("failed"):
                pytest.fail(_why_failed(kube, operator.namespace, names))
            found = executors()
            names.update(p.metadata.name for p in found)
            return [p for p in found if p.status.phase == "Running"]

        seen = wait_for(running_executors, lambda found: len(found) == EXECUTORS, timeout=300,
                        what=f"{EXECUTORS} executor pods running")  # fmt: skip
        done = wait_for(job_status, lambda st: bool(st.get("succeeded") or st.get("failed")), timeout=600,
                        interval=2, what=f"Job {JOB} finished")  # fmt: skip
        names.update(p.metadata.name for p in executors())
        assert done.get("succeeded") == 1, _why_failed(kube, operator.namespace, names)
        [pod] = kube.core.list_namespaced_pod(operator.namespace, label_selector=f"job-name={JOB}").items
        log = kube.container_logs(operator.namespace, pod.metadata.name, "report")
        assert "on k8s://https://" in log, log[-2000:]
        for executor in seen:
            assert executor.spec.containers[0].image == f"vigil-report:{VERSION}"
            assert executor.spec.containers[0].security_context.read_only_root_filesystem is True
            owners = [(o.kind, o.name) for o in executor.metadata.owner_references or []]
            assert owners == [("Pod", pod.metadata.name)], owners  # they go with the job's pod
        wait_for(executors, lambda left: not left, timeout=60, what="the executor pods deleted at the job's end")
        spec = pod.spec
        assert spec.containers[0].image == f"vigil-report:{VERSION}"
        assert spec.containers[0].security_context.read_only_root_filesystem is True
        assert spec.containers[0].security_context.run_as_non_root is True
        ns_labels = kube.core.read_namespace(operator.namespace).metadata.labels
        assert ns_labels["pod-security.kubernetes.io/enforce"] == "restricted"  # all admitted under it
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

        local = _local_report(kafka, tmp_path / "local")
        on_kube = _model_rows(tmp_path / "report-claim", s.group)
        assert on_kube["rebalances"], on_kube  # the group's join and its member's leave at least
        assert on_kube == _model_rows(local, s.group)
    finally:
        producing.stop()
        s.close()
        kube.core.delete_namespaced_persistent_volume_claim(claim, operator.namespace)
        kube.core.delete_persistent_volume(claim)


def _why_failed(kube: Kube, namespace: str, executors: set[str]) -> str:
    """The job pod's last lines, each executor's errors and warnings (their pods go with the driver: their logs
    stay in the kept pod logs) and the namespace's warning events (an OOM kill, an eviction)."""
    parts = []
    for pod in kube.core.list_namespaced_pod(namespace, label_selector=f"job-name={JOB}").items:
        parts.append(
            f"job pod {pod.metadata.name}:\n" + kube.container_logs(namespace, pod.metadata.name, "report")[-3000:]
        )
    for name in sorted(executors):
        lines = kube.container_logs(namespace, name, "executor").splitlines()
        telling = [line for line in lines if re.search(r" (ERROR|WARN) |Exception|Caused by|Killed", line)]
        parts.append(f"executor {name} ({len(lines)} lines), errors and warnings:\n" + "\n".join(telling[-30:]))
    events = kube.core.list_namespaced_event(namespace, field_selector="type=Warning").items
    parts.append("warning events:\n" + "\n".join(f"{e.involved_object.name}: {e.reason}: {e.message}" for e in events))
    return "\n".join(parts)


def _claim(kube: Kube, namespace: str, directory: Path) -> str:
    """A claim on a directory of the node (a hostPath volume, bound by name): the job pod and its executors all
    run on the one node, so ReadWriteOnce serves them all; the image's user writes it."""
    directory.mkdir(parents=True)
    directory.chmod(0o777)
    name = clients.unique("report-data")
    kube.core.create_persistent_volume({
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
                 "persistentVolumeReclaimPolicy": "Retain", "hostPath": {"path": str(directory)},
                 "claimRef": {"namespace": namespace, "name": name}},
    })  # fmt: skip
    kube.core.create_namespaced_persistent_volume_claim(namespace, {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "", "volumeName": name,
                 "resources": {"requests": {"storage": "1Gi"}}},
    })  # fmt: skip
    wait_for(lambda: kube.core.read_namespaced_persistent_volume_claim(name, namespace).status.phase,
             lambda phase: phase == "Bound", timeout=60, what=f"PVC {namespace}/{name} bound")  # fmt: skip
    return name


def _local_report(kafka: KafkaCluster, out: Path) -> Path:
    """`vigil report` with Spark in this machine's process (local[2]) over the same cluster and topics."""
    jars = spark_install.ensure_jars(progress=print)
    env = {**os.environ, **kafka.connection().to_env(), "VIGIL_SPARK_JARS": str(jars)}
    done = subprocess.run(
        [sys.executable, "-m", "vigil_spark", "--out", str(out), "--cluster", "default", "--master", "local[2]",
         "--events-topic", EVENTS_TOPIC],
        env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def _model_rows(out: Path, group: str) -> dict[str, list[str]]:
    """Each model table's JSON rows about `group`, sorted (Spark's part files come in any order)."""
    rows: dict[str, list[str]] = {}
    for table in sorted((out / "model").iterdir()):
        found = [json.loads(line) for part in sorted((table / "json").glob("part-*.json"))
                 for line in part.read_text().splitlines() if line]  # fmt: skip
        rows[table.name] = sorted(json.dumps(r, sort_keys=True) for r in found if r.get("group") == group)
    return rows
