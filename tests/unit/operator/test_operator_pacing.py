"""When a ConsumerGroup resyncs (domain.pacing), in its cluster's loop, and that once asked to stop — the replica
stops leading, the group is deleted, the operator exits — no resync starts and a resync in flight begins no further
step."""

import enum

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vigil_operator.domain import pacing
from vigil_operator.domain.pacing import End, Pace, Resync, Wait

INTERVAL = 30.0
PAUSING, DELETED, EXITING = "leadership lost", "resource deleted", "operator exiting"

NEXT = [
    # (case, stopping, requested, last_ended, now, move)
    ("the loop starts (new group, replica starts or resumes): at once", None, False, None, 0.0, Resync("first")),
    ("a request before the first: still the first", None, True, None, 0.0, Resync("first")),
    ("just after a resync: wait the interval", None, False, 100.0, 100.0, Wait(INTERVAL)),
    ("mid-interval: wait the rest", None, False, 100.0, 112.5, Wait(17.5)),
    ("the interval is up", None, False, 100.0, 130.0, Resync("interval")),
    ("long overdue (the resync took longer than the interval)", None, False, 100.0, 500.0, Resync("interval")),
    ("a spec change or a pod's event: at once", None, True, 100.0, 101.0, Resync("requested")),
    ("paused while waiting: no resync starts", PAUSING, False, 100.0, 112.5, End(PAUSING)),
    ("paused when the interval is up: none starts", PAUSING, False, 100.0, 130.0, End(PAUSING)),
    ("paused with a request pending (an event queued before the pause): none starts", PAUSING, True, 100.0, 101.0,
     End(PAUSING)),
    ("paused before the first resync (a daemon kopf spawned from a queued event, then stopped)", PAUSING, False, None,
     0.0, End(PAUSING)),
    ("deleted", DELETED, True, 100.0, 130.0, End(DELETED)),
    ("exiting", EXITING, False, None, 0.0, End(EXITING)),
]  # fmt: skip


@pytest.mark.parametrize(("case", "stopping", "requested", "last", "now", "move"), NEXT, ids=[c[0] for c in NEXT])
def test_next_move(
    case: str, *, stopping: str | None, requested: bool, last: float | None, now: float, move: pacing.Move
) -> None:
    assert pacing.next_move(stopping=stopping, requested=requested, last_ended=last, interval=INTERVAL, now=now) == move


STEPS = [
    # (case, stopping, may begin a step)
    ("running: removals, rollout steps, the status write go on", None, True),
    ("paused mid-resync: another replica acts on the group, this one writes nothing more", PAUSING, False),
    ("the group is being deleted", DELETED, False),
    ("the operator exits (the next one resyncs)", EXITING, False),
]


@pytest.mark.parametrize(("case", "stopping", "begins"), STEPS, ids=[c[0] for c in STEPS])
def test_a_resync_asked_to_stop_begins_no_step(case: str, stopping: str | None, begins: bool) -> None:
    assert pacing.may_begin_step(stopping=stopping) is begins


class Reason(enum.Flag):
    """The shape of kopf's DaemonStoppingReason."""

    OPERATOR_PAUSING = enum.auto()
    DAEMON_SIGNALLED = enum.auto()


@pytest.mark.parametrize(
    ("reason", "words"),
    [
        (Reason.OPERATOR_PAUSING, "operator pausing"),
        (Reason.OPERATOR_PAUSING | Reason.DAEMON_SIGNALLED, "operator pausing, daemon signalled"),
        ("RESOURCE_DELETED", "resource deleted"),
    ],
)
def test_stop_reason_in_words(reason: object, words: str) -> None:
    assert pacing.stop_reason(reason) == words


# -- the loop of each cluster ---------------------------------------------------------------------------------------

A, B = "kafka-a:9092", "kafka-b:9092"
PLANS = [
    # (case, paces, busy, now, due, wake_in)
    ("nothing to resync", {}, (), 0.0, {}, None),
    ("new groups: at once, per cluster", {"g1": Pace(A, None), "g2": Pace(B, None), "g3": Pace(A, None)}, (), 0.0,
     {A: ("g1", "g3"), B: ("g2",)}, None),
    ("the next due group sets the wake", {"g1": Pace(A, 100.0), "g2": Pace(A, 110.0)}, (), 120.0, {}, 10.0),
    ("due and waiting in one cluster", {"g1": Pace(A, 100.0), "g2": Pace(A, 110.0)}, (), 135.0, {A: ("g1",)}, 5.0),
    ("a request is due at once", {"g1": Pace(A, 100.0, requested=True)}, (), 101.0, {A: ("g1",)}, None),
    ("a cluster with a round running waits for it to end (it wakes the loop)",
     {"g1": Pace(A, None), "g2": Pace(B, 100.0)}, (A,), 200.0, {B: ("g2",)}, None),
    ("a busy cluster's waiting groups do not set the wake", {"g1": Pace(A, 100.0), "g2": Pace(B, 110.0)}, (A,), 120.0,
     {}, 20.0),
]  # fmt: skip


@pytest.mark.parametrize(("case", "paces", "busy", "now", "due", "wake"), PLANS, ids=[c[0] for c in PLANS])
def test_plan(
    case: str, paces: dict[str, Pace], busy: tuple[str, ...], now: float, *, due: dict[str, tuple[str, ...]],
    wake: float | None,
) -> None:  # fmt: skip
    found = pacing.plan(paces, busy=busy, interval=INTERVAL, now=now)
    assert (dict(found.due), found.wake_in) == (due, wake)


paces_st = st.dictionaries(
    st.text("abcdefgh", min_size=1, max_size=3),
    st.builds(Pace, st.sampled_from([A, B, "kafka-c:9092"]), st.none() | st.floats(0, 1000), st.booleans()),
    max_size=20,
)


@given(paces=paces_st, busy=st.sets(st.sampled_from([A, B, "kafka-c:9092"])), now=st.floats(0, 2000))
def test_every_group_is_due_waiting_or_behind_its_clusters_round(
    paces: dict[str, Pace], busy: set[str], now: float
) -> None:
    found = pacing.plan(paces, busy=busy, interval=INTERVAL, now=now)
    planned = [key for keys in found.due.values() for key in keys]
    assert len(planned) == len(set(planned))
    assert not set(found.due) & busy
    for key, pace in paces.items():
        if pace.cluster in busy:
            assert key not in planned
            continue
        is_due = pace.last_ended is None or pace.requested or now >= pace.last_ended + INTERVAL
        assert (key in found.due.get(pace.cluster, ())) is is_due
        if not is_due:
            assert pace.last_ended is not None
            assert found.wake_in is not None
            assert found.wake_in <= pace.last_ended + INTERVAL - now
    if found.wake_in is not None:
        assert found.wake_in > 0
