"""The operator's own webhook certificates (`webhook.operatorCertificates`) in the chart on the real node, reached the
way a release of 0.2.0 reaches them: installed with the chart's certificate, then switched by `helm upgrade`. Two
replicas serve the injection webhook with `failurePolicy: Fail`, so a pod the apiserver cannot call the webhook for
is refused, not let through — also while the rollout replaces them: a stopping replica serves on for its drain,
closing the apiserver's kept connections with its answers (a request sent on a connection kopf closed at once came
back `EOF` and its pod was refused, in CI). Labelled pods are created every 0.1 s throughout the upgrade and the
takeover that follows (the chart's certificate served on beside a new CA, then the new CA's): every pod is admitted
with its sidecar, and at the end both new replicas serve the operator's certificate, signed by the only CA the
configurations trust; the next upgrade lets the chart's Secret go. (A CA rotation the Secret's annotation asks for
is the same plan: tests/integration/test_webhook_tls.py runs it against the real apiserver.)
"""

import base64
import functools
import socket
import ssl
import threading
import time
import uuid
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from kubernetes.client.exceptions import ApiException

from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import clients
from vigil_dev.testing.chart import CHART
from vigil_dev.testing.e2e import consumer_group, statefulset, wait_injecting
from vigil_dev.testing.kube_fixtures import Kube, exists
from vigil_dev.testing.release import RunningOperator
from vigil_dev.testing.waiting import bound, wait_for
from vigil_operator import pki
from vigil_operator.domain.webhook_certs import HANDOVER_PROPAGATIONS

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.kube]

PROPAGATION = 6
"""The release's `propagationSeconds`. The chart's CA stays trusted until no replica of the release's earlier
rollout is left (the operator reads its Deployment's pods), not for a fixed 5 propagations, which a slow rollout
could outlast."""
OPERATOR_VALUES = {
    "operator": {"replicas": 2, "resyncSeconds": 3},
    # the chart's own certificate first (0.2.0's default); the test switches the release to the operator's
    "webhook": {"failurePolicy": "Fail", "operatorCertificates": {"enabled": False, "propagationSeconds": PROPAGATION}},
}
EVERY = 0.1
"""Seconds between two pod creations (server-side dry runs: admission runs in full, nothing is stored)."""


def certs_secret(kube: Kube, operator: RunningOperator) -> tuple[dict[str, bytes], dict[str, str]]:
    secret: Any = kube.core.read_namespaced_secret(f"{operator.release}-webhook-certs", operator.namespace)
    data = {k: base64.b64decode(v) for k, v in (secret.data or {}).items()}
    return data, dict(secret.metadata.annotations or {})


def served_by(kube: Kube, operator: RunningOperator, pod: str) -> bytes:
    """The certificate (DER) a replica's webhook port serves now, read with a handshake that verifies nothing."""
    ip = (kube.pod(operator.namespace, pod) or {})["status"]["podIP"]
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with (
        socket.create_connection((ip, 9443), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname="vigil") as tls,
    ):
        return bytes(tls.getpeercert(binary_form=True) or b"")


def upgrade(operator: RunningOperator, *sets: str) -> None:
    """`helm upgrade` of the release with its values and `sets`, waiting for its pods."""
    operator.tools.helm(
        "upgrade", operator.release, str(CHART), "--namespace", operator.namespace, "--reuse-values",
        *(a for s in sets for a in ("--set", s)), "--wait", "--timeout", "180s", timeout=240,
    ).check()  # fmt: skip


def test_switching_from_the_chart_s_certificate_while_pods_are_created_refuses_none_and_ends_on_the_operator_s(
    kube: Kube, kafka: KafkaCluster, operator: RunningOperator
) -> None:
    operator.wait_ready(2)
    chart_secret: Any = kube.core.read_namespaced_secret(f"{operator.release}-webhook-tls", operator.namespace)
    chart_ca = x509.load_pem_x509_certificate(base64.b64decode(chart_secret.data["ca.crt"]))
    namespace, name = f"t-{uuid.uuid4().hex[:10]}", "switch"
    bootstrap = kafka.connection().bootstrap_servers
    topic = clients.create_topic(kafka.connection(), clients.unique("switch"), partitions=1)
    kube.create_namespace(namespace)
    admitted: list[bool] = []
    refused: list[str] = []
    stop = threading.Event()
    creator: threading.Thread | None = None
    try:
        group = clients.unique("switch")
        kube.apply(consumer_group(name, group, bootstrap), namespace)
        workload = statefulset(name, group, topic, bootstrap, replicas=0)
        wait_injecting(kube, namespace, workload)
        template = workload["spec"]["template"]

        def create_pods() -> None:
            while not stop.wait(EVERY):
                pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {**template["metadata"], "generateName": "r-"},
                       "spec": template["spec"]}  # fmt: skip
                try:
                    made = kube.core.create_namespaced_pod(namespace, pod, dry_run="All").to_dict()
                except ApiException as exc:  # each refusal is counted and shown: the apiserver's own message
                    refused.append(f"{exc.status}: {str(exc.body)[:400]}")
                    continue
                containers = [*(made["spec"].get("init_containers") or []), *made["spec"]["containers"]]
                admitted.append(any(c["name"] == "vigil-sidecar" for c in containers))

        creator = threading.Thread(target=create_pods, daemon=True)
        creator.start()
        wait_for(lambda: len(admitted) + len(refused), lambda n: n >= 5, timeout=30, what="pods being created")
        upgrade(operator, "webhook.operatorCertificates.enabled=true")
        replicas = operator.wait_ready(2)
        taken_over = wait_for(
            lambda: certs_secret(kube, operator),
            lambda s: "ca.crt" in s[0] and len(x509.load_pem_x509_certificates(s[0]["ca.crt"])) == 1
            and x509.load_pem_x509_certificates(s[0]["ca.crt"])[0] != chart_ca,
            timeout=bound((HANDOVER_PROPAGATIONS + 2) * PROPAGATION + 60),
            what="the takeover done: one CA left, the operator's",
        )  # fmt: skip
        (new_ca,) = x509.load_pem_x509_certificates(taken_over[0]["ca.crt"])
        serving = x509.load_pem_x509_certificate(taken_over[0]["tls.crt"])
        serving.verify_directly_issued_by(new_ca)
        expected = serving.public_bytes(serialization.Encoding.DER)
        for replica in replicas:  # each reloaded it (every quarter of the propagation), without a restart
            wait_for(functools.partial(served_by, kube, operator, replica.pod), lambda der: der == expected,
                     timeout=bound(PROPAGATION + 10), what=f"{replica.pod} serving the new certificate")  # fmt: skip
            assert replica.restarts() == 0
        time.sleep(2 * EVERY)  # pacing: a few more creations under the new CA alone, not a wait for an outcome
    finally:
        stop.set()  # the creator ends before its namespace goes: a creation racing the delete is refused for that
        if creator is not None:
            creator.join(timeout=10)
        kube.core.delete_namespace(namespace)
    assert creator is not None
    assert not creator.is_alive()
    assert refused == [], refused[:3]
    assert admitted
    assert all(admitted), f"{admitted.count(False)} of {len(admitted)} pods admitted without the sidecar"
    upgrade(operator)  # the next upgrade: the chart's Secret, taken over, goes
    assert not exists(lambda: kube.core.read_namespaced_secret(f"{operator.release}-webhook-tls", operator.namespace))
    print(f"{len(admitted)} pods admitted with the sidecar during the switch from the chart's CA "
          f"{pki.fingerprint(chart_ca)[:12]} to the operator's {pki.fingerprint(new_ca)[:12]}")  # fmt: skip
