"""The watchdog's decisions as tables: each case is a list of (time, observation, expected actions).

`WAIT` in an expectation matches any `Wait`; a `Wait(until)` matches exactly. Times are monotonic seconds.
"""

import ast
import pathlib
from dataclasses import replace

import pytest

from vigil_core.kafka.model import GroupState, GroupType, GroupView, MemberView, TopicPartitionRef
from vigil_core.kafka.outcomes import TRANSPORT_ERROR, Api, Outcome, classify, code_of
from vigil_core.liveness import StallAction
from vigil_sidecar.watchdog import decide as wd
from vigil_sidecar.watchdog.state import (
    Action,
    ActionResult,
    Alert,
    AlertKind,
    Beacon,
    CoordinatorResult,
    Describe,
    DescribeResult,
    Evict,
    LookupCoordinator,
    Observation,
    Restart,
    Tick,
    Wait,
    WatchdogConfig,
    WatchdogState,
)
from vigil_sidecar.watchdog.timers import CheckTimer, PollTimer, SessionView

POD = "pod-0"
HOST = "/127.0.0.1"
CFG = WatchdogConfig(pod_name=POD, stall_timeout=30.0, check_interval=5.0, cooldown=120.0, session_timeout=45.0)
WAIT = object()
TICK = Tick()


def member(
    member_id: str = "pod-0-a", client_id: str = POD, instance_id: str | None = None, *, parts: int = 1
) -> MemberView:
    return MemberView(member_id, instance_id, client_id, HOST, tuple(TopicPartitionRef("t", p) for p in range(parts)))


OURS = member()
OTHER = member("pod-1-b", "pod-1")


def view(*members: MemberView, state: GroupState = GroupState.STABLE) -> DescribeResult:
    return DescribeResult(GroupView("g", state, GroupType.CLASSIC, "range", 1, members or (OURS, OTHER)))


def beacon(member_id: str = "pod-0-a", parts: int = 3, instance_id: str | None = None) -> Beacon:
    return Beacon(member_id=member_id, generation=1, instance_id=instance_id, assigned_partitions=parts, app_time=0.0)


def outcome(api: Api, name: str) -> Outcome:
    return classify(api, code_of(name))


def left(name: str = "NONE") -> ActionResult:
    return ActionResult(outcome(Api.LEAVE_GROUP, name))


def evict(age: float, member_id: str = "pod-0-a", instance_id: str | None = None) -> Evict:
    return Evict(member_id, instance_id, wd.stall_reason(age, 30.0))


def undone(member_id: str, back: float) -> str:
    return (
        f"vigil: eviction undone: member {member_id} rejoined without polling (back in the group {back:.0f}s, no poll)"
    )


def evict_waiting(age: float, state: GroupState) -> Evict:
    """The eviction of a member a rebalance waits on: the reason names the group's state."""
    return Evict("pod-0-a", None, f"{wd.stall_reason(age, 30.0)} while the group waits for it ({state.value})")


Step = tuple[float, Observation, list[object]]

# a watchdog that found the coordinator, got one poll at t=1 and proved the member: its stall deadline is 31
STARTED: list[Step] = [
    (0.0, TICK, [LookupCoordinator()]),
    (0.1, CoordinatorResult(1), [Wait(5.1)]),
    (1.0, beacon(), [Describe()]),
    (1.1, view(), [Wait(6.1)]),
]
STALL_EVICTED: list[Step] = [
    *STARTED,
    (30.9, TICK, [Wait(31.0)]),
    (31.0, TICK, [Describe()]),
    (31.2, view(), [evict(30.2)]),
]

# an idle app (no partitions, by its report and the broker's view), silent since t=1, looked at at its deadline
IDLE_STARTED: list[Step] = [
    (0.0, TICK, [LookupCoordinator()]),
    (0.1, CoordinatorResult(1), [WAIT]),
    (1.0, beacon(parts=0), [Describe()]),
    (1.1, view(member(parts=0), OTHER), [WAIT]),
    (31.0, TICK, [Describe()]),
]

CASES: dict[str, list[Step]] = {
    "start: find the coordinator, wait for the app's first poll, prove its member once": STARTED,
    "healthy app: polls keep the timer fresh, no broker request per check": [
        *STARTED,
        *[(t, beacon(), [WAIT]) for t in (10.0, 20.0, 30.0, 40.0, 50.0)],
        (79.0, TICK, [WAIT]),
    ],
    "never before the threshold": [*STARTED, (30.99, TICK, [Wait(31.0)])],
    "stalled in a Stable group: look again, then evict the proven pair with a reason": STALL_EVICTED,
    "DONE ends the episode; it is watched for a cooldown, then nothing more until the app polls again": [
        *STALL_EVICTED,
        (31.3, left(), [WAIT]),
        (36.3, TICK, [Describe()]),  # did it stay out?
        (36.4, view(OTHER), [WAIT]),
        (41.4, TICK, [Describe()]),
        (41.5, view(OTHER), [WAIT]),
        (151.3, TICK, [WAIT]),  # a cooldown (120 s) after the eviction: the watch ends
        *[(t, TICK, [WAIT]) for t in (200.0, 400.0)],
    ],
    "polling again after an eviction that held, under the same member id (KIP-848 with a listener): proven again": [
        *STALL_EVICTED,
        (31.3, left(), [WAIT]),
        (36.3, TICK, [Describe()]),
        (36.4, view(OTHER), [WAIT]),  # stays out while the app is stalled
        (50.0, beacon(), [Describe()]),  # the app polls: the same id is back, prove it again
        (50.1, view(OURS, OTHER), [WAIT]),
        *[(t, beacon(), [WAIT]) for t in (60.0, 70.0)],
    ],
    "an eviction undone (back, and no poll for a stall timeout: KIP-848, no rebalance callback) → restart once": [
        *STALL_EVICTED,
        (31.3, left(), [WAIT]),
        (36.3, TICK, [Describe()]),
        (36.4, view(OURS, OTHER), [WAIT]),  # back: maybe by a poll that has not returned yet
        (41.4, TICK, [Describe()]),
        (41.5, view(OURS, OTHER), [WAIT]),
        (66.4, TICK, [Describe()]),
        (66.5, view(OURS, OTHER), [Restart("pod-0-a", None, undone("pod-0-a", 30)), WAIT]),
        (71.5, TICK, [WAIT]),  # nothing more until the app polls again
        (100.0, TICK, [WAIT]),
    ],
    "back, then the poll that rejoined returns (a Spring container's, after its poll timeout): nothing undone": [
        *STALL_EVICTED,
        (31.3, left(), [WAIT]),
        (36.3, TICK, [Describe()]),
        (36.4, view(member("pod-0-new"), OTHER), [WAIT]),
        (41.0, beacon("pod-0-new"), [Describe()]),  # the new member is proven, as any other
        (41.1, view(member("pod-0-new"), OTHER), [WAIT]),
        *[(t, beacon("pod-0-new"), [WAIT]) for t in (50.0, 60.0, 70.0)],
        (99.0, TICK, [WAIT]),
    ],
    "seen back, then gone, then back: the stall timeout counts from the last time it came back": [
        *STALL_EVICTED,
        (31.3, left(), [WAIT]),
        (36.3, TICK, [Describe()]),
        (36.4, view(OURS, OTHER), [WAIT]),
        (41.4, TICK, [Describe()]),
        (41.5, view(OTHER), [WAIT]),
        (46.5, TICK, [Describe()]),
        (46.6, view(OURS, OTHER), [WAIT]),
        (66.5, TICK, [Describe()]),
        (66.6, view(OURS, OTHER), [WAIT]),  # 20 s back only
        (76.6, TICK, [Describe()]),
        (76.7, view(OURS, OTHER), [Restart("pod-0-a", None, undone("pod-0-a", 30)), WAIT]),
    ],
    "seen back at the cooldown's end: the watch lasts until a stall timeout after that": [
        *STALL_EVICTED,
        (31.3, left(), [WAIT]),
        (150.0, TICK, [Describe()]),
        (150.1, view(OURS, OTHER), [WAIT]),  # the cooldown ends at 151.3
        (180.1, TICK, [Describe()]),
        (180.2, view(OURS, OTHER), [Restart("pod-0-a", None, undone("pod-0-a", 30)), WAIT]),
    ],
    "back under a new member id with the pod's client id is undone too": [
        *STALL_EVICTED,
        (31.3, left(), [WAIT]),
        (36.3, TICK, [Describe()]),
        (36.4, view(member("pod-0-new"), OTHER), [WAIT]),
        (66.4, TICK, [Describe()]),
        (66.5, view(member("pod-0-new"), OTHER), [Restart("pod-0-new", None, undone("pod-0-new", 30)), WAIT]),
    ],
    "back under the evicted member id, its client.id not the pod's (KIP-848 keeps the id): undone too": [
        (0.0, TICK, [LookupCoordinator()]),
        (0.1, CoordinatorResult(1), [WAIT]),
        (1.0, beacon("k848-x"), [Describe()]),  # proven by the member id the app reported
        (1.1, view(member("k848-x", "orders"), OTHER), [WAIT]),
        (31.0, TICK, [Describe()]),
        (31.1, view(member("k848-x", "orders"), OTHER), [evict(30.1, "k848-x")]),
        (31.3, left(), [WAIT]),
        (36.3, TICK, [Describe()]),
        (36.4, view(member("k848-x", "orders"), OTHER), [WAIT]),
        (66.4, TICK, [Describe()]),
        (66.5, view(member("k848-x", "orders"), OTHER), [Restart("k848-x", None, undone("k848-x", 30)), WAIT]),
    ],
    "the app polls again after the eviction: no watch, no escalation": [
        *STALL_EVICTED,
        (31.3, left(), [WAIT]),
        (33.0, beacon("pod-0-new"), [Describe()]),
        (33.1, view(member("pod-0-new"), OTHER), [WAIT]),
    ],
    "ALREADY_GONE ends the episode without retry": [
        *STALL_EVICTED,
        (31.3, left("UNKNOWN_MEMBER_ID"), [WAIT]),
        (36.0, TICK, [WAIT]),
        (90.0, TICK, [WAIT]),
    ],
    "NOTHING_TO_DO (the instance id moved on) ends the episode without retry": [
        *STALL_EVICTED,
        (31.3, left("FENCED_INSTANCE_ID"), [WAIT]),
        (90.0, TICK, [WAIT]),
    ],
    "a transport error on LeaveGroup: look again after a backoff, retry the same pair": [
        *STALL_EVICTED,
        (31.3, ActionResult(classify(Api.LEAVE_GROUP, TRANSPORT_ERROR)), [Wait(31.8)]),
        (31.8, TICK, [Describe()]),
        (31.9, view(), [evict(30.9)]),
        (32.0, left(), [WAIT]),
    ],
    "a transient LeaveGroup failure, then the app polls: a later stall is a new act, inside the cooldown": [
        *STALL_EVICTED,
        (31.3, ActionResult(classify(Api.LEAVE_GROUP, TRANSPORT_ERROR)), [Wait(31.8)]),
        (31.5, beacon(), [WAIT]),
        (61.5, TICK, [Describe()]),
        (61.6, view(), [Alert(AlertKind.COOLDOWN, "*"), WAIT]),
        (70.0, TICK, [WAIT]),
    ],
    "NOT_COORDINATOR on LeaveGroup: find the coordinator, look again, retry": [
        *STALL_EVICTED,
        (31.3, left("NOT_COORDINATOR"), [LookupCoordinator()]),
        (31.4, CoordinatorResult(2), [Wait(31.8)]),
        (31.8, TICK, [Describe()]),
        (31.9, view(), [evict(30.9)]),
    ],
    "REPORT on LeaveGroup: one alert, no retry, keeps running": [
        *STALL_EVICTED,
        (
            31.3,
            left("GROUP_AUTHORIZATION_FAILED"),
            [Alert(AlertKind.REPORT, str(outcome(Api.LEAVE_GROUP, "GROUP_AUTHORIZATION_FAILED"))), WAIT],
        ),
        (40.0, TICK, [WAIT]),
    ],
    "Empty (or any state neither Stable nor a rebalance) at the deadline: no action; counts afresh once Stable": [
        *STARTED,
        (31.0, TICK, [Describe()]),
        (31.1, view(state=GroupState.EMPTY), [Wait(36.1)]),
        (36.1, TICK, [Describe()]),
        (36.2, view(state=GroupState.UNKNOWN), [Wait(41.2)]),
        (41.2, TICK, [Describe()]),
        (41.3, view(), [Wait(46.3)]),
        (71.2, TICK, [Describe()]),  # silent past the stall timeout: looked at each interval, for a new rebalance
        (71.25, view(), [Wait(71.3)]),
        (71.3, TICK, [Describe()]),
        (71.4, view(), [evict(70.4)]),
    ],
    "a count restarted once Stable: a rebalance begun since, waiting on the silent member, is acted on at once": [
        *STARTED,
        (31.0, TICK, [Describe()]),
        (31.1, view(state=GroupState.EMPTY), [Wait(36.1)]),
        (36.1, TICK, [Describe()]),
        (36.2, view(), [Wait(41.2)]),  # Stable: the count restarts (deadline 66.2), the silence goes on
        (41.2, TICK, [Describe()]),
        (41.3, view(state=GroupState.PREPARING_REBALANCE), [evict_waiting(40.3, GroupState.PREPARING_REBALANCE)]),
    ],
    "a rebalance waiting on a member silent for the stall timeout: evicted at once, the state in the reason": [
        *STARTED,
        (31.0, TICK, [Describe()]),
        (31.1, view(state=GroupState.PREPARING_REBALANCE), [evict_waiting(30.1, GroupState.PREPARING_REBALANCE)]),
    ],
    "a rebalance before the deadline: looked at each check interval, acted on at the member's own deadline": [
        *STARTED,
        (10.0, beacon(), [WAIT]),  # the last poll: its stall deadline is 40
        (20.0, view(state=GroupState.COMPLETING_REBALANCE), [Wait(25.0)]),  # a view taken anyway (the edge's)
        (25.0, TICK, [Describe()]),
        (25.1, view(state=GroupState.COMPLETING_REBALANCE), [Wait(30.1)]),
        (38.0, TICK, [Describe()]),
        (38.1, view(state=GroupState.COMPLETING_REBALANCE), [Wait(40.0)]),
        (40.0, TICK, [Describe()]),
        (40.1, view(state=GroupState.COMPLETING_REBALANCE), [evict_waiting(30.1, GroupState.COMPLETING_REBALANCE)]),
    ],
    "a KIP-848 group reconciling (librdkafka: Unknown) waits on a silent member too: evicted": [
        *STARTED,
        (31.0, TICK, [Describe()]),
        (
            31.1,
            DescribeResult(GroupView("g", GroupState.UNKNOWN, GroupType.CONSUMER, "uniform", 1, (OURS, OTHER))),
            [evict_waiting(30.1, GroupState.UNKNOWN)],
        ),
    ],
    "an idle member the rebalance waits on is evicted too (its removal ends the wait)": [
        *IDLE_STARTED,
        (
            31.1,
            view(member(parts=0), OTHER, state=GroupState.PREPARING_REBALANCE),
            [evict_waiting(30.1, GroupState.PREPARING_REBALANCE)],
        ),
    ],
    "polling through a rebalance: never acted on; the count restarts at the first Stable view": [
        *STARTED,
        (20.0, beacon(), [WAIT]),
        (25.0, view(state=GroupState.PREPARING_REBALANCE), [WAIT]),  # a view taken anyway (the edge's)
        (30.0, beacon(), [Describe()]),  # rebalancing: looked at each check interval
        (30.1, view(state=GroupState.PREPARING_REBALANCE), [WAIT]),
        (35.1, TICK, [Describe()]),
        (35.2, view(state=GroupState.PREPARING_REBALANCE), [WAIT]),
        (38.0, beacon(), [WAIT]),  # the last poll
        (40.2, TICK, [Describe()]),
        (40.3, view(), [WAIT]),  # Stable: the stall timeout counts from here
        (70.2, TICK, [Describe()]),  # silent for 30 s since the poll at 38: looked at, for a new rebalance
        (70.25, view(), [Wait(70.3)]),  # the act waits 30 s after the Stable view, not after the poll at 38
        (70.3, TICK, [Describe()]),
        (70.4, view(), [evict(32.4)]),
    ],
    "the stalled member left in the meantime: nothing to do, quietly": [
        *STARTED,
        (31.0, TICK, [Describe()]),
        (31.1, view(OTHER), [WAIT]),
        (36.0, TICK, [WAIT]),
        (99.0, TICK, [WAIT]),
    ],
    "no member is provably the pod's (host only): one alert, never an eviction": [
        (0.0, TICK, [LookupCoordinator()]),
        (0.1, CoordinatorResult(1), [WAIT]),
        (1.0, beacon("pod-0-z"), [Describe()]),  # a member id the group does not have (yet)
        (1.1, view(member("x-1", "someone"), OTHER), [WAIT]),
        (31.0, TICK, [Describe()]),
        (31.1, view(member("x-1", "someone"), OTHER), [Alert(AlertKind.IDENTITY, "*"), WAIT]),
        (36.1, TICK, [Describe()]),
        (36.2, view(member("x-1", "someone"), OTHER), [WAIT]),
    ],
    "static member: proven by instance id, evicted as the observed pair": [
        (0.0, TICK, [LookupCoordinator()]),
        (0.1, CoordinatorResult(1), [WAIT]),
        (1.0, beacon("pod-0-s", instance_id="ns-pod-0"), [Describe()]),
        (1.1, view(member("pod-0-s", instance_id="ns-pod-0"), OTHER), [WAIT]),
        (31.0, TICK, [Describe()]),
        (31.1, view(member("pod-0-s", instance_id="ns-pod-0"), OTHER), [evict(30.1, "pod-0-s", "ns-pod-0")]),
    ],
    "static member replaced (the instance id is held by a newer member): not the stalled app": [
        (0.0, TICK, [LookupCoordinator()]),
        (0.1, CoordinatorResult(1), [WAIT]),
        (1.0, beacon("pod-0-s", instance_id="ns-pod-0"), [Describe()]),
        (1.1, view(member("pod-0-t", instance_id="ns-pod-0"), OTHER), [WAIT]),
        (31.0, TICK, [Describe()]),
        (31.1, view(member("pod-0-t", instance_id="ns-pod-0"), OTHER), [Alert(AlertKind.IDENTITY, "*"), WAIT]),
    ],
    "an idle member (no partitions, by the app and by the broker) is never evicted": [
        *IDLE_STARTED,
        (31.1, view(member(parts=0), OTHER), [WAIT]),
        (60.0, TICK, [WAIT]),
    ],
    "partitions the broker gave after the app's last poll (KIP-848 reconciles in the background): evicted": [
        *IDLE_STARTED,
        (31.1, view(member(parts=2), OTHER), [evict(30.1)]),
    ],
    "a failed lookup backs off before the next": [
        (0.0, TICK, [LookupCoordinator()]),
        (0.1, CoordinatorResult(outcome(Api.FIND_COORDINATOR, "COORDINATOR_NOT_AVAILABLE")), [Wait(0.6)]),
        (0.3, TICK, [Wait(0.6)]),
        (0.6, TICK, [LookupCoordinator()]),
        (0.7, CoordinatorResult(outcome(Api.FIND_COORDINATOR, "COORDINATOR_NOT_AVAILABLE")), [Wait(1.7)]),
        (1.7, TICK, [LookupCoordinator()]),
        (1.8, CoordinatorResult(1), [WAIT]),
    ],
    "REPORT on describe: one alert, doubling backoff, keeps running": [
        (0.0, TICK, [LookupCoordinator()]),
        (0.1, CoordinatorResult(1), [WAIT]),
        (1.0, beacon(), [Describe()]),
        (
            1.1,
            DescribeResult(outcome(Api.DESCRIBE_GROUP, "GROUP_AUTHORIZATION_FAILED")),
            [Alert(AlertKind.REPORT, str(outcome(Api.DESCRIBE_GROUP, "GROUP_AUTHORIZATION_FAILED"))), Wait(1.6)],
        ),
        (1.6, TICK, [Describe()]),
        (1.7, DescribeResult(outcome(Api.DESCRIBE_GROUP, "GROUP_AUTHORIZATION_FAILED")), [Wait(2.7)]),
        (2.7, TICK, [Describe()]),
        (2.8, view(), [WAIT]),
    ],
    "NOT_COORDINATOR on describe: find the coordinator again first": [
        (0.0, TICK, [LookupCoordinator()]),
        (0.1, CoordinatorResult(1), [WAIT]),
        (1.0, beacon(), [Describe()]),
        (1.1, DescribeResult(outcome(Api.DESCRIBE_GROUP, "NOT_COORDINATOR")), [LookupCoordinator()]),
        (1.2, CoordinatorResult(2), [Wait(1.6)]),
        (1.6, TICK, [Describe()]),
    ],
    "a new member id (the app rejoined) is proven again before anything is done": [
        *STARTED,
        (10.0, beacon("pod-0-b"), [Describe()]),
        (10.1, view(member("pod-0-b"), OTHER), [WAIT]),
        (40.0, TICK, [Describe()]),
        (40.1, view(member("pod-0-b"), OTHER), [evict(30.1, "pod-0-b")]),
    ],
}


def run(steps: list[Step], config: WatchdogConfig = CFG) -> WatchdogState:
    state = WatchdogState.initial(config)
    for i, (now, observation, expected) in enumerate(steps):
        state, actions = wd.decide(state, observation, now)
        assert _matches(actions, expected), f"step {i} at t={now} ({observation}): got {actions}, want {expected}"
    return state


def _matches(actions: list[Action], expected: list[object]) -> bool:
    if len(actions) != len(expected):
        return False
    for got, want in zip(actions, expected, strict=True):
        if want is WAIT:
            if not isinstance(got, Wait):
                return False
        elif isinstance(want, Alert) and want.message == "*":
            if not (isinstance(got, Alert) and got.kind is want.kind):
                return False
        elif isinstance(want, Wait) and isinstance(got, Wait):
            if got.until != pytest.approx(want.until):
                return False
        elif got != want:
            return False
    return True


@pytest.mark.parametrize("steps", CASES.values(), ids=CASES.keys())
def test_decisions(steps: list[Step]) -> None:
    run(steps)


def test_beacons_of_another_instance_in_the_pod_neither_reset_the_timer_nor_name_the_member() -> None:
    """Two consumer processes in one pod: the sidecar watches its instance id (p0-a); B's beacons (p0-b) keep coming
    while A is stalled, and neither hide A's stall nor make B the member to prove."""
    a, b = member("p0-a-1", instance_id="p0-a"), member("p0-b-1", instance_id="p0-b")
    run(
        [
            (0.0, TICK, [LookupCoordinator()]),
            (0.1, CoordinatorResult(1), [WAIT]),
            (0.5, beacon("p0-b-1", instance_id="p0-b"), [WAIT]),  # not watched: nothing to prove yet
            (1.0, beacon("p0-a-1", instance_id="p0-a"), [Describe()]),
            (1.1, view(a, b), [WAIT]),
            *[(t, beacon("p0-b-1", instance_id="p0-b"), [WAIT]) for t in (10.0, 20.0, 30.0)],
            (31.0, TICK, [Describe()]),
            (31.1, view(a, b), [evict(30.1, "p0-a-1", "p0-a")]),
        ],
        replace(CFG, instance_id="p0-a"),
    )


@pytest.mark.parametrize(
    ("last_poll", "due"),
    [(None, True), (0.5, True), (1.0, True), (1.0001, False), (31.5, False)],
)
def test_an_eviction_goes_out_only_while_the_silence_lasts(last_poll: float | None, due: bool) -> None:
    """Decided on the poll at t=1: each attempt, retries included, is sent only while no later poll has been seen (a
    retry through a coordinator move must not remove an app that polls again)."""
    assert wd.eviction_due(Evict("pod-0-a", None, "r", silent_since=1.0), last_poll) is due


def test_the_evict_action_carries_the_poll_it_was_judged_from() -> None:
    state = WatchdogState.initial(CFG)
    for now, observation, _ in STARTED:
        state, _ = wd.decide(state, observation, now)
    state, _ = wd.decide(state, TICK, 31.0)  # describe
    _, actions = wd.decide(state, view(), 31.2)
    (evict_action,) = actions
    assert isinstance(evict_action, Evict)
    assert evict_action.silent_since == 1.0  # the beacon at t=1
    assert wd.eviction_due(evict_action, 1.0)
    assert not wd.eviction_due(evict_action, 20.0)


def test_restart_action_flips_the_probe_once() -> None:
    config = replace(CFG, action=StallAction.RESTART)
    run(
        [
            *STARTED,
            (31.0, TICK, [Describe()]),
            (31.1, view(), [Restart("pod-0-a", None, wd.stall_reason(30.1, 30.0)), WAIT]),
            (36.0, TICK, [WAIT]),
            (99.0, TICK, [WAIT]),
        ],
        config,
    )


@pytest.mark.parametrize("group_type", [GroupType.SHARE, GroupType.STREAMS])
def test_a_stalled_member_of_a_group_without_a_removal_api_is_restarted_instead(group_type: GroupType) -> None:
    """Action leave-group on a share or streams group: no Kafka API removes one of its members, so the sidecar fails
    the app's probe (a restart), saying why; a classic group in the same steps is evicted (STALL_EVICTED)."""

    def typed() -> DescribeResult:
        return DescribeResult(GroupView("g", GroupState.STABLE, group_type, "", 1, (OURS, OTHER)))

    reason = f"{wd.stall_reason(30.1, 30.0)}; a restart, as no Kafka API removes a member of a {group_type.value} group"
    run(
        [
            (0.0, TICK, [LookupCoordinator()]),
            (0.1, CoordinatorResult(1), [Wait(5.1)]),
            (1.0, beacon(), [Describe()]),
            (1.1, typed(), [Wait(6.1)]),
            (31.0, TICK, [Describe()]),
            (31.1, typed(), [Restart("pod-0-a", None, reason), WAIT]),
            (36.0, TICK, [WAIT]),
        ]
    )


def test_alert_action_and_cooldown_per_member() -> None:
    """Action `alert` keeps the member: a second stall within the cooldown waits for its end (one alert), then acts."""
    config = replace(CFG, action=StallAction.ALERT)
    state = run(
        [
            *STARTED,
            (31.0, TICK, [Describe()]),
            (31.1, view(), [Alert(AlertKind.STALL, "*"), WAIT]),
            (40.0, beacon(), [WAIT]),  # the app came back, then stalls again
            (70.0, TICK, [Describe()]),
            (70.1, view(), [Alert(AlertKind.COOLDOWN, "*"), Wait(75.1)]),
            (75.1, TICK, [WAIT]),
            (150.0, TICK, [Wait(151.1)]),
            (151.1, TICK, [Describe()]),
            (151.2, view(), [Alert(AlertKind.STALL, "*"), WAIT]),
        ],
        config,
    )
    assert [at for _, at in state.acted] == [pytest.approx(151.2)]  # the older action aged out of the record


def test_eviction_reason_text() -> None:
    assert wd.stall_reason(42.13, 30.0) == "vigil: no poll for 42.1s (stall timeout 30s)"
    assert wd.stall_reason(7.0, 7.5) == "vigil: no poll for 7.0s (stall timeout 7.5s)"


def test_a_request_without_answer_is_asked_again_after_a_session() -> None:
    state = run([*STARTED, (31.0, TICK, [Describe()])])
    state, actions = wd.decide(state, TICK, 40.0)
    assert isinstance(actions[-1], Wait)
    state, actions = wd.decide(state, TICK, 31.0 + CFG.session_timeout)
    assert actions == [Describe()]


def test_a_stale_answer_to_an_eviction_nobody_asked_for_is_ignored() -> None:
    state = run(STARTED)
    new_state, actions = wd.decide(state, left(), 2.0)
    assert new_state.episode is None
    assert all(isinstance(a, Wait) for a in actions)


@pytest.mark.parametrize(
    ("field", "value"),
    [("stall_timeout", 0.0), ("check_interval", -1.0), ("session_timeout", float("nan")), ("cooldown", -1.0)],
)
def test_config_rejects_nonsense(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field):
        replace(CFG, **{field: value})
    with pytest.raises(ValueError, match="pod_name"):
        replace(CFG, pod_name="")


def test_timers() -> None:
    poll = PollTimer.started(10.0, 30.0)
    assert (poll.deadline, poll.expired(39.9), poll.expired(40.0)) == (40.0, False, True)
    restarted = poll.with_restart(25.0)
    assert (restarted.deadline, restarted.poll_age(50.0)) == (55.0, 40.0)
    assert restarted.with_poll(20.0).deadline == 55.0  # an out-of-order poll never pulls the deadline earlier
    assert SessionView(0.0, 45.0).expired(45.0)
    assert not SessionView(0.0, 45.0).with_answer(10.0).expired(45.0)
    check = CheckTimer()
    assert check.due(0.0)
    failed = check.with_failure(1.0, base=0.5, cap=2.0).with_failure(1.5, base=0.5, cap=2.0)
    assert (failed.next_at, failed.failures, failed.may_retry(2.4), failed.may_retry(2.5)) == (2.5, 2, False, True)
    ok = failed.with_success(3.0, 5.0)
    assert (ok.next_at, ok.failures, ok.may_retry(3.0), ok.due(3.0)) == (8.0, 0, True, False)
    assert ok.with_due(4.0).due(4.0)


_IO = {
    "asyncio",
    "socket",
    "aiohttp",
    "h11",
    "confluent_kafka",
    "kafka",
    "kubernetes",
    "kopf",
    "subprocess",
    "time",
    "os",
}


def test_the_watchdog_does_no_io_and_reads_no_clock() -> None:
    package = pathlib.Path(wd.__file__).parent
    for path in sorted(package.glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                assert name.split(".")[0] not in _IO, f"{path.name} imports {name}"
