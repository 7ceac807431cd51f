"""Upgrading the CRD in place (`vigil crd apply`; Helm never upgrades `crds/`): a cluster on the previous schema
with a ConsumerGroup and its status keeps both, and takes the new field at once.

"The previous schema" is this release's CRD without `spec.liveness.nodeLostGraceSeconds` (added in this
release): what a cluster installed from the previous chart has."""

import asyncio
import copy
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from vigil_core.crd import API_GROUP, PLURAL, VERSION
from vigil_dev.testing.kube_fixtures import Kube, install_crd
from vigil_dev.testing.waiting import bound, wait_for
from vigil_operator import cli as operator_cli
from vigil_operator import crd
from vigil_operator.domain import crd_revision

pytestmark = pytest.mark.kube


def previous_crd() -> dict[str, Any]:
    older = copy.deepcopy(crd.load())
    annotations = older["metadata"]["annotations"]
    annotations[crd_revision.ANNOTATION] = str(crd_revision.revision(older) - 1)
    version = older["spec"]["versions"][0]
    liveness = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["liveness"]
    del liveness["properties"]["nodeLostGraceSeconds"]
    return older


def liveness_fields(kube: Kube) -> set[str]:
    found = client.ApiextensionsV1Api(kube.api).read_custom_resource_definition(crd.NAME).to_dict()
    schema = found["spec"]["versions"][0]["schema"]["open_apiv3_schema"]
    return set(schema["properties"]["spec"]["properties"]["liveness"]["properties"])


@pytest.fixture
def old_cluster(kube: Kube) -> Iterator[str]:
    """The previous CRD installed, a namespace for the test; the current CRD is applied back whatever happens."""
    install_crd(kube, previous_crd())
    wait_for(lambda: liveness_fields(kube), lambda f: "nodeLostGraceSeconds" not in f, timeout=bound(5),
             what="the previous CRD in place")  # fmt: skip
    namespace = f"up-{uuid.uuid4().hex[:8]}"
    kube.core.create_namespace({"metadata": {"name": namespace}})
    yield namespace
    kube.core.delete_namespace(namespace)
    kube.apply(crd.load())


def test_vigil_crd_apply_upgrades_in_place_keeping_crs_and_status(kube: Kube, old_cluster: str) -> None:
    namespace = old_cluster
    cr = {"apiVersion": f"{API_GROUP}/{VERSION}", "kind": "ConsumerGroup", "metadata": {"name": "orders"},
          "spec": {"groupId": "orders", "kafka": {"bootstrapServers": "kafka:9092"},
                   "workload": {"kind": "StatefulSet", "name": "orders"}}}  # fmt: skip
    kube.custom.create_namespaced_custom_object(API_GROUP, VERSION, namespace, PLURAL, cr)
    status = {"status": {"state": "Stable", "memberCount": 7, "report": {"rebalances24h": 3}}}
    kube.custom.patch_namespaced_custom_object_status(API_GROUP, VERSION, namespace, PLURAL, "orders", status)
    before = kube.custom.get_namespaced_custom_object(API_GROUP, VERSION, namespace, PLURAL, "orders")

    assert crd.main(["apply", "--kubeconfig", str(kube.kubeconfig)]) == 0

    assert "nodeLostGraceSeconds" in liveness_fields(kube)
    assert asyncio.run(operator_cli.crd_refusal(str(kube.kubeconfig))) is None  # the operator may start now
    after = kube.custom.get_namespaced_custom_object(API_GROUP, VERSION, namespace, PLURAL, "orders")
    expected = copy.deepcopy(before["spec"])
    expected["liveness"]["nodeLostGraceSeconds"] = 60  # the apiserver defaults stored objects as it reads them
    assert after["spec"] == expected
    assert after["status"] == before["status"]
    assert after["metadata"]["uid"] == before["metadata"]["uid"]
    # the new field is served at once: set on the existing object, defaulted on new ones
    change = {"spec": {"liveness": {"nodeLostGraceSeconds": 30}}}
    patched = kube.custom.patch_namespaced_custom_object(API_GROUP, VERSION, namespace, PLURAL, "orders", change)
    assert patched["spec"]["liveness"]["nodeLostGraceSeconds"] == 30
    fresh = copy.deepcopy(cr) | {"metadata": {"name": "payments"}}
    created = kube.custom.create_namespaced_custom_object(API_GROUP, VERSION, namespace, PLURAL, fresh)
    assert created["spec"]["liveness"]["nodeLostGraceSeconds"] == 60


def test_the_operator_refuses_to_start_on_the_previous_crd_in_one_line(kube: Kube, old_cluster: str) -> None:
    """Helm never upgrades `crds/`: an operator upgraded without `vigil crd apply` would write status fields the
    old schema prunes. It says so and exits before it acts on anything."""
    done = subprocess.run(
        [sys.executable, "-m", "vigil_cli", "operator", "--kubeconfig", str(kube.kubeconfig), "--no-webhook"],
        capture_output=True, text=True, timeout=bound(30), check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    need = crd_revision.revision(crd.load())
    assert done.stderr == (
        f"vigil operator: the CRD {crd.NAME} in the cluster is revision {need - 1}, this operator needs {need}: "
        f"{crd_revision.FIX}\n"
    )


def test_vigil_crd_apply_without_a_cluster_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Any) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\nusers: [{name: u, user: {}}]\n"
    )
    assert crd.main(["apply", "--kubeconfig", str(config), "--timeout", "5"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("vigil crd apply: the API server at https://127.0.0.1:1 is unreachable")
    assert err.count("\n") == 1
