"""Properties of the heartbeat bridge under a fake clock: a small simulated edge drives `step` as the sidecar's or the
operator's loop would, against a broker that answers from a random script after a latency, with wake-ups late by
a random amount, the app ending again at random moments and views taken at random.

- (a) no heartbeat after `Ended`, none at or after the deadline, and the bridge always ends;
- (b) heartbeats at least an interval apart; while every answer is NONE and comes within an interval, never more
  than an interval plus one wake-up's lateness apart, from the start to the deadline (the session never lapses
  because of the bridge);
- (c) at most one `Remove` per bridge, only after a foreign rebalance was answered and never after a moved
  generation (that ends the bridge "stale-generation" with no Remove), and under `hold` not before the hold ends;
- (d) `Ended` exactly once, counting exactly the heartbeats sent, and the time since the start;
- (e) persisting the state at any step and continuing from the copy gives the same actions;
- (f) `start` never starts a bridge without proof that the app ended;
- (g) a KIP-848 bridge (keep-alives) never removes; it releases the instance id at most once, only once the app is
  back, and sends nothing after that;
- and every `Wait` ends in the future; the outcome "rejoined" only follows an answer or a view that showed it.
"""

import heapq
import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from vigil_core.bridge.engine import (
    PROOFS,
    Action,
    AppBack,
    AppEnded,
    BridgeConfig,
    BridgeState,
    Described,
    Ended,
    GroupProtocol,
    HeartbeatAnswered,
    KeepAlive,
    Member,
    Observation,
    Refused,
    Release,
    ReleaseAnswered,
    Remove,
    RemoveAnswered,
    SendHeartbeat,
    Tick,
    Wait,
    start,
    step,
)
from vigil_core.kafka.model import GroupState, GroupType, GroupView, MemberView
from vigil_core.kafka.outcomes import Api, classify, code_of

T0 = 1_763_700_000.0
ME = Member("m-1", 7, "pod-0")
HEARTBEAT_ANSWERS = [
    "NONE",
    "REBALANCE_IN_PROGRESS",
    "ILLEGAL_GENERATION",
    "UNKNOWN_MEMBER_ID",
    "FENCED_INSTANCE_ID",
    "TRANSPORT_ERROR",
    "NOT_COORDINATOR",
    "COORDINATOR_LOAD_IN_PROGRESS",
    "REQUEST_TIMED_OUT",
    "GROUP_AUTHORIZATION_FAILED",
]
KEEP_ALIVE_ANSWERS = [
    "NONE",
    "FENCED_MEMBER_EPOCH",
    "UNKNOWN_MEMBER_ID",
    "FENCED_INSTANCE_ID",
    "TRANSPORT_ERROR",
    "NOT_COORDINATOR",
    "COORDINATOR_LOAD_IN_PROGRESS",
    "GROUP_AUTHORIZATION_FAILED",
]
RELEASE_ANSWERS = ["NONE", "UNKNOWN_MEMBER_ID", "FENCED_INSTANCE_ID", "TRANSPORT_ERROR", "GROUP_AUTHORIZATION_FAILED"]
REMOVE_ANSWERS = ["NONE", "UNKNOWN_MEMBER_ID", "FENCED_INSTANCE_ID", "TRANSPORT_ERROR", "GROUP_AUTHORIZATION_FAILED"]
VIEWS = ["present", "rejoined", "gone"]


@dataclass
class World:
    config: BridgeConfig
    heartbeat_answers: list[str]
    """Answered in order; NONE once the script runs out."""
    remove_answers: list[str]
    latency: float
    lateness: float
    app_ends: list[float] = field(default_factory=list)
    """Seconds after the start at which the app ends again."""
    views: list[tuple[float, str]] = field(default_factory=list)
    persist_at: int | None = None
    """The step after which the state is replaced by `from_json(to_json())`."""
    protocol: GroupProtocol = "classic"
    app_back: float | None = None
    """Seconds after the start at which the app's new process asks for the go-ahead."""
    release_answer: str = "NONE"

    # what happened
    log: list[tuple[float, Action]] = field(default_factory=list)
    answered: list[tuple[float, str]] = field(default_factory=list)
    """(time, answer name or "view:<kind>") of everything delivered to the bridge."""
    state: BridgeState | None = None

    def run(self) -> "World":
        begun = start("g", ME, proof="container-terminated", earlier_ends=(), now=T0, config=self.config,
                      protocol=self.protocol)  # fmt: skip
        assert isinstance(begun, BridgeState)
        state = begun
        heartbeats, removes = iter(self.heartbeat_answers), iter(self.remove_answers)
        seq = itertools.count()
        queue: list[tuple[float, int, Observation]] = [(T0 + t, next(seq), AppEnded()) for t in self.app_ends]
        queue += [(T0 + t, next(seq), self._view(kind)) for t, kind in self.views]
        if self.app_back is not None:
            queue.append((T0 + self.app_back, next(seq), AppBack()))
        heapq.heapify(queue)
        tick_at: float | None = T0
        now: float
        observation: Observation
        for i in itertools.count():
            assert i < 20_000, "the simulation did not settle"
            if tick_at is not None and (not queue or tick_at <= queue[0][0]):
                now, observation, tick_at = tick_at, Tick(), None
            elif queue:
                now, _, observation = heapq.heappop(queue)
            else:
                break
            self._note(now, observation)
            state, actions = step(state, observation, now)
            if i == self.persist_at:
                state = BridgeState.from_json(state.to_json())
            for action in actions:
                self.log.append((now, action))
                match action:
                    case SendHeartbeat() | KeepAlive() | Remove() | Release():
                        answer = self._reply(action, heartbeats, removes)
                        heapq.heappush(queue, (now + self.latency, next(seq), answer))
                        tick_at = None  # the edge now waits for the answer
                    case Wait(until=until):
                        assert until > now, f"a Wait that does not end in the future at T0+{now - T0}: {action}"
                        tick_at = until + self.lateness
                    case Ended():
                        tick_at = None
        self.state = state
        return self

    def _reply(
        self, request: SendHeartbeat | KeepAlive | Remove | Release, heartbeats: Iterator[str], removes: Iterator[str]
    ) -> Observation:
        """The broker's answer to `request`, from the script."""
        match request:
            case SendHeartbeat():
                return HeartbeatAnswered(classify(Api.HEARTBEAT, code_of(next(heartbeats, "NONE"))))
            case KeepAlive(epoch=epoch):
                answer = classify(Api.CONSUMER_GROUP_HEARTBEAT, code_of(next(heartbeats, "NONE")))
                return HeartbeatAnswered(answer, epoch + 1 if answer.name == "NONE" else 0)
            case Release():
                return ReleaseAnswered(classify(Api.CONSUMER_GROUP_HEARTBEAT, code_of(self.release_answer)))
        return RemoveAnswered(classify(Api.LEAVE_GROUP, code_of(next(removes, "NONE"))))

    def _view(self, kind: str) -> Described:
        holder = {"present": [("m-1", "pod-0")], "rejoined": [("m-2", "pod-0")], "gone": []}[kind]
        members = tuple(MemberView(m, i, "app", "/10.0.0.1", ()) for m, i in [*holder, ("x", None)])
        return Described(GroupView("g", GroupState.STABLE, GroupType.CLASSIC, "range", 1, members))

    def _note(self, now: float, observation: Observation) -> None:
        match observation:
            case HeartbeatAnswered(outcome=o) | RemoveAnswered(outcome=o):
                self.answered.append((now, o.name))
            case ReleaseAnswered(outcome=o):
                self.answered.append((now, "release:" + o.name))
            case AppBack():
                self.answered.append((now, "app-back"))
            case Described(view=v):
                self.answered.append((now, "view:" + _kind(v)))

    # what the properties look at

    def sent(self) -> list[float]:
        return [t for t, a in self.log if isinstance(a, SendHeartbeat | KeepAlive)]

    def releases(self) -> list[float]:
        return [t for t, a in self.log if isinstance(a, Release)]

    def ends(self) -> list[tuple[float, Ended]]:
        return [(t, a) for t, a in self.log if isinstance(a, Ended)]

    def removes(self) -> list[float]:
        return [t for t, a in self.log if isinstance(a, Remove)]


def _kind(view: GroupView) -> str:
    holder = next((m.member_id for m in view.members if m.instance_id == "pod-0"), None)
    return {None: "gone", "m-1": "present"}.get(holder, "rejoined")


def configs() -> st.SearchStrategy[BridgeConfig]:
    return st.builds(
        lambda interval, bridges, policy, ret, restarts, session: BridgeConfig(
            heartbeat_interval=interval,
            max_bridge_seconds=interval * bridges,
            on_foreign_rebalance=policy,
            expected_return_seconds=ret,
            crash_loop_restarts=restarts,
            session_timeout=session,
        ),
        st.floats(0.5, 5.0),
        st.floats(0.5, 25.0),
        st.sampled_from(["remove", "hold"]),
        st.none() | st.floats(0.5, 60.0),
        st.integers(2, 4),
        st.none() | st.floats(1.0, 30.0),
    )


@st.composite
def worlds(draw: st.DrawFn, *, calm: bool = False) -> World:
    """A random world; `calm`: every answer NONE within an interval, nothing else happening."""
    config = draw(configs())
    interval = config.heartbeat_interval
    horizon = config.max_bridge_seconds * 1.2
    protocol = draw(st.sampled_from(["classic", "consumer"]))
    if calm:
        return World(
            protocol=protocol,
            config=config,
            heartbeat_answers=[],
            remove_answers=[],
            latency=draw(st.floats(0.0, 0.99)) * interval,
            lateness=draw(st.floats(0.0, 0.5)) * interval,
            persist_at=draw(st.none() | st.integers(0, 60)),
        )
    answers = KEEP_ALIVE_ANSWERS if protocol == "consumer" else HEARTBEAT_ANSWERS
    return World(
        protocol=protocol,
        app_back=draw(st.none() | st.floats(0.0, horizon)),
        release_answer=draw(st.sampled_from(RELEASE_ANSWERS)),
        config=config,
        heartbeat_answers=draw(st.lists(st.sampled_from(["NONE"] * 8 + answers), max_size=40)),
        remove_answers=draw(st.lists(st.sampled_from(REMOVE_ANSWERS), max_size=3)),
        latency=draw(st.floats(0.0, 2.5)) * interval,
        lateness=draw(st.floats(0.0, 0.5)) * interval,
        app_ends=draw(st.lists(st.floats(0.0, horizon), max_size=2)),
        views=draw(st.lists(st.tuples(st.floats(0.0, horizon), st.sampled_from(VIEWS)), max_size=2)),
        persist_at=draw(st.none() | st.integers(0, 60)),
    )


EXAMPLES = settings(max_examples=250, deadline=None)


@EXAMPLES
@given(worlds())
def test_a_no_heartbeat_after_the_end_or_the_deadline_and_it_always_ends(world: World) -> None:
    world.run()
    state = world.state
    assert state is not None
    ends = world.ends()
    assert len(ends) == 1
    ended_at = ends[0][0]
    assert all(T0 <= t < state.deadline for t in world.sent())
    last = max(i for i, (_, a) in enumerate(world.log) if isinstance(a, SendHeartbeat | KeepAlive | Ended))
    assert isinstance(world.log[last][1], Ended)
    # by the deadline; past it only for a Remove due then, after the answer to a heartbeat in flight and its own
    assert ended_at <= state.deadline + 2 * world.latency + world.lateness + 1e-6
    assert all(t <= ended_at for t, _ in world.log)


@EXAMPLES
@given(worlds())
def test_b_heartbeats_are_at_least_an_interval_apart(world: World) -> None:
    sent = world.run().sent()
    assert all(b - a >= world.config.heartbeat_interval for a, b in itertools.pairwise(sent))


@EXAMPLES
@given(worlds(calm=True))
def test_b_answered_promptly_they_are_at_most_an_interval_and_one_wake_up_apart(world: World) -> None:
    world.run()
    assert world.state is not None
    interval, slack = world.config.heartbeat_interval, world.lateness + 1e-6
    sent = world.sent()
    assert sent[0] == T0
    assert all(b - a <= interval + slack for a, b in itertools.pairwise(sent))
    assert world.state.deadline - sent[-1] <= interval + slack
    ((_, ended),) = world.ends()
    assert ended.outcome == "deadline"


@EXAMPLES
@given(worlds())
def test_c_at_most_one_remove_and_only_after_a_foreign_rebalance(world: World) -> None:
    world.run()
    assert world.state is not None
    removes = world.removes()
    assert len(removes) <= 1
    if not removes:
        return
    before = [name for t, name in world.answered if t <= removes[0]]
    assert "REBALANCE_IN_PROGRESS" in before
    assert "ILLEGAL_GENERATION" not in before  # a moved generation stops the heartbeats, never removes
    cfg = world.config
    if cfg.on_foreign_rebalance == "hold":
        met = next(t for t, name in world.answered if name == "REBALANCE_IN_PROGRESS")
        hold = T0 + min(cfg.max_bridge_seconds, cfg.expected_return_seconds or cfg.max_bridge_seconds)
        if cfg.session_timeout is not None:  # the group waits at most a session for the held member
            hold = min(hold, met + cfg.session_timeout)
        assert removes[0] >= hold - 1e-9


@EXAMPLES
@given(worlds())
def test_c2_stale_generation_only_on_a_moved_generation_and_never_with_a_remove(world: World) -> None:
    world.run()
    ends = world.ends()
    if not ends or ends[0][1].outcome != "stale-generation":
        return
    assert {(ends[0][0], "ILLEGAL_GENERATION"), (ends[0][0], "FENCED_MEMBER_EPOCH")} & set(world.answered)
    assert not world.removes()


@EXAMPLES
@given(worlds())
def test_d_ended_exactly_once_counting_every_heartbeat(world: World) -> None:
    world.run()
    ((ended_at, ended),) = world.ends()
    assert ended.heartbeats_sent == len(world.sent())
    assert ended.seconds_bridged == max(0.0, ended_at - T0)
    assert ended.reason.endswith(".")
    if ended.outcome == "rejoined":  # only on the broker's or a view's word
        shown = {"FENCED_INSTANCE_ID", "view:rejoined", "release:NONE", "release:FENCED_INSTANCE_ID"}
        assert any(name in shown for t, name in world.answered if t <= ended_at)
    if ended.outcome == "removed":
        assert world.removes()


@EXAMPLES
@given(worlds(), st.integers(0, 60))
def test_e_persisting_at_any_step_changes_nothing(world: World, at: int) -> None:
    def replay(persist_at: int | None) -> list[tuple[float, Action]]:
        copy = World(
            config=world.config,
            heartbeat_answers=world.heartbeat_answers,
            remove_answers=world.remove_answers,
            latency=world.latency,
            lateness=world.lateness,
            app_ends=world.app_ends,
            views=world.views,
            persist_at=persist_at,
            protocol=world.protocol,
            app_back=world.app_back,
            release_answer=world.release_answer,
        )
        return copy.run().log

    assert replay(at) == replay(None)


@EXAMPLES
@given(worlds())
def test_g_a_kip848_bridge_never_removes_and_releases_once_for_the_app_back(world: World) -> None:
    world.run()
    releases = world.releases()
    if world.protocol == "classic":
        assert not releases
        return
    assert not world.removes()
    assert len(releases) <= 1
    if releases:
        assert any(name == "app-back" for t, name in world.answered if t <= releases[0])
        first = next(i for i, (_, a) in enumerate(world.log) if isinstance(a, Release))
        assert all(isinstance(a, Wait | Ended) for _, a in world.log[first + 1 :])


@settings(max_examples=400, deadline=None)
@given(
    proof=st.none() | st.text(max_size=30) | st.sampled_from(PROOFS),
    member=st.none() | st.builds(Member, st.text(max_size=5), st.integers(-2, 9), st.none() | st.text(max_size=5)),
    earlier=st.lists(st.floats(T0 - 2000, T0 + 10), max_size=3),
    config=configs(),
)
def test_f_start_never_starts_without_proof(
    proof: str | None, member: Member | None, earlier: list[float], config: BridgeConfig
) -> None:
    result = start("g", member, proof=proof, earlier_ends=earlier, now=T0, config=config)
    if proof not in PROOFS:
        assert isinstance(result, Refused)
        assert result.cause == "no-proof"
        return
    if isinstance(result, BridgeState):
        assert member is not None
        assert member.member_id
        assert member.instance_id
        assert member.generation >= 0
        assert len([t for t in earlier if T0 - 600 < t < T0]) + 1 < config.crash_loop_restarts
        assert (result.member_id, result.generation, result.instance_id) == (
            member.member_id,
            member.generation,
            member.instance_id,
        )
    else:
        assert result.message.endswith(".")


@settings(max_examples=300, deadline=None)
@given(
    member=st.builds(Member, st.text(min_size=1, max_size=5), st.integers(0, 9), st.none() | st.text(max_size=5)),
    mine=st.text(min_size=1, max_size=5),
)
def test_g_a_member_under_another_instance_id_is_never_bridged(member: Member, mine: str) -> None:
    result = start("g", member, proof="helper-connection-closed", earlier_ends=(), now=T0,
                   config=BridgeConfig(heartbeat_interval=1.0, max_bridge_seconds=30.0), instance_id=mine)  # fmt: skip
    if isinstance(result, BridgeState):
        assert result.instance_id == mine
