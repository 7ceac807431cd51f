"""The coordinated restart planner as a pure function: (spec, StatefulSet, pods, group, last rollout,
how the step's bridge ended, now) → (rollout, actions). Expectations follow the rules `domain.rollout` states."""

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vigil_operator.domain import rollout as ro
from vigil_operator.domain.conditions import rfc3339
from vigil_operator.domain.reconcile import Notice
from vigil_operator.domain.spec import ConsumerGroupSpec, SpecError, parse_spec
from vigil_operator.domain.status import RolloutPhase, RolloutStatus

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
OLD, NEW = "orders-aaa", "orders-bbb"


def spec(**restart: Any) -> ConsumerGroupSpec:
    return parse_spec({
        "groupId": "orders", "kafka": {"bootstrapServers": "kafka:9092"},
        "workload": {"kind": "StatefulSet", "name": "orders"}, "membership": "static",
        "restart": {"strategy": "Coordinated", "maxRestartSeconds": 60, **restart},
    })  # fmt: skip


SPEC = spec()
SET = ro.SetFacts(update_strategy="OnDelete", update_revision=NEW, replicas=3)


def pod(i: int, revision: str = OLD, *, ready: bool = True, uid: str | None = None, **extra: Any) -> ro.SetPod:
    return ro.SetPod(f"orders-{i}", i, uid or f"uid-{i}", revision, ready, True, instance_id=f"ns-orders-{i}",
                     **extra)  # fmt: skip


def group(stable: bool = True, **members: str) -> ro.GroupNow:
    return ro.GroupNow(stable, {f"ns-{k.replace('_', '-')}": v for k, v in members.items()})


MEMBERS = {"orders_0": "m0", "orders_1": "m1", "orders_2": "m2"}


def rolling(current: str | None = None, done: int = 0, **extra: Any) -> RolloutStatus:
    fields: dict[str, Any] = {"target_revision": NEW, "phase": RolloutPhase.ROLLING, "total": 3, "done": done,
                              "current_pod": current}  # fmt: skip
    if current is not None:
        i = current.rsplit("-", 1)[1]
        fields |= {"old_pod_uid": f"uid-{i}", "old_member_id": f"m{i}", "step_started_at": rfc3339(NOW)}
    return RolloutStatus(**(fields | extra))


def begun(actions: list[ro.Action]) -> list[str]:
    return [a.pod for a in actions if isinstance(a, ro.BeginStep)]


def notes(actions: list[ro.Action]) -> list[str]:
    return [n.reason for n in map(ro.note, actions) if n is not None]


# --- refusals ----------------------------------------------------------------------------------------------------


def test_no_refusal_without_coordinated_restarts() -> None:
    plain = parse_spec({"groupId": "g", "kafka": {"bootstrapServers": "k:9092"},
                        "workload": {"kind": "StatefulSet", "name": "orders"}, "membership": "static"})  # fmt: skip
    assert ro.refusal(plain, None) is None


@pytest.mark.parametrize(
    ("workload", "reason", "field"),
    [
        (None, "WorkloadNotFound", "spec.workload.name: "),
        (ro.SetFacts("RollingUpdate", NEW, 3), "UpdateStrategyNotOnDelete", "spec.restart.strategy: "),
        (SET, None, None),
    ],
)
def test_refusal_names_the_field(workload: ro.SetFacts | None, reason: str | None, field: str | None) -> None:
    found = ro.refusal(SPEC, workload)
    assert (found.reason if found else None) == reason
    assert (found.message.split(" ")[0] + " " if found else None) == field


def test_coordinated_needs_a_static_group() -> None:
    with pytest.raises(SpecError, match=r"^spec\.restart\.strategy: Coordinated needs membership static"):
        parse_spec({"groupId": "g", "kafka": {"bootstrapServers": "k:9092"},
                    "workload": {"kind": "StatefulSet", "name": "orders"},
                    "restart": {"strategy": "Coordinated"}})  # fmt: skip


# --- what is outdated ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("the_pod", "workload", "expected"),
    [
        (pod(0, NEW), SET, False),
        (pod(0, OLD), SET, True),
        (ro.SetPod("orders-0", 0, "u", NEW, True, False), SET, True),  # no sidecar: re-rolled to get one
        (pod(0, NEW, created_at=NOW - timedelta(minutes=1)), ro.SetFacts("OnDelete", NEW, 3, NOW), True),
        (pod(0, NEW, created_at=NOW + timedelta(seconds=1)), ro.SetFacts("OnDelete", NEW, 3, NOW), False),
    ],
)
def test_outdated(the_pod: ro.SetPod, workload: ro.SetFacts, expected: bool) -> None:
    assert ro.outdated(workload, the_pod) is expected


def test_a_restart_request_is_its_own_target() -> None:
    assert ro.target(SET) == NEW
    assert ro.target(ro.SetFacts("OnDelete", NEW, 3, NOW)) == f"{NEW}+restart@{rfc3339(NOW)}"


# --- plan ----------------------------------------------------------------------------------------------------------


def plan(
    pods: list[ro.SetPod], previous: RolloutStatus | None, *, stable: bool = True, outcome: str | None = None,
    members: dict[str, str] | None = None, now: datetime = NOW, the_spec: ConsumerGroupSpec = SPEC,
) -> tuple[RolloutStatus | None, list[ro.Action]]:  # fmt: skip
    return ro.plan(the_spec, SET, pods, group(stable, **(members or MEMBERS)), previous, bridge_outcome=outcome,
                   now=now)  # fmt: skip


def test_nothing_outdated_nothing_to_do_but_the_target_is_recorded() -> None:
    state, actions = plan([pod(i, NEW) for i in range(3)], None)
    assert actions == []
    assert state == RolloutStatus(target_revision=NEW, phase=RolloutPhase.COMPLETE, message="nothing to restart")
    assert plan([pod(i, NEW) for i in range(3)], state) == (state, [])


def test_a_new_revision_begins_with_the_highest_ordinal() -> None:
    state, actions = plan([pod(i) for i in range(3)], None)
    assert state is not None
    assert (state.phase, state.total, state.current_pod, state.old_pod_uid) == (RolloutPhase.ROLLING, 3, "orders-2",
                                                                                "uid-2")  # fmt: skip
    assert begun(actions) == ["orders-2"]
    assert notes(actions) == ["RolloutStarted"]
    assert actions == [ro.Started(NEW, 3), ro.BeginStep("orders-2", "uid-2", "ns-orders-2")]


@pytest.mark.parametrize(
    ("pods", "stable", "why"),
    [
        ([pod(0), pod(1), pod(2)], False, "waiting for the group to be Stable"),
        ([pod(0), pod(1, ready=False), pod(2)], True, "waiting for orders-1 to be Ready"),
        ([pod(0), pod(1), pod(2, deleting=True)], True, "waiting for orders-2 to be Ready"),
    ],
)
def test_a_step_begins_only_when_stable_and_all_ready(pods: list[ro.SetPod], stable: bool, why: str) -> None:
    state, actions = plan(pods, rolling(), stable=stable)
    assert begun(actions) == []
    assert state is not None
    assert state.message == why


def test_a_step_ends_when_the_bridge_rejoined_and_the_replacement_is_ready() -> None:
    pods = [pod(0), pod(1), pod(2, NEW, uid="uid-2b")]
    back = dict(MEMBERS, orders_2="m2-new")
    state, actions = plan(pods, rolling("orders-2"), outcome="rejoined", members=back)
    assert state is not None
    assert (state.done, state.current_pod) == (1, "orders-1")  # the next step begins in the same resync
    assert notes(actions) == ["RolloutStep"]
    ended = "orders-2 restarted (1/3): back in the same generation"
    assert actions == [ro.StepEnded("orders-2", ended), ro.BeginStep("orders-1", "uid-1", "ns-orders-1")]
    assert ro.note(actions[0]) == Notice("Normal", "RolloutStep", ended)


@pytest.mark.parametrize(
    ("pods", "outcome", "members", "stable"),
    [
        ([pod(0), pod(1)], None, MEMBERS, True),  # the replacement not created yet
        ([pod(0), pod(1), pod(2, NEW, uid="uid-2b", ready=False)], "rejoined", dict(MEMBERS, orders_2="x"), True),
        ([pod(0), pod(1), pod(2, NEW, uid="uid-2b")], None, dict(MEMBERS, orders_2="x"), True),  # bridge running
        ([pod(0), pod(1), pod(2, NEW, uid="uid-2b")], "rejoined", MEMBERS, True),  # still the old member id
        ([pod(0), pod(1), pod(2, NEW, uid="uid-2b")], "rejoined", dict(MEMBERS, orders_2="x"), False),
        ([pod(0), pod(1), pod(2, OLD)], "rejoined", dict(MEMBERS, orders_2="x"), True),  # the old pod (same uid)
    ],
)
def test_a_step_waits_for_every_condition(
    pods: list[ro.SetPod], outcome: str | None, members: dict[str, str], stable: bool
) -> None:
    state, actions = plan(pods, rolling("orders-2"), outcome=outcome, members=members, stable=stable)
    assert state is not None
    assert (state.phase, state.current_pod, state.done) == (RolloutPhase.ROLLING, "orders-2", 0)
    assert actions == []


@pytest.mark.parametrize("outcome", ["removed", "member-gone", "deadline", "error", "crash-loop"])
def test_any_other_end_of_the_bridge_pauses(outcome: str) -> None:
    state, actions = plan([pod(0), pod(1)], rolling("orders-2"), outcome=outcome)
    assert state is not None
    assert state.phase is RolloutPhase.PAUSED
    assert outcome in state.message
    assert notes(actions) == ["RolloutPaused"]
    assert actions == [ro.Paused(state.message)]


def test_an_overrun_step_pauses() -> None:
    late = NOW + timedelta(seconds=61)
    state, actions = plan([pod(0), pod(1)], rolling("orders-2"), now=late)
    assert state is not None
    assert state.phase is RolloutPhase.PAUSED
    assert notes(actions) == ["RolloutPaused"]
    assert "maxRestartSeconds (60s)" in state.message
    in_time, _ = plan([pod(0), pod(1)], rolling("orders-2"), now=NOW + timedelta(seconds=60))
    assert in_time is not None
    assert in_time.phase is RolloutPhase.ROLLING


def test_a_paused_rollout_stays_paused_until_the_target_changes() -> None:
    paused = rolling("orders-2", phase=RolloutPhase.PAUSED, message="x")
    assert plan([pod(i) for i in range(3)], paused) == (paused, [])
    other = paused.model_copy(update={"target_revision": "orders-older"})
    state, actions = plan([pod(i) for i in range(3)], other)
    assert state is not None
    assert (state.phase, state.target_revision) == (RolloutPhase.ROLLING, NEW)
    assert begun(actions) == ["orders-2"]


def test_the_last_step_completes_the_rollout() -> None:
    pods = [pod(0, NEW, uid="uid-0b"), pod(1, NEW), pod(2, NEW)]
    state, actions = plan(pods, rolling("orders-0", done=2), outcome="rejoined", members=dict(MEMBERS, orders_0="n"))
    assert state is not None
    assert (state.phase, state.done, state.current_pod) == (RolloutPhase.COMPLETE, 3, None)
    assert notes(actions) == ["RolloutStep", "RolloutComplete"]
    assert actions[-1] == ro.Completed(NEW, "3 pod(s) restarted")
    assert ro.note(actions[-1]) == Notice("Normal", "RolloutComplete", f"{NEW}: 3 pod(s) restarted with no rebalance")


def test_pods_beyond_the_replica_count_are_not_rolled() -> None:
    state, actions = plan([pod(0, NEW), pod(1, NEW), pod(2, NEW), pod(3)], None)
    assert actions == []
    assert state is not None
    assert (state.phase, state.total) == (RolloutPhase.COMPLETE, 0)


# --- the actions tell themselves; the runtime pauses as the plan does -----------------------------------------------


@pytest.mark.parametrize(
    ("action", "note"),
    [
        (ro.Started("rev", 2), Notice("Normal", "RolloutStarted", "restarting 2 pod(s) one at a time for rev")),
        (ro.StepEnded("orders-1", "orders-1 restarted"), Notice("Normal", "RolloutStep", "orders-1 restarted")),
        (ro.Paused("orders-1: why"), Notice("Warning", "RolloutPaused", "orders-1: why")),
        (ro.Completed("rev", "2 pod(s) restarted"),
         Notice("Normal", "RolloutComplete", "rev: 2 pod(s) restarted with no rebalance")),
        (ro.BeginStep("orders-1", "uid-1", "ns-orders-1"), None),  # told by the runtime once the pod is deleted
    ],
)  # fmt: skip
def test_each_action_tells_itself(action: ro.Action, note: Notice | None) -> None:
    assert ro.note(action) == note


def test_a_step_that_could_not_begin_pauses_as_the_plan_does() -> None:
    begun_state = rolling("orders-2", bridge='{"v": 1}')
    paused, told = ro.pause(begun_state, "orders-2: delete refused", bridge=None)
    assert (paused.phase, paused.message, paused.bridge, paused.current_pod) == (
        RolloutPhase.PAUSED, "orders-2: delete refused", None, "orders-2")  # fmt: skip
    assert told == ro.Paused("orders-2: delete refused")
    assert plan([pod(i) for i in range(3)], paused) == (paused, [])  # and it stays paused


@pytest.mark.parametrize(("heartbeat_ms", "seconds"), [(0, 0.5), (3000, 3.5), (5000, 5.5), (250, 0.75)])
def test_a_raised_session_is_waited_for_one_heartbeat_and_a_round_trip(heartbeat_ms: int, seconds: float) -> None:
    assert ro.session_raise_wait(heartbeat_ms) == pytest.approx(seconds)


# --- properties --------------------------------------------------------------------------------------------------


@given(
    revisions=st.lists(st.booleans(), min_size=1, max_size=6),
    ready=st.lists(st.booleans(), min_size=6, max_size=6),
    stable=st.booleans(),
    phase=st.sampled_from([None, RolloutPhase.ROLLING, RolloutPhase.PAUSED, RolloutPhase.COMPLETE]),
    outcome=st.sampled_from([None, "rejoined", "removed", "deadline"]),
    elapsed=st.integers(0, 120),
)
def test_at_most_one_pod_and_only_the_highest_outdated_when_all_is_well(  # noqa: PLR0917 - one per strategy
    revisions: list[bool], ready: list[bool], stable: bool, phase: RolloutPhase | None, outcome: str | None,
    elapsed: int,
) -> None:  # fmt: skip
    """Whatever the mix: at most one step begins; it begins only in a Stable group whose pods are all Ready and not
    while paused; it is the highest ordinal outdated pod; a rollout completes only when nothing is outdated."""
    workload = ro.SetFacts("OnDelete", NEW, len(revisions))
    pods = [pod(i, NEW if fresh else OLD, ready=ready[i]) for i, fresh in enumerate(revisions)]
    previous = None if phase is None else RolloutStatus(target_revision=NEW, phase=phase, total=len(revisions))
    members = {f"ns-orders-{i}": f"m{i}" for i in range(len(revisions))}
    state, actions = ro.plan(SPEC, workload, pods, ro.GroupNow(stable, members), previous, bridge_outcome=outcome,
                             now=NOW + timedelta(seconds=elapsed))  # fmt: skip
    steps = [a for a in actions if isinstance(a, ro.BeginStep)]
    assert len(steps) <= 1
    stale = [p for p in pods if ro.outdated(workload, p)]
    if steps:
        assert stable
        assert all(p.ready for p in pods)
        assert phase is not RolloutPhase.PAUSED
        assert steps[0].pod == max(stale, key=lambda p: p.ordinal).name
        assert state is not None
        assert state.current_pod == steps[0].pod
    if state is not None and state.phase is RolloutPhase.COMPLETE and state is not previous:
        assert not stale  # (no step was in progress here, so none ended in this plan)


@given(
    revisions=st.lists(st.booleans(), min_size=1, max_size=6),
    ready=st.lists(st.booleans(), min_size=6, max_size=6),
    stable=st.booleans(),
    phase=st.sampled_from([None, RolloutPhase.ROLLING, RolloutPhase.PAUSED, RolloutPhase.COMPLETE]),
    current=st.booleans(),
    outcome=st.sampled_from([None, "rejoined", "removed", "deadline"]),
    elapsed=st.integers(0, 120),
)
def test_the_actions_say_what_the_plan_did(  # noqa: PLR0917 - one per strategy
    revisions: list[bool], ready: list[bool], stable: bool, phase: RolloutPhase | None, current: bool,
    outcome: str | None, elapsed: int,
) -> None:  # fmt: skip
    """The runtime acts on the actions alone: a rollout begun says Started (first), one that paused in this resync
    Paused, one that completed Completed, a step begun BeginStep (last); each at most once, each told by its own
    note."""
    workload = ro.SetFacts("OnDelete", NEW, len(revisions))
    pods = [pod(i, NEW if fresh else OLD, ready=ready[i]) for i, fresh in enumerate(revisions)]
    step = f"orders-{len(revisions) - 1}" if current else None
    previous = None if phase is None else rolling(step, phase=phase, total=len(revisions))
    members = {f"ns-orders-{i}": f"m{i}" for i in range(len(revisions))}
    state, actions = ro.plan(SPEC, workload, pods, ro.GroupNow(stable, members), previous, bridge_outcome=outcome,
                             now=NOW + timedelta(seconds=elapsed))  # fmt: skip
    kinds = [type(a) for a in actions]
    assert all(kinds.count(kind) <= 1 for kind in set(kinds))
    assert (ro.Started in kinds) is (previous is None and state.phase is RolloutPhase.ROLLING)
    assert (ro.Paused in kinds) is (state.phase is RolloutPhase.PAUSED and phase is RolloutPhase.ROLLING)
    assert (ro.Completed in kinds) is (state.phase is RolloutPhase.COMPLETE and phase is RolloutPhase.ROLLING)
    before = None if previous is None else previous.current_pod
    assert (ro.BeginStep in kinds) is (state.current_pod is not None and state.current_pod != before)
    if ro.Started in kinds:
        assert kinds[0] is ro.Started
    if ro.BeginStep in kinds:
        assert kinds[-1] is ro.BeginStep
    assert [ro.note(a) is None for a in actions] == [k is ro.BeginStep for k in kinds]
