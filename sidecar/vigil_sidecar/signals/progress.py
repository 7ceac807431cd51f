"""The progress signal's I/O edge: what the rules in `watchdog.progress_rules` judge, gathered from the broker.

Blocking; runs on the sidecar's Kafka worker thread (the `GroupClient` is used from one thread). Per check, for the
partitions assigned to this pod's member, read_committed throughout:

- one OffsetFetch for the group's committed offsets (`GroupClient.committed_offsets`);
- one ListOffsets per assigned partition for the last stable offset (`GroupClient.end_offsets`, read_committed);
- only where committed < LSO and the answer is not cached: a read_committed fetch of one record at the committed
  offset by a probe consumer. A transaction's commit marker occupies an offset but is never delivered, so "lag 1
  with nothing to read" is an idle transactional partition, not a stall. The probe assigns partitions by hand under
  its own group id (`vigil-probe-<pod>`): it never joins, and with auto-commit off never commits into, any group.
  A data record at offset X never changes, so "data at X" is cached until the committed offset moves; "nothing
  readable from X" holds until the LSO moves. A steady state (caught up, a marker's lag of 1, or a stall) therefore
  costs no fetches.

The history per partition is bounded by `compact`, which keeps exactly the samples the rules look at.
"""

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from confluent_kafka import Consumer, KafkaError, TopicPartition

from vigil_core.kafka.group_client import GroupClient
from vigil_core.kafka.model import GroupView, MemberView, TopicPartitionRef
from vigil_core.kafka.security import ClientConfig, KafkaConnection
from vigil_sidecar.watchdog import progress_rules
from vigil_sidecar.watchdog.progress_rules import GroupFacts, MemberProgress, PartitionFacts, Sample

MAX_TAIL: Final = 8
"""Samples kept at the end of a partition's history besides the few `compact` keeps for the rules."""
_PARTITION_EOF: Final = KafkaError._PARTITION_EOF  # noqa: SLF001 - confluent-kafka's public name for it
PROBE_TIMEOUT: Final = 5.0
"""How long one probe waits for a record or the end of the partition; no answer → unknown, not cached."""


@dataclass(frozen=True)
class RequestCount:
    """Broker requests one `sample` sent (the benchmark's "broker requests per check"; describe not included: the
    watchdog sends it anyway)."""

    offset_fetch: int = 0
    list_offsets: int = 0
    probes: int = 0
    """Probe fetches (each: one assign and normally one Fetch until a record or the partition's end)."""

    @property
    def total(self) -> int:
        return self.offset_fetch + self.list_offsets + self.probes


@dataclass(frozen=True)
class _Probed:
    committed: int
    data: bool
    lso: int
    """For a negative answer: nothing readable between `committed` and this LSO."""


class ProgressSampler:
    """Gathers `PartitionFacts` for one member of `group_id`, keeping history and assignment-change times.

    Not thread-safe: one sampler per watched member, used from the sidecar's Kafka worker thread."""

    def __init__(
        self,
        client: GroupClient,
        connection: KafkaConnection,
        group_id: str,
        *,
        pod_name: str = "sidecar",
        probe_config: ClientConfig | None = None,
        probe_timeout: float = PROBE_TIMEOUT,
        consumer_factory: Callable[[ClientConfig], Any] = Consumer,
    ) -> None:
        self._client = client
        self._group_id = group_id
        self._probe_conf: ClientConfig = (
            connection.confluent_config()
            | {
                "group.id": f"vigil-probe-{pod_name}",  # librdkafka needs one; never the watched group's
                "client.id": f"vigil-probe-{pod_name}",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "isolation.level": "read_committed",
                "enable.partition.eof": True,
                "fetch.wait.max.ms": 100,
                "max.partition.fetch.bytes": 1024,  # one small record is all a probe needs
                "log_level": 3,
            }
            | (probe_config or {})
        )
        self._probe_timeout = probe_timeout
        self._consumer_factory = consumer_factory
        self._probe: Any = None
        self._member_id: str | None = None
        self._histories: dict[TopicPartitionRef, tuple[Sample, ...]] = {}
        self._assigned_at: dict[TopicPartitionRef, float] = {}
        self._probed: dict[TopicPartitionRef, _Probed] = {}
        self._stable_since: float | None = None
        self.last_requests = RequestCount()
        """What the latest `sample` cost."""

    # -- the check ---------------------------------------------------------------------------------------------
    def sample(self, view: GroupView, member: MemberView, now: float) -> list[PartitionFacts]:
        """One check of `member`'s assigned partitions at `now` (monotonic seconds): the facts, oldest sample first.

        Raises `GroupClientError` as the group client does (the caller reports it and backs off)."""
        self._observe_group(view, member, now)
        assigned = member.assignment
        committed = self._client.committed_offsets(self._group_id)
        ends = self._client.end_offsets(assigned, read_committed=True)
        probes = 0
        facts: list[PartitionFacts] = []
        for tp in assigned:
            offset, lso = committed.get(tp), ends[tp]
            data: bool | None = None
            if offset is not None and offset < lso:
                data, probed = self._data_at(tp, offset, lso)
                probes += probed
            history = compact((*self._histories.get(tp, ()), Sample(now, offset, lso, data)))
            self._histories[tp] = history
            facts.append(PartitionFacts(tp, history, paused=False, assigned_at=self._assigned_at[tp]))
        self.last_requests = RequestCount(offset_fetch=1, list_offsets=len(assigned), probes=probes)
        return facts

    def group_facts(self, view: GroupView, stall_timeout: float, no_commit_factor: float = 3.0) -> GroupFacts:
        """The whole member's facts as of the latest `sample` (which must have seen `view`)."""
        since = self._stable_since
        return GroupFacts(
            stable=view.stable and since is not None,
            stable_since=since if since is not None else 0.0,
            stall_timeout=stall_timeout,
            no_commit_factor=no_commit_factor,
        )

    def check(
        self, view: GroupView, member: MemberView, now: float, *, stall_timeout: float, no_commit_factor: float = 3.0
    ) -> MemberProgress:
        """`sample`, infer pauses, and judge: what the adapter turns into watchdog observations."""
        partitions = self.sample(view, member, now)
        group = self.group_facts(view, stall_timeout, no_commit_factor)
        return progress_rules.member_status(infer_paused(partitions, group, now), group, now)

    def close(self) -> None:
        if self._probe is not None:
            self._probe.close()
            self._probe = None

    # -- bookkeeping -------------------------------------------------------------------------------------------
    def _observe_group(self, view: GroupView, member: MemberView, now: float) -> None:
        if not view.stable:
            self._stable_since = None
        elif self._stable_since is None:  # first Stable view since a rebalance (or since start: not earlier)
            self._stable_since = now
        if member.member_id != self._member_id:  # a new member (rejoin, restart): its history starts now
            self._member_id = member.member_id
            self._histories.clear()
            self._assigned_at.clear()
        assigned = set(member.assignment)
        for tp in set(self._assigned_at) - assigned:
            del self._assigned_at[tp]
            self._histories.pop(tp, None)
            self._probed.pop(tp, None)
        for tp in assigned:
            self._assigned_at.setdefault(tp, now)

    # -- the probe ---------------------------------------------------------------------------------------------
    def _data_at(self, tp: TopicPartitionRef, committed: int, lso: int) -> tuple[bool | None, int]:
        """Whether a data record is readable (read_committed) from `committed`, and how many probes that took."""
        cached = self._probed.get(tp)
        if cached is not None and cached.committed == committed and (cached.data or cached.lso == lso):
            return cached.data, 0
        data = self._fetch_one(tp, committed)
        if data is not None:
            self._probed[tp] = _Probed(committed, data, lso)
        return data, 1

    def _fetch_one(self, tp: TopicPartitionRef, offset: int) -> bool | None:
        """True: a data record at or after `offset` (below the LSO, as read_committed delivers nothing beyond);
        False: the partition's end came first (only markers or aborted records); None: no answer in time."""
        if self._probe is None:
            self._probe = self._consumer_factory(self._probe_conf)
        probe = self._probe
        probe.assign([TopicPartition(tp.topic, tp.partition, offset)])
        try:
            deadline = time.monotonic() + self._probe_timeout
            while (left := deadline - time.monotonic()) > 0:
                msg = probe.poll(min(left, 0.5))
                if msg is None or (msg.topic(), msg.partition()) != (tp.topic, tp.partition):
                    continue
                error = msg.error()
                if error is None:
                    if msg.offset() >= offset:  # an older probe's record at a lower offset proves nothing here
                        return True
                    continue
                if error.code() == _PARTITION_EOF:
                    return False
            return None
        finally:
            probe.unassign()


def infer_paused(partitions: Sequence[PartitionFacts], group: GroupFacts, now: float) -> list[PartitionFacts]:
    """Mark as paused a partition with data waiting while another partition of the same member had its committed
    offset move within the last stall timeout.

    A pause is invisible from outside (the broker never hears of it); what is visible is that the member's poll loop
    runs: it commits elsewhere. A partition held back while its siblings progress is the app's choice (a pause, or
    per-partition work that an eviction would not fix). A member whose only moving partitions are paused shows
    nothing of the kind and is judged by the stall rules."""
    moved = {p.partition: _last_move(p.samples) for p in partitions}
    out: list[PartitionFacts] = []
    for p in partitions:
        alive_elsewhere = any(
            at is not None and now - at < group.stall_timeout for tp, at in moved.items() if tp != p.partition
        )
        waiting = progress_rules.stuck_since(p, group) is not None
        out.append(replace(p, paused=True) if waiting and alive_elsewhere else p)
    return out


def compact(samples: Sequence[Sample], tail: int = MAX_TAIL) -> tuple[Sample, ...]:
    """A bounded history the rules judge exactly as the full one: the last sample before the current committed
    offset (a commit seen), the first sample at it (when it moved; the LSO then), the sample before the trailing
    stretch with data waiting and that stretch's first (when the stall clock started), and the last `tail`."""
    n = len(samples)
    if n <= tail + 4:
        return tuple(samples)
    run = n - 1
    while run > 0 and samples[run - 1].committed == samples[-1].committed:
        run -= 1
    waiting = _waiting_flags(samples[run:])
    stretch = len(waiting) - 1
    while stretch > 0 and waiting[stretch] and waiting[stretch - 1]:
        stretch -= 1
    keep = {run - 1, run, run + stretch - 1, run + stretch, *range(n - tail, n)}
    return tuple(samples[i] for i in sorted(keep) if 0 <= i < n)


def _waiting_flags(run: Sequence[Sample]) -> list[bool]:
    """`progress_rules._waiting`, restated: per sample of an unmoved run, is there data the member should consume."""
    if run and run[-1].committed is None:
        return [s.lso > run[0].lso for s in run]
    return [s.data_waiting for s in run]


def _last_move(samples: Iterable[Sample]) -> float | None:
    """When the committed offset was last seen to change (a first commit counts)."""
    last: float | None = None
    previous: Sample | None = None
    for s in samples:
        if previous is not None and s.committed != previous.committed:
            last = s.at
        previous = s
    return last
