"""Pods that slipped through without the sidecar are found: a pod labelled for injection that runs none (admitted
while the webhook was down or failed open, or not injected by it) is named by the SidecarMissing condition, warned
of by an Event when it appears, and counted on /metrics."""

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vigil_core import rules
from vigil_core.kafka.model import GroupState, GroupType, GroupView
from vigil_operator.domain import readings
from vigil_operator.domain.conditions import find
from vigil_operator.domain.injection import INJECT_LABEL, INJECTED_ANNOTATION, SIDECAR_NAME
from vigil_operator.domain.pods import pod_facts
from vigil_operator.domain.reconcile import (
    MISSING_NAMED,
    GroupFacts,
    Observation,
    PodFacts,
    Unreachable,
    reconcile,
    without_sidecar,
)
from vigil_operator.domain.spec import parse_spec
from vigil_operator.domain.status import ConditionType, ConsumerGroupStatus

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
SPEC = parse_spec({
    "groupId": "orders", "kafka": {"bootstrapServers": "kafka:9092"},
    "workload": {"kind": "StatefulSet", "name": "orders"},
})  # fmt: skip
STABLE = GroupFacts("cluster", GroupView("orders", GroupState.STABLE, GroupType.CLASSIC, "range", 1, ()), {}, {},
                    rules.BrokerLimits())  # fmt: skip


def pod(name: str, *, label: str | None = "true", containers: tuple[str, ...] = ("app",),
        init: tuple[str, ...] = (), stamped: bool = False) -> dict[str, Any]:  # fmt: skip
    meta: dict[str, Any] = {"name": name, "namespace": "shop", "uid": f"uid-{name}",
                            "annotations": {"vigil.dev/consumer-group": "orders"}}  # fmt: skip
    if label is not None:
        meta["labels"] = {INJECT_LABEL: label}
    if stamped:
        meta["annotations"][INJECTED_ANNOTATION] = "true"
    spec = {"containers": [{"name": c} for c in containers], "initContainers": [{"name": c} for c in init]}
    return {"metadata": meta, "spec": spec}


@pytest.mark.parametrize(
    ("body", "missing"),
    [
        (pod("a"), True),  # labelled, no sidecar
        (pod("a", containers=("app", SIDECAR_NAME)), False),  # injected as a container
        (pod("a", init=(SIDECAR_NAME,)), False),  # injected as a native sidecar
        (pod("a", label=None), False),  # not opted in: nothing was to be injected
        (pod("a", label="false"), False),
        (pod("a", label="True"), False),  # the webhook's selector matches "true" only
        (pod("a", stamped=True), True),  # the stamp without the container is no sidecar
    ],
)
def test_pod_facts_say_whether_a_labelled_pod_lacks_the_sidecar(body: dict[str, Any], missing: bool) -> None:
    assert pod_facts(body).sidecar_missing is missing


EMPTY = ConsumerGroupStatus()


def sync(pods: list[PodFacts], previous: ConsumerGroupStatus = EMPTY,
         broker: GroupFacts | Unreachable = STABLE) -> tuple[ConsumerGroupStatus, list[Any]]:  # fmt: skip
    return reconcile(previous, Observation(1, SPEC, broker, pods), NOW)


def test_a_pod_without_the_sidecar_is_a_condition_naming_it_and_a_warning_event() -> None:
    status, notices = sync([PodFacts("orders-0"), PodFacts("orders-1", sidecar_missing=True)])
    found = find(status.conditions, ConditionType.SIDECAR_MISSING)
    assert found is not None
    assert (found.status, found.reason) == ("True", "PodsWithoutSidecar")
    assert "1 pod(s)" in found.message
    assert "orders-1" in found.message
    assert "orders-0" not in found.message
    assert [(n.type, n.reason) for n in notices if n.reason.startswith("SidecarMissing")] == [
        ("Warning", "SidecarMissingTrue")
    ]


def test_once_every_pod_has_the_sidecar_the_condition_clears_with_a_normal_event() -> None:
    before, _ = sync([PodFacts("orders-1", sidecar_missing=True)])
    after, notices = sync([PodFacts("orders-1")], before)
    found = find(after.conditions, ConditionType.SIDECAR_MISSING)
    assert found is not None
    assert (found.status, found.reason) == ("False", "AllInjected")
    assert [(n.type, n.reason) for n in notices if n.reason.startswith("SidecarMissing")] == [
        ("Normal", "SidecarMissingFalse")
    ]


def test_no_event_while_nothing_changes_and_none_on_a_first_sync_that_finds_all_injected() -> None:
    first, notices = sync([PodFacts("orders-0")])
    assert not [n for n in notices if n.reason.startswith("SidecarMissing")]
    missing, _ = sync([PodFacts("orders-0", sidecar_missing=True)], first)
    _, again = sync([PodFacts("orders-0", sidecar_missing=True)], missing)
    assert not [n for n in again if n.reason.startswith("SidecarMissing")]


def test_a_pod_being_deleted_no_longer_counts() -> None:
    status, _ = sync([PodFacts("orders-0", sidecar_missing=True, deleting=True)])
    found = find(status.conditions, ConditionType.SIDECAR_MISSING)
    assert found is not None
    assert found.status == "False"


def test_it_is_reported_even_when_the_broker_cannot_be_asked() -> None:
    status, _ = sync([PodFacts("orders-0", sidecar_missing=True)], broker=Unreachable("BrokerUnreachable", "down"))
    found = find(status.conditions, ConditionType.SIDECAR_MISSING)
    assert found is not None
    assert found.status == "True"


def test_a_long_list_names_the_first_pods_and_counts_the_rest() -> None:
    pods = [PodFacts(f"orders-{i:02d}", sidecar_missing=True) for i in range(MISSING_NAMED + 3)]
    status, _ = sync(pods)
    found = find(status.conditions, ConditionType.SIDECAR_MISSING)
    assert found is not None
    assert f"{MISSING_NAMED + 3} pod(s)" in found.message
    assert "and 3 more" in found.message
    assert f"orders-{MISSING_NAMED - 1:02d}" in found.message
    assert f"orders-{MISSING_NAMED:02d}" not in found.message


@given(st.lists(st.tuples(st.booleans(), st.booleans()), max_size=12))
def test_the_count_is_the_labelled_pods_without_sidecar_not_being_deleted(flags: list[tuple[bool, bool]]) -> None:
    pods = [PodFacts(f"p{i}", sidecar_missing=m, deleting=d) for i, (m, d) in enumerate(flags)]
    expected = sum(1 for m, d in flags if m and not d)
    assert len(without_sidecar(pods)) == expected
    now, _ = readings.next_readings(None, state=GroupState.STABLE, members=0, lag=None, generation=None,
                                    now=NOW.timestamp(), without_sidecar=expected)  # fmt: skip
    assert now.without_sidecar == expected
    later = NOW + timedelta(seconds=1)
    assert readings.next_readings(now, state=GroupState.STABLE, members=0, lag=None, generation=None,
                                  now=later.timestamp())[0].without_sidecar == 0  # fmt: skip
