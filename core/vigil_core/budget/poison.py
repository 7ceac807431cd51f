"""Poison pills: a record that stalls every member it reaches; evicting the next owner only moves it on.

When vigil evicts a stalled member, its partitions go to others. If one of them stops polling soon after it took
over such a partition, the likely cause is a record in it (a poison pill), not that member: evicting again would
only hand the record round the group, one rebalance per member. So an eviction's permit leaves a **handoff** per
partition in the group's ledger, and a later request whose stall began within the handoff's window, from a member
owning one of those partitions, is refused and marks the partition **poisoned** (with its committed offset).
While a mark stands, no member owning that partition is evicted; the mark goes once the partition's committed
offset moves past it (the record was got over), or after `POISON_KEPT`.

The window: the new owner gets the partition after the rebalance the eviction starts (allowed one stall timeout)
and must stall within one stall timeout of that: stall start in [release, release + 2 × stall timeout]. Its request
comes one stall timeout (plus settle and a check) after its stall began, so a handoff is kept until
release + 3 × stall timeout + settle + `HANDOFF_SLACK`; its expiry is stored, so a reader needs no policy.

Pure: no I/O, no clock.
"""

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

TopicPartition = tuple[str, int]

POISON_KEPT: Final = 24 * 3600.0
"""Seconds a mark stands when no committed offset past it is ever seen (the partition's owner never asks again)."""
HANDOFF_SLACK: Final = 30.0
"""Room for check intervals and retries on top of the computed request time."""


@dataclass(frozen=True)
class Handoff:
    """A partition released by an eviction at `released`; suspect for a new owner's stall until `until`."""

    topic: str
    partition: int
    released: float
    until: float
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)


@dataclass(frozen=True)
class PoisonMark:
    """A partition suspected of holding a poison pill at committed offset `offset` (None: unknown)."""

    topic: str
    partition: int
    offset: int | None
    marked: float
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)


def released(
    partitions: Collection[TopicPartition], now: float, *, stall_timeout: float, settle: float
) -> tuple[Handoff, ...]:
    """The handoffs an eviction granted at `now` leaves for the partitions its member owned."""
    until = now + 3 * stall_timeout + settle + HANDOFF_SLACK
    return tuple(Handoff(topic, partition, now, until) for topic, partition in sorted(set(partitions)))


def current(
    handoffs: tuple[Handoff, ...],
    marks: tuple[PoisonMark, ...],
    now: float,
    committed: Mapping[TopicPartition, int] | None = None,
) -> tuple[tuple[Handoff, ...], tuple[PoisonMark, ...]]:
    """Drop expired handoffs, and marks that are older than `POISON_KEPT` or whose partition's committed offset
    (as far as `committed` knows) moved past the marked one."""
    known = committed or {}

    def passed(mark: PoisonMark) -> bool:
        offset = known.get(mark.tp)
        return mark.offset is not None and offset is not None and offset > mark.offset

    kept_handoffs = tuple(h for h in handoffs if h.until >= now)
    kept_marks = tuple(m for m in marks if now - m.marked <= POISON_KEPT and not passed(m))
    return kept_handoffs, kept_marks


@dataclass(frozen=True)
class Suspicion:
    """A request that must not evict: `hits` are the poisoned partitions this member owns (new marks included)."""

    hits: tuple[PoisonMark, ...]
    handoffs: tuple[Handoff, ...]
    """The handoffs left (those that became marks are consumed)."""
    marks: tuple[PoisonMark, ...]
    """Every mark, the new ones included."""


def suspect(
    handoffs: tuple[Handoff, ...],
    marks: tuple[PoisonMark, ...],
    partitions: Collection[TopicPartition],
    stall_start: float,
    now: float,
    *,
    stall_timeout: float,
    committed: Mapping[TopicPartition, int] | None = None,
) -> Suspicion | None:
    """Whether a member owning `partitions`, stalled since `stall_start`, stalls on a poison pill: it owns a
    marked partition, or one an eviction handed over shortly before its stall began. None: evict as usual."""
    owned = set(partitions)
    known = committed or {}
    fresh = [h for h in handoffs if h.tp in owned and h.released <= stall_start <= h.released + 2 * stall_timeout]
    new_marks = tuple(PoisonMark(h.topic, h.partition, known.get(h.tp), now) for h in fresh if h.tp not in _tps(marks))
    all_marks = (*marks, *_unique(new_marks))
    hits = tuple(m for m in all_marks if m.tp in owned)
    if not hits:
        return None
    left = tuple(h for h in handoffs if h not in fresh)
    return Suspicion(hits, left, all_marks)


def describe(hits: tuple[PoisonMark, ...]) -> str:
    """The partitions of a suspicion for a human: `orders-3 at offset 1200, payments-0 (offset unknown)`."""
    return ", ".join(
        f"{m.topic}-{m.partition} " + ("(offset unknown)" if m.offset is None else f"at offset {m.offset}")
        for m in hits
    )


def _tps(marks: tuple[PoisonMark, ...]) -> set[TopicPartition]:
    return {m.tp for m in marks}


def _unique(marks: tuple[PoisonMark, ...]) -> tuple[PoisonMark, ...]:
    seen: dict[TopicPartition, PoisonMark] = {}
    for mark in marks:
        seen.setdefault(mark.tp, mark)
    return tuple(seen.values())
