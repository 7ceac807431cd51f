"""The progress signal's rules: is a member making progress, judged from its committed offsets alone (no app change).

Burrow's evaluator in miniature: small named predicates, each a plain function of the facts and `now`, combined in
severity order into a status per partition and, as the worst of them, per member. What the edge gathers per
assigned partition, on every check (read_committed throughout):

- the committed offset (OffsetFetch) and the last stable offset (ListOffsets, read_committed), as a history of
  samples since the partition was assigned to the member;
- whether a fetch of one record from the committed offset returned a data record. A committed transaction ends
  with a marker that occupies an offset but is never delivered, so an idle transactional topic shows a permanent
  "lag of 1" (LSO − committed = 1) with nothing to read: never a stall. A data record at offset X never changes, so
  a positive probe may be cached until the committed offset moves;
- whether the app has paused the partition (a paused partition is the app's choice, not a stall).

Statuses, most severe first, in the order the rules are tried (Burrow tries "stopped" before "stalled"):

- `STOP`: data waits at the committed offset, the committed offset has not moved for a stall timeout, and the LSO
  kept growing meanwhile: work arrives and none is done;
- `STALL`: data waits at the committed offset and the committed offset has not moved for a stall timeout;
- `NO_COMMITS`: no commit seen while data waited for N stall timeouts: the app commits elsewhere, only at
  shutdown, or not at all. A finding for a human, never a reason to act; the stall rules are not tried: without
  one observed commit, an unmoved committed offset says nothing about the app's progress;
- `SUSPENDED`: the group is not Stable, or the partition's assignment changed less than a stall timeout ago;
- `OK`: otherwise (caught up, only markers left, paused, or moving).

The stall clock of a partition starts at the latest of: the committed offset's last move, the first sample since
then with data to read, the assignment change, and the group's return to Stable. Time in the previous owner's
hands, or spent caught up, never counts.
"""

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Final

from vigil_core.kafka.model import TopicPartitionRef


class ProgressStatus(IntEnum):
    """Ordered by severity: the member's status is the worst of its partitions'."""

    OK = 0
    SUSPENDED = 1
    NO_COMMITS = 2
    STALL = 3
    STOP = 4

    @property
    def stalled(self) -> bool:
        """A status the watchdog treats as a stall (acts on, subject to its own guardrails)."""
        return self >= ProgressStatus.STALL


@dataclass(frozen=True)
class Sample:
    """One check of one partition."""

    at: float
    """Monotonic seconds."""
    committed: int | None
    """The group's committed offset; None when nothing was ever committed."""
    lso: int
    """The read_committed end: the last stable offset."""
    data: bool | None = None
    """Whether a read_committed fetch of one record from the committed offset returned a data record; None when not
    probed (no lag)."""

    @property
    def lag(self) -> int:
        return 0 if self.committed is None else max(0, self.lso - self.committed)

    @property
    def data_waiting(self) -> bool:
        return self.committed is not None and self.lag > 0 and self.data is True


@dataclass(frozen=True)
class PartitionFacts:
    partition: TopicPartitionRef
    samples: tuple[Sample, ...]
    """Oldest first, since the partition was assigned to the member; the last one is the current check."""
    paused: bool = False
    assigned_at: float = 0.0
    """When the partition's assignment to this member last changed."""


@dataclass(frozen=True)
class GroupFacts:
    """What holds for the whole member at `now`."""

    stable: bool
    """The group is Stable."""
    stable_since: float
    """When vigil first saw it Stable after its last rebalance."""
    stall_timeout: float
    no_commit_factor: float = 3.0
    """N: no commit seen within N × stall timeout of watching → `NO_COMMITS`."""


# --- the rules: named predicates ---------------------------------------------------------------------------------


def is_group_unsettled(p: PartitionFacts, g: GroupFacts, now: float) -> bool:
    """The group is rebalancing, or the partition changed hands less than a stall timeout ago."""
    return not g.stable or now - p.assigned_at < g.stall_timeout


def is_paused(p: PartitionFacts, g: GroupFacts, now: float) -> bool:
    return p.paused


def has_no_samples(p: PartitionFacts, g: GroupFacts, now: float) -> bool:
    return not p.samples


def has_no_commits(p: PartitionFacts, g: GroupFacts, now: float) -> bool:
    """No commit observed (the committed offset never moved, or was never set) while data waited for N stall
    timeouts. An idle partition needs no commit, so it never counts."""
    start = stuck_since(p, g)
    return not _commit_seen(p.samples) and start is not None and now - start >= g.no_commit_factor * g.stall_timeout


def is_not_yet_judged(p: PartitionFacts, g: GroupFacts, now: float) -> bool:
    """No commit observed yet, but not watched long enough to say so: nothing to judge progress against."""
    return not _commit_seen(p.samples)


def has_no_data_waiting(p: PartitionFacts, g: GroupFacts, now: float) -> bool:
    """Caught up, or only transaction markers (or aborted records) between the committed offset and the LSO."""
    return not _waiting(_unmoved_run(p.samples))[-1]


def is_stuck_with_data(p: PartitionFacts, g: GroupFacts, now: float) -> bool:
    """Data waiting at an unmoved committed offset for at least a stall timeout."""
    start = stuck_since(p, g)
    return start is not None and now - start >= g.stall_timeout


def is_stopped(p: PartitionFacts, g: GroupFacts, now: float) -> bool:
    """Stuck with data, and the lag grew meanwhile."""
    return is_stuck_with_data(p, g, now) and is_lag_growing(p, g, now)


def is_lag_growing(p: PartitionFacts, g: GroupFacts, now: float) -> bool:
    """The LSO grew while the committed offset stood still (work arrives, none is done)."""
    run = _unmoved_run(p.samples)
    return len(run) >= 2 and run[-1].lso > run[0].lso


Rule = Callable[[PartitionFacts, GroupFacts, float], bool]

RULES: Final[tuple[tuple[str, Rule, ProgressStatus], ...]] = (
    ("is_group_unsettled", is_group_unsettled, ProgressStatus.SUSPENDED),
    ("is_paused", is_paused, ProgressStatus.OK),
    ("has_no_samples", has_no_samples, ProgressStatus.OK),
    ("has_no_commits", has_no_commits, ProgressStatus.NO_COMMITS),
    ("is_not_yet_judged", is_not_yet_judged, ProgressStatus.OK),
    ("has_no_data_waiting", has_no_data_waiting, ProgressStatus.OK),
    ("is_stopped", is_stopped, ProgressStatus.STOP),
    ("is_stalled", is_stuck_with_data, ProgressStatus.STALL),
)
"""Tried in order; the first that holds gives the status (none: OK). Earlier rules are the ones that must win:
suspension and pauses over everything, no-commits over the stall rules, markers over lag, STOP over STALL."""


def partition_status(p: PartitionFacts, g: GroupFacts, now: float) -> tuple[ProgressStatus, str | None]:
    """The partition's status and the name of the rule that decided it (None: no rule held, OK)."""
    for name, rule, status in RULES:
        if rule(p, g, now):
            return status, name
    return ProgressStatus.OK, None


@dataclass(frozen=True)
class MemberProgress:
    status: ProgressStatus
    partitions: tuple[tuple[TopicPartitionRef, ProgressStatus, str | None], ...]
    """(partition, status, deciding rule), in the order given."""

    @property
    def stalled_partitions(self) -> tuple[TopicPartitionRef, ...]:
        return tuple(tp for tp, status, _ in self.partitions if status.stalled)


def member_status(partitions: Sequence[PartitionFacts], g: GroupFacts, now: float) -> MemberProgress:
    """Every partition's status and the member's, the worst of them (SUSPENDED for all while not Stable)."""
    judged = tuple((p.partition, *partition_status(p, g, now)) for p in partitions)
    worst = max((status for _, status, _ in judged), default=ProgressStatus.OK)
    if not g.stable:
        worst = ProgressStatus.SUSPENDED
    return MemberProgress(worst, judged)


def stuck_since(p: PartitionFacts, g: GroupFacts) -> float | None:
    """When the current stall clock started, or None when there is no data waiting now."""
    run = _unmoved_run(p.samples)
    waiting = _waiting(run)
    if not run or not waiting[-1]:
        return None
    # the clock starts at the first sample of the trailing stretch with data waiting (data at offset X stays)
    first = len(run) - 1
    while first > 0 and waiting[first - 1]:
        first -= 1
    return max(run[first].at, p.assigned_at, g.stable_since)


def _waiting(run: Sequence[Sample]) -> list[bool]:
    """Per sample of an unmoved run: is there data the member should have consumed?

    With a committed offset: a data record at it. Without one (never committed), the position is the client's
    `auto.offset.reset`, unknown from outside; what is known is that records arrived since watching began (the LSO
    grew), which a consumer reading from either end would have been given."""
    if run and run[-1].committed is None:
        return [s.lso > run[0].lso for s in run]
    return [s.data_waiting for s in run]


def _unmoved_run(samples: Sequence[Sample]) -> tuple[Sample, ...]:
    """The trailing samples sharing the latest committed offset."""
    if not samples:
        return ()
    last = samples[-1].committed
    start = len(samples) - 1
    while start > 0 and samples[start - 1].committed == last:
        start -= 1
    return tuple(samples[start:])


def _commit_seen(samples: Sequence[Sample]) -> bool:
    """The committed offset moved at least once while watched (a first commit counts)."""
    return any(a.committed != b.committed for a, b in itertools.pairwise(samples))
