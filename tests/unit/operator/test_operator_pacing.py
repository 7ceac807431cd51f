"""When a ConsumerGroup resyncs (domain.pacing), in its cluster's loop, and that once asked to stop — the replica
stops leading, the group is deleted, the operator exits — no resync starts and a resync in flight begins no further
step."""

import enum

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vigil_operator.domain import pacing
from vigil_operator.domain.pacing import Pace

INTERVAL = 30.0
PAUSING, DELETED, EXITING = "leadership lost", "resource deleted", "operator exiting"

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
    # (case, paces, cadence, busy, now, due, periodic, wake_in)
    ("nothing to resync", {}, {}, (), 0.0, {}, (), None),
    ("the loop starts: every cluster's periodic round at once",
     {"g1": Pace(A, False), "g2": Pace(B, False), "g3": Pace(A, False)}, {}, (), 0.0,
     {A: ("g1", "g3"), B: ("g2",)}, (A, B), None),
    ("mid-interval, nothing asked: wait for the next periodic round",
     {"g1": Pace(A, True), "g2": Pace(A, True)}, {A: 100.0}, (), 112.5, {}, (), 17.5),
    ("the interval is up: every group of the cluster, however its last resync went",
     {"g1": Pace(A, True), "g2": Pace(A, False), "g3": Pace(A, True, requested=True)}, {A: 100.0}, (), 130.0,
     {A: ("g1", "g2", "g3")}, (A,), None),
    ("long overdue (the round took longer than the interval): at once",
     {"g1": Pace(A, True)}, {A: 100.0}, (), 500.0, {A: ("g1",)}, (A,), None),
    ("a request between periodic rounds: that group alone, the cadence kept",
     {"g1": Pace(A, True, requested=True), "g2": Pace(A, True)}, {A: 100.0}, (), 101.0, {A: ("g1",)}, (), 29.0),
    ("a group new to the loop between periodic rounds: at once, alone",
     {"g1": Pace(A, True), "new": Pace(A, False)}, {A: 100.0}, (), 101.0, {A: ("new",)}, (), 29.0),
    ("a cluster with a round running waits for it to end (it wakes the loop)",
     {"g1": Pace(A, False), "g2": Pace(B, True)}, {B: 100.0}, (A,), 200.0, {B: ("g2",)}, (B,), None),
    ("a busy cluster's next round does not set the wake",
     {"g1": Pace(A, True), "g2": Pace(B, True)}, {A: 100.0, B: 110.0}, (A,), 120.0, {}, (), 20.0),
]  # fmt: skip


@pytest.mark.parametrize(("case", "paces", "cadence", "busy", "now", "due", "periodic", "wake"), PLANS,
                         ids=[c[0] for c in PLANS])  # fmt: skip
def test_plan(
    case: str, paces: dict[str, Pace], cadence: dict[str, float], busy: tuple[str, ...], now: float, *,
    due: dict[str, tuple[str, ...]], periodic: tuple[str, ...], wake: float | None,
) -> None:  # fmt: skip
    found = pacing.plan(paces, cadence=cadence, busy=busy, interval=INTERVAL, now=now)
    assert (dict(found.due), found.periodic, found.wake_in) == (due, frozenset(periodic), wake)


CLUSTERS = [A, B, "kafka-c:9092"]
paces_st = st.dictionaries(
    st.text("abcdefgh", min_size=1, max_size=3),
    st.builds(Pace, st.sampled_from(CLUSTERS), st.booleans(), st.booleans()),
    max_size=20,
)


@given(paces=paces_st, cadence=st.dictionaries(st.sampled_from(CLUSTERS), st.floats(0, 1000)),
       busy=st.sets(st.sampled_from(CLUSTERS)), now=st.floats(0, 2000))  # fmt: skip
def test_a_periodic_round_takes_the_whole_cluster_and_between_them_only_new_or_asked_groups(
    paces: dict[str, Pace], cadence: dict[str, float], busy: set[str], now: float
) -> None:
    found = pacing.plan(paces, cadence=cadence, busy=busy, interval=INTERVAL, now=now)
    planned = [key for keys in found.due.values() for key in keys]
    assert len(planned) == len(set(planned))
    assert not set(found.due) & busy
    assert found.periodic <= set(found.due)
    for key, pace in paces.items():
        if pace.cluster in busy:
            assert key not in planned
            continue
        began = cadence.get(pace.cluster)
        periodic = began is None or now >= began + INTERVAL
        assert (pace.cluster in found.periodic) is periodic
        is_due = periodic or pace.requested or not pace.resynced
        assert (key in found.due.get(pace.cluster, ())) is is_due
        if not periodic:
            assert began is not None
            assert found.wake_in is not None
            assert found.wake_in <= began + INTERVAL - now
    if found.wake_in is not None:
        assert found.wake_in > 0
