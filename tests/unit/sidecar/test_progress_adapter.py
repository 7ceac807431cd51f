"""The progress signal's pure parts as tables: the adapter (judgement → watchdog observations), the pause inference,
and the bounded history (judged exactly as the full one)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vigil_core.kafka.model import MemberView, TopicPartitionRef
from vigil_core.liveness import StallAction
from vigil_sidecar.signals.progress import compact, infer_paused
from vigil_sidecar.signals.progress_adapter import AdapterState, NoCommits, adapt
from vigil_sidecar.watchdog import progress_rules as pr
from vigil_sidecar.watchdog.decide import decide
from vigil_sidecar.watchdog.progress_rules import GroupFacts, MemberProgress, PartitionFacts, ProgressStatus, Sample
from vigil_sidecar.watchdog.state import Beacon, WatchdogConfig, WatchdogState

A, B = TopicPartitionRef("orders", 0), TopicPartitionRef("orders", 1)
MEMBER = MemberView("m-1", "pod-0", "pod-0", "/10.0.0.1", (A, B))
OK, SUS, NOC, STALL, STOP = (ProgressStatus.OK, ProgressStatus.SUSPENDED, ProgressStatus.NO_COMMITS,
                             ProgressStatus.STALL, ProgressStatus.STOP)  # fmt: skip


def progress(a: ProgressStatus, b: ProgressStatus = OK) -> MemberProgress:
    return MemberProgress(max(a, b), ((A, a, None), (B, b, None)))


def beacon(now: float) -> Beacon:
    return Beacon("m-1", -1, "pod-0", 2, now)


# (case, statuses of A and B per check, expected outputs per check)
CASES = [
    ("OK: a beacon every check", [(OK, OK), (OK, OK)], [[beacon(0)], [beacon(1)]]),
    ("SUSPENDED: keep beaconing, never evict while rebalancing", [(SUS, OK)], [[beacon(0)]]),
    ("STALL: silent, the watchdog's timer runs out", [(OK, OK), (STALL, OK), (STALL, OK)], [[beacon(0)], [], []]),
    ("STOP: silent", [(STOP, STALL)], [[]]),
    ("stall over: beacons again", [(STALL, OK), (OK, OK)], [[], [beacon(1)]]),
    (
        "NO_COMMITS: a finding once, and beacons (never an eviction)",
        [(NOC, OK), (NOC, OK), (NOC, OK)],
        [[NoCommits("m-1", (A,)), beacon(0)], [beacon(1)], [beacon(2)]],
    ),
    (
        "NO_COMMITS spreading: only the new partition is named",
        [(NOC, OK), (NOC, NOC)],
        [[NoCommits("m-1", (A,)), beacon(0)], [NoCommits("m-1", (B,)), beacon(1)]],
    ),
    (
        "NO_COMMITS again after it cleared: named again",
        [(NOC, OK), (OK, OK), (NOC, OK)],
        [[NoCommits("m-1", (A,)), beacon(0)], [beacon(1)], [NoCommits("m-1", (A,)), beacon(2)]],
    ),
    ("NO_COMMITS beside a STALL: the finding, and silence", [(NOC, STALL)], [[NoCommits("m-1", (A,))]]),
]


@pytest.mark.parametrize(("statuses", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_adapter(statuses: list[tuple[ProgressStatus, ProgressStatus]], expected: list[list[object]]) -> None:
    state = AdapterState()
    for now, ((a, b), want) in enumerate(zip(statuses, expected, strict=True)):
        state, out = adapt(state, progress(a, b), MEMBER, float(now))
        assert out == want, f"check {now}"


def test_a_new_member_is_told_about_its_no_commits_afresh() -> None:
    state, _ = adapt(AdapterState(), progress(NOC), MEMBER, 0.0)
    other = MemberView("m-2", "pod-0", "pod-0", "/10.0.0.1", (A, B))
    _, out = adapt(state, progress(NOC), other, 1.0)
    assert out == [NoCommits("m-2", (A,)), Beacon("m-2", -1, "pod-0", 2, 1.0)]


def test_the_unchanged_watchdog_alerts_one_stall_timeout_after_the_beacons_stop() -> None:
    """The adapter's silence is what the watchdog reads as a stall: no poll timer restart → its own stall timer."""
    config = WatchdogConfig("pod-0", stall_timeout=6.0, check_interval=1.0, cooldown=60.0, session_timeout=6.0,
                            action=StallAction.ALERT, instance_id="pod-0")  # fmt: skip
    state, adapter = WatchdogState.initial(config), AdapterState()
    state = state.with_coordinator(1, 0.0)
    silent_from = 5.0
    for t in range(5):
        adapter, out = adapt(adapter, progress(OK), MEMBER, float(t))
        for observation in out:
            assert isinstance(observation, Beacon)
            state, _ = decide(state, observation, float(t))
    adapter, out = adapt(adapter, progress(STALL), MEMBER, silent_from)
    assert out == []
    assert state.poll is not None
    assert state.poll.deadline == pytest.approx(4.0 + config.stall_timeout)


# --- infer_paused ----------------------------------------------------------------------------------------------

G = GroupFacts(stable=True, stable_since=-100.0, stall_timeout=6.0)


def _facts(tp: TopicPartitionRef, samples: list[tuple[float, int, int, bool | None]]) -> PartitionFacts:
    return PartitionFacts(tp, tuple(Sample(*s) for s in samples), assigned_at=-100.0)


HELD = [(0, 9, 20, True), *[(t, 10, 20, True) for t in range(1, 11)]]  # a commit, then data waits at 10 for 9 s
MOVING = [(t, 100 + t, 200, True) for t in range(0, 11)]  # commits every second
MOVED_LONG_AGO = [(0, 100, 200, None), (1, 200, 200, None), *[(t, 200, 200, None) for t in range(2, 11)]]

PAUSE_CASES = [
    ("held while a sibling commits: paused", HELD, MOVING, True, OK, "is_paused"),
    ("held, the sibling last moved over a stall timeout ago: judged", HELD, MOVED_LONG_AGO, False, STALL, "is_stalled"),
    (
        "held, no sibling progress at all: judged",
        HELD,
        [(t, 5, 5, None) for t in range(11)],
        False,
        STALL,
        "is_stalled",
    ),
    ("nothing waiting: not marked", [(t, 20, 20, None) for t in range(11)], MOVING, False, OK, "is_not_yet_judged"),
]


@pytest.mark.parametrize(("held", "sibling", "paused", "status", "rule"), [c[1:] for c in PAUSE_CASES],
                         ids=[c[0] for c in PAUSE_CASES])  # fmt: skip
def test_infer_paused(
    held: list[tuple[float, int, int, bool | None]],
    sibling: list[tuple[float, int, int, bool | None]],
    paused: bool,
    status: ProgressStatus,
    rule: str | None,
) -> None:
    a, _ = infer_paused([_facts(A, held), _facts(B, sibling)], G, 10.0)
    assert a.paused is paused
    assert pr.partition_status(a, G, 10.0) == (status, rule)


# --- compact ---------------------------------------------------------------------------------------------------

_sample_steps = st.lists(
    st.tuples(
        st.floats(0.1, 5.0),  # time step
        st.integers(0, 2),  # committed offset advance (0 = unmoved)
        st.integers(0, 3),  # LSO advance
        st.sampled_from([True, False, None]),  # what a probe would say
    ),
    min_size=1,
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(steps=_sample_steps, never_committed=st.booleans(), stall=st.sampled_from([3.0, 10.0, 30.0]))
def test_compacted_history_is_judged_as_the_full_one(
    steps: list[tuple[float, int, int, bool | None]], never_committed: bool, stall: float
) -> None:
    t, committed, lso, samples = 0.0, 0, 0, []
    for dt, dc, dl, data in steps:
        t, lso = t + dt, lso + dl
        committed = min(committed + dc, lso)
        offset = None if never_committed else committed
        samples.append(Sample(t, offset, lso, data if offset is not None and offset < lso else None))
    group = GroupFacts(stable=True, stable_since=0.0, stall_timeout=stall, no_commit_factor=3.0)
    full = PartitionFacts(A, tuple(samples))
    short = PartitionFacts(A, compact(samples, tail=3))
    assert len(short.samples) <= 7
    for now in (t, t + stall, t + 4 * stall):
        assert pr.partition_status(short, group, now) == pr.partition_status(full, group, now)
