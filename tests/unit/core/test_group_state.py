"""The group state vigil reports everywhere (the sidecar's watchdog and /v1/status, the ConsumerGroup status, its
conditions and the operator's metric), named once in `vigil_core.kafka.model`.

librdkafka's describe names no KIP-848 state but Stable, Empty and Dead (`rd_kafka_consumer_group_state_code`):
Assigning and Reconciling come back Unknown, and only then is ConsumerGroupDescribe asked; its answer names them.
"""

import pytest
from confluent_kafka import ConsumerGroupState, ConsumerGroupType
from hypothesis import given
from hypothesis import strategies as st

from vigil_core.kafka import model
from vigil_core.kafka.model import GroupState, GroupType

CLASSIC, KIP848, UNTYPED = GroupType.CLASSIC, GroupType.CONSUMER, GroupType.UNKNOWN
S = GroupState
OK, GROUP_ID_NOT_FOUND, TRANSPORT = 0, 69, -1

# (case, group type, librdkafka's state, ConsumerGroupDescribe's answer or None, state reported, rebalancing)
CASES = [
    ("classic Stable", CLASSIC, S.STABLE, None, S.STABLE, False),
    ("classic join phase", CLASSIC, S.PREPARING_REBALANCE, None, S.PREPARING_REBALANCE, True),
    ("classic sync phase", CLASSIC, S.COMPLETING_REBALANCE, None, S.COMPLETING_REBALANCE, True),
    ("classic Unknown stays Unknown, no rebalance", CLASSIC, S.UNKNOWN, None, S.UNKNOWN, False),
    ("KIP-848 Stable: librdkafka names it", KIP848, S.STABLE, None, S.STABLE, False),
    ("KIP-848 Empty", KIP848, S.EMPTY, None, S.EMPTY, False),
    ("KIP-848 Dead", KIP848, S.DEAD, None, S.DEAD, False),
    ("KIP-848 Unknown, described Reconciling", KIP848, S.UNKNOWN, (OK, "Reconciling"), S.RECONCILING, True),
    ("KIP-848 Unknown, described Assigning", KIP848, S.UNKNOWN, (OK, "Assigning"), S.ASSIGNING, True),
    ("KIP-848 Unknown, described Stable (settled meanwhile)", KIP848, S.UNKNOWN, (OK, "Stable"), S.STABLE, False),
    ("KIP-848 Unknown, the describe failed", KIP848, S.UNKNOWN, (TRANSPORT, ""), S.UNKNOWN, True),
    ("KIP-848 Unknown, the group went away", KIP848, S.UNKNOWN, (GROUP_ID_NOT_FOUND, ""), S.UNKNOWN, True),
    ("KIP-848 Unknown, a state vigil does not know", KIP848, S.UNKNOWN, (OK, "Sleeping"), S.UNKNOWN, True),
    ("KIP-848 Unknown, not asked", KIP848, S.UNKNOWN, None, S.UNKNOWN, True),
    ("an untyped group is never described again", UNTYPED, S.UNKNOWN, (OK, "Reconciling"), S.UNKNOWN, False),
]


@pytest.mark.parametrize(("kind", "reported", "described", "expected", "rebalancing"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])  # fmt: skip
def test_the_state_vigil_reports(
    kind: GroupType, reported: GroupState, described: tuple[int, str] | None, expected: GroupState, rebalancing: bool
) -> None:
    state = model.group_state(kind, reported, described)
    assert state is expected
    assert model.rebalancing(kind, state) is rebalancing
    assert model.GroupView("g", state, kind, "", 1, ()).rebalancing is rebalancing


@pytest.mark.parametrize(
    ("kind", "reported", "asked"),
    [(KIP848, S.UNKNOWN, True), (KIP848, S.STABLE, False), (CLASSIC, S.UNKNOWN, False), (UNTYPED, S.UNKNOWN, False)],
)
def test_consumer_group_describe_is_asked_only_for_a_kip848_state_librdkafka_cannot_name(
    kind: GroupType, reported: GroupState, asked: bool
) -> None:
    assert model.needs_consumer_group_describe(kind, reported) is asked


@given(st.sampled_from(GroupType), st.sampled_from(GroupState), st.none() | st.tuples(st.integers(-1, 120), st.text()))
def test_a_state_librdkafka_named_is_never_replaced(
    kind: GroupType, reported: GroupState, described: tuple[int, str] | None
) -> None:
    state = model.group_state(kind, reported, described)
    if not model.needs_consumer_group_describe(kind, reported):
        assert state is reported
    assert state in GroupState


def test_every_confluent_group_state_and_type_maps_to_ours() -> None:
    states = {s: model.by_name(GroupState, s, GroupState.UNKNOWN) for s in ConsumerGroupState}
    assert states[ConsumerGroupState.PREPARING_REBALANCING] is GroupState.PREPARING_REBALANCE
    assert states[ConsumerGroupState.COMPLETING_REBALANCING] is GroupState.COMPLETING_REBALANCE
    assert [s for s, m in states.items() if m is GroupState.UNKNOWN] == [ConsumerGroupState.UNKNOWN]
    types = {t: model.by_name(GroupType, t, GroupType.UNKNOWN) for t in ConsumerGroupType}
    assert types == {ConsumerGroupType.CLASSIC: CLASSIC, ConsumerGroupType.CONSUMER: KIP848,
                     ConsumerGroupType.UNKNOWN: UNTYPED}  # fmt: skip


@pytest.mark.parametrize("state", list(GroupState))
def test_every_state_the_broker_names_maps_to_itself(state: GroupState) -> None:
    """ConsumerGroupDescribe's names (Empty, Assigning, Reconciling, Stable, Dead) and the classic ones."""
    assert model.by_name(GroupState, state.value, GroupState.UNKNOWN) is state


# (case, state, type, with a member, librdkafka's "not found")
NOT_FOUND = [
    ("Dead, classic, nobody: not found (or a share or streams group)", S.DEAD, CLASSIC, False, True),
    ("Dead with a member: found", S.DEAD, CLASSIC, True, False),
    ("Empty classic: found", S.EMPTY, CLASSIC, False, False),
    ("Dead KIP-848: found (ConsumerGroupDescribe said so)", S.DEAD, KIP848, False, False),
    ("Dead share: its own describe said so", S.DEAD, GroupType.SHARE, False, False),
]


@pytest.mark.parametrize(("state", "kind", "member", "expected"), [c[1:] for c in NOT_FOUND],
                         ids=[c[0] for c in NOT_FOUND])  # fmt: skip
def test_not_found_is_what_librdkafka_says_of_a_group_it_cannot_see(
    state: GroupState, kind: GroupType, member: bool, expected: bool
) -> None:
    members = (model.MemberView("m", None, "c", "/h", ()),) if member else ()
    assert model.GroupView("g", state, kind, "", 1, members).not_found is expected
