"""A ConsumerGroup's readings for `/metrics`: what changes every resync (lag, the resync's time) and the rebalances
counted between two resyncs. Pure: (the last readings, this resync's facts, now) → the new readings.

The broker's own rebalance metrics carry no group id, so this is the per-group rebalance rate a team alerts on. It
is counted exactly from the generation (classic) or group epoch (KIP-848) delta between two resyncs: each bump is one
rebalance, however many happened between two resyncs; a state seen in passing would miss every rebalance that
began and ended between them.
"""

from dataclasses import dataclass

from vigil_core.kafka.model import GroupState


@dataclass(frozen=True)
class Readings:
    state: GroupState
    members: int
    lag: int | None
    """None: unknown (no assigned partition with both a committed and an end offset, or not described)."""
    generation: int | None
    """The last generation or group epoch seen; None while none was (not described, or not readable)."""
    resynced_at: float
    """Unix time of the resync."""
    without_sidecar: int = 0
    """The group's pods labelled for injection that run without the sidecar (`reconcile.without_sidecar`)."""


def rebalances_between(before: int | None, after: int | None) -> int:
    """Rebalances from generation `before` to `after` (each bump is one). The first reading is a baseline (0); a
    generation that went down belongs to a group deleted and made again since: its own `after` bumps count."""
    if before is None or after is None:
        return 0
    if after >= before:
        return after - before
    return after


def next_readings(
    last: Readings | None,
    *,
    state: GroupState,
    members: int,
    lag: int | None,
    generation: int | None,
    now: float,
    without_sidecar: int = 0,
) -> tuple[Readings, int]:
    """This resync's readings and the rebalances since the last. A resync that could not read the generation keeps
    the last one: the rebalances in between are counted at the next resync that can."""
    known = generation if generation is not None else (last.generation if last is not None else None)
    counted = rebalances_between(last.generation if last is not None else None, generation)
    return Readings(state, members, lag, known, now, without_sidecar), counted
