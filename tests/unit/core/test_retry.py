"""Retry waits (`vigil_core.kafka.retry`): the ceiling doubles to its cap, the jitter keeps each wait in the ceiling's
upper half, and clients with different seeds do not retry in lockstep."""

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vigil_core.kafka import retry

ATTEMPTS = 6
"""GroupClient's default `max_attempts`: at most five waits between six attempts."""

attempts = st.integers(min_value=0, max_value=64)
draws = st.floats(min_value=0.0, max_value=1.0, exclude_max=True)
seeds = st.integers(min_value=0, max_value=2**64)


def schedule(rng: random.Random, failures: int = ATTEMPTS - 1) -> list[float]:
    """When each retry is sent (seconds after the first failure), as a GroupClient seeded `rng` sends them."""
    moments, now = [], 0.0
    for attempt in range(failures):
        now += retry.jittered(attempt, rng.random())
        moments.append(now)
    return moments


@pytest.mark.parametrize(
    ("attempt", "ceiling"), [(-1, 0.2), (0, 0.2), (1, 0.4), (2, 0.8), (4, 3.2), (5, 5.0), (60, 5.0)]
)
def test_the_ceiling_doubles_from_the_base_up_to_the_cap(attempt: int, ceiling: float) -> None:
    assert retry.backoff(attempt) == pytest.approx(ceiling)


def test_the_draw_spans_the_upper_half_of_the_ceiling() -> None:
    assert retry.jittered(3, 0.0) == pytest.approx(1.6 / 2)
    assert retry.jittered(3, 0.5) == pytest.approx(1.6 * 0.75)
    assert retry.jittered(3, 1 - 1e-9) == pytest.approx(1.6)


@pytest.mark.parametrize("draw", [-0.1, 1.0, 2.0, float("nan")])
def test_a_draw_outside_the_unit_interval_is_refused(draw: float) -> None:
    with pytest.raises(ValueError, match="draw must be in"):
        retry.jittered(0, draw)


@settings(max_examples=500, deadline=None)
@given(attempt=attempts, draw=draws, base=st.floats(0.01, 2.0), cap=st.floats(0.01, 60.0))
def test_a_jittered_wait_stays_within_half_the_ceiling_and_the_ceiling(
    attempt: int, draw: float, base: float, cap: float
) -> None:
    ceiling = retry.backoff(attempt, base=base, cap=cap)
    wait = retry.jittered(attempt, draw, base=base, cap=cap)
    assert ceiling * (1 - retry.SPREAD) <= wait <= ceiling
    assert wait <= cap


@settings(max_examples=300, deadline=None)
@given(attempt=attempts, low=draws, high=draws)
def test_a_larger_draw_never_waits_less(attempt: int, low: float, high: float) -> None:
    low, high = sorted((low, high))
    assert retry.jittered(attempt, low) <= retry.jittered(attempt, high)


@settings(max_examples=300, deadline=None)
@given(seed=seeds)
def test_a_seeded_schedule_is_reproducible_and_paced(seed: int) -> None:
    moments = schedule(random.Random(seed))
    assert moments == schedule(random.Random(seed))
    floor = sum(retry.backoff(a) * (1 - retry.SPREAD) for a in range(ATTEMPTS - 1))
    ceiling = sum(retry.backoff(a) for a in range(ATTEMPTS - 1))
    assert floor <= moments[-1] <= ceiling


@settings(max_examples=300, deadline=None)
@given(a=seeds, b=seeds)
def test_two_sidecars_with_different_seeds_do_not_retry_in_lockstep(a: int, b: int) -> None:
    """Both saw the coordinator move at the same moment; their retries are never all within a millisecond."""
    if a == b:
        return
    first, second = schedule(random.Random(a)), schedule(random.Random(b))
    assert any(abs(x - y) > 0.001 for x, y in zip(first, second, strict=True)), (first, second)


def test_the_retries_of_a_group_of_sidecars_spread_over_the_jitter_window() -> None:
    """Twenty sidecars of one group (seeded as twenty processes would be: differently) retrying after one failure:
    the first retries fall over more than half the window [ceiling/2, ceiling], no two at the same moment."""
    first = sorted(retry.jittered(0, random.Random(seed).random()) for seed in range(20))
    window = retry.backoff(0) * retry.SPREAD
    assert first[-1] - first[0] > window / 2
    assert min(y - x for x, y in itertools.pairwise(first)) > 0.0
