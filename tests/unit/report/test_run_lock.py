"""The report's run lock: who holds an output, and when a holder is a killed run's to take over."""

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vigil_spark import run_lock

NOW = datetime(2026, 11, 29, 7, 17, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


@given(
    st.text(min_size=1, max_size=40),
    st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)),
)
def test_a_holder_reads_back_as_written(who: str, since: datetime) -> None:
    holder = run_lock.Holder(who, since)
    assert run_lock.decode(holder.encode()) == holder


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{",
        "null",
        "[]",
        '{"who": "a"}',
        '{"who": 1, "since": "2026-11-29T07:00:00+00:00"}',
        '{"who": "a", "since": "yesterday"}',
        '{"who": "a", "since": "2026-11-29T07:00:00"}',
    ],
)
def test_anything_else_is_held_by_nobody(text: str) -> None:
    assert run_lock.decode(text) is None


@pytest.mark.parametrize(
    ("age", "stale"),
    [
        (timedelta(0), False),
        (timedelta(minutes=59, seconds=59), False),
        (HOUR, True),  # the longest a run may take has passed: its run was killed
        (timedelta(hours=5), True),
        (-timedelta(minutes=3), False),  # a holder whose clock is ahead is not stale
    ],
)
def test_a_holder_is_stale_once_the_longest_run_has_passed(age: timedelta, stale: bool) -> None:
    assert run_lock.is_stale(run_lock.Holder("pod-a pid 7", NOW - age), NOW, HOUR) is stale


def test_an_unreadable_lock_is_stale() -> None:
    assert run_lock.is_stale(None, NOW, HOUR)


@given(st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=2)), st.timedeltas(max_value=timedelta(days=1)))
def test_staleness_only_grows_with_time(age: timedelta, later: timedelta) -> None:
    holder = run_lock.Holder("pod-a pid 7", NOW - age)
    if run_lock.is_stale(holder, NOW, HOUR) and later >= timedelta(0):
        assert run_lock.is_stale(holder, NOW + later, HOUR)


def test_a_skipped_run_says_who_holds_the_output_and_until_when() -> None:
    holder = run_lock.Holder("report-now-x7 pid 7", NOW - timedelta(minutes=5, seconds=30))
    line = run_lock.busy("/data/run.lock", holder, NOW, HOUR)
    assert line == (
        "skipped: another run (report-now-x7 pid 7, started 2026-11-29T07:11:30Z, 5 min ago) holds /data/run.lock; "
        "runs on one output must not overlap. It is taken over in 54 min (--lock-stale-after), or delete it once "
        "that run is gone"
    )
    assert "started 2026-11-29T07:17:20Z, 0 s ago" in run_lock.busy(
        "x", run_lock.Holder("a", NOW + timedelta(seconds=20)), NOW, HOUR
    )
