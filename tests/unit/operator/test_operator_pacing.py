"""A ConsumerGroup's resync loop (domain.pacing): when it resyncs, and that once kopf asks it to stop — the replica
pauses for a peer with a higher priority, the group is deleted, the operator exits — no resync starts and a resync
in flight begins no further step (a paused replica used to resync once more after "Pausing operations")."""

import enum

import pytest

from vigil_operator.domain import pacing
from vigil_operator.domain.pacing import End, Resync, Wait

INTERVAL = 30.0
PAUSING, DELETED, EXITING = "operator pausing", "resource deleted", "operator exiting"

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
