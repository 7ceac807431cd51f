"""A ConsumerGroup's readings on /metrics: rebalances counted exactly from generation deltas, the per-group series
set and dropped with the group."""

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import generate_latest

from vigil_core.kafka.model import GroupState
from vigil_operator.domain.readings import Readings, next_readings, rebalances_between
from vigil_operator.metrics import OperatorMetrics

# (case, generation before, generation after, rebalances)
BETWEEN = [
    ("first reading is a baseline", None, 7, 0),
    ("not read this time", 7, None, 0),
    ("never read", None, None, 0),
    ("no rebalance", 7, 7, 0),
    ("one", 7, 8, 1),
    ("five between two resyncs", 7, 12, 5),
    ("the group was deleted and made again: its own epochs", 40, 3, 3),
    ("made again, not yet rebalanced", 40, 0, 0),
]


@pytest.mark.parametrize(("before", "after", "expected"), [c[1:] for c in BETWEEN], ids=[c[0] for c in BETWEEN])
def test_rebalances_between(before: int | None, after: int | None, expected: int) -> None:
    assert rebalances_between(before, after) == expected


def _read(last: Readings | None, generation: int | None, now: float = 0.0) -> tuple[Readings, int]:
    return next_readings(last, state=GroupState.STABLE, members=3, lag=None, generation=generation, now=now)


@given(st.lists(st.tuples(st.integers(0, 50), st.booleans()), min_size=1, max_size=30))
def test_every_bump_of_a_growing_generation_counts_once_whatever_the_resyncs_miss(
    steps: list[tuple[int, bool]],
) -> None:
    """Generations only grow while the group lives; a resync may see any of them, or none (not readable)."""
    generations, total, last = [], 0, None
    generation = 0
    for bump, readable in steps:
        generation += bump
        last, counted = _read(last, generation if readable else None)
        total += counted
        if readable:
            generations.append(generation)
    assert total == (generations[-1] - generations[0] if generations else 0)


def test_a_resync_that_cannot_read_the_generation_keeps_the_last_one() -> None:
    first, _ = _read(None, 4)
    blind, counted = _read(first, None)
    assert (blind.generation, counted) == (4, 0)
    _, counted = _read(blind, 6)
    assert counted == 2


def _exposed(metrics: OperatorMetrics) -> str:
    return generate_latest(metrics.registry).decode()


LABELS = ("shop", "orders", "orders-group")


def test_a_groups_series_follow_its_state_and_go_with_it() -> None:
    metrics = OperatorMetrics()
    first = Readings(GroupState.STABLE, 3, 10, 4, 100.0)
    metrics.read_group(LABELS, None, first, 0)
    later = Readings(GroupState.PREPARING_REBALANCE, 2, None, 9, 130.0)
    metrics.read_group(LABELS, first, later, 5)

    text = _exposed(metrics)
    where = 'consumergroup="orders",group="orders-group",namespace="shop"'
    assert f'vigil_operator_consumergroup_state{{{where},state="PreparingRebalance"}} 1.0' in text
    assert 'state="Stable"' not in text.split("vigil_operator_consumergroup_state")[-1]
    assert f"vigil_operator_consumergroup_members{{{where}}} 2.0" in text
    assert f"vigil_operator_consumergroup_rebalances_total{{{where}}} 5.0" in text
    assert f"vigil_operator_consumergroup_last_resync_timestamp_seconds{{{where}}} 130.0" in text
    assert "vigil_operator_consumergroup_lag{" not in text  # unknown now: absent, not 0

    metrics.forget_group(LABELS, later)
    assert "orders-group" not in _exposed(metrics)
