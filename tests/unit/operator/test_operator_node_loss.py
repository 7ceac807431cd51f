"""Members on a lost node (domain.node_loss): removed only with no-progress evidence, never a live consumer's."""

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vigil_core.kafka.model import MemberView, TopicPartitionRef
from vigil_operator.domain import node_loss as nl
from vigil_operator.domain.pods import pod_facts

T0 = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
GRACE = timedelta(seconds=30)
P0, P1 = TopicPartitionRef("orders", 0), TopicPartitionRef("orders", 1)


def member(member_id: str = "m-1", *parts: TopicPartitionRef, instance: str | None = None) -> MemberView:
    return MemberView(member_id, instance, "client", "/10.0.0.1", parts or (P0, P1))


PODS = {"m-1": "orders-1"}
LOST = {"orders-1": nl.LostNode("node-1", T0)}


def run(
    steps: list[tuple[float, dict[TopicPartitionRef, int]]], *, end: dict[TopicPartitionRef, int] | None = None,
    lost: dict[str, nl.LostNode] | None = None, m: MemberView | None = None,
) -> list[list[str]]:  # fmt: skip
    """Resyncs at T0 + seconds with these committed offsets; the reasons removed at each."""
    suspects: dict[str, nl.Suspect] = {}
    removed = []
    for seconds, committed in steps:
        found, suspects = nl.judge([m or member()], PODS, LOST if lost is None else lost, suspects,
                                   committed=committed, end_offsets=end or {P0: 100, P1: 100}, grace=GRACE,
                                   now=T0 + timedelta(seconds=seconds))  # fmt: skip
        removed.append([d.reason for d in found])
    return removed


STUCK = {P0: 10, P1: 20}

TABLE = [
    # case, resyncs (seconds after the node went not Ready, committed offsets), end offsets, removed at resync
    ("no commit moves for the grace, records waiting: removed", [(0, STUCK), (15, STUCK), (30, STUCK)], None, 2),
    ("not before the grace", [(0, STUCK), (29, STUCK)], None, None),
    ("a commit moved: the watch starts again", [(0, STUCK), (20, {P0: 11, P1: 20}), (30, {P0: 11, P1: 20}),
                                                 (50, {P0: 11, P1: 20})], None, 3),
    ("progressing all along: never", [(0, STUCK), (30, {P0: 12, P1: 20}), (60, {P0: 14, P1: 21})], None, None),
    ("nothing waiting (caught up): never, idle looks dead", [(0, STUCK), (30, STUCK), (60, STUCK)],
     {P0: 10, P1: 20}, None),
    ("never committed: no evidence", [(0, {}), (30, {}), (60, {})], None, None),
]  # fmt: skip


@pytest.mark.parametrize(("case", "steps", "end", "at"), TABLE, ids=[t[0] for t in TABLE])
def test_judge_table(
    case: str, steps: list[tuple[float, dict[TopicPartitionRef, int]]], end: dict[TopicPartitionRef, int] | None,
    at: int | None,
) -> None:  # fmt: skip
    removed = run(steps, end=end)
    expected = [[] for _ in steps]
    if at is not None:
        expected[at] = removed[at]
        assert len(removed[at]) == 1, case
    assert removed == expected, case


def test_the_reason_names_node_pod_and_evidence() -> None:
    removed = run([(0, STUCK), (45, STUCK)])
    assert removed[1] == [
        "vigil: node node-1 of pod orders-1 not Ready for 45s, and no commit on its 2 partition(s) for 45s with 170"
        " record(s) waiting"
    ]


def test_the_grace_runs_from_the_operators_first_sight_too() -> None:
    """A node lost long before the operator looked (an operator restart): it still watches a whole grace."""
    long_lost = {"orders-1": nl.LostNode("node-1", T0 - timedelta(minutes=10))}
    removed = run([(0, STUCK), (29, STUCK), (30, STUCK)], lost=long_lost)
    assert removed[:2] == [[], []]
    assert len(removed[2]) == 1
    assert "not Ready for 630s" in removed[2][0]


def test_a_node_ready_again_forgets_the_member() -> None:
    suspects: dict[str, nl.Suspect] = {}
    _, suspects = nl.judge([member()], PODS, LOST, suspects, committed=STUCK, end_offsets={P0: 100, P1: 100},
                           grace=GRACE, now=T0)  # fmt: skip
    assert set(suspects) == {"m-1"}
    found, suspects = nl.judge([member()], PODS, {}, suspects, committed=STUCK, end_offsets={P0: 100, P1: 100},
                               grace=GRACE, now=T0 + GRACE)  # fmt: skip
    assert (found, suspects) == ([], {})


def test_a_new_assignment_starts_the_watch_again() -> None:
    suspects: dict[str, nl.Suspect] = {}
    _, suspects = nl.judge([member()], PODS, LOST, suspects, committed=STUCK, end_offsets={P0: 100, P1: 100},
                           grace=GRACE, now=T0)  # fmt: skip
    found, suspects = nl.judge([member("m-1", P0)], PODS, LOST, suspects, committed=STUCK,
                               end_offsets={P0: 100, P1: 100}, grace=GRACE, now=T0 + GRACE)  # fmt: skip
    assert found == []
    assert suspects["m-1"].since == T0 + GRACE


def test_a_static_member_is_removed_with_its_instance_id() -> None:
    removed, _ = nl.judge([member("m-1", instance="ns-orders-1")], PODS, LOST,
                          {"m-1": nl.Suspect(T0, frozenset({P0, P1}), STUCK)}, committed=STUCK,
                          end_offsets={P0: 100, P1: 100}, grace=GRACE, now=T0 + GRACE)  # fmt: skip
    assert [(d.member_id, d.instance_id, d.pod, d.cause) for d in removed] == [
        ("m-1", "ns-orders-1", "orders-1", "node-lost")
    ]


offsets = st.dictionaries(st.sampled_from([P0, P1]), st.integers(0, 50), max_size=2)


@settings(max_examples=300, deadline=None)
@given(steps=st.lists(st.tuples(st.integers(0, 20), offsets, st.booleans()), min_size=1, max_size=30))
def test_never_a_member_that_committed_within_the_grace(
    steps: list[tuple[int, dict[TopicPartitionRef, int], bool]],
) -> None:
    """Whatever the sequence: a removal happens only on a lost node, after a whole grace of identical commits on
    the same partitions, with records waiting."""
    suspects: dict[str, nl.Suspect] = {}
    now = T0
    history: list[tuple[datetime, dict[TopicPartitionRef, int], bool]] = []
    for dt, committed, is_lost in steps:
        now += timedelta(seconds=dt)
        history.append((now, committed, is_lost))
        found, suspects = nl.judge([member()], PODS, LOST if is_lost else {}, suspects, committed=committed,
                                   end_offsets={P0: 60, P1: 60}, grace=GRACE, now=now)  # fmt: skip
        if found:
            assert is_lost
            start = [i for i, h in enumerate(history) if h[0] <= now - GRACE]
            assert start, "removed before a whole grace was watched"
            assert all(c == committed and lost for _, c, lost in history[start[-1] :])
            assert any(60 - o > 0 for o in committed.values())


def node(status: str | None, since: str | None = "2026-11-21T12:00:00Z", name: str = "node-1") -> dict[str, object]:
    conditions = [] if status is None else [{"type": "Ready", "status": status, "lastTransitionTime": since}]
    return {"metadata": {"name": name}, "status": {"conditions": [{"type": "MemoryPressure"}, *conditions]}}


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (node("Unknown"), nl.LostNode("node-1", T0)),  # the kubelet stopped reporting
        (node("False"), nl.LostNode("node-1", T0)),
        (node("True"), None),
        (node(None), None),  # no Ready condition yet: nothing to judge by
        (node("Unknown", since=None), None),
        (node("Unknown", since="yesterday"), None),
        (node("Unknown", name=""), None),
        ({}, None),
    ],
)
def test_lost_node_from_a_node_object(obj: dict[str, object], expected: nl.LostNode | None) -> None:
    assert nl.lost_node(obj) == expected


def test_pod_facts_carry_the_node() -> None:
    pod = {"metadata": {"name": "orders-1", "namespace": "ns"}, "spec": {"nodeName": "node-1"}, "status": {}}
    assert pod_facts(pod).node == "node-1"
    assert pod_facts({"metadata": {"name": "orders-1"}}).node is None
