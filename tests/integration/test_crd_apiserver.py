"""The real kube-apiserver enforces the CRD exactly as the pydantic models read it.

Every example is admitted and comes back with the defaults the models assume; every invalid fixture is refused
with the words parse_spec uses; random specs are admitted or refused by both sides alike, the apiserver naming
every CEL rule impossible() names; the status subresource keeps what the status model writes, prunes the rest,
and feeds the printer columns.
"""

import importlib.util
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from kubernetes.client.exceptions import ApiException

from vigil_core.crd import API_GROUP, KIND, PLURAL, VERSION
from vigil_dev.testing.kube_fixtures import Kube, install_crd
from vigil_operator.domain.spec import parse_spec
from vigil_operator.domain.status import (
    Condition,
    ConditionType,
    ConsumerGroupStatus,
    MemberStatus,
    RolloutPhase,
    StalledMember,
)

pytestmark = pytest.mark.kube

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
WHEN = "2026-01-02T03:04:05Z"


def _cases() -> ModuleType:
    """The fixture readers and spec strategies of test_crd_schema.py, shared rather than copied."""
    path = Path(__file__).parents[1] / "unit" / "operator" / "test_crd_schema.py"
    spec = importlib.util.spec_from_file_location("_vigil_crd_cases", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


cases = _cases()
CEL_MESSAGES: list[str] = [rule["message"] for rule in cases.cel_rules()]


@pytest.fixture(scope="module")
def installed(kube: Kube) -> None:
    install_crd(kube)


@pytest.fixture(scope="module")
def dry_namespace(kube: Kube, installed: None) -> Iterator[str]:
    """One namespace for the dry-run creates (they store nothing, so the tests can share it)."""
    name = f"crd-{uuid.uuid4().hex[:10]}"
    kube.core.create_namespace({"metadata": {"name": name}})
    yield name
    kube.core.delete_namespace(name)


def create(kube: Kube, namespace: str, cr: dict[str, Any], **options: Any) -> dict[str, Any]:
    created: dict[str, Any] = kube.custom.create_namespaced_custom_object(
        API_GROUP, VERSION, namespace, PLURAL, cr, **options
    )
    return created


def dry_run(kube: Kube, namespace: str, cr: dict[str, Any]) -> dict[str, Any]:
    """A server-side dry-run create with strict field validation (what `kubectl apply --dry-run=server` sends)."""
    return create(kube, namespace, cr, dry_run="All", field_validation="Strict")


def refusal(kube: Kube, namespace: str, cr: dict[str, Any]) -> tuple[int, str]:
    with pytest.raises(ApiException) as refused:
        dry_run(kube, namespace, cr)
    return refused.value.status, json.loads(refused.value.body)["message"]


def model_dump(spec: dict[str, Any]) -> dict[str, Any]:
    return parse_spec(spec).model_dump(by_alias=True, exclude_none=True, mode="json")


@pytest.mark.parametrize("path", cases.EXAMPLES, ids=lambda p: p.name)
def test_example_is_admitted_with_the_models_defaults(kube: Kube, dry_namespace: str, path: Path) -> None:
    cr = yaml.safe_load(path.read_text())
    admitted = dry_run(kube, dry_namespace, cr)["spec"]
    assert parse_spec(admitted) == parse_spec(cr["spec"])
    assert admitted == model_dump(cr["spec"])  # every default the model fills, the apiserver filled too


@pytest.mark.parametrize("path", cases.INVALID, ids=lambda p: p.stem)
def test_invalid_fixture_is_refused_by_the_apiserver_with_its_expectation(
    kube: Kube, dry_namespace: str, path: Path
) -> None:
    case = cases.read_invalid(path)
    status, message = refusal(kube, dry_namespace, case.cr)
    assert status == case.status, message
    for expected in case.apiserver:
        assert expected in message


@settings(max_examples=150, deadline=None)
@given(spec=cases.specs())
def test_random_specs_are_admitted_and_refused_alike(kube: Kube, dry_namespace: str, spec: dict[str, Any]) -> None:
    cr = {"apiVersion": f"{API_GROUP}/{VERSION}", "kind": KIND, "metadata": {"name": "random"}, "spec": spec}
    expected = cases.problems(spec)
    if expected:
        status, message = refusal(kube, dry_namespace, cr)
        assert status == 422, message
        assert {m for m in CEL_MESSAGES if m in message} == set(expected), message
    else:
        assert dry_run(kube, dry_namespace, cr)["spec"] == model_dump(spec)


def sample_status() -> ConsumerGroupStatus:
    condition = Condition(type=ConditionType.READY, status="False", reason="MemberStalled",
                          message="orders-1 stalled", last_transition_time=WHEN, observed_generation=1)  # fmt: skip
    return ConsumerGroupStatus(
        observed_generation=1,
        cluster_id="q1Sh-9_ISia_zwGINzRvyQ",
        state="Stable",
        protocol="classic",
        generation=7,
        coordinator=1,
        member_count=3,
        stalled_count=1,
        members=(
            MemberStatus(member_id="m-0", client_id="c", host="/10.0.0.1", pod="orders-0", partitions=2),
            MemberStatus(member_id="m-1", pod="orders-1", partitions=1, stalled=True),
            MemberStatus(member_id="m-2"),
        ),
        stalled_members=(StalledMember(member_id="m-1", pod="orders-1", since=WHEN, action="leave-group"),),
        last_rebalance=WHEN,
        conditions=(condition, condition.model_copy(update={"type": ConditionType.STALLED, "status": "True"})),
        report={"lastRun": WHEN, "rebalances": [{"generation": 7, "cause": {"kind": "MemberStalled"}}]},
    )


def table_row(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    """The CR as `kubectl get -o wide` sees it: printer column name → cell."""
    resp = kube.custom.get_namespaced_custom_object(
        API_GROUP, VERSION, namespace, PLURAL, name, _headers={"Accept": TABLE}, _preload_content=False
    )
    table = json.loads(resp.data)
    assert table["kind"] == "Table"
    (row,) = table["rows"]
    return dict(zip([c["name"] for c in table["columnDefinitions"]], row["cells"], strict=True))


def test_status_subresource_keeps_the_model_prunes_the_rest_and_feeds_the_columns(
    kube: Kube, namespace: str, installed: None
) -> None:
    cr = yaml.safe_load((cases.EXAMPLES[0].parent / "dynamic-deployment.yaml").read_text())
    create(kube, namespace, cr)
    status = sample_status()
    written = status.model_dump(by_alias=True, exclude_none=True, mode="json")
    written["conditions"][0]["severity"] = "High"  # not in the schema: pruned
    retired = {"lag": 42, "lastSyncTime": WHEN}  # 0.2.0's readings, no longer in the schema: pruned
    kube.custom.patch_namespaced_custom_object_status(
        API_GROUP, VERSION, namespace, PLURAL, "orders", {"status": {**written, "phase": "Running", **retired}}
    )
    stored = kube.custom.get_namespaced_custom_object(API_GROUP, VERSION, namespace, PLURAL, "orders")["status"]
    assert "phase" not in stored
    assert not set(retired) & set(stored)
    assert "severity" not in stored["conditions"][0]
    assert stored["report"] == written["report"]  # preserved as written (x-kubernetes-preserve-unknown-fields)
    assert ConsumerGroupStatus.model_validate(stored) == status  # extra="forbid": nothing else survived

    cells = table_row(kube, namespace, "orders")
    assert {k: cells[k] for k in ("Name", "Group", "State", "Members", "Stalled", "Ready")} == {
        "Name": "orders", "Group": "orders", "State": "Stable", "Members": 3, "Stalled": 1, "Ready": "False"
    }  # fmt: skip
    assert (cells["Protocol"], cells["Generation"]) == ("classic", 7)
    assert cells["Age"]
    assert cells["LastRebalance"]


def test_a_timestamp_the_model_refuses_the_apiserver_refuses(kube: Kube, namespace: str, installed: None) -> None:
    cr = yaml.safe_load((cases.EXAMPLES[0].parent / "dynamic-deployment.yaml").read_text())
    create(kube, namespace, cr)
    bad = {"lastRebalance": "yesterday"}
    with pytest.raises(ValueError, match="lastRebalance"):
        ConsumerGroupStatus.model_validate(bad)
    with pytest.raises(ApiException) as refused:
        kube.custom.patch_namespaced_custom_object_status(
            API_GROUP, VERSION, namespace, PLURAL, "orders", {"status": bad}
        )
    assert refused.value.status == 422
    assert "status.lastRebalance" in json.loads(refused.value.body)["message"]


def test_a_newer_operators_condition_types_and_phases_are_stored_and_read_leniently(
    kube: Kube, namespace: str, installed: None
) -> None:
    """No enum on the status fields a newer operator may extend: the apiserver keeps them, this model reads the
    conditions it knows and an unknown rollout phase as Paused."""
    cr = yaml.safe_load((cases.EXAMPLES[0].parent / "dynamic-deployment.yaml").read_text())
    create(kube, namespace, cr)
    newer = {
        "conditions": [
            {"type": "Ready", "status": "True", "reason": "Stable", "lastTransitionTime": WHEN},
            {"type": "SidecarVersionSkew", "status": "True", "reason": "Skewed", "lastTransitionTime": WHEN},
        ],
        "rollout": {"targetRevision": "r2", "phase": "Verifying", "total": 2, "done": 1},
    }
    kube.custom.patch_namespaced_custom_object_status(
        API_GROUP, VERSION, namespace, PLURAL, "orders", {"status": newer}
    )
    stored = kube.custom.get_namespaced_custom_object(API_GROUP, VERSION, namespace, PLURAL, "orders")["status"]
    assert [c["type"] for c in stored["conditions"]] == ["Ready", "SidecarVersionSkew"]
    assert stored["rollout"]["phase"] == "Verifying"
    status = ConsumerGroupStatus.model_validate(stored)
    assert [c.type for c in status.conditions] == [ConditionType.READY]
    assert status.rollout is not None
    assert (status.rollout.phase, status.rollout.done) == (RolloutPhase.PAUSED, 1)


def test_the_group_id_is_immutable_and_the_rest_of_the_spec_is_not(kube: Kube, namespace: str, installed: None) -> None:
    cr = yaml.safe_load((cases.EXAMPLES[0].parent / "dynamic-deployment.yaml").read_text())
    created = create(kube, namespace, cr)
    name = created["metadata"]["name"]
    other = {"spec": {"groupId": created["spec"]["groupId"] + "-2"}}
    with pytest.raises(ApiException) as refused:
        kube.custom.patch_namespaced_custom_object(API_GROUP, VERSION, namespace, PLURAL, name, other)
    assert refused.value.status == 422
    assert "spec.groupId is immutable" in json.loads(refused.value.body)["message"]
    stall = created["spec"]["liveness"]["stallTimeoutSeconds"] + 1
    changed = kube.custom.patch_namespaced_custom_object(
        API_GROUP, VERSION, namespace, PLURAL, name, {"spec": {"liveness": {"stallTimeoutSeconds": stall}}}
    )
    assert (changed["spec"]["groupId"], changed["spec"]["liveness"]["stallTimeoutSeconds"]) == (
        created["spec"]["groupId"], stall)  # fmt: skip


def test_an_unknown_spec_field_is_pruned_without_strict_validation(kube: Kube, dry_namespace: str) -> None:
    """The spec schema is structural too: without fieldValidation=Strict a misspelt field is dropped, silently
    as far as the stored object goes (the apiserver only warns) — which is why the models forbid extras."""
    cr = cases.read_invalid(next(p for p in cases.INVALID if p.stem == "unknown-field")).cr
    admitted = create(kube, dry_namespace, cr, dry_run="All")["spec"]
    assert "stallTimeout" not in admitted["liveness"]
    assert admitted == model_dump({**cr["spec"], "liveness": {}})
