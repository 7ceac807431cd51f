"""The heartbeat bridge's rules as tables: each case is a config and a list of (time, observation, expected actions).

Every bridge starts at T0 (Unix seconds) for member "m-1", generation 5, instance "pod-0" of group "g", with a
1 s heartbeat interval and a 30 s maxBridgeSeconds (deadline T0 + 30). In expectations, `WAIT` matches any `Wait`,
`REMOVE` any compare-and-remove of the bridged pair, and an `Ended` whose reason is "*" any one-sentence reason.
"""

import ast
import inspect
import json
import pathlib
import re
from dataclasses import asdict, replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vigil_core import events
from vigil_core.bridge import engine
from vigil_core.bridge.engine import (
    Action,
    AppBack,
    AppEnded,
    BridgeConfig,
    BridgeDecodeError,
    BridgeState,
    Described,
    Ended,
    EndOutcome,
    HeartbeatAnswered,
    KeepAlive,
    Member,
    Observation,
    Refused,
    Release,
    ReleaseAnswered,
    Remove,
    RemoveAnswered,
    Resumed,
    SendHeartbeat,
    Tick,
    Wait,
    ended_member,
    release,
    start,
    step,
)
from vigil_core.kafka.model import GroupState, GroupType, GroupView, MemberView
from vigil_core.kafka.outcomes import Api, classify, code_of

T0 = 1_763_700_000.0
CFG = BridgeConfig(heartbeat_interval=1.0, max_bridge_seconds=30.0)
HOLD = replace(CFG, on_foreign_rebalance="hold", expected_return_seconds=10.0)
HOLD_OPEN = replace(CFG, on_foreign_rebalance="hold")
ME = Member("m-1", 5, "pod-0")
HB = SendHeartbeat("g", "m-1", 5, "pod-0")
TICK = Tick()
WAIT = object()
REMOVE = object()


def hb(name: str) -> HeartbeatAnswered:
    return HeartbeatAnswered(classify(Api.HEARTBEAT, code_of(name)))


def rm(name: str) -> RemoveAnswered:
    return RemoveAnswered(classify(Api.LEAVE_GROUP, code_of(name)))


OK = hb("NONE")
REBALANCE = hb("REBALANCE_IN_PROGRESS")
MOVED = hb("ILLEGAL_GENERATION")


def ended(outcome: EndOutcome, seconds: float, heartbeats: int, error: str | None = None) -> Ended:
    return Ended(outcome, "*", seconds, heartbeats, error)


def view(*members: tuple[str, str | None], group: str = "g") -> Described:
    ms = tuple(MemberView(mid, iid, "app", "/10.0.0.1", ()) for mid, iid in members)
    return Described(GroupView(group, GroupState.STABLE, GroupType.CLASSIC, "range", 1, ms))


Step = tuple[float, Observation, list[object]]


def steady(first: float, count: int, answer: HeartbeatAnswered = OK, latency: float = 0.05) -> list[Step]:
    """`count` heartbeats from T0 + first, one per second, each answered `answer` after `latency`."""
    steps: list[Step] = []
    for i in range(count):
        t = T0 + first + i
        steps += [(t, TICK, [HB]), (t + latency, answer, [Wait(t + 1.0)])]
    return steps


FIRST: list[Step] = [(T0, TICK, [HB])]
"""The first heartbeat goes at once: the member's session has been running since the app's last one."""

CASES: dict[str, tuple[BridgeConfig, list[Step]]] = {
    # --- pace ---
    "one heartbeat at once, then one per interval while answered": (CFG, steady(0.0, 5)),
    "an early tick sends nothing; the interval counts from send to send": (
        CFG,
        [*FIRST, (T0 + 0.05, OK, [Wait(T0 + 1.0)]), (T0 + 0.5, TICK, [Wait(T0 + 1.0)]), (T0 + 1.0, TICK, [HB])],
    ),
    "never two in flight: a tick during a heartbeat only waits": (
        CFG,
        [*FIRST, (T0 + 1.0, TICK, [Wait(T0 + 30.0)]), (T0 + 2.0, TICK, [Wait(T0 + 30.0)]), (T0 + 2.1, OK, [HB])],
    ),
    "an answer slower than an interval: the next heartbeat goes at once": (
        CFG,
        [*FIRST, (T0 + 1.7, OK, [HB]), (T0 + 1.8, OK, [Wait(T0 + 2.7)])],
    ),
    # --- answers that end it ---
    "FENCED_INSTANCE_ID: the instance id shows a new member, the app is back → rejoined": (
        CFG,
        [
            *steady(0.0, 3),
            (T0 + 3.0, TICK, [HB]),
            (T0 + 3.1, hb("FENCED_INSTANCE_ID"), [ended("rejoined", 3.1, 4, "FENCED_INSTANCE_ID")]),
        ],
    ),
    "UNKNOWN_MEMBER_ID: the coordinator dropped the member → member-gone": (
        CFG,
        [*FIRST, (T0 + 0.1, hb("UNKNOWN_MEMBER_ID"), [ended("member-gone", 0.1, 1, "UNKNOWN_MEMBER_ID")])],
    ),
    "GROUP_ID_NOT_FOUND: the group is gone → member-gone": (
        CFG,
        [*FIRST, (T0 + 0.1, hb("GROUP_ID_NOT_FOUND"), [ended("member-gone", 0.1, 1, "GROUP_ID_NOT_FOUND")])],
    ),
    "REPORT (authorization) → error: only a human can fix it": (
        CFG,
        [*FIRST, (T0 + 0.1, hb("GROUP_AUTHORIZATION_FAILED"), [ended("error", 0.1, 1, "GROUP_AUTHORIZATION_FAILED")])],
    ),
    "an error code unknown to vigil → error: never kept alive against the broker's word": (
        CFG,
        [
            *FIRST,
            (T0 + 0.1, HeartbeatAnswered(classify(Api.HEARTBEAT, 999)), [ended("error", 0.1, 1, "UNKNOWN_ERROR_999")]),
        ],
    ),
    # --- answers that do not end it ---
    "no answer, a moved or loading coordinator: keep heartbeating until the deadline, which names the last error": (
        CFG,
        [
            *FIRST,
            (T0 + 0.1, hb("TRANSPORT_ERROR"), [Wait(T0 + 1.0)]),
            (T0 + 1.0, TICK, [HB]),
            (T0 + 1.1, hb("NOT_COORDINATOR"), [Wait(T0 + 2.0)]),
            (T0 + 2.0, TICK, [HB]),
            (T0 + 9.0, hb("COORDINATOR_LOAD_IN_PROGRESS"), [HB]),  # the client's own retries took 7 s
            (T0 + 29.9, hb("REQUEST_TIMED_OUT"), [HB]),  # still before the deadline: one more
            (T0 + 30.0, TICK, [ended("deadline", 30.0, 5, "REQUEST_TIMED_OUT")]),
        ],
    ),
    "after errors, a successful answer clears the last error": (
        CFG,
        [
            *FIRST,
            (T0 + 0.1, hb("TRANSPORT_ERROR"), [WAIT]),
            *steady(1.0, 29),
            (T0 + 30.0, TICK, [ended("deadline", 30.0, 30)]),
        ],
    ),
    # --- the deadline ---
    "maxBridgeSeconds: none at the deadline; heartbeats stop → deadline": (
        CFG,
        [*steady(0.0, 30), (T0 + 30.0, TICK, [ended("deadline", 30.0, 30)])],
    ),
    "the deadline with a heartbeat in flight ends at once; the late answer is ignored": (
        CFG,
        [
            *steady(0.0, 29),
            (T0 + 29.0, TICK, [HB]),
            (T0 + 30.0, TICK, [ended("deadline", 30.0, 30)]),
            (T0 + 30.5, OK, []),
            (T0 + 31.0, TICK, []),
        ],
    ),
    # --- someone else's rebalance: remove ---
    "remove: REBALANCE_IN_PROGRESS → one compare-and-remove at once → removed": (
        CFG,
        [
            *steady(0.0, 2),
            (T0 + 2.0, TICK, [HB]),
            (
                T0 + 2.1,
                REBALANCE,
                [
                    Remove(
                        "g",
                        "m-1",
                        "pod-0",
                        "vigil: static member pod-0 restarting for 2.1s, absent from a rebalance"
                        " (onForeignRebalance: remove)",
                    )
                ],
            ),
            (T0 + 2.5, TICK, [Wait(T0 + 30.0)]),  # nothing else while the Remove is in flight
            (T0 + 2.6, rm("NONE"), [ended("removed", 2.6, 3, "NONE")]),
            (T0 + 3.0, TICK, []),
        ],
    ),
    "remove: the member had already left (ALREADY_GONE) → member-gone": (
        CFG,
        [
            *FIRST,
            (T0 + 0.1, REBALANCE, [REMOVE]),
            (T0 + 0.2, rm("UNKNOWN_MEMBER_ID"), [ended("member-gone", 0.2, 1, "UNKNOWN_MEMBER_ID")]),
        ],
    ),
    "remove: the app rejoined first (FENCED_INSTANCE_ID, nothing removed) → rejoined": (
        CFG,
        [
            *FIRST,
            (T0 + 0.1, REBALANCE, [REMOVE]),
            (T0 + 0.2, rm("FENCED_INSTANCE_ID"), [ended("rejoined", 0.2, 1, "FENCED_INSTANCE_ID")]),
        ],
    ),
    "remove: no answer after the client's retries → error, the session timeout does it (one Remove only)": (
        CFG,
        [
            *FIRST,
            (T0 + 0.1, REBALANCE, [REMOVE]),
            (T0 + 8.0, rm("TRANSPORT_ERROR"), [ended("error", 8.0, 1, "TRANSPORT_ERROR")]),
        ],
    ),
    "remove: denied → error": (
        CFG,
        [
            *FIRST,
            (T0 + 0.1, REBALANCE, [REMOVE]),
            (T0 + 0.2, rm("GROUP_AUTHORIZATION_FAILED"), [ended("error", 0.2, 1, "GROUP_AUTHORIZATION_FAILED")]),
        ],
    ),
    "a Remove in flight decides the outcome: the deadline waits for its answer": (
        CFG,
        [
            *steady(0.0, 29),
            (T0 + 29.0, TICK, [HB]),
            (T0 + 29.5, REBALANCE, [REMOVE]),
            (T0 + 30.0, TICK, [Wait(T0 + 31.0)]),
            (T0 + 31.0, TICK, [Wait(T0 + 32.0)]),
            (T0 + 31.5, rm("NONE"), [ended("removed", 31.5, 30, "NONE")]),
        ],
    ),
    # --- someone else's rebalance: hold ---
    "hold: heartbeat through the rebalance until the expected return, then compare-and-remove": (
        HOLD,
        [
            *steady(0.0, 2),
            (T0 + 2.0, TICK, [HB]),
            (T0 + 2.1, REBALANCE, [Wait(T0 + 3.0)]),
            *steady(3.0, 7, REBALANCE),
            (
                T0 + 10.0,
                TICK,
                [
                    Remove(
                        "g",
                        "m-1",
                        "pod-0",
                        "vigil: static member pod-0 restarting for 10.0s, not back by the end of the hold",
                    )
                ],
            ),
            (T0 + 10.1, rm("NONE"), [ended("removed", 10.1, 10, "NONE")]),
        ],
    ),
    "hold: the app joins the same rebalance → rejoined, no Remove": (
        HOLD,
        [
            *FIRST,
            (T0 + 0.1, REBALANCE, [Wait(T0 + 1.0)]),
            (T0 + 1.0, TICK, [HB]),
            (T0 + 1.1, REBALANCE, [Wait(T0 + 2.0)]),
            (T0 + 2.0, TICK, [HB]),
            (T0 + 2.1, hb("FENCED_INSTANCE_ID"), [ended("rejoined", 2.1, 3, "FENCED_INSTANCE_ID")]),
        ],
    ),
    "hold without an expected return lasts until the deadline, then removes": (
        HOLD_OPEN,
        [
            *FIRST,
            (T0 + 0.1, REBALANCE, [Wait(T0 + 1.0)]),
            *steady(1.0, 29, REBALANCE),
            (T0 + 30.0, TICK, [REMOVE]),
            (T0 + 30.2, rm("NONE"), [ended("removed", 30.2, 30, "NONE")]),
        ],
    ),
    "hold: at most one session timeout after the rebalance was met, whatever the expected return (the group waits)": (
        replace(HOLD_OPEN, expected_return_seconds=25.0, session_timeout=6.0),
        [
            *steady(0.0, 2),
            (T0 + 2.0, TICK, [HB]),
            (T0 + 2.1, REBALANCE, [Wait(T0 + 3.0)]),  # the hold ends at 2.1 + 6 = 8.1, not at 25
            *steady(3.0, 5, REBALANCE),
            (T0 + 8.0, TICK, [HB]),
            (T0 + 8.05, REBALANCE, [Wait(T0 + 8.1)]),
            (T0 + 8.1, TICK, [REMOVE]),
            (T0 + 8.2, rm("NONE"), [ended("removed", 8.2, 9, "NONE")]),
        ],
    ),
    "hold: a rebalance after the expected return → remove at once": (
        HOLD,
        [*steady(0.0, 12), (T0 + 12.0, TICK, [HB]), (T0 + 12.1, REBALANCE, [REMOVE])],
    ),
    "hold: a Remove due while a heartbeat is in flight follows its answer": (
        HOLD,
        [
            *FIRST,
            (T0 + 0.1, REBALANCE, [WAIT]),
            *steady(1.0, 8, REBALANCE),
            (T0 + 9.0, TICK, [HB]),
            (T0 + 10.0, TICK, [Wait(T0 + 30.0)]),
            (T0 + 10.4, REBALANCE, [REMOVE]),
        ],
    ),
    # --- the generation moved ---
    "remove: ILLEGAL_GENERATION → heartbeats stop, nothing removed (the session decides: the app may be back)": (
        CFG,
        [
            *FIRST,
            (T0 + 0.1, MOVED, [ended("stale-generation", 0.1, 1, "ILLEGAL_GENERATION")]),
            (T0 + 1.0, TICK, []),  # over: nothing more, ever
            (T0 + 1.1, OK, []),
        ],
    ),
    "hold: ILLEGAL_GENERATION (the join completed without the app) ends the bridge, no Remove": (
        HOLD,
        [
            *FIRST,
            (T0 + 0.1, REBALANCE, [WAIT]),
            (T0 + 1.0, TICK, [HB]),
            (T0 + 1.1, MOVED, [ended("stale-generation", 1.1, 2, "ILLEGAL_GENERATION")]),
        ],
    ),
    "remove: a Remove due is not sent once the generation moved on": (
        CFG,
        [
            *FIRST,
            (T0 + 0.1, MOVED, [ended("stale-generation", 0.1, 1, "ILLEGAL_GENERATION")]),
            (T0 + 0.2, REBALANCE, []),
        ],
    ),
    # --- views taken anyway ---
    "a view with the instance id under a new member id → rejoined, at once": (
        CFG,
        [*FIRST, (T0 + 0.1, OK, [WAIT]), (T0 + 0.5, view(("m-2", "pod-0"), ("x", None)), [ended("rejoined", 0.5, 1)])],
    ),
    "a view without the member → member-gone": (
        CFG,
        [*FIRST, (T0 + 0.1, OK, [WAIT]), (T0 + 0.5, view(("x", None)), [ended("member-gone", 0.5, 1)])],
    ),
    "a view with the member still there changes nothing; another group's view is ignored": (
        CFG,
        [
            *FIRST,
            (T0 + 0.1, OK, [Wait(T0 + 1.0)]),
            (T0 + 0.5, view(("m-1", "pod-0")), [Wait(T0 + 1.0)]),
            (T0 + 0.6, view(("x", None), group="other"), [Wait(T0 + 1.0)]),
        ],
    ),
    "a view while a Remove is in flight is ignored: the Remove's answer decides": (
        CFG,
        [
            *FIRST,
            (T0 + 0.1, REBALANCE, [REMOVE]),
            (T0 + 0.2, view(("x", None)), [WAIT]),
            (T0 + 0.3, rm("NONE"), [ended("removed", 0.3, 1, "NONE")]),
        ],
    ),
    # --- crash loops ---
    "the app ends again while bridged: a crash loop (2 ends in the window) → crash-loop": (
        CFG,
        [*FIRST, (T0 + 0.1, OK, [WAIT]), (T0 + 5.0, AppEnded(), [ended("crash-loop", 5.0, 1)]), (T0 + 5.1, TICK, [])],
    ),
    "with crashLoopRestarts 3, one more end is bridged on, the next stops it": (
        replace(CFG, crash_loop_restarts=3),
        [
            *FIRST,
            (T0 + 0.1, OK, [WAIT]),
            (T0 + 0.5, AppEnded(), [Wait(T0 + 1.0)]),
            *steady(1.0, 3),
            (T0 + 3.5, AppEnded(), [ended("crash-loop", 3.5, 4)]),
        ],
    ),
    "an end while a Remove is in flight waits for the Remove's answer": (
        CFG,
        [
            *FIRST,
            (T0 + 0.1, REBALANCE, [REMOVE]),
            (T0 + 0.2, AppEnded(), [WAIT]),
            (T0 + 0.3, rm("NONE"), [ended("removed", 0.3, 1, "NONE")]),
        ],
    ),
    # --- resuming a persisted bridge ---
    "resumed: the lost heartbeat is forgotten and sent again when due": (
        CFG,
        [*FIRST, (T0 + 4.0, Resumed(), [HB]), (T0 + 4.1, OK, [Wait(T0 + 5.0)])],
    ),
    "an answer to nothing in flight is ignored": (
        CFG,
        [*FIRST, (T0 + 0.1, OK, [Wait(T0 + 1.0)]), (T0 + 0.2, OK, [Wait(T0 + 1.0)])],
    ),
    "resumed past the deadline: ends at once": (
        CFG,
        [*FIRST, (T0 + 0.1, OK, [WAIT]), (T0 + 300.0, Resumed(), [ended("deadline", 300.0, 1)])],
    ),
    "resumed with a Remove in flight: the same Remove again (compare-and-remove makes it safe)": (
        CFG,
        [
            *FIRST,
            (T0 + 0.1, REBALANCE, [REMOVE]),
            (T0 + 60.0, Resumed(), [REMOVE]),
            (T0 + 60.1, rm("UNKNOWN_MEMBER_ID"), [ended("member-gone", 60.1, 1, "UNKNOWN_MEMBER_ID")]),
        ],
    ),
}


def begin(config: BridgeConfig = CFG, protocol: engine.GroupProtocol = "classic") -> BridgeState:
    state = start("g", ME, proof="helper-connection-closed", earlier_ends=(), now=T0, config=config, protocol=protocol)
    assert isinstance(state, BridgeState), state
    return state


def run(steps: list[Step], config: BridgeConfig = CFG, protocol: engine.GroupProtocol = "classic") -> BridgeState:
    state = begin(config, protocol)
    for i, (now, observation, expected) in enumerate(steps):
        state, actions = step(state, observation, now)
        assert _matches(actions, expected), (
            f"step {i} at T0+{now - T0:g} ({observation}): got {actions}, want {expected}"
        )
        # every state survives persistence exactly
        assert BridgeState.from_json(state.to_json()) == state
    return state


def _matches(actions: list[Action], expected: list[object]) -> bool:
    if len(actions) != len(expected):
        return False
    for got, want in zip(actions, expected, strict=True):
        if want is WAIT:
            ok = isinstance(got, Wait)
        elif want is REMOVE:
            ok = (
                isinstance(got, Remove)
                and (got.group_id, got.member_id, got.instance_id) == ("g", "m-1", "pod-0")
                and got.reason.startswith("vigil: ")
            )
        elif isinstance(want, Wait) and isinstance(got, Wait):
            ok = got.until == pytest.approx(want.until, abs=1e-6)
        elif isinstance(want, Ended) and isinstance(got, Ended):
            ok = (
                (got.outcome, got.heartbeats_sent, got.kafka_error)
                == (want.outcome, want.heartbeats_sent, want.kafka_error)
                and got.seconds_bridged == pytest.approx(want.seconds_bridged, abs=1e-6)
                and (want.reason == got.reason if want.reason != "*" else _one_sentence(got.reason))
            )
        else:
            ok = got == want
        if not ok:
            return False
    return True


def _one_sentence(text: str) -> bool:
    return bool(text) and text.endswith(".") and "\n" not in text


@pytest.mark.parametrize(("config", "steps"), CASES.values(), ids=CASES.keys())
def test_rules(config: BridgeConfig, steps: list[Step]) -> None:
    run(steps, config)


# --- KIP-848: keep-alives at the member's epoch, the instance id released when the app is back ----------------------

KA = KeepAlive("g", "m-1", 5, "pod-0")
RELEASE = Release("g", "m-1", "pod-0")


def ka(name: str, epoch: int | None = 5) -> HeartbeatAnswered:
    return HeartbeatAnswered(classify(Api.CONSUMER_GROUP_HEARTBEAT, code_of(name)), epoch)


def rel(name: str) -> ReleaseAnswered:
    return ReleaseAnswered(classify(Api.CONSUMER_GROUP_HEARTBEAT, code_of(name)))


KA_FIRST: list[Step] = [(T0, TICK, [KA])]

KIP848_CASES: dict[str, list[Step]] = {
    "keep-alives at once, then one per interval, at the epoch the answers give": [
        *KA_FIRST,
        (T0 + 0.1, ka("NONE"), [Wait(T0 + 1.0)]),
        (T0 + 1.0, TICK, [KA]),
        (T0 + 1.1, ka("NONE", 7), [Wait(T0 + 2.0)]),  # a rebalance reconciled the member meanwhile
        (T0 + 2.0, TICK, [KeepAlive("g", "m-1", 7, "pod-0")]),
    ],
    "an answer without an epoch (no answer came) keeps the last one": [
        *KA_FIRST,
        (T0 + 0.1, HeartbeatAnswered(classify(Api.CONSUMER_GROUP_HEARTBEAT, code_of("TRANSPORT_ERROR"))), [WAIT]),
        (T0 + 1.0, TICK, [KA]),
    ],
    "the app is back: its instance id released at once, then rejoined": [
        *KA_FIRST,
        (T0 + 0.1, ka("NONE"), [Wait(T0 + 1.0)]),
        (T0 + 0.5, AppBack(), [RELEASE]),
        (T0 + 0.6, rel("NONE"), [ended("rejoined", 0.6, 1, "NONE")]),
    ],
    "the app is back during a keep-alive: the release follows its answer": [
        *KA_FIRST,
        (T0 + 0.05, AppBack(), [WAIT]),
        (T0 + 0.1, ka("NONE"), [RELEASE]),
        (T0 + 0.2, rel("NONE"), [ended("rejoined", 0.2, 1, "NONE")]),
    ],
    "a release in flight: ticks and views wait, the deadline too": [
        *KA_FIRST,
        (T0 + 0.1, ka("NONE"), [WAIT]),
        (T0 + 29.9, AppBack(), [RELEASE]),
        (T0 + 30.5, TICK, [WAIT]),
        (T0 + 30.6, view(("m-2", "pod-0")), [WAIT]),
        (T0 + 30.7, rel("NONE"), [ended("rejoined", 30.7, 1, "NONE")]),
    ],
    "released already replaced (FENCED_INSTANCE_ID): rejoined": [
        *KA_FIRST,
        (T0 + 0.1, AppBack(), [WAIT]),
        (T0 + 0.2, ka("NONE"), [RELEASE]),
        (T0 + 0.3, rel("FENCED_INSTANCE_ID"), [ended("rejoined", 0.3, 1, "FENCED_INSTANCE_ID")]),
    ],
    "the member gone when the app is back: member-gone": [
        *KA_FIRST,
        (T0 + 0.1, AppBack(), [WAIT]),
        (T0 + 0.2, ka("NONE"), [RELEASE]),
        (T0 + 0.3, rel("UNKNOWN_MEMBER_ID"), [ended("member-gone", 0.3, 1, "UNKNOWN_MEMBER_ID")]),
    ],
    "a release refused: error (the join waits for the member's expiry)": [
        *KA_FIRST,
        (T0 + 0.1, AppBack(), [WAIT]),
        (T0 + 0.2, ka("NONE"), [RELEASE]),
        (T0 + 0.3, rel("GROUP_AUTHORIZATION_FAILED"), [ended("error", 0.3, 1, "GROUP_AUTHORIZATION_FAILED")]),
    ],
    "FENCED_MEMBER_EPOCH: the epoch moved on without it → stale-generation": [
        *KA_FIRST,
        (T0 + 0.1, ka("FENCED_MEMBER_EPOCH", 0), [ended("stale-generation", 0.1, 1, "FENCED_MEMBER_EPOCH")]),
    ],
    "FENCED_INSTANCE_ID on a keep-alive: someone holds the instance id → rejoined": [
        *KA_FIRST,
        (T0 + 0.1, ka("FENCED_INSTANCE_ID", 0), [ended("rejoined", 0.1, 1, "FENCED_INSTANCE_ID")]),
    ],
    "UNKNOWN_MEMBER_ID: the member expired or was removed → member-gone": [
        *KA_FIRST,
        (T0 + 0.1, ka("UNKNOWN_MEMBER_ID", 0), [ended("member-gone", 0.1, 1, "UNKNOWN_MEMBER_ID")]),
    ],
    "no foreign-rebalance policy: an epoch moved on is only the next keep-alive's": [
        *KA_FIRST,
        (T0 + 0.1, ka("NONE", 9), [Wait(T0 + 1.0)]),
    ],
    "the deadline ends it (the sidecar then owes a release)": [
        *KA_FIRST,
        (T0 + 0.1, ka("NONE"), [WAIT]),
        (T0 + 30.0, TICK, [ended("deadline", 30.0, 1)]),
    ],
    "a crash loop ends it": [
        *KA_FIRST,
        (T0 + 0.1, ka("NONE"), [WAIT]),
        (T0 + 5.0, AppEnded(), [ended("crash-loop", 5.0, 1)]),
    ],
}


@pytest.mark.parametrize("steps", KIP848_CASES.values(), ids=KIP848_CASES.keys())
def test_kip848_rules(steps: list[Step]) -> None:
    run(steps, CFG, "consumer")


def test_a_classic_bridge_ignores_the_app_coming_back_its_join_replaces_the_member() -> None:
    run([*FIRST, (T0 + 0.1, AppBack(), [WAIT]), (T0 + 0.2, OK, [Wait(T0 + 1.0)]), (T0 + 1.0, TICK, [HB])])


@pytest.mark.parametrize(
    ("protocol", "outcome", "owed"),
    [
        ("consumer", "deadline", True),
        ("consumer", "error", True),
        ("consumer", "stale-generation", True),
        ("consumer", "stopped", True),
        ("consumer", "rejoined", False),
        ("consumer", "member-gone", False),
        ("consumer", "crash-loop", False),
        ("classic", "deadline", False),
        ("classic", "stopped", False),
    ],
)
def test_a_kip848_bridge_that_ends_with_the_member_kept_releases_its_instance_id(
    protocol: engine.GroupProtocol, outcome: str, owed: bool
) -> None:
    assert engine.parting_release(begin(CFG, protocol), outcome) == (RELEASE if owed else None)


@pytest.mark.parametrize(("epoch", "started"), [(5, True), (1, True), (0, False), (-1, False), (-2, False)])
def test_a_kip848_bridge_needs_the_member_s_current_epoch(epoch: int, started: bool) -> None:
    """-2: the member left for now (released); it can no longer be kept alive."""
    result = start("g", Member("m-1", epoch, "pod-0"), proof="helper-connection-closed", earlier_ends=(), now=T0,
                   config=CFG, protocol="consumer")  # fmt: skip
    assert isinstance(result, BridgeState) is started
    if not started:
        assert isinstance(result, Refused)
        assert result.cause == "no-generation"
        assert "epoch" in result.message


def test_a_stale_answer_after_resuming_is_ignored() -> None:
    state = begin()
    state, _ = step(state, TICK, T0)
    state, actions = step(state, Resumed(), T0 + 0.2)
    assert actions == [Wait(T0 + 1.0)]  # not yet due: the interval counts from the lost heartbeat
    state, actions = step(state, OK, T0 + 0.3)  # the lost heartbeat's answer after all: nothing in flight
    assert actions == [Wait(T0 + 1.0)]
    assert state.heartbeats_sent == 1


# --- starting ---------------------------------------------------------------------------------------------------

STARTS: dict[str, tuple[str | None, Member | None, tuple[float, ...], str | None]] = {
    # name: (proof, member, earlier ends (relative to T0), refusal cause or None for started)
    "helper connection closed": ("helper-connection-closed", ME, (), None),
    "container terminated": ("container-terminated", ME, (), None),
    "pod deleted by a coordinated rollout": ("pod-deleted", ME, (), None),
    "silence is never proof": (None, ME, (), "no-proof"),
    "an empty proof": ("", ME, (), "no-proof"),
    "a missing beacon is not a proof": ("beacon-missing", ME, (), "no-proof"),
    "no report from the helper: no generation": ("container-terminated", None, (), "no-member"),
    "a dynamic member": ("container-terminated", Member("m-1", 5, None), (), "dynamic-member"),
    "generation unknown (-1)": ("container-terminated", Member("m-1", -1, "pod-0"), (), "no-generation"),
    "second end within the window: a crash loop": ("container-terminated", ME, (-100.0,), "crash-loop"),
    "an earlier end outside the window does not count": ("container-terminated", ME, (-601.0,), None),
    "an end at the window's edge does not count": ("container-terminated", ME, (-600.0,), None),
    "ends at or after now are not earlier ends": ("container-terminated", ME, (0.0, 5.0), None),
    "another process's member (instance p0-b in pod-0's sidecar)": ("helper-connection-closed",
                                                                     Member("m-2", 5, "p0-b"), (), "other-instance"),
}  # fmt: skip


@pytest.mark.parametrize(("proof", "member", "earlier", "refusal"), STARTS.values(), ids=STARTS.keys())
def test_start(proof: str | None, member: Member | None, earlier: tuple[float, ...], refusal: str | None) -> None:
    result = start(
        "g", member, proof=proof, earlier_ends=[T0 + t for t in earlier], now=T0, config=CFG, instance_id="pod-0"
    )
    if refusal is None:
        assert isinstance(result, BridgeState)
        assert (result.member_id, result.generation, result.instance_id, result.proof) == ("m-1", 5, "pod-0", proof)
        assert (result.started_at, result.deadline, result.heartbeats_sent, result.ended) == (T0, T0 + 30.0, 0, None)
        assert result.ends == (T0,)
    else:
        assert isinstance(result, Refused)
        assert result.cause == refusal
        assert _one_sentence(result.message)


def test_without_an_instance_id_to_check_any_static_member_is_bridged() -> None:
    """The operator's rollout bridges the member it read for the pod: no instance id to compare with."""
    other = start("g", Member("m-2", 5, "p0-b"), proof="pod-deleted", earlier_ends=(), now=T0, config=CFG)
    assert isinstance(other, BridgeState)


A, B = Member("m-a", 3, "p0-a"), Member("m-b", 3, "p0-b")
ENDED: dict[str, tuple[str | None, dict[str | None, Member], int, Member | None]] = {
    # name: (the ended process's token, the member per process, processes still holding, the member bridged)
    "the process that ended reported A": ("tok-a", {"tok-a": A, "tok-b": B}, 1, A),
    "B beaconed last: still A's end is A's": ("tok-a", {"tok-b": B, "tok-a": A}, 1, A),
    "an untagged report (older helper), the only process": ("tok-a", {None: A}, 0, A),
    "an untagged report, another process still there: either's": ("tok-a", {None: B}, 1, None),
    "a hold that named no token, the only process": (None, {None: A}, 0, A),
    "a hold that named no token, another process still there": (None, {"tok-b": B, None: A}, 1, None),
    "the ended process never reported; the other did": ("tok-a", {"tok-b": B}, 1, None),
    "nothing reported": ("tok-a", {}, 0, None),
}  # fmt: skip


@pytest.mark.parametrize(("process", "reported", "others", "member"), ENDED.values(), ids=ENDED.keys())
def test_the_proof_of_an_end_binds_to_the_member_its_process_reported(
    process: str | None, reported: dict[str | None, Member], others: int, member: Member | None
) -> None:
    assert ended_member(process, reported, others_open=others) == member


CLOSED = "helper-connection-closed"
RELEASES: dict[str, tuple[str | None, Member | None, tuple[float, ...], str | None]] = {
    # name: (proof, member, earlier ends (relative to T0), refusal cause or None for released)
    "helper connection closed: released, no generation needed": (CLOSED, Member("m-1", -1, "pod-0"), (), None),
    "silence is never proof": (None, ME, (), "no-proof"),
    "a crash loop: its partitions should move on": (CLOSED, ME, (-100.0,), "crash-loop"),
    "no report from the helper": (CLOSED, None, (), "no-member"),
    "a dynamic member has nothing to release": (CLOSED, Member("m-1", 5, None), (), "dynamic-member"),
    "another process's member": (CLOSED, Member("m-2", 5, "p0-b"), (), "other-instance"),
}  # fmt: skip


@pytest.mark.parametrize(("proof", "member", "earlier", "refusal"), RELEASES.values(), ids=RELEASES.keys())
def test_release_of_a_dead_kip848_static_member(
    proof: str | None, member: Member | None, earlier: tuple[float, ...], refusal: str | None
) -> None:
    result = release(
        "g", member, proof=proof, earlier_ends=[T0 + t for t in earlier], now=T0, config=CFG, instance_id="pod-0"
    )
    if refusal is None:
        assert result == Release("g", "m-1", "pod-0")
    else:
        assert isinstance(result, Refused)
        assert result.cause == refusal
        assert result.message.startswith("Not releasing")
        assert _one_sentence(result.message)


def test_crash_loop_threshold_is_configurable() -> None:
    three = replace(CFG, crash_loop_restarts=3)
    one_before = start("g", ME, proof="container-terminated", earlier_ends=[T0 - 10], now=T0, config=three)
    two_before = start("g", ME, proof="container-terminated", earlier_ends=[T0 - 20, T0 - 10], now=T0, config=three)
    assert isinstance(one_before, BridgeState)
    assert one_before.ends == (T0 - 10, T0)
    assert isinstance(two_before, Refused)
    assert two_before.cause == "crash-loop"
    assert "3 times" in two_before.message


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("heartbeat_interval", 0.0),
        ("heartbeat_interval", float("nan")),
        ("max_bridge_seconds", -1.0),
        ("max_bridge_seconds", float("inf")),
        ("expected_return_seconds", 0.0),
        ("crash_window_seconds", -1.0),
        ("crash_loop_restarts", 1),
        ("on_foreign_rebalance", "evict"),
    ],
)
def test_config_rejects_nonsense(field: str, value: Any) -> None:
    with pytest.raises(ValueError, match=field):
        replace(CFG, **{field: value})


# --- persistence ------------------------------------------------------------------------------------------------


def test_the_persisted_state_is_small_and_readable() -> None:
    state, _ = step(begin(HOLD), TICK, T0)
    doc = json.loads(state.to_json())
    assert doc["v"] == 1
    assert (doc["member_id"], doc["generation"], doc["instance_id"], doc["deadline"]) == ("m-1", 5, "pod-0", T0 + 30)
    assert doc["in_flight"] == "heartbeat"
    assert doc["config"]["on_foreign_rebalance"] == "hold"
    assert len(state.to_json()) < 600


def test_unknown_fields_are_ignored() -> None:
    state = begin()
    doc = json.loads(state.to_json())
    doc["added_by_a_newer_vigil"] = {"x": 1}
    doc["config"]["also_new"] = 2
    assert BridgeState.from_json(json.dumps(doc)) == state


_times = st.floats(0, 2e9, allow_nan=False) | st.integers(0, 2_000_000_000)
_spans = st.floats(0.001, 1e6, allow_nan=False) | st.integers(1, 10**6)
_configs = st.builds(
    BridgeConfig,
    heartbeat_interval=_spans,
    max_bridge_seconds=_spans,
    on_foreign_rebalance=st.sampled_from(["remove", "hold"]),
    expected_return_seconds=st.none() | _spans,
    crash_window_seconds=st.just(0.0) | _spans,
    crash_loop_restarts=st.integers(2, 2**40),
    session_timeout=st.none() | _spans,
)
_states = st.builds(
    BridgeState,
    config=_configs,
    group_id=st.text(),
    member_id=st.text(),
    generation=st.integers(-(2**31), 2**31),
    instance_id=st.text(),
    proof=st.sampled_from(engine.PROOFS),
    started_at=_times,
    deadline=_times,
    next_heartbeat_at=_times,
    ends=st.lists(_times, max_size=4).map(tuple),
    heartbeats_sent=st.integers(0, 2**40),
    in_flight=st.sampled_from([None, "heartbeat", "remove", "release"]),
    remove_at=st.none() | _times,
    remove_cause=st.sampled_from([None, "rebalance", "hold-ended", "generation-moved"]),
    last_error=st.none() | st.text(max_size=30),
    ended=st.none() | st.sampled_from(engine.END_OUTCOMES),
    protocol=st.sampled_from(["classic", "consumer"]),
    release_due=st.booleans(),
)


@settings(max_examples=300, deadline=None)
@given(_states)
def test_any_state_round_trips_and_is_written_as_before(state: BridgeState) -> None:
    """Every state reads back equal; and the bytes are the ones the hand-written encoder of 0.1.0 wrote (the
    dataclasses' fields in order after the version, compact; what an older operator resumes)."""
    text = state.to_json()
    assert BridgeState.from_json(text) == state
    doc = {"v": 1, **asdict(state)}
    doc["ends"] = list(state.ends)
    assert text == json.dumps(doc, separators=(",", ":"), allow_nan=False)


def _broken(change: dict[str, object]) -> str:
    doc = json.loads(begin().to_json())
    for key, value in change.items():
        if value is KeyError:
            del doc[key]
        else:
            doc[key] = value
    return json.dumps(doc)


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("", "not a bridge state: not JSON"),
        ("[1]", "not a bridge state: not a JSON object"),
        ("NaN", "not a bridge state: not a JSON object"),
        (_broken({"v": KeyError}), "v is missing"),
        (_broken({"v": True}), "v must be an integer, got true"),
        (_broken({"v": 0}), "v must be greater than or equal to 1"),
        (_broken({"config": KeyError}), "config is missing"),
        (_broken({"deadline": KeyError}), "deadline is missing"),
        (_broken({"generation": "5"}), 'generation must be an integer, got "5"'),
        (_broken({"heartbeats_sent": True}), "heartbeats_sent must be an integer"),
        (_broken({"ends": [1.0, "x"]}), 'ends[1] must be a number, got "x"'),
        (_broken({"proof": "silence"}), "proof must be 'helper-connection-closed', 'container-terminated' or"),
        (_broken({"ended": "exploded"}), "ended must be 'rejoined', "),
        (_broken({"in_flight": "describe"}), "in_flight must be 'heartbeat', 'remove' or 'release', got \"describe\""),
        (_broken({"config": {"heartbeat_interval": 1.0}}), "config.max_bridge_seconds is missing"),
        (_broken({"config": {"heartbeat_interval": 1.0, "max_bridge_seconds": 0}}), "config: bridge max_bridge_sec"),
    ],
)
def test_a_broken_state_fails_in_one_line_naming_the_field(text: str, names: str) -> None:
    with pytest.raises(BridgeDecodeError, match=re.escape(names)) as info:
        BridgeState.from_json(text)
    assert str(info.value).startswith("not a bridge state: ")
    assert "\n" not in str(info.value)


# --- vocabulary and purity ----------------------------------------------------------------------------------------


def test_proofs_and_outcomes_are_the_events_vocabulary() -> None:
    started = inspect.getsource(events.BridgeStartedPayload)
    finished = inspect.getsource(events.BridgeEndedPayload)
    for proof in engine.PROOFS:
        assert f'"{proof}"' in started
    for outcome in engine.END_OUTCOMES:
        assert f'"{outcome}"' in finished


_ALLOWED = {
    "collections",
    "dataclasses",
    "json",
    "math",
    "pydantic",
    "typing",
    "vigil_core.codec",
    "vigil_core.kafka.model",
    "vigil_core.kafka.outcomes",
    "vigil_core.liveness",
}


def test_the_engine_does_no_io_and_reads_no_clock() -> None:
    package = pathlib.Path(engine.__file__).parent
    for path in sorted(package.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                # `from vigil_core import codec` imports vigil_core.codec
                names = [node.module if node.module in _ALLOWED else f"{node.module}.{a.name}" for a in node.names]
            for name in names:
                assert name in _ALLOWED or name.split(".")[0] in _ALLOWED, f"{path.name} imports {name}"
