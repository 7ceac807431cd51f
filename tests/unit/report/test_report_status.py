"""The report's `status.report` writer, pure parts: the matching rule, the applied object, the one-line errors."""

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vigil_operator.domain.status import ConsumerGroupStatus
from vigil_spark.outputs import status
from vigil_spark.outputs.summary import GroupSummary

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
CLUSTER = status.KafkaCluster("prod", "ID-A", status.addresses("Kafka-0:9092,kafka-1:9092"))


def cr(group: str = "orders", *, cid: str | None = None, cname: str | None = None, boot: str = "x:1",
       name: str = "cg", ns: str = "ns") -> status.Target:  # fmt: skip
    return status.Target(ns, name, group, cid, cname, status.addresses(boot))


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        (cr(cid="ID-A"), True),  # the id decides ...
        (cr(cid="ID-B", cname="prod", boot="kafka-0:9092"), False),  # ... whatever the name and addresses say
        (cr(cid="ID-A", cname="other"), True),
        (cr(cname="prod"), True),  # no id yet: the name
        (cr(cname="other", boot="kafka-0:9092"), False),  # a name that differs is not overridden by an address
        (cr(boot="KAFKA-1:9092"), True),  # no id, no name: a shared address (hosts without case)
        (cr(boot="kafka-1:9093"), False),
        (cr(), False),
    ],
)
def test_the_matching_rule(target: status.Target, expected: bool) -> None:
    assert status.same_cluster(target, CLUSTER) is expected


def test_without_an_id_from_the_brokers_the_name_decides() -> None:
    anonymous = status.KafkaCluster("prod", None, frozenset())
    assert status.same_cluster(cr(cid="ID-B", cname="prod"), anonymous)
    assert not status.same_cluster(cr(cid="ID-B"), anonymous)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a:1,B:2", {"a:1", "b:2"}),
        (" a:1 , a:1 ", {"a:1"}),
        ("[::1]:9092", {"[::1]:9092"}),
        ("localhost", set()),
        ("", set()),
    ],
)
def test_addresses(text: str, expected: set[str]) -> None:
    assert status.addresses(text) == expected


def test_target_of_reads_the_fields_the_rule_uses() -> None:
    obj = {"metadata": {"name": "cg", "namespace": "ns"},
           "spec": {"groupId": "orders", "kafka": {"bootstrapServers": "K:1", "clusterName": "prod"}},
           "status": {"clusterId": "ID-A"}}  # fmt: skip
    assert status.target_of(obj) == status.Target("ns", "cg", "orders", "ID-A", "prod", frozenset({"k:1"}))
    assert status.target_of({"metadata": {"name": "cg", "namespace": "ns"}, "spec": {}}) is None
    bare = status.target_of({"metadata": {"name": "cg", "namespace": "ns"}, "spec": {"groupId": "g"}})
    assert bare == status.Target("ns", "cg", "g")


def summary(group: str, cluster: str = "prod", *, p95: float | None = 2.5, cause: str | None = "left") -> GroupSummary:
    return GroupSummary(cluster, group, 3, 7, p95, cause, NOW if cause else None, 0)


def test_the_applied_object_is_identity_and_status_report_only() -> None:
    body = status.apply_body(cr(name="orders-cg", ns="team"), status.report_of(summary("orders"), NOW))
    assert body == {
        "apiVersion": "vigil.dev/v1alpha1",
        "kind": "ConsumerGroup",
        "metadata": {"name": "orders-cg", "namespace": "team"},
        "status": {"report": {"cluster": "prod", "rebalances24h": 3, "p95DurationSeconds": 2.5, "topCause": "left",
                              "lastRebalance": "2026-11-21T12:00:00Z", "reportTime": "2026-11-21T12:00:00Z"}},
    }  # fmt: skip
    # what the operator reads back: its own model parses a status carrying the report
    assert ConsumerGroupStatus.model_validate(body["status"]).report == body["status"]["report"]


def test_empty_keys_are_left_out_so_apply_removes_them() -> None:
    report = status.report_of(summary("orders", p95=None, cause=None), NOW)
    assert report == {"cluster": "prod", "rebalances24h": 3, "reportTime": "2026-11-21T12:00:00Z"}


def test_plan_applies_to_every_match_and_names_the_rest() -> None:
    targets = [cr("orders", cid="ID-A", name="a"), cr("orders", cname="prod", name="b", ns="other"),
               cr("orders", cid="ID-B", name="c"), cr("billing", cid="ID-A", name="d")]  # fmt: skip
    summaries = [summary("orders"), summary("payments"), summary("billing", cluster="staging")]
    done = status.plan(summaries, targets, CLUSTER, NOW)
    assert [t.ref for t, _ in done.updates] == ["ns/a", "other/b"]
    assert all(body["status"]["report"]["rebalances24h"] == 3 for _, body in done.updates)
    assert done.summarized == 2  # billing is another cluster's summary (another --cluster in the same --out)
    assert done.without_cr == ("payments",)
    assert done.other_cluster == ("ns/c",)


@given(
    st.lists(st.sampled_from(["g1", "g2", "g3"]), max_size=6),
    st.lists(
        st.tuples(st.sampled_from(["g1", "g2", "g4"]), st.sampled_from([None, "ID-A", "ID-B"]),
                  st.sampled_from([None, "prod", "dev"]), st.sampled_from(["", "kafka-0:9092", "y:1"])),
        max_size=8,
    ),
)  # fmt: skip
def test_plan_properties(groups: list[str], crs: list[tuple[str, str | None, str | None, str]]) -> None:
    targets = [cr(g, cid=i, cname=n, boot=b, name=f"cg{k}") for k, (g, i, n, b) in enumerate(crs)]
    summaries = [summary(g) for g in dict.fromkeys(groups)]
    done = status.plan(summaries, targets, CLUSTER, NOW)
    applied = [t for t, _ in done.updates]
    # exactly the CRs with a summarized group id on the same cluster, each once, with its own group's report
    assert sorted(applied, key=lambda t: t.ref) == sorted(
        (t for t in targets if t.group_id in groups and status.same_cluster(t, CLUSTER)), key=lambda t: t.ref
    )
    for t, body in done.updates:
        assert body["metadata"] == {"name": t.name, "namespace": t.namespace}
        assert set(body["status"]) == {"report"}
    assert set(done.without_cr) == {g for g in groups if g not in {t.group_id for t in applied}}
    assert len(done.other_cluster) + len(applied) == sum(1 for t in targets if t.group_id in groups)


@pytest.mark.parametrize(
    ("code", "what", "needs", "expected"),
    [
        (403, "list consumergroups.vigil.dev in all namespaces", status.NEEDS_LIST,
         "kubernetes: list consumergroups.vigil.dev in all namespaces: forbidden (no); the report job needs"
         " `list` on consumergroups (apiGroup vigil.dev)"),
        (403, "apply status.report of ConsumerGroup ns/cg", status.NEEDS_PATCH,
         "kubernetes: apply status.report of ConsumerGroup ns/cg: forbidden (no); the report job needs"
         " `patch` on consumergroups/status (apiGroup vigil.dev)"),
        (401, "list x", status.NEEDS_LIST, "kubernetes: list x: unauthorized (no); check the kubeconfig's credentials"),
        (404, "list x", status.NEEDS_LIST,
         "kubernetes: list x: not found (no); is the consumergroups.vigil.dev CRD installed?"),
        (422, "apply y", status.NEEDS_PATCH, "kubernetes: apply y: 422 no"),
    ],
)  # fmt: skip
def test_refusals_are_one_line_naming_the_permission(code: int, what: str, needs: str, expected: str) -> None:
    assert status.refusal(code, "Forbidden", "no", what=what, needs=needs) == expected


def test_api_message_and_unreachable() -> None:
    assert status.api_message(b'{"kind":"Status","message":"nope\\nmore"}') == "nope"
    assert status.api_message("plain text\nmore") == "plain text"
    assert status.api_message(None) == ""
    exc = OSError("<urllib3.connection.HTTPSConnection object at 0x1>: Failed to establish a new connection: "
                  "[Errno 111] Connection refused")  # fmt: skip
    assert status.unreachable("https://127.0.0.1:1", exc) == (
        "kubernetes: cannot reach the apiserver at https://127.0.0.1:1: [Errno 111] Connection refused"
    )


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ("", "kubernetes: patch consumergroups/status in namespace ns: not allowed (no rule grants it); the report"
             " job needs `patch` on consumergroups/status (apiGroup vigil.dev)"),
        ("webhook said no", "kubernetes: patch consumergroups/status in namespace ns: not allowed (webhook said no);"
                            " the report job needs `patch` on consumergroups/status (apiGroup vigil.dev)"),
    ],
)  # fmt: skip
def test_a_denied_review_is_one_line_naming_the_permission(reason: str, expected: str) -> None:
    assert status.denied("ns", reason) == expected
