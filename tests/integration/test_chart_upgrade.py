"""Upgrading a release from the previous chart (vN, from git history: `chart_versions.PREVIOUS_RELEASE`) to the
work tree's chart (vN+1) the documented way, on the real apiserver, with a ConsumerGroup and its status in place.

Install as vN's users did (`kubectl apply` of vN's `crds/`, `helm install` vN), give a ConsumerGroup a status as
the operator and the report job write it, then upgrade as the README says (`vigil crd apply`, since Helm never
upgrades `crds/`, then `helm upgrade`): the CR's spec and status survive (new CRD defaults added), the CRD is the
current one, the webhook TLS Secret is kept, the objects of vN+1 exist and the ones vN+1 dropped are gone; a
rollback and a second upgrade leave the CR alone; the documented uninstall order (webhook configurations first,
then `helm uninstall`) keeps the CRD and the CR. No operator runs: objects are checked, never readiness.
"""

import asyncio
import copy
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from vigil_core.crd import API_GROUP, PLURAL, VERSION
from vigil_dev.testing import chart, chart_versions
from vigil_dev.testing.chart import Obj, Tools
from vigil_dev.testing.kube_fixtures import Kube, exists, install_crd, read_json
from vigil_dev.testing.waiting import bound, wait_for
from vigil_operator import crd
from vigil_operator.domain.status import Condition, ConditionType, ConsumerGroupStatus, MemberStatus, StalledMember
from vigil_operator.k8s.api import KubeApi
from vigil_spark.outputs import status as report_status

pytestmark = pytest.mark.kube

VALUES = {"report": {"enabled": True}, "kafka": {"bootstrapServers": "kafka.shop:9092"}, "operator": {"replicas": 0}}
"""Valid for both charts (vN's values schema is strict too); the report on, so every kind the charts have renders
(vN+1 changed the report CronJob when this was written). No operator pod: the cluster has a real node with the
current images, and a running operator would rewrite the status this test follows through the upgrade (an
operator acting on a group is the e2e suites' subject)."""
WHEN = "2026-01-02T03:04:05Z"


@pytest.fixture
def tools(kube: Kube, tmp_path: Path) -> Tools:
    return Tools.from_binaries(kube.cluster.binaries, kube.kubeconfig, tmp_path / "helm")


@pytest.fixture
def previous(tmp_path: Path) -> Path:
    """vN's tree (`charts/vigil`, `crds/`) from git history; a missing history fails in one line, never skips."""
    try:
        return chart_versions.extract(tmp_path / "vN")
    except chart_versions.HistoryMissingError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture
def release(kube: Kube, tools: Tools, namespace: str) -> Iterator[str]:
    """A release name; afterwards the release is gone and the current CRD is back for the rest of the session."""
    name = f"vigil-{uuid.uuid4().hex[:6]}"
    try:
        yield name
    finally:
        tools.helm("uninstall", name, "--namespace", namespace, "--ignore-not-found")
        install_crd(kube)


def the_cr(kube: Kube, namespace: str, name: str) -> Obj:
    found: Obj = kube.custom.get_namespaced_custom_object(API_GROUP, VERSION, namespace, PLURAL, name)
    return found


def served_versions(kube: Kube) -> list[Obj]:
    found = read_json(lambda: client.ApiextensionsV1Api(kube.api).read_custom_resource_definition(
        crd.NAME, _preload_content=False))  # fmt: skip
    assert found is not None
    versions: list[Obj] = found["spec"]["versions"]
    return versions


def rendered(tools: Tools, chart_dir: Path, release: str, namespace: str, values: Path) -> dict[tuple[str, str], Obj]:
    """(kind, name) → the object as the chart renders it with these values, without what differs per render (the
    generated TLS Secret's data, its checksum, the caBundle). `crds/` are left out: Helm does not manage them."""
    skip_tests = "--skip-tests"  # `helm test`'s hooks exist only while it runs
    out = tools.helm("template", release, str(chart_dir), "--namespace", namespace, "-f", str(values), skip_tests)
    out = out.check()
    objects = {}
    for doc in filter(None, yaml.safe_load_all(out.stdout)):
        if doc["kind"] == "Secret":
            doc.pop("data", None)
        template = doc.get("spec", {}).get("template", {}).get("metadata", {})
        template.get("annotations", {}).pop("checksum/webhook-tls", None)
        for hook in doc.get("webhooks", []):
            hook["clientConfig"].pop("caBundle", None)
        objects[(doc["kind"], doc["metadata"]["name"])] = doc
    return objects


def live(tools: Tools, namespace: str, kind: str, name: str) -> Obj | None:
    done = tools.kubectl("get", f"{kind}/{name}", "--namespace", namespace, "-o", "json", "--ignore-not-found")
    assert done.returncode == 0, done.output
    found: Obj | None = json.loads(done.stdout) if done.stdout.strip() else None
    return found


def unlike(tools: Tools, namespace: str, objects: dict[tuple[str, str], Obj]) -> list[str]:
    """How the cluster differs from `objects` (the apiserver's defaults aside): one line per missing or differing
    object, naming the first differing field."""
    found = {key: difference(live(tools, namespace, *key), obj) for key, obj in objects.items()}
    return sorted(f"{kind}/{name}: {diff}" for (kind, name), diff in found.items() if diff is not None)


def operator_status() -> dict[str, Any]:
    """A status as the operator builds it (its model, its dump: no `report`, None left out)."""
    ready = Condition(type=ConditionType.READY, status="False", reason="MemberStalled",
                      message="orders-1 stalled", last_transition_time=WHEN, observed_generation=1)  # fmt: skip
    status = ConsumerGroupStatus(
        observed_generation=1, cluster_id="q1Sh-9_ISia_zwGINzRvyQ", state="Stable", protocol="classic",
        coordinator=1, member_count=2, stalled_count=1,
        members=(MemberStatus(member_id="m-0", pod="orders-0", partitions=2),
                 MemberStatus(member_id="m-1", pod="orders-1", partitions=1, stalled=True)),
        stalled_members=(StalledMember(member_id="m-1", pod="orders-1", since=WHEN, action="leave-group"),),
        last_rebalance=WHEN, conditions=(ready,),
    )  # fmt: skip
    return status.model_dump(mode="json", by_alias=True, exclude_none=True, exclude={"report"})


def write_status(kube: Kube, namespace: str, name: str) -> None:
    """Through the operator's own writer (server-side apply as `vigil-operator`) and the report job's
    (`status.report` as `vigil-report`)."""
    asyncio.run(KubeApi(kube.api).apply_status(namespace, name, operator_status()))
    target = report_status.target_of(the_cr(kube, namespace, name))
    assert target is not None
    writer = report_status.Writer(kube.api, namespace, timeout=10)
    report = {"cluster": "main", "lastRun": WHEN, "rebalances24h": 3}
    assert writer.apply(target, report_status.apply_body(target, report))


def status_managers(cr: Obj) -> set[str]:
    return {m["manager"] for m in cr["metadata"]["managedFields"] if m.get("subresource") == "status"}


def vigil_crd_apply(kube: Kube) -> str:
    """The documented step, run as users run it: `vigil crd apply` (the current CLI, a separate process)."""
    done = subprocess.run(
        [sys.executable, "-m", "vigil_cli", "crd", "apply", "--kubeconfig", str(kube.kubeconfig)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_upgrade_from_the_previous_chart_keeps_the_consumer_group_and_its_status(
    kube: Kube, tools: Tools, namespace: str, release: str, previous: Path
) -> None:
    old_chart = previous / "charts" / "vigil"
    values = tools.values_file(release, VALUES)
    full = release  # the release name contains "vigil": it is the prefix of every object
    admission = client.AdmissionregistrationV1Api(kube.api)
    ext = client.ApiextensionsV1Api(kube.api)
    old_objects = rendered(tools, old_chart, release, namespace, values)
    new_objects = rendered(tools, chart.CHART, release, namespace, values)
    old_crd = yaml.safe_load(next((old_chart / "crds").glob("*.yaml")).read_text())

    # -- vN, installed as its users did ------------------------------------------------------------------------
    applied = tools.kubectl("apply", "-f", str(old_chart / "crds"))
    assert applied.returncode == 0, applied.output
    wait_for(lambda: served_versions(kube), lambda v: v == old_crd["spec"]["versions"], timeout=bound(10),
             what="vN's CRD served")  # fmt: skip
    installed = tools.helm("install", release, str(old_chart), "--namespace", namespace, "-f", str(values))
    assert installed.returncode == 0, installed.output
    assert unlike(tools, namespace, old_objects) == []
    changed = unlike(tools, namespace, new_objects) != [] or old_crd["spec"] != crd.load()["spec"]
    assert changed, f"vN ({chart_versions.PREVIOUS_RELEASE[:12]}) is the work tree's chart: move PREVIOUS_RELEASE"

    group = yaml.safe_load((chart.ROOT / "examples" / "consumergroups" / "dynamic-deployment.yaml").read_text())
    group["metadata"] = {"name": "orders", "namespace": namespace}
    kube.custom.create_namespaced_custom_object(API_GROUP, VERSION, namespace, PLURAL, group)
    write_status(kube, namespace, "orders")
    before = the_cr(kube, namespace, "orders")
    assert before["status"]["conditions"][0]["reason"] == "MemberStalled"
    assert before["status"]["report"]["rebalances24h"] == 3
    assert status_managers(before) == {"vigil-operator", "vigil-report"}
    secret = kube.core.read_namespaced_secret(f"{full}-webhook-tls", namespace).data

    # -- the documented upgrade: the CRD first (Helm never upgrades crds/), then the release ---------------------
    assert "applied and Established" in vigil_crd_apply(kube)
    upgraded = tools.helm("upgrade", release, str(chart.CHART), "--namespace", namespace, "-f", str(values))
    assert upgraded.returncode == 0, upgraded.output

    assert served_versions(kube) == crd.load()["spec"]["versions"]  # the CRD is the current one, all of it
    after = the_cr(kube, namespace, "orders")
    assert after["metadata"]["uid"] == before["metadata"]["uid"]
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]  # nothing rewrote it
    assert after["status"] == before["status"]
    assert status_managers(after) == {"vigil-operator", "vigil-report"}
    # the spec is vN's with what vN+1's CRD defaults added: exactly what the apiserver makes of it on create now
    probe = copy.deepcopy(group) | {"metadata": {"name": "probe", "namespace": namespace}}
    created = tools.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", stdin=json.dumps(probe))
    assert created.returncode == 0, created.output
    assert after["spec"] == json.loads(created.stdout)["spec"]
    assert difference(after["spec"], before["spec"]) is None  # no value lost or changed

    assert kube.core.read_namespaced_secret(f"{full}-webhook-tls", namespace).data == secret
    for config in (admission.read_mutating_webhook_configuration(full),
                   admission.read_validating_webhook_configuration(full)):  # fmt: skip
        assert {h.client_config.ca_bundle for h in config.webhooks} == {secret["ca.crt"]}
    assert unlike(tools, namespace, new_objects) == []  # every object of vN+1 exists, as vN+1 renders it
    # what vN+1 dropped is gone, but for vN's webhook certificate: kept for the operator to take over (vN+1's
    # default is the operator's own certificates; no operator runs here to take it over)
    dropped = sorted(o for o in old_objects.keys() - new_objects.keys() if live(tools, namespace, *o))
    assert dropped == [("Secret", f"{full}-webhook-tls")]

    # -- a rollback and a second upgrade leave the CR alone ----------------------------------------------------
    rolled = tools.helm("rollback", release, "1", "--namespace", namespace)
    assert rolled.returncode == 0, rolled.output
    assert unlike(tools, namespace, old_objects) == []
    assert served_versions(kube) == crd.load()["spec"]["versions"]  # Helm never downgrades a CRD (additive: fine)
    assert the_cr(kube, namespace, "orders") == after
    again = tools.helm("upgrade", release, str(chart.CHART), "--namespace", namespace, "-f", str(values))
    assert again.returncode == 0, again.output
    assert unlike(tools, namespace, new_objects) == []
    assert the_cr(kube, namespace, "orders") == after
    assert kube.core.read_namespaced_secret(f"{full}-webhook-tls", namespace).data == secret

    # -- the documented uninstall order: webhook configurations first, then the release; the CRD stays ---------
    admission.delete_mutating_webhook_configuration(full)
    admission.delete_validating_webhook_configuration(full)
    uninstalled = tools.helm("uninstall", release, "--namespace", namespace)
    assert uninstalled.returncode == 0, uninstalled.output
    assert [o for o in new_objects if live(tools, namespace, *o)] == []
    assert the_cr(kube, namespace, "orders") == after
    assert exists(lambda: ext.read_custom_resource_definition(crd.NAME))


def difference(whole: Any, part: Any, path: str = "") -> str | None:
    """Where `whole` does not contain `part` unchanged (`whole` may have more keys: the apiserver's defaults; lists
    match item by item), as `path: whole's value vs part's`; None when it does."""
    if isinstance(part, dict) and isinstance(whole, dict):
        return next((d for k, v in part.items() if (d := difference(whole.get(k), v, f"{path}.{k}")) is not None), None)
    if isinstance(part, list) and isinstance(whole, list) and len(whole) == len(part):
        return next((d for i, (w, v) in enumerate(zip(whole, part, strict=True))
                     if (d := difference(w, v, f"{path}[{i}]")) is not None), None)  # fmt: skip
    return None if whole == part else f"{path or '.'}: {str(whole)[:200]} vs {str(part)[:200]}"
