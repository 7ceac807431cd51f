"""The census round's pure half (`vigil_core.kafka.census_plan`) as tables, plus properties over any listing: which
batched requests each coordinator gets, how answers merge into one observation or one miss per group, and when a
group no broker listed is Dead rather than missed."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vigil_core.kafka import census_plan as plan
from vigil_core.kafka import model
from vigil_core.kafka.census_plan import (
    Batch,
    Coordinator,
    Description,
    Failure,
    GroupConfigs,
    Leaders,
    ListedGroup,
    Listing,
    Miss,
    Observation,
    Offsets,
    ShareOffsets,
)
from vigil_core.kafka.model import GroupState, GroupTimings, GroupType, GroupView, MemberView, TopicPartitionRef
from vigil_core.kafka.outcomes import TRANSPORT_ERROR, Api, code_of

S, T = GroupState, GroupType
NO_ANSWER = TRANSPORT_ERROR
NOT_COORDINATOR, NOT_FOUND, DENIED = code_of("NOT_COORDINATOR"), code_of("GROUP_ID_NOT_FOUND"), 30
UNSTABLE, NO_TOPIC = code_of("UNSTABLE_OFFSET_COMMIT"), code_of("UNKNOWN_TOPIC_OR_PARTITION")


def tp(topic: str, partition: int) -> TopicPartitionRef:
    return TopicPartitionRef(topic, partition)


def member(member_id: str, *assigned: TopicPartitionRef, instance: str | None = None) -> MemberView:
    return MemberView(member_id, instance, f"client-{member_id}", "/127.0.0.1", tuple(sorted(assigned)))


# -- planning ---------------------------------------------------------------------------------------------------

# (case, listed state, listed type, the describe batch it is in (None: none), its offsets (OffsetFetch or
#  DescribeShareGroupOffsets, None: neither), the view its listing alone settles or None)
PLANS = [
    ("classic Stable: described", "Stable", "classic", "classic", "offsets", None),
    ("classic join phase: described", "PreparingRebalance", "classic", "classic", "offsets", None),
    ("classic sync phase: described", "CompletingRebalance", "classic", "classic", "offsets", None),
    ("classic Empty: offsets only", "Empty", "classic", None, "offsets", (S.EMPTY, T.CLASSIC)),
    ("classic Dead: nothing to ask", "Dead", "classic", None, None, (S.DEAD, T.CLASSIC)),
    ("KIP-848 Stable", "Stable", "consumer", "consumer", "offsets", None),
    ("KIP-848 Empty: still described (epoch, assignor)", "Empty", "consumer", "consumer", "offsets", None),
    ("KIP-848 Reconciling", "Reconciling", "consumer", "consumer", "offsets", None),
    ("a broker before ListGroups v5: classic", "Stable", "", "classic", "offsets", None),
    ("share Stable: described, its offsets kept apart", "Stable", "share", "share", "share_offsets", None),
    ("share Empty: its listing, and its lag", "Empty", "share", None, "share_offsets", (S.EMPTY, T.SHARE)),
    ("share Dead: nothing to ask", "Dead", "share", None, None, (S.DEAD, T.SHARE)),
    ("streams Stable: described, offsets fetched", "Stable", "streams", "streams", "offsets", None),
    ("streams NotReady: described", "NotReady", "streams", "streams", "offsets", None),
    ("streams Empty: offsets only", "Empty", "streams", None, "offsets", (S.EMPTY, T.STREAMS)),
    ("streams Dead: nothing to ask", "Dead", "streams", None, None, (S.DEAD, T.STREAMS)),
    ("a type vigil does not know: not found, as describe says", "Stable", "future", None, None, (S.DEAD, T.CLASSIC)),
]
BATCHES = ("classic", "consumer", "share", "streams")
OFFSETS = ("offsets", "share_offsets")


@pytest.mark.parametrize(("listed", "expected"), [((c[1], c[2]), c[3:]) for c in PLANS], ids=[c[0] for c in PLANS])
def test_plan_asks_each_group_what_describe_needs(
    listed: tuple[str, str], expected: tuple[str | None, str | None, tuple[GroupState, GroupType] | None]
) -> None:
    batch, offsets, settled = expected
    todo = plan.plan(7, [ListedGroup("g", *listed)])
    assert {name: getattr(todo, name) for name in BATCHES + OFFSETS} == {
        name: ((("g",),) if name in (batch, offsets) else ()) for name in BATCHES + OFFSETS
    }
    assert todo.configs == todo.consumer
    assert ("g" in todo.fetched) is (offsets == "offsets")
    if settled is None:
        assert "g" not in todo.settled
    else:
        assert todo.settled["g"] == GroupView("g", settled[0], settled[1], "", 7, ())


def test_a_coordinator_with_every_kind_gets_one_request_of_each_kind() -> None:
    listed = [
        ListedGroup("live", "Stable", "classic"),
        ListedGroup("empty", "Empty", "classic"),
        ListedGroup("kip848", "Stable", "consumer"),
        ListedGroup("kip848-empty", "Empty", "consumer"),
    ]
    todo = plan.plan(1, listed)
    assert todo.classic == (("live",),)
    assert todo.consumer == todo.configs == (("kip848", "kip848-empty"),)
    assert todo.offsets == (("live", "empty", "kip848", "kip848-empty"),)
    assert todo.requests == 4


@given(items=st.lists(st.integers(), max_size=60), size=st.integers(1, 25))
def test_chunks_keep_every_item_in_order_in_the_fewest_batches(items: list[int], size: int) -> None:
    batches = plan.chunks(items, size)
    assert [x for b in batches for x in b] == items
    assert all(1 <= len(b) <= size for b in batches)
    assert len(batches) == math.ceil(len(items) / size)


def test_chunks_refuse_an_empty_batch_size() -> None:
    with pytest.raises(ValueError, match="at least one"):
        plan.chunks([1], 0)


_STATES = st.sampled_from(["Stable", "Empty", "Dead", "PreparingRebalance", "Reconciling", "Assigning", "NotReady"])
_TYPES = st.sampled_from(["classic", "consumer", "", "share", "streams", "future"])
_LISTED = st.lists(st.builds(ListedGroup, st.text("abcdef", min_size=1, max_size=4), _STATES, _TYPES), max_size=40)


@settings(max_examples=200, deadline=None)
@given(listed=_LISTED, size=st.integers(1, 8))
def test_every_listed_group_is_described_or_settled_once_and_requests_grow_with_batches_only(
    listed: list[ListedGroup], size: int
) -> None:
    unique = list({g.group_id: g for g in listed}.values())
    todo = plan.plan(3, unique, size)
    described = [g for b in todo.classic + todo.consumer + todo.share + todo.streams for g in b]
    assert sorted(described + list(todo.settled)) == sorted(g.group_id for g in unique)
    assert len(set(described)) == len(described)
    assert todo.fetched <= set(todo.types)
    assert all(v.coordinator_id == 3 for v in todo.settled.values())
    # the budget: per kind of request, one per `size` groups at most; the kinds are seven (four describes)
    batches = math.ceil(len(unique) / size)
    assert todo.requests <= 7 * batches
    shares = {g.group_id for g in unique if g.type == "share"}
    assert not todo.fetched & shares  # share offsets are kept apart: their lag is asked instead
    assert {g for b in todo.share_offsets for g in b} == {g.group_id for g in unique if g.type == "share"
                                                          and g.state != "Dead"}  # fmt: skip
    assert len(todo.offsets) == math.ceil(len(todo.fetched) / size)


@settings(max_examples=200, deadline=None)
@given(
    asked=st.lists(st.text("abcdefgh", min_size=1, max_size=2), max_size=30),
    listed=st.lists(st.lists(st.text("abcdefgh", min_size=1, max_size=2), max_size=10), max_size=4),
)
def test_asked_groups_are_listed_by_a_broker_or_unlisted_in_the_order_asked(
    asked: list[str], listed: list[list[str]]
) -> None:
    listings = [
        Listing(node, tuple(ListedGroup(g, "Stable", "classic") for g in dict.fromkeys(groups)))
        for node, groups in enumerate(listed)
    ]
    here = {li.node: [g.group_id for g in plan.listed_here(asked, li)] for li in listings}
    missing = plan.unlisted(asked, listings)
    order = list(dict.fromkeys(asked))
    assert set(missing) | {g for gs in here.values() for g in gs} == set(order)
    assert not set(missing) & {g for gs in here.values() for g in gs}
    assert list(missing) == [g for g in order if g in missing]
    for groups in here.values():
        assert groups == [g for g in order if g in groups]


# -- merging ----------------------------------------------------------------------------------------------------

A, B = tp("a", 0), tp("a", 1)


def test_a_classic_and_a_kip848_group_become_what_describe_gives() -> None:
    todo = plan.plan(1, [ListedGroup("c", "Stable", "classic"), ListedGroup("k", "Reconciling", "consumer")])
    classic = Description(0, "Stable", "range", (member("m1", A, instance="pod-0"),))
    kip848 = Description(0, "Reconciling", "uniform", (member("m2", B),), epoch=5, member_epochs={"m2": 4})
    results = plan.observe_all(
        todo,
        Batch({"c": classic, "k": kip848}),
        Batch({"c": Offsets(0, {A: 3}), "k": Offsets(0, {B: 9})}),
        Batch({"k": GroupConfigs(0, {model.GROUP_SESSION_CONFIG: ("8000", False)})}),
        {A: 10, B: 9},
    )
    assert results["c"] == Observation(
        GroupView("c", S.STABLE, T.CLASSIC, "range", 1, classic.members), {A: 3}, {A: 10}
    )
    kip = results["k"]
    assert isinstance(kip, Observation)
    assert kip.view == GroupView("k", S.RECONCILING, T.CONSUMER, "uniform", 1, kip848.members)
    assert (kip.group_epoch, kip.member_epochs, kip.end_offsets) == (5, {"m2": 4}, {B: 9})
    assert kip.timings == GroupTimings(8000, 5000, 8000)  # the heartbeat absent from the answer: Kafka's default


def _one(
    described: Batch[Description] | None = None,
    committed: Batch[Offsets] | None = None,
    configs: Batch[GroupConfigs] | None = None,
    ends: dict[TopicPartitionRef, int | Failure] | None = None,
    kind: str = "consumer",
) -> Observation | Miss:
    todo = plan.plan(2, [ListedGroup("g", "Stable", kind)])
    ok = Description(0, "Stable", "uniform", (member("m", A),), epoch=1)
    return plan.observe_all(
        todo,
        described if described is not None else Batch({"g": ok}),
        committed if committed is not None else Batch({"g": Offsets(0, {A: 1})}),
        configs if configs is not None else Batch({"g": GroupConfigs(0, {})}),
        ends if ends is not None else {A: 2},
    )["g"]


def _failed(api: Api, code: int, node: int = 2) -> Failure:
    return Failure(api, node, code, "why")


# (case, the DescribeShareGroupOffsets answer, the lag observed)
SHARE_LAGS = [
    ("answered", Batch({"g": ShareOffsets(0, {A: 4, B: 0})}), {A: 4, B: 0}),
    ("no answer: observed without it", Batch(failure=_failed(Api.SHARE_OFFSETS, NO_ANSWER)), {}),
    ("a broker before v1 (4.4): observed without it", Batch(failure=_failed(Api.SHARE_OFFSETS, code_of(
        "UNSUPPORTED_VERSION"))), {}),
    ("the group's error: observed without it", Batch({"g": ShareOffsets(NOT_FOUND, {A: 4})}), {}),
    ("the answer left the group out", Batch({}), {}),
]  # fmt: skip


@pytest.mark.parametrize(("answer", "lag"), [c[1:] for c in SHARE_LAGS], ids=[c[0] for c in SHARE_LAGS])
def test_a_share_group_is_observed_with_the_lag_the_broker_says_or_without_it(
    answer: Batch[ShareOffsets], lag: dict[TopicPartitionRef, int]
) -> None:
    todo = plan.plan(2, [ListedGroup("g", "Stable", "share")])
    described = Description(0, "Stable", "simple", (member("m", A, B),), epoch=3)
    result = plan.observe_all(todo, Batch({"g": described}), Batch(), Batch(), {A: 9, B: 9}, share_offsets=answer)["g"]
    assert isinstance(result, Observation)
    assert result.view == GroupView("g", S.STABLE, T.SHARE, "simple", 2, described.members)
    assert (result.committed, result.end_offsets, result.share_lag) == ({}, {A: 9, B: 9}, lag)


@pytest.mark.parametrize("kind", [T.CLASSIC, T.CONSUMER, T.STREAMS])
def test_only_a_share_group_carries_a_share_lag(kind: GroupType) -> None:
    view = GroupView("g", S.STABLE, kind, "", 2, (member("m", A),))
    result = plan.observe(view, {A: 1}, {A: 2}, share_lag={A: 4})
    assert isinstance(result, Observation)
    assert result.share_lag == {}


# (case, answers, None for an observation or the (request, broker, code) of the miss)
MERGES = [
    ("all answered", {}, None),
    ("describe got no answer", {"described": Batch(failure=_failed(Api.DESCRIBE_GROUP, NO_ANSWER))},
     (Api.DESCRIBE_GROUP, 2, NO_ANSWER)),
    ("the coordinator moved", {"described": Batch({"g": Description(NOT_COORDINATOR)})},
     (Api.DESCRIBE_GROUP, 2, NOT_COORDINATOR)),
    ("the answer left the group out", {"described": Batch({})}, (Api.DESCRIBE_GROUP, 2, -1)),
    ("offsets got no answer", {"committed": Batch(failure=_failed(Api.OFFSET_FETCH, NO_ANSWER))},
     (Api.OFFSET_FETCH, 2, NO_ANSWER)),
    ("offsets denied", {"committed": Batch({"g": Offsets(DENIED)})}, (Api.OFFSET_FETCH, 2, DENIED)),
    ("a transaction's offsets pending", {"committed": Batch({"g": Offsets(0, {}, (A,))})},
     (Api.OFFSET_FETCH, 2, UNSTABLE)),
    ("the leader did not answer", {"ends": {A: _failed(Api.LIST_OFFSETS, NO_ANSWER, node=3)}},
     (Api.LIST_OFFSETS, 3, NO_ANSWER)),
    ("no leader known", {"ends": {A: _failed(Api.METADATA, NO_TOPIC)}}, (Api.METADATA, 2, NO_TOPIC)),
    ("an end offset missing", {"ends": {}}, (Api.LIST_OFFSETS, -1, -1)),
    ("timings not readable: observed without them", {"configs": Batch(failure=_failed(Api.DESCRIBE_CONFIGS, 30))},
     None),
]  # fmt: skip


@pytest.mark.parametrize(("answers", "expected"), [c[1:] for c in MERGES], ids=[c[0] for c in MERGES])
def test_the_first_failed_request_is_the_miss(
    answers: dict[str, object], expected: tuple[Api, int, int] | None
) -> None:
    result = _one(**answers)
    if expected is None:
        assert isinstance(result, Observation)
        assert result.timings == (None if "configs" in answers else GroupTimings(45000, 5000, None))
        return
    assert isinstance(result, Miss)
    assert (result.api, result.node, result.code) == expected
    assert f"{expected[0].value} to broker {expected[1]}" in result.line
    assert "\n" not in result.line
    assert result.outcome.code == expected[2]


def test_a_group_listed_twice_keeps_an_observation_over_a_miss() -> None:
    seen = Observation(plan.not_found("g", 1), {}, {})
    missed = Miss(Api.DESCRIBE_GROUP, 2, NOT_COORDINATOR, "DescribeGroup to broker 2: NOT_COORDINATOR")
    assert plan.preferred(missed, seen) is seen
    assert plan.preferred(seen, missed) is seen
    other = Observation(plan.not_found("g", 2), {}, {})
    assert plan.preferred(seen, other) is seen


def test_leaders_group_partitions_and_name_what_has_none() -> None:
    leaders = Leaders({A: 1, B: 2, tp("b", 0): 1}, topic_errors={"gone": NO_TOPIC})
    grouped, failed = plan.by_leader(5, [B, A, tp("b", 0), tp("gone", 0), tp("a", 9)], leaders)
    assert grouped == {1: (A, tp("b", 0)), 2: (B,)}
    assert failed[tp("gone", 0)].code == NO_TOPIC
    assert failed[tp("a", 9)].code == code_of("LEADER_NOT_AVAILABLE")
    assert {f.node for f in failed.values()} == {5}
    _, all_failed = plan.by_leader(5, [A], Failure(Api.METADATA, 5, NO_ANSWER))
    assert all_failed[A].code == NO_ANSWER


# -- groups no broker listed ------------------------------------------------------------------------------------

ANSWERED, SILENT = Listing(1), Listing(2, failure=Failure(Api.LIST_GROUPS, 2, NO_ANSWER, "KafkaTimeoutError"))
LISTINGS = {1: ANSWERED, 2: SILENT}

# (case, FindCoordinator's answer for the group, None: Dead at that node; else the miss's (request, broker, code))
UNLISTED = [
    ("its coordinator answered without it: it does not exist", Batch({"g": Coordinator(0, 1)}), None),
    ("its coordinator is silent: it may exist", Batch({"g": Coordinator(0, 2)}), (Api.LIST_GROUPS, 2, NO_ANSWER)),
    ("a coordinator not in the metadata", Batch({"g": Coordinator(0, 9)}), (Api.LIST_GROUPS, 9, NO_ANSWER)),
    ("FindCoordinator denied (no Describe ACL)", Batch({"g": Coordinator(DENIED, -1, "denied")}),
     (Api.FIND_COORDINATOR, -1, DENIED)),
    ("FindCoordinator got no answer", Batch(failure=Failure(Api.FIND_COORDINATOR, 1, NO_ANSWER)),
     (Api.FIND_COORDINATOR, 1, NO_ANSWER)),
]  # fmt: skip


@pytest.mark.parametrize(("found", "expected"), [c[1:] for c in UNLISTED], ids=[c[0] for c in UNLISTED])
def test_an_unlisted_group_is_dead_only_where_its_coordinator_answered(
    found: Batch[Coordinator], expected: tuple[Api, int, int] | None
) -> None:
    result = plan.resolve_unlisted(["g"], found, LISTINGS)["g"]
    if expected is None:
        assert result == Observation(GroupView("g", S.DEAD, T.CLASSIC, "", 1, ()), {}, {})
        return
    assert isinstance(result, Miss)
    assert (result.api, result.node, result.code) == expected
    assert f"broker {expected[1]}" in result.line


def test_with_no_broker_answering_every_unlisted_group_is_a_miss_naming_them_all() -> None:
    other = Listing(3, failure=Failure(Api.LIST_GROUPS, 3, NOT_COORDINATOR))
    results = plan.resolve_unlisted(["g", "h"], None, {2: SILENT, 3: other})
    assert {type(r) for r in results.values()} == {Miss}
    first = results["g"]
    assert isinstance(first, Miss)
    assert "broker 2" in first.line
    assert "broker 3" in first.line
    assert (first.api, first.node, first.code) == (Api.LIST_GROUPS, -1, NO_ANSWER)


@settings(max_examples=200, deadline=None)
@given(
    coordinators=st.lists(st.one_of(st.none(), st.integers(1, 4)), min_size=1, max_size=20),
    answered=st.sets(st.integers(1, 4)),
)
def test_an_unlisted_group_is_dead_iff_its_coordinator_answered(
    coordinators: list[int | None], answered: set[int]
) -> None:
    """Node 4 is not in the metadata; None: FindCoordinator has no answer for the group."""
    groups = [f"g{i}" for i in range(len(coordinators))]
    listings = {
        n: Listing(n) if n in answered else Listing(n, failure=Failure(Api.LIST_GROUPS, n, NO_ANSWER))
        for n in (1, 2, 3)
    }
    found = Batch({g: Coordinator(0, n) for g, n in zip(groups, coordinators, strict=True) if n is not None})
    results = plan.resolve_unlisted(groups, found, listings)
    assert set(results) == set(groups)
    for group_id, node in zip(groups, coordinators, strict=True):
        dead = node is not None and node in answered and node in listings
        assert isinstance(results[group_id], Observation) is dead
        result = results[group_id]
        if isinstance(result, Miss) and node is not None:
            assert result.node == node


# -- a KIP-848 group's timings ----------------------------------------------------------------------------------

SESSION, HEARTBEAT = model.GROUP_SESSION_CONFIG, model.GROUP_HEARTBEAT_CONFIG
TIMINGS = [
    ("the broker's values (defaults of the group)", {SESSION: ("10000", True), HEARTBEAT: ("1000", True)},
     GroupTimings(10000, 1000, None)),
    ("the group's own session", {SESSION: ("8000", False), HEARTBEAT: ("1000", True)}, GroupTimings(8000, 1000, 8000)),
    ("an older broker answers neither: Kafka's defaults", {}, GroupTimings(45000, 5000, None)),
    ("a value the broker leaves out", {SESSION: (None, False)}, GroupTimings(45000, 5000, None)),
]  # fmt: skip


@pytest.mark.parametrize(("configs", "expected"), [c[1:] for c in TIMINGS], ids=[c[0] for c in TIMINGS])
def test_group_timings_read_one_way(configs: dict[str, tuple[str | None, bool]], expected: GroupTimings) -> None:
    assert model.group_timings(configs) == expected
    assert plan.timings_of(GroupConfigs(0, configs)) == expected
    assert plan.timings_of(GroupConfigs(DENIED)) is None
    assert plan.timings_of(Failure(Api.DESCRIBE_CONFIGS, 1, NO_ANSWER)) is None
