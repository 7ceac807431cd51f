"""The stats signal (pure): librdkafka's statistics JSON, forwarded by the app, judged without a broker request.

Any librdkafka-based client (Go, .NET, Python, C) with `statistics.interval.ms` set hands its stats callback one
JSON document per interval (librdkafka's STATISTICS.md); the app POSTs it unchanged to the sidecar
(`POST /v1/stats`, see STATS.md). This module parses it (`parse_stats`: a `StatsError`, one line naming the field,
on anything malformed) and judges it (`judge`): did the app progress since the previous document?

The rule, per document (first match wins):
1. `ts` or `age` went backwards (a new client instance: the app restarted; `age` counts from the instance's
   creation, while `ts` is the host's monotonic clock, which a process restart does not reset): the state is
   reset → FIRST.
2. no previous document → FIRST (counts as progress: nothing to compare with yet).
3. `cgrp.join_state` is not "steady", or `cgrp.rebalance_cnt` changed since the previous document (an assignment
   change), or less than one stall timeout has passed since either → SUSPENDED (counts as progress: no judgement).
4. any partition's `app_offset` advanced since the previous document → PROGRESS.
5. nothing waits for the app (`PartitionStats.waiting`: judged from the app's own position, never from
   `consumer_lag`) → IDLE (an idle app is never stalled).
6. otherwise records wait and the app took none → WAITING, the only verdict that is not progress.

Why not `consumer_lag`: librdkafka computes it as the end offset minus the consumer's *committed* offset
(librdkafka src/rdkafka.c, `rd_kafka_stats_emit_toppar`), which does not move for an app that commits through a
transaction (`send_offsets_to_transaction`: the consumer's committed offset is the one fetched at assignment),
commits every N records, or commits elsewhere. The app's position (`app_offset`, advanced past transaction
markers once polled: src/rdkafka_op.c, `rd_kafka_op_handle_std`) against the last stable offset is what the app
still has to take.

The runtime turns each progressing verdict into a synthetic beacon (as the progress adapter does), so the
watchdog's own stall timer decides when silence is a stall: a stall is reported only after `app_offset` stayed
put with records waiting for a whole stall timeout. No I/O, no clock: `now` is an argument.
"""

from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Final, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, TypeAdapter
from pydantic_core import PydanticCustomError

from vigil_core import codec

#: The largest document accepted (librdkafka's grow with topics × partitions × brokers; 1 MiB is thousands).
MAX_STATS_BYTES: Final = 1024 * 1024
#: librdkafka's "no offset" (RD_KAFKA_OFFSET_INVALID).
OFFSET_INVALID: Final = -1001
STEADY: Final = "steady"


class StatsError(ValueError):
    """A malformed statistics document: one line naming the field."""


@dataclass(frozen=True)
class PartitionStats:
    topic: str
    partition: int
    app_offset: int
    """Offset of the last message passed to the app + 1 (transaction markers included once polled past); -1001
    when none yet."""
    fetchq_cnt: int
    """Messages fetched for the app and not yet taken by it."""
    next_offset: int
    """Where the fetcher goes on (librdkafka's fetch position)."""
    hi_offset: int
    ls_offset: int
    """The last stable offset (-1001 when unknown)."""
    committed_offset: int

    @property
    def position(self) -> int | None:
        """Where the app is: `app_offset`, else (nothing taken since the assignment) the committed offset the
        fetcher started from; None when neither is known."""
        for offset in (self.app_offset, self.committed_offset):
            if offset >= 0:
                return offset
        return None

    @property
    def end(self) -> int | None:
        """What the app can read up to: the last stable offset (read_committed, librdkafka's default), else the high
        watermark; None when unknown. A read_uncommitted app stalled between the two is missed, never acted on."""
        for offset in (self.ls_offset, self.hi_offset):
            if offset >= 0:
                return offset
        return None

    @property
    def waiting(self) -> bool:
        """Records the fetcher holds for the app and the app has not taken: some in the fetch queue, or the fetcher
        gone past the app's position below the end. A paused partition never waits: pausing restarts its fetcher
        at the app's position and purges its queue (librdkafka src/rdkafka_partition.c `rd_kafka_toppar_pause_resume`,
        src/rdkafka_fetcher.c `rd_kafka_toppar_fetch_decide`), and it fetches nothing until resumed."""
        if self.fetchq_cnt > 0:
            return True
        position, end = self.position, self.end
        return position is not None and end is not None and position < end and self.next_offset > position


@dataclass(frozen=True)
class StatsDoc:
    ts_us: int
    """librdkafka's monotonic clock, microseconds (the host's: a restarted process does not reset it)."""
    time: int
    """Wall clock, seconds since the epoch."""
    cgrp_state: str
    join_state: str
    rebalance_cnt: int
    rebalance_age_ms: int
    assignment_size: int
    partitions: tuple[PartitionStats, ...]
    age_us: int | None = None
    """Microseconds since this client instance was created (None when the document has no `age`)."""

    @property
    def waiting(self) -> bool:
        return any(p.waiting for p in self.partitions)

    def restarted_after(self, last: "StatsDoc") -> bool:
        """This document comes from a new client instance (the app restarted) rather than from `last`'s."""
        new_age = self.age_us is not None and last.age_us is not None and self.age_us < last.age_us
        return self.ts_us < last.ts_us or new_age


class _Doc(BaseModel):
    """librdkafka's objects as read here: only the fields the rule needs, strictly typed; the rest is ignored."""

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)


class _Partition(_Doc):
    partition: int
    app_offset: int
    fetchq_cnt: int
    next_offset: int
    hi_offset: int
    ls_offset: int
    committed_offset: int


def _unless_unassigned(value: object) -> object:
    """librdkafka's internal UA (unassigned) partition, `"partition": -1`, is skipped (None) unread."""
    if value is None:
        raise PydanticCustomError("model_type", "Input should be an object")
    if isinstance(value, dict) and type(value.get("partition")) is int and value["partition"] == -1:
        return None
    return value


class _Topic(_Doc):
    partitions: dict[str, Annotated[_Partition | None, BeforeValidator(_unless_unassigned)]]


class _Cgrp(_Doc):
    state: str
    join_state: str
    rebalance_cnt: int
    rebalance_age: int
    assignment_size: int


class _Stats(_Doc):
    type: Literal["consumer"]
    ts: int
    time: int
    cgrp: _Cgrp
    topics: dict[str, _Topic] = Field(default_factory=dict)
    age: int | None = None


_STATS: Final = TypeAdapter(_Stats)


def parse_stats(data: bytes | str) -> StatsDoc:
    """One statistics document as librdkafka emitted it → StatsDoc; StatsError (one line naming the field) if not."""
    if len(data) > MAX_STATS_BYTES:
        raise StatsError(f"stats: document of {len(data)} bytes is over the {MAX_STATS_BYTES}-byte limit")
    doc = codec.decode(_STATS, data, "stats", StatsError)
    partitions = [
        PartitionStats(topic=name, **p.model_dump())  # the same names as librdkafka's
        for name, topic in doc.topics.items()
        for p in topic.partitions.values()
        if p is not None
    ]
    return StatsDoc(
        ts_us=doc.ts,
        time=doc.time,
        cgrp_state=doc.cgrp.state,
        join_state=doc.cgrp.join_state,
        rebalance_cnt=doc.cgrp.rebalance_cnt,
        rebalance_age_ms=doc.cgrp.rebalance_age,
        assignment_size=doc.cgrp.assignment_size,
        partitions=tuple(sorted(partitions, key=lambda p: (p.topic, p.partition))),
        age_us=doc.age,
    )


class Verdict(StrEnum):
    FIRST = "first"
    """No previous document (or the app restarted): nothing to compare with; counts as progress."""
    SUSPENDED = "suspended"
    """Rebalancing, or within one stall timeout after an assignment change: no judgement; counts as progress."""
    PROGRESS = "progress"
    """An app_offset advanced."""
    IDLE = "idle"
    """Nothing waits for the app: not a stall."""
    WAITING = "waiting"
    """Records wait and no app_offset moved: the only verdict that lets the stall timer run."""

    @property
    def progressed(self) -> bool:
        return self is not Verdict.WAITING


@dataclass(frozen=True)
class StatsState:
    last: StatsDoc | None = None
    suspended_until: float | None = None
    """`now` + one stall timeout after the last non-steady or rebalance-changed document."""
    last_progress: float | None = None
    """When a document last counted as progress (what a stall is measured from)."""

    def stalled(self, now: float, stall_timeout: float) -> bool:
        """What the watchdog's timer will conclude from the verdicts so far (for tests and /v1/status)."""
        return self.last_progress is not None and now - self.last_progress >= stall_timeout


def _offsets(doc: StatsDoc) -> dict[tuple[str, int], int]:
    return {(p.topic, p.partition): p.app_offset for p in doc.partitions}


def judge(state: StatsState, doc: StatsDoc, now: float, stall_timeout: float) -> tuple[StatsState, Verdict]:
    """One forwarded document → the new state and whether the app progressed (see the module's rule)."""
    last = state.last
    if last is not None and doc.restarted_after(last):
        state, last = StatsState(), None  # the app restarted: a new client instance
    suspended_until = state.suspended_until
    if last is None:
        verdict = Verdict.FIRST
        if doc.join_state != STEADY:
            suspended_until = now + stall_timeout
    elif doc.join_state != STEADY or doc.rebalance_cnt != last.rebalance_cnt:
        suspended_until = now + stall_timeout
        verdict = Verdict.SUSPENDED
    elif suspended_until is not None and now < suspended_until:
        verdict = Verdict.SUSPENDED
    else:
        before = _offsets(last)
        advanced = any(
            p.app_offset != OFFSET_INVALID and p.app_offset > before.get((p.topic, p.partition), OFFSET_INVALID)
            for p in doc.partitions
        )
        if advanced:
            verdict = Verdict.PROGRESS
        elif not doc.waiting:
            verdict = Verdict.IDLE
        else:
            verdict = Verdict.WAITING
    last_progress = now if verdict.progressed else state.last_progress
    return StatsState(last=doc, suspended_until=suspended_until, last_progress=last_progress), verdict
