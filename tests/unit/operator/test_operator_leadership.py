"""Leader election over a Lease (domain.leadership): the decision table, then properties of replicas running the
election loop against a compare-and-swap store, in simulated time, with any clock offsets, latencies, lost answers,
crashes and releases:

- never two leaders: at every instant at most one replica believes it leads, and the Lease names it;
- a released Lease is taken at the standby's next try;
- a crashed leader's Lease is taken no sooner than the lease duration after its last renewal landed, and no later
  than the lease duration and one retry period (plus the requests' own time) after it.
"""

import heapq
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from vigil_operator.domain import leadership as el
from vigil_operator.domain.leadership import (
    Acquire,
    LeaseRecord,
    Lost,
    Observation,
    Renew,
    StandBy,
    Timing,
    decide,
)

T = Timing()  # 15 s / 10 s / 2 s
WALL = 1_800_000_000.0
"""The epoch time written into records: no decision reads it back."""
B = LeaseRecord("b", 15, acquire_time=WALL - 600, renew_time=WALL - 1, transitions=3, version="42")
OURS = replace(B, holder="a")
FREE = el.released(B, WALL - 5)

DECISIONS = [
    # (case, record, observed_at, now, renewed_at, decision)
    ("missing: create it naming us", None, 0.0, 100.0, None,
     Acquire(LeaseRecord("a", 15, WALL, WALL, 0, ""))),
    ("released (no holder): take it at once", FREE, 99.0, 100.0, None,
     Acquire(replace(FREE, holder="a", lease_duration=15, acquire_time=WALL, renew_time=WALL, transitions=4))),
    ("held by b, just seen: stand by, read again in a retry period", B, 100.0, 100.0, None,
     StandBy("b", 115.0, 102.0)),
    ("held by b, unchanged for 14 s: read again at its expiry", B, 100.0, 114.0, None,
     StandBy("b", 115.0, 115.0)),
    ("held by b, unchanged for the lease duration by our clock: take it", B, 100.0, 115.0, None,
     Acquire(replace(B, holder="a", acquire_time=WALL, renew_time=WALL, transitions=4))),
    ("its renewTime is 10 minutes old by b's clock: only our own clock counts", replace(B, renew_time=WALL - 600),
     110.0, 111.0, None, StandBy("b", 125.0, 113.0)),
    ("b wrote a longer duration (30 s): it counts", replace(B, lease_duration=30), 100.0, 120.0, None,
     StandBy("b", 130.0, 122.0)),
    ("b wrote a shorter duration (5 s): ours counts", replace(B, lease_duration=5), 100.0, 110.0, None,
     StandBy("b", 115.0, 112.0)),
    ("ours, leading: renew (acquire time and transitions kept)", OURS, 90.0, 102.0, 100.0,
     Renew(replace(OURS, renew_time=WALL))),
    ("ours, leading, a moment before the renew deadline: renew", OURS, 90.0, 109.9, 100.0,
     Renew(replace(OURS, renew_time=WALL))),
    ("ours, but not leading (a term that ended, or this identity before): acquire it again, under its version",
     OURS, 90.0, 102.0, None, Acquire(replace(OURS, renew_time=WALL))),
    ("leading, but no renewal succeeded for the renew deadline: lost", OURS, 90.0, 110.0, 100.0,
     Lost("no renewal succeeded for 10s")),
    ("leading, but b holds it: lost", B, 90.0, 102.0, 100.0, Lost("b holds the Lease")),
]  # fmt: skip


@pytest.mark.parametrize(
    ("case", "record", "observed_at", "now", "renewed_at", "decision"), DECISIONS, ids=[c[0] for c in DECISIONS]
)
def test_decide(
    case: str,
    *,
    record: LeaseRecord | None,
    observed_at: float,
    now: float,
    renewed_at: float | None,
    decision: el.Decision,
) -> None:
    assert decide(record, observed_at, "a", now, wall=WALL, renewed_at=renewed_at) == decision


def test_a_record_seen_again_unchanged_keeps_its_first_sighting_and_any_change_restarts_it() -> None:
    first = el.observe(None, B, 100.0)
    assert first == Observation(B, 100.0)
    assert el.observe(first, B, 112.0) is first  # a read that returns it unchanged does not restart the count
    assert el.observe(first, replace(B, renew_time=WALL, version="43"), 112.0) == Observation(
        replace(B, renew_time=WALL, version="43"), 112.0
    )
    assert el.observe(first, replace(B, version="43"), 112.0).at == 112.0  # a write we cannot tell from a renewal


def test_leads_until_the_renew_deadline_after_the_last_successful_write_was_sent() -> None:
    assert [el.leads(100.0, now, T) for now in (100.0, 109.999, 110.0)] == [True, True, False]
    assert not el.leads(None, 100.0, T)


@pytest.mark.parametrize(
    ("lease", "renew", "retry", "error"),
    [
        (15, 15, 2, "renew_deadline 15s must be shorter than lease_duration 15s"),
        (15, 10, 6, "renew_deadline 10s must be at least twice retry_period 6s"),
        (15, 10, 0, "at least twice retry_period 0s"),
        (0.5, 0.4, 0.1, "lease_duration 0.5s: the Lease counts it in whole seconds"),
    ],
)
def test_timings_that_could_make_two_leaders_or_none_are_refused(
    lease: float, renew: float, retry: float, error: str
) -> None:
    with pytest.raises(ValueError, match=error):
        Timing(lease, renew, retry)


def test_defaults_are_client_gos() -> None:
    assert (T.lease_duration, T.renew_deadline, T.retry_period, T.lease_seconds, T.request_timeout) == (
        15.0, 10.0, 2.0, 15, 5.0,
    )  # fmt: skip
    assert Timing(2.5, 2, 0.5).lease_seconds == 3


def test_the_lease_object_as_the_api_server_stores_it() -> None:
    stored = {
        "metadata": {"name": "vigil-operator", "resourceVersion": "42"},
        "spec": {
            "holderIdentity": "b",
            "leaseDurationSeconds": 15,
            "acquireTime": "2027-01-15T08:00:00.000000Z",
            "renewTime": "2027-01-15T08:09:59.250000Z",
            "leaseTransitions": 3,
            "strategy": "OldestEmulationVersion",
        },
    }
    record = el.record_of(stored)
    at = datetime(2027, 1, 15, 8, tzinfo=UTC).timestamp()
    assert record == LeaseRecord("b", 15, at, at + 599.25, 3, "42")
    assert el.lease_spec(record) == {k: v for k, v in stored["spec"].items() if k != "strategy"}
    assert el.record_of({"metadata": {"resourceVersion": "7"}, "spec": {}}) == LeaseRecord(None, 0, version="7")
    assert el.record_of({"spec": {"holderIdentity": "", "renewTime": "yesterday"}}) == LeaseRecord(None, 0)
    free = el.lease_spec(el.released(record, at))
    assert free["holderIdentity"] is None  # a merge patch's null: the field is removed
    assert (free["leaseDurationSeconds"], free["leaseTransitions"]) == (1, 3)


@given(
    holder=st.one_of(st.none(), st.text(min_size=1, max_size=20)),
    duration=st.integers(1, 3600),
    times=st.lists(st.integers(0, 4_000_000_000_000_000), min_size=2, max_size=2),
    transitions=st.integers(0, 2**31 - 1),
)
def test_a_record_survives_the_lease_object(
    holder: str | None, duration: int, times: list[int], transitions: int
) -> None:
    acquire, renew = (t / 1_000_000 for t in times)  # microseconds, as a MicroTime keeps them
    record = LeaseRecord(holder, duration, acquire, renew, transitions, "9")
    back = el.record_of({"metadata": {"resourceVersion": "9"}, "spec": el.lease_spec(record)})
    assert replace(back, acquire_time=None, renew_time=None) == replace(record, acquire_time=None, renew_time=None)
    assert back.acquire_time is not None
    assert back.renew_time is not None
    assert abs(back.acquire_time - acquire) < 1e-6
    assert abs(back.renew_time - renew) < 1e-6


# -- the election loop in simulated time ------------------------------------------------------------------------------
# Each replica runs the loop `shells.leadership.Leadership.run` runs: read unless its view is fresh, decide, write or
# sleep. A request lands on the store at one instant (a read's snapshot, a write's compare-and-swap) and its answer
# comes later, or never (a timeout: the replica sees a failure, whether or not it landed).


@dataclass
class Store:
    """The API server's Lease: compare-and-swap on the resourceVersion; when each holder's writes landed."""

    record: LeaseRecord | None = None
    versions: int = 0
    landed: list[tuple[float, str | None]] = field(default_factory=list)
    """When each write landed, and the holder it wrote."""

    def swap(self, record: LeaseRecord, now: float) -> LeaseRecord | None:
        """Create (version "") if missing, update if still at `record.version`; None on a conflict."""
        if record.version != (self.record.version if self.record is not None else ""):
            return None
        self.versions += 1
        self.record = replace(record, version=str(self.versions))
        self.landed.append((now, record.holder))
        return self.record

    def first(self, holder: str | None, after: float = -math.inf) -> float:
        """When the first write of `holder` after `after` landed."""
        return next(t for t, who in self.landed if who == holder and t > after)

    def last(self, holder: str | None) -> float:
        """When the last write of `holder` landed."""
        return max(t for t, who in self.landed if who == holder)


FAILED = object()
"""A request's answer never came (timeout, connection lost): whether it landed or not."""


@dataclass
class Replica:
    me: str
    offset: float
    """Its clock minus the simulation's: any skew."""
    seen: Observation | None = None
    fresh: bool = False
    renewed_at: float | None = None
    gone: bool = False
    """Crashed or released: it acts on nothing more and believes nothing."""
    terms: list[float] = field(default_factory=list)
    """When (simulation time) each of its terms began."""


class Election:
    def __init__(
        self, timing: Timing, replicas: list[Replica], latency: Callable[[Replica], tuple[float, float, str]]
    ) -> None:
        self.timing = timing
        self.replicas = replicas
        self.latency = latency
        """Per request of a replica: (to land, to answer after landing, "ok" | "lost-before" | "lost-after")."""
        self.store = Store()
        self.now = 0.0
        self._queue: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = 0
        self.reads_landed: list[tuple[float, str, str | None]] = []
        """(when, reader, holder it saw)."""

    def at(self, when: float, event: Callable[[], None]) -> None:
        heapq.heappush(self._queue, (max(when, self.now), self._seq, event))
        self._seq += 1

    def run(self, until: float) -> None:
        """Every event up to `until`, checked after each; then the clock stands at `until`."""
        while self._queue and self._queue[0][0] <= until:
            self.now, _, event = heapq.heappop(self._queue)
            event()
            self.check()
        self.now = max(self.now, until)
        self.check()

    def leaders(self) -> list[Replica]:
        return [r for r in self.replicas if not r.gone and el.leads(r.renewed_at, self.now + r.offset, self.timing)]

    def check(self) -> None:
        leaders = self.leaders()
        assert len(leaders) <= 1, f"at {self.now:.3f}: {[r.me for r in leaders]} all lead"
        for r in leaders:
            assert self.store.record is not None
            assert self.store.record.holder == r.me, f"at {self.now:.3f}: {r.me} leads on a Lease held by another"

    # -- a replica's loop ------------------------------------------------------------------------------------------

    def start(self, r: Replica, when: float) -> None:
        self.at(when, lambda: self.act(r))

    def act(self, r: Replica) -> None:
        if r.gone:
            return
        local = self.now + r.offset
        if not r.fresh:
            self.request(r, lambda: self.read(r), lambda answer: self.on_read(r, answer))
            return
        while True:
            seen = r.seen
            decision = decide(
                seen.record if seen else None, seen.at if seen else local, r.me, local, wall=local,
                renewed_at=r.renewed_at, timing=self.timing,
            )  # fmt: skip
            if not isinstance(decision, Lost):
                break
            r.renewed_at = None
        if isinstance(decision, StandBy):
            r.fresh = False
            self.at(decision.until - r.offset, lambda: self.act(r))
            return
        record = decision.record
        r.fresh = False
        self.request(r, lambda: self.store.swap(record, self.now), lambda answer: self.on_written(r, local, answer))

    def read(self, r: Replica) -> LeaseRecord | None:
        self.reads_landed.append((self.now, r.me, self.store.record.holder if self.store.record else None))
        return self.store.record

    def on_read(self, r: Replica, answer: object) -> None:
        if answer is FAILED:
            self.at(self.now + self.timing.retry_period, lambda: self.act(r))
            return
        assert answer is None or isinstance(answer, LeaseRecord)
        r.seen = None if answer is None else el.observe(r.seen, answer, self.now + r.offset)
        r.fresh = True
        self.act(r)

    def on_written(self, r: Replica, sent: float, answer: object) -> None:
        local = self.now + r.offset
        if answer is FAILED:
            self.at(self.now + self.timing.retry_period, lambda: self.act(r))
            return
        if answer is None:  # 409: read again at once
            self.act(r)
            return
        assert isinstance(answer, LeaseRecord)
        r.seen, r.fresh = Observation(answer, local), True
        if el.leads(sent, local, self.timing):
            if not el.leads(r.renewed_at, local, self.timing):
                r.terms.append(self.now)
            r.renewed_at = sent
        self.at(sent + self.timing.retry_period - r.offset, lambda: self.act(r))

    def request(self, r: Replica, land: Callable[[], object], answer: Callable[[object], None]) -> None:
        """One request of `r`'s: lands, then answers (unless `r` is gone by then: its loop was cancelled)."""
        to_land, to_answer, fate = self.latency(r)

        def landing() -> None:
            result = FAILED if fate == "lost-before" else land()
            if fate != "ok":
                result = FAILED
            self.at(self.now + to_answer, lambda: None if r.gone else answer(result))

        self.at(self.now + to_land, landing)

    # -- leaving -----------------------------------------------------------------------------------------------------

    def crash(self, r: Replica) -> None:
        r.gone = True  # its requests in flight still land

    def release(self, r: Replica, attempts: int = 3) -> None:
        """`Leadership.release`: stop leading, stop the loop, clear the holder under the version known (a 409:
        read, and again if it still names us)."""
        r.gone, r.renewed_at = True, None
        record = r.seen.record if r.seen else None
        if record is None or record.holder != r.me or attempts == 0:
            return
        to_land, to_answer, _ = self.latency(r)

        def landing() -> None:
            if self.store.swap(el.released(record, self.now + r.offset), self.now) is None:
                stored = self.store.record
                r.seen = None if stored is None else Observation(stored, self.now + r.offset)
                self.at(self.now + to_answer, lambda: self.release(r, attempts - 1))

        self.at(self.now + to_land, landing)


def latencies(
    rng: random.Random, timing: Timing, slow: float, lost: float
) -> Callable[[Replica], tuple[float, float, str]]:
    """Quick answers, a share `slow` of them slower than the renew deadline, a share `lost` lost before or after
    landing. From a seed, not drawn by hypothesis one by one: a run makes thousands of requests."""

    def draw(_: Replica) -> tuple[float, float, str]:
        scale = timing.renew_deadline * 1.5 if rng.random() < slow else 0.05
        fate = "ok" if rng.random() >= lost else rng.choice(["lost-before", "lost-after"])
        return rng.uniform(0, scale), rng.uniform(0, scale), fate

    return draw


timings = st.builds(
    lambda lease, renew_share, retry_share: Timing(lease, lease * renew_share, lease * renew_share * retry_share),
    st.integers(1, 20),
    st.floats(0.3, 0.95),
    st.floats(0.05, 0.5),
)
offsets = st.floats(-1e6, 1e6, allow_nan=False)


@settings(max_examples=300, deadline=None)
@given(
    timing=timings,
    skews=st.lists(offsets, min_size=2, max_size=4),
    starts=st.lists(st.floats(0, 30), min_size=4, max_size=4),
    ends=st.lists(st.tuples(st.sampled_from(["crash", "release", "stay"]), st.floats(0, 60)), min_size=4, max_size=4),
    slow=st.sampled_from([0.0, 0.1, 0.3]),
    lost=st.sampled_from([0.0, 0.1, 0.3]),
    seed=st.integers(0, 2**32),
)
def test_never_two_leaders_whatever_the_interleaving(
    *,
    timing: Timing,
    skews: list[float],
    starts: list[float],
    ends: list[tuple[str, float]],
    slow: float,
    lost: float,
    seed: int,
) -> None:
    """Replicas start, crash and release at random; requests land late, answer late (past the renew deadline) or
    never; clocks are offset by up to 11 days. `Election.check` asserts after every event that at most one replica
    leads and that the Lease names it."""
    replicas = [Replica(f"r{i}", skew) for i, skew in enumerate(skews)]
    election = Election(timing, replicas, latencies(random.Random(seed), timing, slow, lost))
    for r, start, (end, after) in zip(replicas, starts, ends, strict=False):
        election.start(r, start)
        if end == "crash" and r is not replicas[0]:  # one stays: the run ends with a leader
            election.at(start + after, lambda r=r: election.crash(r))
        elif end == "release" and r is not replicas[0]:
            election.at(start + after, lambda r=r: election.release(r))
    election.run(until=150.0)
    event(f"terms begun: {min(sum(len(r.terms) for r in replicas), 5)}+")  # `pytest --hypothesis-show-statistics`
    assert election.store.versions >= 1


QUICK = 0.01
"""Each request's time in the liveness properties: lands after QUICK / 2, answers QUICK / 2 later."""


def quick(_: Replica) -> tuple[float, float, str]:
    return QUICK / 2, QUICK / 2, "ok"


a_leads_b_stands_by = given(
    timing=timings,
    skews=st.tuples(offsets, offsets),
    standby_start=st.floats(0.1, 5),
    later=st.floats(0, 30),
)
"""Two replicas as `two_replicas` starts them; `later`: how long `a` has led when it leaves."""


def two_replicas(timing: Timing, skews: tuple[float, float], standby_start: float) -> tuple[Election, Replica, Replica]:
    """`a` leads (it starts first), `b` stands by; both have run a few retry periods."""
    a, b = Replica("a", skews[0]), Replica("b", skews[1])
    election = Election(timing, [a, b], quick)
    election.start(a, 0.0)
    election.start(b, standby_start)
    election.run(until=standby_start + 3 * timing.retry_period)
    assert [r.me for r in election.leaders()] == ["a"]
    assert b.seen is not None
    assert b.seen.record.holder == "a"
    return election, a, b


@settings(max_examples=200, deadline=None)
@a_leads_b_stands_by
def test_a_released_lease_is_taken_at_the_next_try(
    timing: Timing, skews: tuple[float, float], standby_start: float, later: float
) -> None:
    election, a, _b = two_replicas(timing, skews, standby_start)
    election.run(until=election.now + later)
    election.at(election.now, lambda: election.release(a))
    election.run(until=election.now + 4 * QUICK)  # a renewal of a's in flight may land first: then read, retry
    released_at = election.store.first(None)
    election.run(until=released_at + timing.retry_period + 4 * QUICK)
    assert [r.me for r in election.leaders()] == ["b"]
    first_look, _, holder = next(look for look in election.reads_landed if look[1] == "b" and look[0] > released_at)
    assert holder is None
    taken = election.store.first("b", after=released_at)
    assert taken - first_look <= QUICK + 1e-9, "b read the free Lease and did not take it at once"
    assert taken <= released_at + timing.retry_period + 4 * QUICK


@settings(max_examples=200, deadline=None)
@a_leads_b_stands_by
def test_a_crashed_leaders_lease_is_taken_after_the_lease_duration_and_within_a_retry_period_more(
    timing: Timing, skews: tuple[float, float], standby_start: float, later: float
) -> None:
    election, a, b = two_replicas(timing, skews, standby_start)
    election.run(until=election.now + later)
    election.crash(a)
    election.run(until=election.now + QUICK)  # a renewal in flight when it crashed still lands
    last_renewal = election.store.last("a")
    duration = max(timing.lease_duration, timing.lease_seconds)
    election.run(until=last_renewal + duration + timing.retry_period + 4 * QUICK)
    assert [r.me for r in election.leaders()] == ["b"]
    taken = election.store.first("b")
    assert taken >= last_renewal + duration, f"taken {taken - last_renewal:.3f}s after the last renewal"
    assert taken <= last_renewal + duration + timing.retry_period + 4 * QUICK
    assert b.terms == [pytest.approx(taken + QUICK / 2)]


def test_a_leader_cut_off_stops_leading_at_its_renew_deadline_before_a_standby_takes_over() -> None:
    """`a`'s requests stop reaching the API server (it is cut off, not crashed): it stops leading at the renew
    deadline after its last renewal was sent; `b` takes over the lease duration after it last saw the Lease
    change; `a` then finds `b` holding it and stands by. Clocks 2000 s apart."""
    timing = Timing(15, 10, 2)
    a, b = Replica("a", 1000.0), Replica("b", -1000.0)
    cut_off = [False]

    def latency(r: Replica) -> tuple[float, float, str]:
        return QUICK / 2, QUICK / 2, "lost-before" if cut_off[0] and r is a else "ok"

    election = Election(timing, [a, b], latency)
    election.start(a, 0.0)
    election.start(b, 0.5)
    election.run(until=20.0)
    assert [r.me for r in election.leaders()] == ["a"]
    cut_off[0] = True
    assert a.renewed_at is not None
    deadline = a.renewed_at - a.offset + timing.renew_deadline
    last_landed = election.store.last("a")
    election.run(until=deadline - QUICK)
    assert [r.me for r in election.leaders()] == ["a"]
    election.run(until=deadline)
    assert election.leaders() == []
    election.run(until=last_landed + timing.lease_duration + timing.retry_period + 4 * QUICK)
    assert [r.me for r in election.leaders()] == ["b"]
    assert b.terms[-1] >= last_landed + timing.lease_duration
    cut_off[0] = False
    election.run(until=election.now + 2 * timing.retry_period + 4 * QUICK)
    assert [r.me for r in election.leaders()] == ["b"]
    assert a.seen is not None
    assert a.seen.record.holder == "b"
    assert len(a.terms) == 1
