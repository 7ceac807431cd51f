"""Properties of the watchdog under a fake clock: a small simulated world (an app that polls and stops, a group that
rebalances, a coordinator that answers after a latency) drives `decide` as the sidecar's loop would.

- never acts before the threshold (the last poll + the stall timeout);
- always acts within the threshold + one check interval once stalled in a Stable group (answers and wake-ups each
  late by less than half a check interval);
- never acts twice on a member within a cooldown (a retry of a failed LeaveGroup is the same act);
- never acts while the group is neither Stable nor rebalancing, nor on a view older than one check interval; while
  it rebalances, only on a member that has not polled for the stall timeout (the group waits on it);
- always evicts within the threshold + one check interval a member stalled through a rebalance;
- never acts on a member whose only relation to the pod is the host;
- always makes progress: every `Wait` ends in the future.
"""

import heapq
import itertools
from dataclasses import dataclass, field

from hypothesis import example, given, settings
from hypothesis import strategies as st

from vigil_core.kafka.model import GroupState, GroupType, GroupView, MemberView, TopicPartitionRef
from vigil_core.kafka.outcomes import Api, classify, code_of
from vigil_core.liveness import StallAction
from vigil_sidecar.watchdog.decide import decide
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

POD = "pod-0"
HOST = "/127.0.0.1"
REMOVES = {"NONE", "UNKNOWN_MEMBER_ID"}
RETRIED = {"REQUEST_TIMED_OUT", "NOT_COORDINATOR"}


@dataclass
class World:
    config: WatchdogConfig
    polls: list[float]
    unstable: list[tuple[float, float]] = field(default_factory=list)
    unstable_state: GroupState = GroupState.PREPARING_REBALANCE
    """What the group is during the `unstable` windows: rebalancing (waiting on its members), or Empty/Unknown."""
    latency: float = 0.0
    lateness: float = 0.0
    leave_answers: list[str] = field(default_factory=lambda: ["NONE"])
    host_only: bool = False
    """The pod's app reports a member id the group does not have; other members share the host."""
    rejoin_lead: float = 0.0
    """A poll that rejoins the group shows the member to the broker this long before it returns and beacons (its
    JoinGroup, SyncGroup and fetch): the app is back by its own poll, never behind its back."""

    # what happened
    log: list[tuple[float, Action]] = field(default_factory=list)
    views: list[tuple[float, GroupState]] = field(default_factory=list)
    beacons: list[tuple[float, str]] = field(default_factory=list)
    evictions: list[tuple[float, str, bool]] = field(default_factory=list)
    """(time, member id, whether it retries an eviction whose last answer was transient)"""
    removals: list[float] = field(default_factory=list)
    """When a LeaveGroup removed the app's member (its answer landed)."""

    def state_at(self, t: float) -> GroupState:
        rebalancing = any(start <= t < start + length for start, length in self.unstable)
        return self.unstable_state if rebalancing else GroupState.STABLE

    def run(self, end: float) -> None:  # noqa: PLR0912 - the whole simulated world in one loop
        last_answer: dict[str, str] = {}
        rejoins = itertools.count(1)
        member_id, present = "pod-0-0", True
        leaves = itertools.cycle(self.leave_answers)
        seq = itertools.count()
        queue: list[tuple[float, int, object]] = [(p, next(seq), "poll") for p in self.polls]
        if self.rejoin_lead > 0:
            queue += [(max(0.0, p - self.rejoin_lead), next(seq), "rejoin") for p in self.polls]
        heapq.heapify(queue)
        state = WatchdogState.initial(self.config)
        tick_at: float | None = 0.0
        for _ in range(20000):
            if tick_at is not None and (not queue or tick_at <= queue[0][0]):
                now, event, tick_at = tick_at, "tick", None
            elif queue:
                now, _, event = heapq.heappop(queue)
            else:
                return
            if now > end:
                return
            observation: Observation
            if event == "tick":
                observation = Tick()
            elif event == "poll":
                if not present:
                    member_id, present = f"pod-0-{next(rejoins)}", True  # the app rejoins in its next poll
                reported = "pod-0-ghost" if self.host_only else member_id
                self.beacons.append((now, reported))
                observation = Beacon(reported, 1, None, 3, now)
            elif event == "rejoin":
                if not present:
                    member_id, present = f"pod-0-{next(rejoins)}", True  # inside the poll, before it returns
                continue
            elif event == "describe":
                group_state = self.state_at(now)
                self.views.append((now, group_state))
                observation = DescribeResult(self._view(group_state, member_id if present else None))
            elif isinstance(event, Evict):
                name = next(leaves)
                if event.member_id == member_id and present and name in REMOVES:
                    present = False
                    self.removals.append(now)
                last_answer[event.member_id] = name
                observation = ActionResult(classify(Api.LEAVE_GROUP, code_of(name)))
            else:
                assert isinstance(event, CoordinatorResult)
                observation = event
            state, actions = decide(state, observation, now)
            for action in actions:
                self.log.append((now, action))
                match action:
                    case LookupCoordinator():
                        heapq.heappush(queue, (now + self.latency, next(seq), CoordinatorResult(1)))
                    case Describe():
                        heapq.heappush(queue, (now + self.latency, next(seq), "describe"))
                    case Evict():
                        retry = last_answer.pop(action.member_id, None) in RETRIED
                        self.evictions.append((now, action.member_id, retry))
                        heapq.heappush(queue, (now + self.latency, next(seq), action))
                    case Wait(until=until):
                        assert until > now, f"a Wait that does not end in the future at t={now}: {action}"
                        tick_at = until + self.lateness
        raise AssertionError("the simulation did not settle")

    def _view(self, group_state: GroupState, member_id: str | None) -> GroupView:
        tp = (TopicPartitionRef("t", 0),)
        others = [MemberView("pod-1-b", None, "pod-1", HOST, tp)]
        if self.host_only:
            others.append(MemberView("x-1", None, "other-app", HOST, tp))
        mine = [] if member_id is None else [MemberView(member_id, None, POD, HOST, tp)]
        return GroupView("g", group_state, GroupType.CLASSIC, "range", 1, tuple(mine + others))

    # what the properties look at

    def acts(self) -> list[tuple[float, str]]:
        """(time, member id) of every action on a member (eviction, restart, stall alert), retries excluded."""
        result = [(now, member_id) for now, member_id, retry in self.evictions if not retry]
        for now, action in self.log:
            if isinstance(action, Restart):
                result.append((now, action.member_id))
            elif isinstance(action, Alert) and action.kind is AlertKind.STALL:
                result.append((now, action.message.split("'")[1]))
        return sorted(result)

    def last_poll_before(self, t: float) -> float | None:
        return max((at for at, _ in self.beacons if at <= t), default=None)


def configs() -> st.SearchStrategy[WatchdogConfig]:
    return st.builds(
        lambda stall, interval, cooldown, action: WatchdogConfig(
            pod_name=POD,
            stall_timeout=stall,
            check_interval=interval,
            cooldown=cooldown,
            session_timeout=max(stall, 10.0),
            action=action,
        ),
        st.floats(5.0, 60.0),
        st.floats(1.0, 10.0),
        st.floats(0.0, 200.0),
        st.sampled_from(StallAction),
    )


def polls(max_gap: float = 150.0) -> st.SearchStrategy[list[float]]:
    return st.lists(st.floats(0.5, max_gap), min_size=1, max_size=8).map(lambda gaps: list(itertools.accumulate(gaps)))


ANSWERS = st.lists(
    st.sampled_from(["NONE", "UNKNOWN_MEMBER_ID", "FENCED_INSTANCE_ID", *RETRIED, "GROUP_AUTHORIZATION_FAILED"]),
    min_size=1,
    max_size=4,
)
WINDOWS = st.lists(st.tuples(st.floats(0.0, 600.0), st.floats(1.0, 90.0)), max_size=3)


UNSTABLE_STATES = st.sampled_from(
    [GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY, GroupState.UNKNOWN]
)


@st.composite
def worlds(draw: st.DrawFn, *, stable: bool = False, answers: bool = True, host_only: bool = False) -> World:
    config = draw(configs())
    return World(
        config=config,
        polls=draw(polls()),
        unstable=[] if stable else draw(WINDOWS),
        unstable_state=draw(UNSTABLE_STATES),
        latency=draw(st.floats(0.0, 0.49)) * config.check_interval,
        lateness=draw(st.floats(0.0, 0.49)) * config.check_interval,
        leave_answers=draw(ANSWERS) if answers else ["NONE"],
        host_only=host_only,
    )


@settings(max_examples=300, deadline=None)
@given(worlds())
def test_never_acts_before_the_threshold(world: World) -> None:
    world.run(end=1500.0)
    for now, _ in world.acts():
        last = world.last_poll_before(now)
        assert last is not None
        assert now - last >= world.config.stall_timeout


@settings(max_examples=300, deadline=None)
@given(worlds(stable=True, answers=False).filter(lambda w: w.config.action is StallAction.LEAVE_GROUP))
def test_always_evicts_within_threshold_plus_one_check_interval_in_a_stable_group(world: World) -> None:
    cfg = world.config
    world.run(end=world.polls[-1] + cfg.stall_timeout + 3 * cfg.check_interval)
    evicted = [(now, a.member_id) for now, a in world.log if isinstance(a, Evict)]
    polled = [*world.beacons, (float("inf"), "")]
    for (at, member_id), (next_at, _) in itertools.pairwise(polled):
        limit = at + cfg.stall_timeout + cfg.check_interval
        if next_at <= limit:
            continue  # the app polled again in time
        assert any(mid == member_id and t <= limit for t, mid in evicted), (
            f"member {member_id} silent since {at} not evicted by {limit}: {evicted}"
        )


@settings(max_examples=300, deadline=None)
@given(worlds())
def test_never_twice_on_a_member_within_a_cooldown(world: World) -> None:
    world.run(end=1500.0)
    by_member: dict[str, list[float]] = {}
    for now, member_id in world.acts():
        by_member.setdefault(member_id, []).append(now)
    for times in by_member.values():
        for a, b in itertools.pairwise(times):
            assert b - a >= world.config.cooldown


@settings(max_examples=300, deadline=None)
@given(worlds())
def test_never_acts_unless_stable_or_rebalancing_on_a_member_silent_for_the_stall_timeout(world: World) -> None:
    world.run(end=1500.0)
    for now, _ in world.acts():
        seen = [(at, group_state) for at, group_state in world.views if at <= now]
        assert seen, "acted without having looked at the group"
        at, group_state = seen[-1]
        assert group_state in (GroupState.STABLE, GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE)
        assert now - at <= world.config.check_interval
        last = world.last_poll_before(now)
        assert last is not None
        if group_state is not GroupState.STABLE:
            assert at - last >= world.config.stall_timeout  # the view shows a member silent for the stall timeout
        if world.latency == 0.0:
            assert world.state_at(now) is group_state


@settings(max_examples=300, deadline=None)
@given(
    worlds(answers=False).filter(
        lambda w: w.config.action is StallAction.LEAVE_GROUP and w.unstable_state is GroupState.PREPARING_REBALANCE
    )
)
@example(  # found by hypothesis: the poll at 1 falls in a rebalance whose end (Stable at 5) restarts the count, and
    # the rebalance from 6 waits on the member: looked at once the silence reaches the stall timeout (it was not)
    World(
        config=WatchdogConfig(
            pod_name=POD,
            stall_timeout=6.0,
            check_interval=1.0,
            cooldown=0.0,
            session_timeout=10.0,
            action=StallAction.LEAVE_GROUP,
        ),
        polls=[1.0],
        unstable=[(0.0, 5.0), (6.0, 3.0)],
    )
)
def test_always_evicts_a_member_stalled_through_a_rebalance_within_threshold_plus_one_check_interval(
    world: World,
) -> None:
    """A rebalance that begins before a member's stall timeout and lasts past it (the group waiting on the member)
    does not hold the eviction back: it comes at the last poll + the stall timeout + one check interval at most."""
    cfg = world.config
    last = world.polls[-1]
    threshold = last + cfg.stall_timeout
    waiting = [b for b, n in world.unstable if last < b < threshold and b + n > threshold + cfg.check_interval]
    world.run(end=threshold + 3 * cfg.check_interval)
    if not waiting or any(at > last for at in world.removals):
        return  # a LeaveGroup already sent when the app last polled removed it after: no member left to evict
    evicted = [now for now, a in world.log if isinstance(a, Evict)]
    assert any(threshold <= t <= threshold + cfg.check_interval for t in evicted), (last, world.unstable, evicted)


@settings(max_examples=200, deadline=None)
@given(worlds(host_only=True))
def test_never_acts_on_a_member_related_to_the_pod_by_host_only(world: World) -> None:
    world.run(end=1500.0)
    assert world.acts() == []
    identity_alerts = [a for _, a in world.log if isinstance(a, Alert) and a.kind is AlertKind.IDENTITY]
    assert len(identity_alerts) <= 1


@settings(max_examples=300, deadline=None)
@given(worlds(), st.floats(0.0, 0.99))
def test_never_restarts_an_app_whose_member_comes_back_only_by_its_own_polls(world: World, lead: float) -> None:
    """An app that polls again after its eviction rejoins inside that poll, seen by a describe before the poll
    returns and beacons: that is not an eviction undone behind its back (no restart, no undone alert)."""
    world.rejoin_lead = lead * world.config.stall_timeout
    world.run(end=1500.0)
    undone = [a for _, a in world.log if isinstance(a, Restart | Alert) and "eviction undone" in _said(a)]
    assert not undone


def _said(action: Restart | Alert) -> str:
    return action.reason if isinstance(action, Restart) else action.message


def test_the_simulation_does_show_a_member_back_before_its_poll_returns() -> None:
    """Not vacuous: evicted at ~41, the app's next poll (79) rejoins 8 s before it returns; the describes between
    71 and 79 show the member back, and nothing is restarted (the rule before restarted it at the first of them)."""
    config = WatchdogConfig(pod_name=POD, stall_timeout=30.0, check_interval=5.0, cooldown=60.0, session_timeout=45.0)
    world = World(config=config, polls=[1.0, 11.0, 79.0], latency=0.2, rejoin_lead=8.0)
    world.run(end=100.0)
    assert [m for _, m, _ in world.evictions] == ["pod-0-0"]
    back = [a for now, a in world.log if isinstance(a, Describe) and 71.0 <= now < 79.0]
    assert back, "no describe while the member was back and its poll had not returned"
    assert not [a for _, a in world.log if isinstance(a, Restart)]


def test_the_simulation_does_evict_a_member_stalled_through_a_rebalance() -> None:
    """Not vacuous either: a rebalance from t=25 to t=85 waits on a member silent since t=11; evicted at the threshold
    (41) + at most one check interval, not at the rebalance's end."""
    config = WatchdogConfig(pod_name=POD, stall_timeout=30.0, check_interval=5.0, cooldown=60.0, session_timeout=45.0)
    world = World(config=config, polls=[1.0, 11.0], unstable=[(25.0, 60.0)], latency=0.2, lateness=1.0)
    world.run(end=200.0)
    [(at, member_id, retry)] = world.evictions
    assert (member_id, retry) == ("pod-0-0", False)
    assert 11.0 + 30.0 <= at <= 11.0 + 30.0 + 5.0
    reasons = [a.reason for _, a in world.log if isinstance(a, Evict)]
    assert reasons == ["vigil: no poll for 30.2s (stall timeout 30s) while the group waits for it (PreparingRebalance)"]


def test_the_simulation_does_evict_a_stalled_member() -> None:
    """The properties are not vacuous: a plain stall in this world ends in one eviction, soon after the threshold."""
    config = WatchdogConfig(pod_name=POD, stall_timeout=30.0, check_interval=5.0, cooldown=60.0, session_timeout=45.0)
    world = World(config=config, polls=[1.0, 11.0, 21.0], latency=0.2, lateness=1.0)
    world.run(end=200.0)
    [(at, member_id, retry)] = world.evictions
    assert (member_id, retry) == ("pod-0-0", False)
    assert 21.0 + 30.0 <= at <= 21.0 + 30.0 + 5.0
