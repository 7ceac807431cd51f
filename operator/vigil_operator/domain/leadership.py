"""Which operator replica leads: client-go's leader election over a coordination.k8s.io Lease, as a pure decision.

Why: one resync loop per Kafka cluster must run on exactly one replica (#22). kopf peering only pauses daemons and
timers — a per-object timer is what forces kopf's finalizer onto every ConsumerGroup — so the loop is guarded by a
Lease of its own instead, the way kube-controller-manager and kube-scheduler guard theirs.

The protocol (client-go `tools/leaderelection`):
- A replica reads the Lease. Missing: it creates it naming itself. Free (a holder released it) or expired: it takes
  it by an update under the `resourceVersion` it read. The API server's compare-and-swap lets exactly one of
  several racing replicas win; the others get 409 Conflict and stand by.
- **Expired is judged by our own clock, never by the times in the record**: a record held by another counts as
  expired only once it has not changed for the lease duration since we first saw it as it is (a later read that
  returns it unchanged does not restart the count; any write by the holder does). Clock skew between nodes cannot
  shorten a lease; only the clocks' rates matter, and `lease_duration − renew_deadline` is the margin for those.
  The duration counted is the longer of ours and the one the holder wrote (replicas configured differently, as
  during an upgrade that changes it, stay safe).
- The holder renews every `retry_period` and leads only until `renew_deadline` after its last renewal that
  succeeded, counted from when that renewal was *sent*; a standby counts from when its read *returned*. The
  renewal landed in between, so a holder that can no longer renew stops leading at least `lease_duration −
  renew_deadline` before any standby may take over: never two leaders, even with a renewal's answer lost or late.
- A replica that exits gracefully releases: it stops leading first, then clears the holder, and a standby takes
  the free Lease at its next try instead of after the lease duration.

Defaults are client-go's (kube-controller-manager's and kube-scheduler's): lease 15 s, renew deadline 10 s, retry
2 s. A crashed leader is replaced 15–17 s after its last renewal (kopf peering: up to its 60 s lifetime); a
stopped one at the standby's next try (≤ 2 s); a leader cut off from the API server stops within 10 s. No jitter:
the compare-and-swap, not timing, separates racing replicas.

Pure: times are arguments. `now`, `observed_at` and `renewed_at` are one local monotonic clock; `wall` (epoch
seconds) is only written into the record, for people and other tools — no decision reads it back.
"""

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Final


@dataclass(frozen=True)
class Timing:
    """The election's three durations, in seconds (client-go's `LeaseDuration`, `RenewDeadline`, `RetryPeriod`)."""

    lease_duration: float = 15.0
    """How long a standby waits, by its own clock, after it last saw the Lease change before taking it."""
    renew_deadline: float = 10.0
    """How long the leader keeps leading after its last successful renewal was sent."""
    retry_period: float = 2.0
    """How often the leader renews and a standby reads."""

    def __post_init__(self) -> None:
        if not self.lease_duration >= 1:
            raise ValueError(f"lease_duration {self.lease_duration:g}s: the Lease counts it in whole seconds, >= 1")
        if not self.lease_duration > self.renew_deadline:
            raise ValueError(
                f"renew_deadline {self.renew_deadline:g}s must be shorter than lease_duration {self.lease_duration:g}s:"
                " the leader must stop leading before a standby may take over"
            )
        if not self.renew_deadline >= 2 * self.retry_period > 0:
            raise ValueError(
                f"renew_deadline {self.renew_deadline:g}s must be at least twice retry_period {self.retry_period:g}s"
                " (> 0): a failed renewal gets a second try before the leader gives up"
            )

    @property
    def lease_seconds(self) -> int:
        """`spec.leaseDurationSeconds` as written: whole seconds, rounded up (a standby waits the longer one)."""
        return math.ceil(self.lease_duration)

    @property
    def request_timeout(self) -> float:
        """Each request to the API server is cut after this: a hung connection leaves time for a second try
        before the renew deadline."""
        return self.renew_deadline / 2


DEFAULT_TIMING: Final = Timing()


@dataclass(frozen=True)
class LeaseRecord:
    """A Lease's `spec` as plain values, and the `resourceVersion` a write of it is compared against."""

    holder: str | None
    """`holderIdentity`; None when free (never held, or released)."""
    lease_duration: float
    """`leaseDurationSeconds` as the holder wrote it."""
    acquire_time: float | None = None
    """`acquireTime` (epoch seconds, the writer's wall clock): informative only."""
    renew_time: float | None = None
    """`renewTime` (epoch seconds, the writer's wall clock): informative only."""
    transitions: int = 0
    """`leaseTransitions`: how often the holder changed."""
    version: str = ""
    """`metadata.resourceVersion` of the stored Lease; "" for a Lease not stored yet (written by create)."""


@dataclass(frozen=True)
class Observation:
    """A record and when this replica first saw it as it is (its local clock, when the read returned)."""

    record: LeaseRecord
    at: float


def observe(seen: Observation | None, record: LeaseRecord, now: float) -> Observation:
    """What is known after a read returned `record` at `now`: the previous observation if nothing changed (its
    time stands: a lease expires after not changing for the lease duration), else a new one from `now`.

    Any change counts, the resourceVersion included: a write we cannot tell from a renewal delays a takeover,
    it never hastens one."""
    if seen is not None and seen.record == record:
        return seen
    return Observation(record, now)


@dataclass(frozen=True)
class Acquire:
    """Write `record` (create it when `record.version` is "", else update under that version); lead once the
    write succeeds, from when it was sent."""

    record: LeaseRecord


@dataclass(frozen=True)
class Renew:
    """Write `record` (under `record.version`); lead on until `renew_deadline` after this write was sent."""

    record: LeaseRecord


@dataclass(frozen=True)
class StandBy:
    """Another replica holds the Lease: read again at `until` (local clock)."""

    holder: str
    expires: float
    """When its hold expires unless the record changes before (local clock)."""
    until: float
    """The next try: one retry period on, or the expiry if sooner (so a crashed holder is replaced at once)."""


@dataclass(frozen=True)
class Lost:
    """Stop leading now; then decide again as a replica that does not lead."""

    why: str


Decision = Acquire | Renew | StandBy | Lost


def decide(
    record: LeaseRecord | None,
    observed_at: float,
    me: str,
    now: float,
    *,
    wall: float,
    renewed_at: float | None = None,
    timing: Timing = DEFAULT_TIMING,
) -> Decision:
    """What replica `me` does at an attempt, given the Lease's `record` (None: it does not exist) first seen as it
    is at `observed_at`; `renewed_at`: when our last successful write was sent, while we lead (None: we do not);
    `wall`: the epoch time written into the record."""
    if renewed_at is not None and not leads(renewed_at, now, timing):
        return Lost(f"no renewal succeeded for {timing.renew_deadline:g}s")
    if record is None:
        return Acquire(LeaseRecord(me, timing.lease_seconds, wall, wall, 0))
    if record.holder == me:
        ours = replace(
            record,
            lease_duration=timing.lease_seconds,
            acquire_time=record.acquire_time if record.acquire_time is not None else wall,
            renew_time=wall,
        )
        # Not leading yet the record names us: our last term ended (the deadline passed while the API server was
        # away), or this identity ran before. Nobody took it since, or the compare-and-swap refuses this write.
        return Renew(ours) if renewed_at is not None else Acquire(ours)
    if record.holder is not None:
        if renewed_at is not None:
            return Lost(f"{record.holder} holds the Lease")
        expires = observed_at + max(timing.lease_duration, record.lease_duration)
        if now < expires:
            return StandBy(record.holder, expires, min(now + timing.retry_period, expires))
    return Acquire(
        replace(
            record,
            holder=me,
            lease_duration=timing.lease_seconds,
            acquire_time=wall,
            renew_time=wall,
            transitions=record.transitions + 1,
        )
    )


def leads(renewed_at: float | None, now: float, timing: Timing = DEFAULT_TIMING) -> bool:
    """Whether a replica whose last successful write was sent at `renewed_at` leads at `now`."""
    return renewed_at is not None and now < renewed_at + timing.renew_deadline


def released(record: LeaseRecord, wall: float) -> LeaseRecord:
    """The record a holder writes when it exits gracefully (under the version it holds): no holder, so the next
    try of any standby takes it; a 1 s duration, as client-go writes, for other readers of the Lease."""
    return replace(record, holder=None, lease_duration=1, acquire_time=wall, renew_time=wall)


# -- the Lease object (coordination.k8s.io/v1) ------------------------------------------------------------------------


def record_of(lease: Mapping[str, Any]) -> LeaseRecord:
    """The record in a Lease as the API server returned it (JSON). Times that do not parse read as None: they are
    informative only."""
    spec = lease.get("spec") or {}
    return LeaseRecord(
        holder=str(spec.get("holderIdentity") or "") or None,
        lease_duration=float(spec.get("leaseDurationSeconds") or 0),
        acquire_time=_epoch(spec.get("acquireTime")),
        renew_time=_epoch(spec.get("renewTime")),
        transitions=int(spec.get("leaseTransitions") or 0),
        version=str((lease.get("metadata") or {}).get("resourceVersion") or ""),
    )


def lease_spec(record: LeaseRecord) -> dict[str, Any]:
    """The election's `spec` fields for `record` as JSON, None for an absent one: a JSON merge patch of them
    leaves other fields (a newer API's `strategy`, `preferredHolder`) as they are and removes the absent ones."""
    return {
        "holderIdentity": record.holder,
        "leaseDurationSeconds": math.ceil(record.lease_duration),
        "acquireTime": None if record.acquire_time is None else _micro_time(record.acquire_time),
        "renewTime": None if record.renew_time is None else _micro_time(record.renew_time),
        "leaseTransitions": record.transitions,
    }


def _micro_time(epoch: float) -> str:
    """A `MicroTime` as the API server writes it (RFC 3339, microseconds, UTC)."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _epoch(text: object) -> float | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()
