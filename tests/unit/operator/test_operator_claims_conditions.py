"""Small pure pieces of the operator: who owns a Kafka group (claims), condition transitions and timestamps
(conditions), and what a pod says about its identity (pods)."""

import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vigil_operator.domain.claims import Claim, owner
from vigil_operator.domain.conditions import rfc3339 as to_rfc3339
from vigil_operator.domain.conditions import with_condition
from vigil_operator.domain.injection import SIDECAR_NAME
from vigil_operator.domain.pods import pod_facts
from vigil_operator.domain.reconcile import PodFacts
from vigil_operator.domain.status import CONDITION_ORDER, MESSAGE_LIMIT, Condition, ConditionType

T0 = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
CLUSTER, OTHER_CLUSTER = "q1X3dYtLRkO0h1nO6tQ2Ag", "Zz9Y8xW7vU6tS5rQ4pO3nA"


# --- claims -------------------------------------------------------------------------------------------------------


def claim(created: str, namespace: str, name: str, cluster: str = CLUSTER, group: str = "orders") -> Claim:
    return Claim(created, namespace, name, cluster, group)


OLD = claim("2025-01-01T00:00:00Z", "zeta", "zz")
NEW = claim("2025-06-01T00:00:00Z", "alpha", "aa")

# (case, claims, expected owner)
CLAIM_CASES = [
    ("nobody", [], None),
    ("one", [NEW], NEW),
    ("the oldest wins whatever its name", [NEW, OLD], OLD),
    (
        "same second: namespace decides",
        [claim("2025-06-01T00:00:00Z", "shop", "a"), claim("2025-06-01T00:00:00Z", "billing", "z")],
        claim("2025-06-01T00:00:00Z", "billing", "z"),
    ),
    (
        "same second and namespace: name decides",
        [claim("2025-06-01T00:00:00Z", "shop", "orders-b"), claim("2025-06-01T00:00:00Z", "shop", "orders-a")],
        claim("2025-06-01T00:00:00Z", "shop", "orders-a"),
    ),
    (
        "an older claim on another cluster is ignored",
        [NEW, claim("2020-01-01T00:00:00Z", "a", "a", OTHER_CLUSTER)],
        NEW,
    ),
    (
        "an older claim on another group is ignored",
        [NEW, claim("2020-01-01T00:00:00Z", "a", "a", group="billing")],
        NEW,
    ),
    ("only other clusters and groups", [claim("2020-01-01T00:00:00Z", "a", "a", OTHER_CLUSTER, "billing")], None),
]


@pytest.mark.parametrize(("claims", "expected"), [c[1:] for c in CLAIM_CASES], ids=[c[0] for c in CLAIM_CASES])
def test_owner(claims: list[Claim], expected: Claim | None) -> None:
    assert owner(claims, CLUSTER, "orders") == expected
    assert owner(reversed(claims), CLUSTER, "orders") == expected
    assert owner(iter(claims), CLUSTER, "orders") == expected  # any iterable, read once


def test_owner_ref_names_namespace_and_name() -> None:
    assert claim("2025-06-01T00:00:00Z", "shop", "orders-first").ref == "shop/orders-first"


claims_strategy = st.lists(
    st.builds(
        Claim,
        st.sampled_from(["2025-06-01T00:00:00Z", "2025-06-01T00:00:01Z", "2025-06-02T00:00:00Z"]),
        st.sampled_from(["alpha", "shop"]),
        st.sampled_from(["a", "b", "c"]),
        st.sampled_from([CLUSTER, OTHER_CLUSTER]),
        st.sampled_from(["orders", "billing"]),
    ),
    max_size=8,
)


@settings(max_examples=200, deadline=None)
@given(claims=claims_strategy, order=st.randoms(use_true_random=False))
def test_owner_is_the_oldest_then_first_by_namespace_and_name_in_any_order(claims: list[Claim], order: Any) -> None:
    shuffled = list(claims)
    order.shuffle(shuffled)
    mine = [c for c in claims if (c.cluster_id, c.group_id) == (CLUSTER, "orders")]
    if not mine:
        assert owner(shuffled, CLUSTER, "orders") is None
        return
    best = min((c.created, c.namespace, c.name) for c in mine)
    found = owner(shuffled, CLUSTER, "orders")
    assert found is not None
    assert (found.created, found.namespace, found.name, found.cluster_id, found.group_id) == (*best, CLUSTER, "orders")


# --- conditions ---------------------------------------------------------------------------------------------------


def put(
    conditions: tuple[Condition, ...],
    kind: ConditionType,
    status: Any,
    reason: str,
    at: datetime,
    *,
    generation: int = 1,
) -> tuple[Condition, ...]:
    return with_condition(conditions, kind, status, reason, f"{reason} message", generation=generation, now=at)


def get(conditions: tuple[Condition, ...], kind: ConditionType) -> Condition:
    (found,) = [c for c in conditions if c.type is kind]
    return found


def test_a_new_condition_transitions_now() -> None:
    cs = put((), ConditionType.READY, "True", "Stable", T0, generation=7)
    assert cs == (
        Condition(
            type=ConditionType.READY,
            status="True",
            reason="Stable",
            message="Stable message",
            last_transition_time="2025-06-01T12:00:00Z",
            observed_generation=7,
        ),
    )


def test_same_status_keeps_the_transition_time_but_takes_reason_message_generation() -> None:
    cs = put((), ConditionType.REBALANCING, "False", "Stable", T0, generation=1)
    cs = put(cs, ConditionType.REBALANCING, "False", "Empty", T0 + timedelta(minutes=5), generation=2)

    c = get(cs, ConditionType.REBALANCING)
    assert (c.status, c.reason, c.message, c.observed_generation) == ("False", "Empty", "Empty message", 2)
    assert c.last_transition_time == "2025-06-01T12:00:00Z"


@pytest.mark.parametrize(("before", "after"), [("True", "False"), ("False", "Unknown"), ("Unknown", "True")])
def test_a_status_change_moves_the_transition_time(before: str, after: str) -> None:
    cs = put((), ConditionType.STALLED, before, "Before", T0)
    cs = put(cs, ConditionType.STALLED, after, "After", T0 + timedelta(seconds=90))

    assert get(cs, ConditionType.STALLED).last_transition_time == "2025-06-01T12:01:30Z"
    assert len(cs) == 1


def test_other_conditions_are_left_alone() -> None:
    cs = put((), ConditionType.READY, "True", "Stable", T0)
    cs = put(cs, ConditionType.STALLED, "False", "NoStall", T0)
    ready = get(cs, ConditionType.READY)

    cs = put(cs, ConditionType.STALLED, "True", "MembersStalled", T0 + timedelta(minutes=1), generation=9)

    assert get(cs, ConditionType.READY) == ready


def test_order_follows_condition_order_whatever_the_input_order() -> None:
    order = list(ConditionType)
    cs: tuple[Condition, ...] = ()
    for kind in reversed(order):
        cs = put(cs, kind, "False", "Why", T0)
        assert [c.type for c in cs] == [k for k in CONDITION_ORDER if k in {c.type for c in cs}]
    assert [c.type for c in cs] == list(CONDITION_ORDER)
    # an unordered input is written back ordered
    shuffled = (cs[3], cs[0], cs[5], cs[4], cs[2], cs[1])
    again = put(shuffled, ConditionType.READY, "False", "Why", T0 + timedelta(seconds=1))
    assert [c.type for c in again] == list(CONDITION_ORDER)


transitions = st.lists(
    st.tuples(
        st.sampled_from(list(ConditionType)),
        st.sampled_from(["True", "False", "Unknown"]),
        st.sampled_from(["A", "B"]),
        st.integers(0, 10),  # seconds after the previous step
    ),
    max_size=30,
)


@settings(max_examples=200, deadline=None)
@given(transitions)
def test_transition_time_is_when_the_status_last_changed(steps: list[tuple[ConditionType, str, str, int]]) -> None:
    cs: tuple[Condition, ...] = ()
    now = T0
    changed_at: dict[ConditionType, tuple[str, datetime]] = {}
    for generation, (kind, status, reason, wait) in enumerate(steps):
        now += timedelta(seconds=wait)
        if kind not in changed_at or changed_at[kind][0] != status:
            changed_at[kind] = (status, now)
        cs = put(cs, kind, status, reason, now, generation=generation)
        c = get(cs, kind)
        assert (c.status, c.reason, c.observed_generation) == (status, reason, generation)

    assert [c.type for c in cs] == [k for k in CONDITION_ORDER if k in changed_at]
    for c in cs:
        assert c.last_transition_time == changed_at[c.type][1].strftime("%Y-%m-%dT%H:%M:%SZ")


# --- rfc3339 ------------------------------------------------------------------------------------------------------

RFC3339_SECONDS = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

RFC3339_CASES = [
    ("utc", datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC), "2025-06-01T12:00:00Z"),
    (
        "microseconds are dropped, not rounded",
        datetime(2025, 6, 1, 12, 0, 0, 999_999, tzinfo=UTC),
        "2025-06-01T12:00:00Z",
    ),
    ("east of utc", datetime(2025, 6, 1, 14, 0, 5, tzinfo=timezone(timedelta(hours=2))), "2025-06-01T12:00:05Z"),
    (
        "west of utc across midnight",
        datetime(2025, 6, 1, 20, 30, 0, tzinfo=timezone(timedelta(hours=-5, minutes=-30))),
        "2025-06-02T02:00:00Z",
    ),
    ("a year before 1000 keeps four digits", datetime(999, 1, 2, 3, 4, 5, tzinfo=UTC), "0999-01-02T03:04:05Z"),
]


@pytest.mark.parametrize(("moment", "text"), [c[1:] for c in RFC3339_CASES], ids=[c[0] for c in RFC3339_CASES])
def test_rfc3339(moment: datetime, text: str) -> None:
    assert to_rfc3339(moment) == text


@settings(max_examples=200, deadline=None)
@given(
    st.datetimes(
        min_value=datetime(1970, 1, 2),
        max_value=datetime(2200, 1, 1),
        timezones=st.one_of(
            st.timezones(), st.builds(timezone, st.integers(-23 * 60, 23 * 60).map(lambda m: timedelta(minutes=m)))
        ),
    )
)
def test_rfc3339_is_utc_seconds_z_in_any_timezone(moment: datetime) -> None:
    text = to_rfc3339(moment)

    assert RFC3339_SECONDS.fullmatch(text), text
    whole_seconds = (moment - EPOCH) // timedelta(seconds=1)  # floor, exact integer arithmetic
    assert datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC) == EPOCH + timedelta(seconds=whole_seconds)


# --- pods ---------------------------------------------------------------------------------------------------------

DOWNWARD = [
    {"name": "VIGIL_POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
    {"name": "VIGIL_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
]


def pod(
    env: list[dict[str, Any]] | None,
    *,
    where: str = "containers",
    container: str = SIDECAR_NAME,
    app_env: list[dict[str, Any]] | None = None,
    meta: dict[str, Any] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "app", "image": "app:1", "env": app_env or []}]}
    if env is not None:
        spec.setdefault(where, []).append({"name": container, "image": "vigil:1", "env": env})
    metadata = {"name": "orders-0", "namespace": "shop"} if meta is None else meta
    return {"metadata": metadata, "spec": spec}


def instance(value: str) -> dict[str, Any]:
    return {"name": "VIGIL_INSTANCE_ID", "value": value}


# (case, pod, expected)
POD_CASES = [
    (
        "namespace-pod expanded from the pod's metadata",
        pod([*DOWNWARD, instance("$(VIGIL_NAMESPACE)-$(VIGIL_POD_NAME)")]),
        PodFacts("orders-0", "shop-orders-0"),
    ),
    (
        "expanded from this pod's own metadata, not a constant",
        pod([*DOWNWARD, instance("$(VIGIL_NAMESPACE)-$(VIGIL_POD_NAME)")], meta={"name": "web-3", "namespace": "ns"}),
        PodFacts("web-3", "ns-web-3"),
    ),
    ("literal value kept", pod([*DOWNWARD, instance("orders-static-7")]), PodFacts("orders-0", "orders-static-7")),
    (
        "valueFrom: unknown",
        pod([*DOWNWARD, {"name": "VIGIL_INSTANCE_ID", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]),
        PodFacts("orders-0", None),
    ),
    (
        "a variable the pod cannot resolve: unknown",
        pod([instance("$(APP_SHARD)-$(VIGIL_POD_NAME)")]),
        PodFacts("orders-0"),
    ),
    ("no VIGIL_INSTANCE_ID: unknown", pod(DOWNWARD), PodFacts("orders-0")),
    (
        "no sidecar: unknown, even if the app has the variable",
        pod(None, app_env=[instance("orders-static-7")]),
        PodFacts("orders-0"),
    ),
    (
        "another container's variable does not count",
        pod([instance("x")], container="istio-proxy"),
        PodFacts("orders-0"),
    ),
    (
        "native sidecar (initContainer)",
        pod([*DOWNWARD, instance("$(VIGIL_NAMESPACE)-$(VIGIL_POD_NAME)")], where="initContainers"),
        PodFacts("orders-0", "shop-orders-0"),
    ),
    ("no metadata: no name", pod(None, meta={}), PodFacts("")),
]


@pytest.mark.parametrize(("body", "expected"), [c[1:] for c in POD_CASES], ids=[c[0] for c in POD_CASES])
def test_pod_facts(body: dict[str, Any], expected: PodFacts) -> None:
    assert pod_facts(body) == expected


@pytest.mark.parametrize("length", [0, 1, MESSAGE_LIMIT, MESSAGE_LIMIT + 1, 40_000])
def test_a_message_past_the_apiservers_bound_is_cut_never_refused(length: int) -> None:
    # a refusal quoting a user's overlong value (an image, a broker list) must still be written as a condition
    (found,) = with_condition((), ConditionType.CONFIG_VALID, "False", "NotAllowed", "x" * length, generation=1, now=T0)
    assert len(found.message) == min(length, MESSAGE_LIMIT)
    assert found.message.endswith("…") == (length > MESSAGE_LIMIT)
