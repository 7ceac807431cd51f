"""The operator's resync as a pure function: (previous status, observation, now) → (status, notices).

Expectations are derived from the rules the modules state (lag = Σ(end − committed) over the partitions that have
both, conditions move `lastTransitionTime` only on a status change, notices only on transitions, members are mapped
to pods by instance id or client.id == pod name and never by host), not copied from a run.
"""

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vigil_core import rules
from vigil_core.kafka.model import GroupState, GroupType, GroupView, MemberView, TopicPartitionRef
from vigil_operator.domain.conditions import rfc3339
from vigil_operator.domain.reconcile import (
    GroupFacts,
    Notice,
    Observation,
    PodFacts,
    Unreachable,
    reconcile,
)
from vigil_operator.domain.reconcile import lag as group_lag
from vigil_operator.domain.spec import TIMING_FIELDS, ConsumerGroupSpec, parse_spec
from vigil_operator.domain.stalls import StallReport
from vigil_operator.domain.status import CONDITION_ORDER, Condition, ConditionType, ConsumerGroupStatus

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
CLUSTER = "q1X3dYtLRkO0h1nO6tQ2Ag"
EMPTY = ConsumerGroupStatus()
LIMITS = rules.BrokerLimits(min_session_ms=6000, max_session_ms=1_800_000, from_defaults=False)

P0, P1, P2, P3 = (TopicPartitionRef("orders", p) for p in range(4))


# --- builders -----------------------------------------------------------------------------------------------------


def make_spec(client: Mapping[str, Any] | None = None, **extra: Any) -> ConsumerGroupSpec:
    return parse_spec(
        {
            "groupId": "orders",
            "kafka": {"bootstrapServers": "kafka:9092"},
            "workload": {"kind": "StatefulSet", "name": "orders"},
            "client": dict(client or {}),
            **extra,
        }
    )


SPEC = make_spec()


def member(
    member_id: str,
    client_id: str,
    assignment: Sequence[TopicPartitionRef] = (),
    instance_id: str | None = None,
    host: str = "/127.0.0.1",
) -> MemberView:
    return MemberView(member_id, instance_id, client_id, host, tuple(assignment))


def view(members: Sequence[MemberView], state: GroupState = GroupState.STABLE) -> GroupView:
    return GroupView("orders", state, GroupType.CLASSIC, "range", 1, tuple(members))


def facts(
    group: GroupView,
    committed: Mapping[TopicPartitionRef, int] | None = None,
    end: Mapping[TopicPartitionRef, int] | None = None,
    limits: rules.BrokerLimits = LIMITS,
) -> GroupFacts:
    return GroupFacts(CLUSTER, group, dict(committed or {}), dict(end or {}), limits)


def observe(
    broker: GroupFacts | Unreachable,
    pods: Sequence[PodFacts] = (),
    stalls: Sequence[StallReport] = (),
    *,
    generation: int = 1,
    spec: ConsumerGroupSpec = SPEC,
    owner: str | None = None,
) -> Observation:
    return Observation(generation, spec, broker, tuple(pods), tuple(stalls), owner)


def report(member_id: str, pod: str | None = None, since: datetime = NOW - timedelta(seconds=40)) -> StallReport:
    return StallReport("orders", member_id, pod, "shop", since, since + timedelta(seconds=10))


def condition(status: ConsumerGroupStatus, kind: ConditionType) -> Condition:
    found = [c for c in status.conditions if c.type is kind]
    assert len(found) == 1, f"{kind} appears {len(found)} times in {status.conditions}"
    return found[0]


def truth(status: ConsumerGroupStatus, kind: ConditionType) -> tuple[str, str]:
    c = condition(status, kind)
    return c.status, c.reason


# A Stable 3-member group whose client ids are the pod names (what the webhook sets)
M0 = member("orders-0-5f0c2a9e", "orders-0", [P0, P1])
M1 = member("orders-1-0d6e8f10", "orders-1", [P2])
M2 = member("orders-2-77aa0011", "orders-2", [P3])
PODS = [PodFacts("orders-0"), PodFacts("orders-1"), PodFacts("orders-2")]
STABLE3 = view([M0, M1, M2])


def stable_status(at: datetime = NOW) -> ConsumerGroupStatus:
    status, _ = reconcile(EMPTY, observe(facts(STABLE3), PODS), at)
    return status


# --- a healthy group ----------------------------------------------------------------------------------------------


def test_stable_group_is_ready_and_each_member_has_its_pod() -> None:
    status, notices = reconcile(EMPTY, observe(facts(STABLE3), PODS), NOW)

    assert status.member_count == 3
    assert status.state == "Stable"
    assert status.protocol == "classic"
    assert status.cluster_id == CLUSTER
    assert status.coordinator == 1
    assert status.stalled_count == 0
    assert status.stalled_members == ()
    assert {m.member_id: m.pod for m in status.members} == {
        M0.member_id: "orders-0",
        M1.member_id: "orders-1",
        M2.member_id: "orders-2",
    }
    assert {m.member_id: m.partitions for m in status.members} == {M0.member_id: 2, M1.member_id: 1, M2.member_id: 1}
    assert not any(m.stalled for m in status.members)
    assert truth(status, ConditionType.READY) == ("True", "Stable")
    assert "3 members" in condition(status, ConditionType.READY).message
    assert truth(status, ConditionType.STALLED) == ("False", "NoStall")
    assert truth(status, ConditionType.REBALANCING) == ("False", "Stable")
    assert truth(status, ConditionType.CONFIG_VALID) == ("True", "Valid")
    assert truth(status, ConditionType.RESTART_IN_PROGRESS) == ("False", "NoRestart")
    assert [c.type for c in status.conditions] == list(CONDITION_ORDER)
    # the first sync says whether the group is ready, and nothing about the defaults that are fine
    assert notices == [Notice("Normal", "ReadyTrue", condition(status, ConditionType.READY).message)]


# (case, assignment by member, committed, end, expected lag by member, expected total): the members' lags are
# the parts of the total (a member's partitions are its own)
LAG_CASES = [
    (
        "every partition known",
        {"a": [P0, P1], "b": [P2]},
        {P0: 10, P1: 5, P2: 0},
        {P0: 15, P1: 9, P2: 7},
        {"a": 5 + 4, "b": 7},
        16,
    ),
    (
        "a partition without a committed offset does not count",
        {"a": [P0, P1], "b": [P2]},
        {P0: 10, P2: 3},
        {P0: 12, P1: 50},
        {"a": 2, "b": None},
        2,
    ),
    ("only end offsets known", {"a": [P0], "b": [P2]}, {}, {P0: 5, P2: 9}, {"a": None, "b": None}, None),
    ("nothing known", {"a": [P0, P1], "b": [P2]}, {}, {}, {"a": None, "b": None}, None),
    ("known zero lag is 0, not unknown", {"a": [P0], "b": []}, {P0: 7}, {P0: 7}, {"a": 0, "b": None}, 0),
    ("unassigned partitions are nobody's lag", {"a": [P0], "b": []}, {P0: 1, P3: 0}, {P0: 2, P3: 100}, {"a": 1}, 1),
]


@pytest.mark.parametrize(
    ("assignment", "committed", "end", "lags", "total"),
    [case[1:] for case in LAG_CASES],
    ids=[case[0] for case in LAG_CASES],
)
def test_lag_is_end_minus_committed_over_known_partitions(
    assignment: dict[str, list[TopicPartitionRef]],
    committed: dict[TopicPartitionRef, int],
    end: dict[TopicPartitionRef, int],
    lags: dict[str, int | None],
    total: int | None,
) -> None:
    members = [member(f"orders-{i}-{key}", f"orders-{i}", parts) for i, (key, parts) in enumerate(assignment.items())]
    assert group_lag(facts(view(members), committed, end)) == total
    known = [lag for lag in lags.values() if lag is not None]
    assert total == (sum(known) if known else None)


# (case, the broker's lag per share-partition, the group's lag)
SHARE_LAG_CASES = [
    ("the broker's lag, summed over every share-partition (assigned or not)", {P0: 4, P1: 0, P3: 6}, 10),
    ("known zero lag is 0", {P0: 0}, 0),
    ("the broker could not say: unknown", {}, None),
]


@pytest.mark.parametrize(("share_lag", "total"), [c[1:] for c in SHARE_LAG_CASES], ids=[c[0] for c in SHARE_LAG_CASES])
def test_a_share_group_s_lag_is_the_broker_s_not_end_minus_committed(
    share_lag: dict[TopicPartitionRef, int], total: int | None
) -> None:
    shared = replace(view([member("m", "c", [P0, P1])]), type=GroupType.SHARE)
    end = {P0: 100, P1: 100}  # end offsets and no commits: a classic reading would say "unknown"
    assert group_lag(replace(facts(shared, {}, end), share_lag=share_lag)) == total


@pytest.mark.parametrize("kind", [GroupType.CONSUMER, GroupType.STREAMS])
def test_kip848_and_streams_groups_lag_as_classic_ones_by_their_commits(kind: GroupType) -> None:
    """Streams groups commit to __consumer_offsets; a member's assignment is what its active tasks read."""
    typed = replace(view([member("m", "c", [P0, P1])]), type=kind)
    assert group_lag(facts(typed, {P0: 3, P1: 10}, {P0: 5, P1: 10})) == 2


def test_a_resync_that_sees_the_same_group_later_says_the_same_status() -> None:
    """The status holds state, not readings: the same group seen 30 s later, with other offsets, is the same status
    (the runtime then writes nothing)."""
    members = [M0, M1, M2]
    first, _ = reconcile(EMPTY, observe(facts(view(members), {P0: 1}, {P0: 5}), PODS), NOW)
    later = NOW + timedelta(seconds=30)
    again, notices = reconcile(first, observe(facts(view(members), {P0: 90}, {P0: 700}), PODS), later)
    assert again == first
    assert notices == []


# --- stalls -------------------------------------------------------------------------------------------------------


def test_stall_of_a_present_member_flags_it_once() -> None:
    before = stable_status(NOW)
    stall = report(M1.member_id, pod="stale-pod-name")
    obs = observe(facts(STABLE3), PODS, [stall])

    status, notices = reconcile(before, obs, NOW + timedelta(seconds=30))

    assert status.stalled_count == 1
    assert {m.member_id for m in status.members if m.stalled} == {M1.member_id}
    assert len(status.stalled_members) == 1
    flagged = status.stalled_members[0]
    assert flagged.member_id == M1.member_id
    assert flagged.pod == "orders-1"  # the pod the broker's member maps to, not what the report said
    assert flagged.since == rfc3339(stall.since)
    assert flagged.action == "leave-group"  # the beacon signal's default action
    assert truth(status, ConditionType.STALLED) == ("True", "MembersStalled")
    assert "orders-1" in condition(status, ConditionType.STALLED).message
    assert truth(status, ConditionType.READY) == ("False", "MembersStalled")
    assert "1 of 3" in condition(status, ConditionType.READY).message
    stalled_notices = [n for n in notices if n.reason == "MemberStalled"]
    assert len(stalled_notices) == 1
    assert stalled_notices[0].type == "Warning"
    assert M1.member_id in stalled_notices[0].message
    assert Notice("Warning", "StalledTrue", condition(status, ConditionType.STALLED).message) in notices
    assert any(n.type == "Warning" and n.reason == "ReadyFalse" for n in notices)

    again, repeated = reconcile(status, obs, NOW + timedelta(seconds=60))
    assert again.stalled_count == 1
    assert repeated == []  # transitions only


def test_stall_of_a_member_not_in_the_group_is_ignored() -> None:
    before = stable_status(NOW)
    gone = report("orders-1-previous-incarnation", pod="orders-1")

    status, notices = reconcile(before, observe(facts(STABLE3), PODS, [gone]), NOW + timedelta(seconds=30))

    assert status.stalled_count == 0
    assert status.stalled_members == ()
    assert not any(m.stalled for m in status.members)
    assert truth(status, ConditionType.STALLED) == ("False", "NoStall")
    assert truth(status, ConditionType.READY) == ("True", "Stable")
    assert notices == []


def test_two_reports_of_one_member_count_once() -> None:
    stalls = [report(M1.member_id, since=NOW - timedelta(seconds=40)), report(M1.member_id, since=NOW)]

    status, notices = reconcile(stable_status(NOW), observe(facts(STABLE3), PODS, stalls), NOW + timedelta(seconds=1))

    assert status.stalled_count == 1
    assert [m.member_id for m in status.stalled_members] == [M1.member_id]
    assert len([n for n in notices if n.reason == "MemberStalled"]) == 1


# --- broker unreachable, duplicate CRs ---------------------------------------------------------------------------


def test_unreachable_broker_keeps_the_last_members_but_says_nothing_is_current() -> None:
    before = stable_status(NOW)
    down = Unreachable("BrokerUnreachable", "bootstrap kafka:9092: connection refused")
    later = NOW + timedelta(seconds=30)

    status, notices = reconcile(before, observe(down, PODS, generation=2), later)

    assert truth(status, ConditionType.READY) == ("False", "BrokerUnreachable")
    assert condition(status, ConditionType.READY).message == down.message
    assert status.state == "Unknown"
    assert status.members == before.members
    assert status.member_count == before.member_count
    assert truth(status, ConditionType.STALLED) == ("Unknown", "BrokerUnreachable")
    assert truth(status, ConditionType.REBALANCING) == ("Unknown", "BrokerUnreachable")
    assert status.observed_generation == 2
    assert Notice("Warning", "ReadyFalse", down.message) in notices


def test_recovery_after_unreachable_is_ready_again_with_a_normal_notice() -> None:
    down, _ = reconcile(stable_status(NOW), observe(Unreachable("SecretMissing", "Secret shop/kafka: not found")), NOW)
    back_at = NOW + timedelta(minutes=2)

    status, notices = reconcile(down, observe(facts(STABLE3), PODS), back_at)

    assert truth(status, ConditionType.READY) == ("True", "Stable")
    assert condition(status, ConditionType.READY).last_transition_time == rfc3339(back_at)
    assert status.state == "Stable"
    ready = [n for n in notices if n.reason == "ReadyTrue"]
    assert len(ready) == 1
    assert ready[0].type == "Normal"


def test_duplicate_cr_is_refused_naming_the_owner() -> None:
    status, notices = reconcile(EMPTY, observe(facts(STABLE3), PODS, owner="shop/orders-first"), NOW)

    ready = condition(status, ConditionType.READY)
    assert (ready.status, ready.reason) == ("False", "DuplicateGroup")
    assert ready.message.startswith("spec.groupId: Kafka group 'orders' is already observed by ConsumerGroup ")
    assert "shop/orders-first" in ready.message
    assert truth(status, ConditionType.STALLED) == ("Unknown", "DuplicateGroup")
    assert truth(status, ConditionType.REBALANCING) == ("Unknown", "DuplicateGroup")
    assert any(n.type == "Warning" and n.reason == "ReadyFalse" and "shop/orders-first" in n.message for n in notices)


# --- group states -------------------------------------------------------------------------------------------------

# (state, group type, has members, Ready, Ready reason, Rebalancing) — Rebalancing's reason is the state
CLASSIC, KIP848 = GroupType.CLASSIC, GroupType.CONSUMER
STATE_CASES = [
    (GroupState.STABLE, CLASSIC, True, "True", "Stable", "False"),
    (GroupState.PREPARING_REBALANCE, CLASSIC, True, "False", "Rebalancing", "True"),
    (GroupState.COMPLETING_REBALANCE, CLASSIC, True, "False", "Rebalancing", "True"),
    (GroupState.EMPTY, CLASSIC, False, "False", "GroupEmpty", "False"),
    (GroupState.DEAD, CLASSIC, False, "False", "GroupNotFound", "False"),
    (GroupState.UNKNOWN, CLASSIC, True, "False", "Unknown", "False"),
    (GroupState.STABLE, KIP848, True, "True", "Stable", "False"),
    (GroupState.RECONCILING, KIP848, True, "False", "Rebalancing", "True"),
    (GroupState.ASSIGNING, KIP848, True, "False", "Rebalancing", "True"),
    (GroupState.EMPTY, KIP848, False, "False", "GroupEmpty", "False"),
    # ConsumerGroupDescribe failed: librdkafka's Unknown in a KIP-848 group is Assigning or Reconciling
    (GroupState.UNKNOWN, KIP848, True, "False", "Rebalancing", "True"),
]


@pytest.mark.parametrize(("state", "kind", "populated", "ready", "reason", "rebalancing"), STATE_CASES, ids=str)
def test_group_state_drives_ready_and_rebalancing(  # noqa: PLR0917 - one parameter per table column
    state: GroupState, kind: GroupType, populated: bool, ready: str, reason: str, rebalancing: str
) -> None:
    members = [M0, M1, M2] if populated else []
    group = GroupView("orders", state, kind, "range", 1, tuple(members))
    status, _ = reconcile(EMPTY, observe(facts(group), PODS), NOW)

    assert status.state == state.value
    assert truth(status, ConditionType.READY) == (ready, reason)
    assert truth(status, ConditionType.REBALANCING) == (rebalancing, state.value)
    assert (condition(status, ConditionType.REBALANCING).status == "True") is group.rebalancing  # one definition
    assert truth(status, ConditionType.STALLED) == ("False", "NoStall")
    if kind is KIP848 and state is GroupState.UNKNOWN:
        assert "Assigning or Reconciling" in condition(status, ConditionType.READY).message


# --- ConfigValid --------------------------------------------------------------------------------------------------

# (case, client settings, ConfigValid, reason, setting the message names, Ready, Ready reason)
CONFIG_CASES = [
    ("client defaults", {}, "True", "Valid", None, "True", "Stable"),
    (
        "heartbeat above a third of the session is advice",
        {"sessionTimeoutMs": 10000, "heartbeatIntervalMs": 4000},
        "True",
        "ValidWithAdvice",
        rules.HEARTBEAT,
        "True",
        "Stable",
    ),
    (
        "session below the broker's minimum is rejected",
        {"sessionTimeoutMs": 3000, "heartbeatIntervalMs": 500},
        "False",
        "TimingsRejected",
        rules.SESSION,
        "False",
        "ConfigInvalid",
    ),
    (
        "session above the broker's maximum is rejected",
        {"sessionTimeoutMs": 2_000_000, "heartbeatIntervalMs": 3000, "maxPollIntervalMs": 2_500_000},
        "False",
        "TimingsRejected",
        rules.SESSION,
        "False",
        "ConfigInvalid",
    ),
]


@pytest.mark.parametrize(
    ("client", "valid", "reason", "names", "ready", "ready_reason"),
    [case[1:] for case in CONFIG_CASES],
    ids=[case[0] for case in CONFIG_CASES],
)
def test_config_valid_is_advice_or_rejection(
    *, client: dict[str, int], valid: str, reason: str, names: str | None, ready: str, ready_reason: str
) -> None:
    spec = make_spec(client)
    status, notices = reconcile(EMPTY, observe(facts(STABLE3), PODS, spec=spec), NOW)

    config = condition(status, ConditionType.CONFIG_VALID)
    assert (config.status, config.reason) == (valid, reason)
    if names is not None:
        assert f"{TIMING_FIELDS[names]} ({names}): " in config.message  # the spec's field, and the property
    assert truth(status, ConditionType.READY) == (ready, ready_reason)
    if ready_reason == "ConfigInvalid":
        assert condition(status, ConditionType.READY).message == config.message
    # the first sync says what is wrong: a rejection is a Warning, advice or validity says nothing
    config_notices = [n for n in notices if n.reason.startswith("ConfigValid")]
    assert config_notices == ([Notice("Warning", "ConfigValidFalse", config.message)] if valid == "False" else [])


def test_another_refusal_under_the_same_reason_is_told_again_and_the_same_one_is_not() -> None:
    too_short = make_spec({"sessionTimeoutMs": 3000, "heartbeatIntervalMs": 500})
    too_long = make_spec({"sessionTimeoutMs": 2_000_000, "heartbeatIntervalMs": 3000, "maxPollIntervalMs": 2_500_000})
    first, _ = reconcile(EMPTY, observe(facts(STABLE3), PODS, spec=too_short), NOW)
    again, quiet = reconcile(first, observe(facts(STABLE3), PODS, spec=too_short), NOW + timedelta(seconds=30))
    assert [n for n in quiet if n.reason.startswith("ConfigValid")] == []
    other, told = reconcile(again, observe(facts(STABLE3), PODS, spec=too_long), NOW + timedelta(seconds=60))
    config = condition(other, ConditionType.CONFIG_VALID)
    assert config.reason == condition(first, ConditionType.CONFIG_VALID).reason == "TimingsRejected"
    assert config.message != condition(first, ConditionType.CONFIG_VALID).message
    assert [n for n in told if n.reason.startswith("ConfigValid")] == [
        Notice("Warning", "ConfigValidFalse", config.message)
    ]


# --- times and generations ----------------------------------------------------------------------------------------


def test_last_transition_time_of_unchanged_conditions_stays_across_resyncs() -> None:
    status = stable_status(NOW)
    obs = observe(facts(STABLE3), PODS)
    for minutes in (1, 2, 10):
        status, notices = reconcile(status, obs, NOW + timedelta(minutes=minutes))
        assert notices == []
        assert {c.type: c.last_transition_time for c in status.conditions} == dict.fromkeys(
            CONDITION_ORDER, rfc3339(NOW)
        )

    flip_at = NOW + timedelta(minutes=11)
    rebalancing, _ = reconcile(
        status, observe(facts(view([M0, M1, M2], GroupState.PREPARING_REBALANCE)), PODS), flip_at
    )
    moved = {c.type for c in rebalancing.conditions if c.last_transition_time == rfc3339(flip_at)}
    assert moved == {ConditionType.READY, ConditionType.REBALANCING}
    assert {c.last_transition_time for c in rebalancing.conditions if c.type not in moved} == {rfc3339(NOW)}

    # a new reason without a new status (Rebalancing: False/Stable → False/Empty) keeps the time
    empty_at = NOW + timedelta(minutes=12)
    empty, _ = reconcile(status, observe(facts(view([], GroupState.EMPTY)), PODS), empty_at)
    assert truth(empty, ConditionType.REBALANCING) == ("False", "Empty")
    assert condition(empty, ConditionType.REBALANCING).last_transition_time == rfc3339(NOW)
    assert condition(empty, ConditionType.READY).last_transition_time == rfc3339(empty_at)


@pytest.mark.parametrize(
    "broker",
    [facts(STABLE3), Unreachable("BrokerUnreachable", "bootstrap kafka:9092: timed out")],
    ids=["described", "unreachable"],
)
@pytest.mark.parametrize("owner", [None, "shop/orders-first"])
def test_observed_generation_follows_the_observation(broker: GroupFacts | Unreachable, owner: str | None) -> None:
    status, _ = reconcile(EMPTY, observe(broker, PODS, generation=3, owner=owner), NOW)
    assert status.observed_generation == 3
    assert {c.observed_generation for c in status.conditions} == {3}

    same, _ = reconcile(status, observe(broker, PODS, generation=3, owner=owner), NOW + timedelta(seconds=30))
    assert same.observed_generation == 3
    assert {c.observed_generation for c in same.conditions} == {3}

    later, _ = reconcile(status, observe(broker, PODS, generation=4, owner=owner), NOW + timedelta(seconds=60))
    assert later.observed_generation == 4
    owned = [c for c in later.conditions if c.type is not ConditionType.RESTART_IN_PROGRESS]
    assert {c.observed_generation for c in owned} == {4}


def test_generation_change_refreshes_every_condition() -> None:
    status, _ = reconcile(EMPTY, observe(facts(STABLE3), PODS, generation=3), NOW)
    later, _ = reconcile(status, observe(facts(STABLE3), PODS, generation=4), NOW + timedelta(seconds=60))

    assert {c.type: c.observed_generation for c in later.conditions} == dict.fromkeys(CONDITION_ORDER, 4)


def test_last_rebalance_moves_only_when_membership_or_partition_counts_change() -> None:
    t = [NOW + timedelta(minutes=i) for i in range(10)]
    status, _ = reconcile(EMPTY, observe(facts(view([M0, M1])), PODS), t[0])
    assert status.last_rebalance is None  # the first sync sees the group, not a change of it

    status, _ = reconcile(status, observe(facts(view([M0, M1])), PODS), t[1])
    assert status.last_rebalance is None

    status, _ = reconcile(status, observe(facts(view([M0, M1, M2])), PODS), t[2])  # a member joined
    assert status.last_rebalance == rfc3339(t[2])

    status, _ = reconcile(status, observe(facts(view([M0, M1, M2])), PODS), t[3])
    assert status.last_rebalance == rfc3339(t[2])

    moved = [member(M0.member_id, "orders-0", [P0]), member(M1.member_id, "orders-1", [P1, P2]), M2]
    status, _ = reconcile(status, observe(facts(view(moved)), PODS), t[4])  # same members, partition counts moved
    assert status.last_rebalance == rfc3339(t[4])

    status, _ = reconcile(status, observe(Unreachable("BrokerUnreachable", "down")), t[5])
    assert status.last_rebalance == rfc3339(t[4])

    status, _ = reconcile(status, observe(facts(view(moved)), PODS), t[6])  # back, unchanged
    assert status.last_rebalance == rfc3339(t[4])

    replaced = [member("orders-0-new-incarnation", "orders-0", [P0]), *moved[1:]]
    status, _ = reconcile(status, observe(facts(view(replaced)), PODS), t[7])  # a member id changed
    assert status.last_rebalance == rfc3339(t[7])

    # entering a rebalancing state is a rebalance seen, even before membership changes
    status, _ = reconcile(status, observe(facts(view(replaced, GroupState.PREPARING_REBALANCE)), PODS), t[8])
    assert status.last_rebalance == rfc3339(t[8])
    status, _ = reconcile(status, observe(facts(view(replaced, GroupState.PREPARING_REBALANCE)), PODS), t[9])
    assert status.last_rebalance == rfc3339(t[8])


def test_first_describe_after_an_unreachable_first_sync_is_not_a_rebalance() -> None:
    down, _ = reconcile(EMPTY, observe(Unreachable("BrokerUnreachable", "down")), NOW)
    status, _ = reconcile(down, observe(facts(STABLE3), PODS), NOW + timedelta(minutes=1))
    assert status.last_rebalance is None


# --- identity -----------------------------------------------------------------------------------------------------


def test_static_members_map_by_instance_id_even_when_client_ids_differ() -> None:
    members = [
        member("consumer-1-aaaa", "consumer-1", [P0], instance_id="shop-orders-0"),
        member("consumer-1-bbbb", "consumer-1", [P1], instance_id="shop-orders-1"),
        member("consumer-1-cccc", "consumer-1", [P2], instance_id="shop-orders-2"),
    ]
    pods = [PodFacts("orders-2", "shop-orders-2"), PodFacts("orders-0", "shop-orders-0"), PodFacts("orders-1", None)]

    status, _ = reconcile(EMPTY, observe(facts(view(members)), pods), NOW)

    assert {m.member_id: m.pod for m in status.members} == {
        "consumer-1-aaaa": "orders-0",
        "consumer-1-bbbb": None,  # the pod does not know its instance id and no client.id is its name
        "consumer-1-cccc": "orders-2",
    }
    assert {m.member_id: m.instance_id for m in status.members}["consumer-1-aaaa"] == "shop-orders-0"


@pytest.mark.parametrize("host", ["orders-0", "/orders-0", "/10.244.0.12"])
def test_host_alone_never_maps_a_pod(host: str) -> None:
    members = [member("consumer-7-aaaa", "consumer-7", [P0], host=host)]
    pods = [PodFacts("orders-0"), PodFacts("orders-0.orders.shop.svc"), PodFacts("10.244.0.12")]

    status, _ = reconcile(EMPTY, observe(facts(view(members)), pods), NOW)

    assert [m.pod for m in status.members] == [None]


# --- properties ---------------------------------------------------------------------------------------------------

PARTS = tuple(TopicPartitionRef(topic, p) for topic in ("orders", "audit") for p in range(3))
POD_NAMES = ("orders-0", "orders-1", "orders-2")
CLIENT_IDS = (*POD_NAMES, "consumer", "orders")
INSTANCE_IDS = (None, "shop-orders-0", "shop-orders-1", "shop-orders-2")
HOSTS = ("/127.0.0.1", *POD_NAMES)
MEMBER_IDS = tuple(f"member-{i}" for i in range(6))
GONE_IDS = ("gone-0", "gone-1")
SPECS = (
    SPEC,
    make_spec({"sessionTimeoutMs": 10000, "heartbeatIntervalMs": 4000}),
    make_spec({"sessionTimeoutMs": 3000, "heartbeatIntervalMs": 500}),
    make_spec(liveness={"signal": "progress"}),
)


@st.composite
def group_views(draw: st.DrawFn) -> GroupView:
    ids = draw(st.lists(st.sampled_from(MEMBER_IDS), unique=True, max_size=5))
    members = [
        MemberView(
            member_id,
            draw(st.sampled_from(INSTANCE_IDS)),
            draw(st.sampled_from(CLIENT_IDS)),
            draw(st.sampled_from(HOSTS)),
            tuple(draw(st.lists(st.sampled_from(PARTS), unique=True, max_size=4))),
        )
        for member_id in ids
    ]
    return GroupView(
        "orders", draw(st.sampled_from(GroupState)), draw(st.sampled_from(GroupType)), "range", 1, tuple(members)
    )


offsets = st.dictionaries(st.sampled_from(PARTS), st.integers(0, 10_000), max_size=len(PARTS))


@st.composite
def group_facts(draw: st.DrawFn) -> GroupFacts:
    return replace(facts(draw(group_views()), draw(offsets), draw(offsets)), share_lag=draw(offsets))


pod_lists = st.lists(
    st.builds(PodFacts, st.sampled_from(POD_NAMES), st.sampled_from(INSTANCE_IDS)),
    unique_by=lambda p: p.name,
    max_size=3,
)


@st.composite
def stall_lists(draw: st.DrawFn) -> list[StallReport]:
    ids = draw(st.lists(st.sampled_from(MEMBER_IDS + GONE_IDS), unique=True, max_size=4))
    out = []
    for member_id in ids:
        since = NOW - timedelta(seconds=draw(st.integers(1, 600)))
        out.append(StallReport("orders", member_id, draw(st.sampled_from((None, *POD_NAMES))), "shop", since, NOW))
    return out


@st.composite
def observations(draw: st.DrawFn, *, reachable: bool = True) -> Observation:
    broker = draw(
        group_facts()
        if reachable
        else st.one_of(group_facts(), st.just(Unreachable("BrokerUnreachable", "bootstrap kafka:9092: refused")))
    )
    return Observation(
        draw(st.integers(0, 20)),
        draw(st.sampled_from(SPECS)),
        broker,
        tuple(draw(pod_lists)),
        tuple(draw(stall_lists())),
        draw(st.sampled_from((None, None, "shop/orders-first"))),
    )


@st.composite
def previous_statuses(draw: st.DrawFn) -> ConsumerGroupStatus:
    if draw(st.booleans()):
        return EMPTY
    status, _ = reconcile(EMPTY, draw(observations(reachable=False)), NOW - timedelta(minutes=5))
    return status


def reference_lag(assignment: Sequence[TopicPartitionRef], facts: GroupFacts) -> int | None:
    """Σ over assigned partitions with both offsets of (end − committed), a committed offset past the end counting 0."""
    known = [tp for tp in assignment if tp in facts.committed and tp in facts.end_offsets]
    if not known:
        return None
    return sum(max(facts.end_offsets[tp] - facts.committed[tp], 0) for tp in known)


@settings(max_examples=150, deadline=None)
@given(previous=previous_statuses(), obs=observations())
def test_reconcile_properties(previous: ConsumerGroupStatus, obs: Observation) -> None:
    assert isinstance(obs.broker, GroupFacts)
    group = obs.broker.view
    status, _ = reconcile(previous, obs, NOW)

    present = {m.member_id for m in group.members}
    stalled = {s.member_id for s in obs.stalls} & present
    assert status.member_count == len(group.members)
    assert sorted(m.member_id for m in status.members) == sorted(present)
    assert status.stalled_count == len(stalled)
    assert {m.member_id for m in status.members if m.stalled} == stalled
    assert {m.member_id for m in status.stalled_members} == stalled

    by_id = {m.member_id: m for m in group.members}
    for m in status.members:
        assert m.partitions == len(by_id[m.member_id].assignment)
    lags = [lag for m in group.members if (lag := reference_lag(m.assignment, obs.broker)) is not None]
    if group.type is GroupType.SHARE:  # no commits: the broker's count over every share-partition
        lags = list(obs.broker.share_lag.values())
    total = group_lag(obs.broker)
    assert total == (sum(lags) if lags else None)
    assert total is None or total >= 0

    pods = {p.name: p for p in obs.pods}
    for m in status.members:  # a pod is proven by instance id or client.id == pod name; never by host
        if m.pod is None:
            continue
        pod = pods[m.pod]
        assert (pod.instance_id is not None and pod.instance_id == m.instance_id) or m.client_id == pod.name
        assert not (pod.instance_id and m.instance_id and pod.instance_id != m.instance_id)

    assert status.observed_generation == obs.generation
    assert [c.type for c in status.conditions] == list(CONDITION_ORDER)
    had_restart = any(c.type is ConditionType.RESTART_IN_PROGRESS for c in previous.conditions)
    for c in status.conditions:
        if c.type is ConditionType.RESTART_IN_PROGRESS and had_restart:
            continue  # see test_generation_change_refreshes_every_condition
        assert c.observed_generation == obs.generation, c.type


@settings(max_examples=150, deadline=None)
@given(previous=previous_statuses(), obs=observations(reachable=False), later=st.integers(1, 3600))
def test_reconcile_is_idempotent_on_its_own_output(previous: ConsumerGroupStatus, obs: Observation, later: int) -> None:
    status, _ = reconcile(previous, obs, NOW)

    again, notices = reconcile(status, obs, NOW + timedelta(seconds=later))

    assert notices == []
    assert again == status


def test_a_kip848_group_on_a_coordinator_serving_only_classic_is_config_invalid_naming_why() -> None:
    """Kafka 3.x: `group.protocol: consumer` cannot work; ConfigValid says so, naming the broker config."""
    spec = make_spec({"groupProtocol": "consumer"})
    classic_only = replace(LIMITS, protocols=("classic",), from_defaults=False)
    empty = GroupView("orders", GroupState.DEAD, GroupType.CLASSIC, "", 1, ())
    status, _ = reconcile(EMPTY, observe(facts(empty, limits=classic_only), PODS, spec=spec), NOW)
    config = condition(status, ConditionType.CONFIG_VALID)
    assert (config.status, config.reason) == ("False", "TimingsRejected")
    assert config.message.startswith(f"{rules.PROTOCOLS}: group.protocol=consumer but")
    served = replace(classic_only, protocols=("classic", "consumer"))
    status, _ = reconcile(EMPTY, observe(facts(empty, limits=served), PODS, spec=spec), NOW)
    assert rules.PROTOCOLS not in condition(status, ConditionType.CONFIG_VALID).message
