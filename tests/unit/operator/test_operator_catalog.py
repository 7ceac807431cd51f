"""The operator's catalog of ConsumerGroups (vigil_operator.catalog): kopf's events keep it, the startup list gives
claims only until kopf shows the group, and the claims by Kafka group id always match what is kept."""

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from vigil_operator.catalog import Catalog


def body(name: str, group: str, *, namespace: str = "ns", created: str = "2026-11-26T00:00:00Z") -> dict[str, Any]:
    return {
        "metadata": {"namespace": namespace, "name": name, "creationTimestamp": created},
        "spec": {"groupId": group, "kafka": {"bootstrapServers": "k:9092"}},
        "status": {"clusterId": "c1"},
    }


def test_listed_groups_claim_at_once_but_are_resynced_only_once_kopf_shows_them() -> None:
    catalog = Catalog()
    catalog.fill([body("old", "orders", created="2026-01-01T00:00:00Z"), body("new", "orders")])
    assert dict(catalog.records()) == {}
    assert sorted(c.name for c in catalog.claims("orders")) == ["new", "old"]
    assert catalog.lookup(("ns", "old")) is not None  # the webhook knows it from the start
    assert catalog.get(("ns", "old")) is None
    assert not catalog.settled  # the loops wait: their first round must see every group
    catalog.put(body("new", "orders"))
    assert list(catalog.records()) == [("ns", "new")]
    assert sorted(c.name for c in catalog.claims("orders")) == ["new", "old"]  # the older claim still counts


def test_settle_forgets_what_kopf_never_showed_and_keeps_what_it_did() -> None:
    catalog = Catalog()
    catalog.fill([body("gone", "a"), body("kept", "b")])
    catalog.put(body("kept", "b"))
    assert not catalog.settled
    assert catalog.settle() == 1
    assert catalog.settled
    assert catalog.claims("a") == []
    assert catalog.lookup(("ns", "gone")) is None
    assert [c.name for c in catalog.claims("b")] == ["kept"]


def test_a_spec_naming_another_group_moves_its_claim() -> None:
    catalog = Catalog()
    catalog.put(body("cg", "a"))
    catalog.put(body("cg", "b"))
    assert catalog.claims("a") == []
    assert [c.group_id for c in catalog.claims("b")] == ["b"]


def test_a_list_older_than_kopfs_event_does_not_override_it() -> None:
    catalog = Catalog()
    catalog.put(body("cg", "new-group"))
    catalog.fill([body("cg", "old-group")])
    assert catalog.claims("old-group") == []
    record = catalog.get(("ns", "cg"))
    assert record is not None
    assert record.spec["groupId"] == "new-group"


def test_the_catalog_keeps_a_copy_of_kopfs_body() -> None:
    catalog = Catalog()
    seen = body("cg", "a")
    catalog.put(seen)
    seen["spec"]["groupId"] = "changed"
    record = catalog.get(("ns", "cg"))
    assert record is not None
    assert record.body["spec"]["groupId"] == "a"


names = st.sampled_from(["a", "b", "c"])
groups = st.sampled_from(["g1", "g2"])
operations = st.lists(
    st.one_of(
        st.tuples(st.just("put"), names, groups),
        st.tuples(st.just("fill"), names, groups),
        st.tuples(st.just("drop"), names, groups),
        st.tuples(st.just("settle"), names, groups),
    ),
    max_size=30,
)


@given(operations)
def test_the_claims_are_exactly_those_of_the_groups_kept(ops: list[tuple[str, str, str]]) -> None:
    catalog = Catalog()
    for op, name, group in ops:
        if op == "put":
            catalog.put(body(name, group))
        elif op == "fill":
            catalog.fill([body(name, group)])
        elif op == "drop":
            catalog.drop(("ns", name))
        else:
            catalog.settle()
    kept = {n: r for n in "abc" if (r := catalog.lookup(("ns", n))) is not None}
    for group in ("g1", "g2"):
        claimed = sorted(c.name for c in catalog.claims(group))
        assert claimed == sorted(n for n, r in kept.items() if r.claim.group_id == group)
    assert set(catalog.records()) <= {("ns", n) for n in kept}
