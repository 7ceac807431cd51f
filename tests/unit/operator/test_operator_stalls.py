"""The StallBook: sidecars' stall-detected / stall-ended / eviction-done events folded into "who is stalled now".

Events are built from the versioned fixtures (tests/unit/fixtures/events/), so they are records a sidecar writes.
The fold's rule, from the module: a detection opens or extends the (group, member) report (`since` the earliest
detection, `last` the latest); an ended or eviction-done removes it unless the report was repeated after it
(`last > event time`: an end at the same instant as the last repetition closes it).
"""

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from vigil_core import events
from vigil_operator.domain.stalls import EMPTY, StallBook, StallReport

FIXTURES = Path(__file__).parents[1] / "fixtures" / "events"
T0 = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
WINDOW = timedelta(minutes=3)
A, B, C = "orders-0-5f0c2a9e", "orders-1-0d6e8f10", "orders-2-77aa0011"


def _fixture(name: str) -> dict[str, Any]:
    for version in sorted(FIXTURES.glob("v*"), reverse=True):
        path = version / f"{name}.json"
        if path.exists():
            record: dict[str, Any] = json.loads(path.read_text())
            return record
    raise AssertionError(f"no fixture {name}.json under {FIXTURES}")


DETECTED, ENDED, EVICTED, REQUESTED = (
    _fixture(n) for n in ("stall-detected", "stall-ended", "eviction-done", "eviction-requested")
)


def _event(base: dict[str, Any], member: str, at: datetime, group: str, pod: str | None) -> dict[str, Any]:
    record: dict[str, Any] = json.loads(json.dumps(base))
    record.update(time=at.isoformat(), group=group, pod=pod)
    record.pop("event_id")
    record["payload"]["member"] = {"member_id": member, "instance_id": None, "client_id": pod}
    return record


def detected(member: str, at: datetime, group: str = "orders", pod: str | None = "orders-0") -> events.StallDetected:
    return events.StallDetected.model_validate(_event(DETECTED, member, at, group, pod))


def ended(member: str, at: datetime, group: str = "orders") -> events.StallEnded:
    return events.StallEnded.model_validate(_event(ENDED, member, at, group, None))


def evicted(member: str, at: datetime, group: str = "orders") -> events.EvictionDone:
    return events.EvictionDone.model_validate(_event(EVICTED, member, at, group, None))


def fold(book: StallBook, *stream: Any) -> StallBook:
    for event in stream:
        book = book.record(event)
    return book


def ids(reports: tuple[StallReport, ...]) -> list[str]:
    return [r.member_id for r in reports]


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


# --- one event at a time ------------------------------------------------------------------------------------------


def test_detected_is_current() -> None:
    book = fold(EMPTY, detected(A, at(0), pod="orders-0"))

    (report,) = book.current("orders", [A, B], at(1), WINDOW)
    assert (report.group, report.member_id, report.pod, report.namespace) == ("orders", A, "orders-0", "shop")
    assert report.since == report.last == at(0)
    assert EMPTY.current("orders", [A], at(1), WINDOW) == ()  # the fold returned a new book


def test_repeated_detection_keeps_since_and_moves_last() -> None:
    book = fold(EMPTY, detected(A, at(0)), detected(A, at(60)), detected(A, at(120)))

    (report,) = book.current("orders", [A], at(121), WINDOW)
    assert report.since == at(0)
    assert report.last == at(120)


def test_a_late_older_repetition_moves_neither_bound_inward() -> None:
    book = fold(EMPTY, detected(A, at(60)), detected(A, at(120)), detected(A, at(90)))

    (report,) = book.current("orders", [A], at(121), WINDOW)
    assert (report.since, report.last) == (at(60), at(120))


@pytest.mark.parametrize("closing", [ended, evicted], ids=["stall-ended", "eviction-done"])
@pytest.mark.parametrize("after", [0, 5], ids=["same-instant", "later"])
def test_ended_or_evicted_at_or_after_the_last_detection_removes_it(closing: Any, after: int) -> None:
    book = fold(EMPTY, detected(A, at(0)), detected(B, at(0)), detected(A, at(30)), closing(A, at(30 + after)))

    assert ids(book.current("orders", [A, B], at(40), WINDOW)) == [B]
    assert ("orders", A) not in book.reports


@pytest.mark.parametrize("closing", [ended, evicted], ids=["stall-ended", "eviction-done"])
def test_end_older_than_the_last_detection_does_not_remove_it(closing: Any) -> None:
    book = fold(EMPTY, detected(A, at(0)), detected(A, at(60)), closing(A, at(30)))

    (report,) = book.current("orders", [A], at(61), WINDOW)
    assert (report.since, report.last) == (at(0), at(60))


def test_end_without_a_report_changes_nothing() -> None:
    book = fold(EMPTY, detected(B, at(0)))
    assert fold(book, ended(A, at(10)), evicted(C, at(10))).reports == book.reports


def test_a_detection_not_after_a_known_end_is_stale_whatever_the_arrival_order() -> None:
    book = fold(EMPTY, ended(A, at(20)), detected(A, at(10)), detected(A, at(20)))
    assert book.reports == {}
    assert ids(fold(book, detected(A, at(21))).current("orders", [A], at(22), WINDOW)) == [A]


def test_a_new_stall_after_an_end_starts_a_new_since() -> None:
    book = fold(EMPTY, detected(A, at(0)), ended(A, at(10)), detected(A, at(100)))

    (report,) = book.current("orders", [A], at(101), WINDOW)
    assert report.since == at(100)


def test_other_event_types_leave_the_book_unchanged() -> None:
    book = fold(EMPTY, detected(A, at(0)))
    requested = events.EvictionRequested.model_validate(_event(REQUESTED, A, at(10), "orders", "orders-0"))
    assert book.record(requested) == book


def test_window_is_measured_from_the_last_repetition_inclusive() -> None:
    book = fold(EMPTY, detected(A, at(0)), detected(A, at(60)))

    assert ids(book.current("orders", [A], at(60) + WINDOW, WINDOW)) == [A]
    assert book.current("orders", [A], at(60) + WINDOW + timedelta(microseconds=1), WINDOW) == ()
    assert ("orders", A) in book.reports  # expiry hides it; forgetting is forget_before's job


def test_current_needs_the_member_in_the_group_and_sorts_by_member() -> None:
    book = fold(EMPTY, detected(C, at(0)), detected(A, at(0)), detected(B, at(0)))

    assert ids(book.current("orders", [C, A, B], at(1), WINDOW)) == [A, B, C]
    assert ids(book.current("orders", [B], at(1), WINDOW)) == [B]
    assert book.current("orders", [], at(1), WINDOW) == ()


def test_other_groups_are_unaffected() -> None:
    book = fold(
        EMPTY,
        detected(A, at(0), group="orders"),
        detected(A, at(5), group="billing"),
        ended(A, at(10), group="billing"),
        detected(B, at(20), group="billing"),
    )

    (report,) = book.current("orders", [A, B], at(21), WINDOW)
    assert (report.group, report.member_id, report.since) == ("orders", A, at(0))
    assert ids(book.current("billing", [A, B], at(21), WINDOW)) == [B]
    assert book.current("payments", [A, B], at(21), WINDOW) == ()


def test_forget_before_drops_reports_not_repeated_since_the_horizon() -> None:
    book = fold(EMPTY, detected(A, at(0)), detected(B, at(0)), detected(B, at(50)), detected(C, at(100)))

    kept = book.forget_before(at(50))

    assert set(kept.reports) == {("orders", B), ("orders", C)}  # last == horizon is kept
    assert kept.reports[("orders", B)] == book.reports[("orders", B)]
    assert set(book.reports) == {("orders", A), ("orders", B), ("orders", C)}  # the book is a value


# --- properties ---------------------------------------------------------------------------------------------------

GROUPS = ("orders", "billing")
MEMBERS = (A, B, C)
KINDS = ("detected", "ended", "evicted")


@dataclass(frozen=True)
class Step:
    kind: str
    group: str
    member: str
    seconds: int
    pod: str

    def event(self) -> Any:
        when = at(self.seconds)
        if self.kind == "detected":
            return detected(self.member, when, self.group, self.pod)
        return (ended if self.kind == "ended" else evicted)(self.member, when, self.group)


steps = st.builds(
    Step,
    st.sampled_from(KINDS),
    st.sampled_from(GROUPS),
    st.sampled_from(MEMBERS),
    st.integers(0, 30),  # a small range: equal times are frequent
    st.sampled_from(("orders-0", "orders-1")),
)


def in_order_reference(stream: list[Step]) -> dict[tuple[str, str], tuple[datetime, datetime, str]]:
    """Events in time order: the latest event of a member decides (an end wins a tie); a report's since is the
    first detection after the member's latest end, its last the latest detection, its pod the latest detection's."""
    open_: dict[tuple[str, str], tuple[datetime, datetime, str]] = {}
    ends: dict[tuple[str, str], int] = {}
    for s in stream:
        key = (s.group, s.member)
        if s.kind == "detected":
            if key in ends and s.seconds <= ends[key]:
                continue  # an end at the same instant wins, whichever of the two was written first
            since = open_[key][0] if key in open_ else at(s.seconds)
            open_[key] = (since, at(s.seconds), s.pod)
        else:
            ends[key] = s.seconds
            open_.pop(key, None)
    return open_


@settings(max_examples=200, deadline=None)
@given(st.lists(steps, max_size=25))
def test_fold_of_a_time_ordered_stream_matches_the_reference(stream: list[Step]) -> None:
    stream = sorted(stream, key=lambda s: s.seconds)  # stable: ties keep their drawn order

    book = fold(EMPTY, *(s.event() for s in stream))

    expected = in_order_reference(stream)
    assert {k: (r.since, r.last, r.pod) for k, r in book.reports.items()} == expected
    now = at(30)
    for group in GROUPS:
        for window in (timedelta(0), timedelta(seconds=5), WINDOW):
            assert ids(book.current(group, [A, C], now, window)) == sorted(
                m for (g, m), (_, last, _) in expected.items() if g == group and m != B and now - last <= window
            )


def by_time_reference(stream: list[Step]) -> set[tuple[str, str]]:
    """Order-independent: a member is stalled when its latest detection is later than its latest end (an end at the
    same instant as a detection closes it, as the module's `last > end time` comparison says)."""
    out = set()
    for key in {(s.group, s.member) for s in stream}:
        detections = [s.seconds for s in stream if (s.group, s.member) == key and s.kind == "detected"]
        ends = [s.seconds for s in stream if (s.group, s.member) == key and s.kind != "detected"]
        if detections and (not ends or max(detections) > max(ends)):
            out.add(key)
    return out


@settings(max_examples=100, deadline=None)
@example([Step("ended", "orders", A, 20, "orders-0"), Step("detected", "orders", A, 10, "orders-0")])
@given(st.lists(steps, max_size=25))
def test_fold_in_any_arrival_order_matches_latest_event_by_time(stream: list[Step]) -> None:
    book = fold(EMPTY, *(s.event() for s in stream))
    assert set(book.reports) == by_time_reference(stream)
