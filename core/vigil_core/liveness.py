"""The liveness policy a ConsumerGroup states (`spec.liveness`) and its sidecar obeys: one definition each of the
choices and of the defaults derived from them, for the operator's spec, the sidecar's settings and the bridge.

Values are the CRD's spellings (and the `VIGIL_*` variables' and events'): a StrEnum member compares equal to its
string. Pure: no I/O.
"""

from enum import StrEnum
from typing import Final

from vigil_core import rules


class Signal(StrEnum):
    """How the app's liveness is seen (`spec.liveness.signal`, `VIGIL_SIGNAL`)."""

    BEACON = "beacon"
    """The app reports each poll (the helper, or the beacon protocol): precise, no broker requests."""
    PROGRESS = "progress"
    """No app change: committed offsets vs the read_committed LSO (Burrow-grade; alert by default)."""
    STATS = "stats"
    """The app forwards librdkafka's statistics JSON (`POST /v1/stats`, signals/STATS.md): any librdkafka client,
    no broker request to judge; leave-group by default, since `app_offset` is as precise as a poll beacon."""


class StallAction(StrEnum):
    """What to do about a proven stall (the spelling the CRD and events use)."""

    LEAVE_GROUP = "leave-group"
    """Compare-and-remove the member (LeaveGroup with the observed member id and instance id)."""
    RESTART = "restart"
    """Fail the app's liveness probe so the kubelet restarts the container."""
    ALERT = "alert"
    """An event and a metric only."""


class ForeignRebalance(StrEnum):
    """What a running bridge does when someone else starts a rebalance, or the generation moves, meanwhile (the
    CRD's `onForeignRebalance`)."""

    REMOVE = "remove"
    """Compare-and-remove the absent member at once, so the rebalance completes now instead of waiting for it
    until its session or rebalance timeout, handing it partitions and expiring it (a second rebalance)."""
    HOLD = "hold"
    """Keep heartbeating so the restarted app joins the same rebalance: until the app's expected return, at most
    the bridge's deadline, and at most one session timeout after the bridge met the rebalance (the group waits
    meanwhile); then remove."""


DEFAULT_SIGNAL: Final = Signal.BEACON
DEFAULT_STALL_TIMEOUT_SECONDS: Final = 60.0
"""No poll (or progress) for this long → the app counts as stalled."""
DEFAULT_MAX_CONCURRENT_EVICTIONS: Final = 1
"""Evictions the group's budget grants per cooldown."""
DEFAULT_SYSTEMIC_STALL_PERCENT: Final = 50.0
"""More than this share of the group stalled at once → no eviction, a systemic-stall event instead."""
DEFAULT_MAX_BRIDGE_SECONDS: Final = 120.0
"""A bridge gives up this long after the app ended; the member then expires at its session timeout."""
DEFAULT_FOREIGN_REBALANCE: Final = ForeignRebalance.REMOVE

CLIENT_DEFAULT_HEARTBEAT_SECONDS: Final = rules.CLIENT_DEFAULTS[rules.HEARTBEAT] / 1000
"""The client's `heartbeat.interval.ms` default (librdkafka and Java: 3 s): a bridge's pace when the group's
interval is unset."""


def stall_action(stated: StallAction | None, signal: Signal) -> StallAction:
    """The action taken on a stall: the stated one, else leave-group with the beacon and stats signals (both see
    the app's own consumption) and alert with the progress signal (committed offsets only suggest a stall)."""
    if stated is not None:
        return stated
    return StallAction.ALERT if signal is Signal.PROGRESS else StallAction.LEAVE_GROUP


def cooldown(stated: float | None, stall_timeout_seconds: float) -> float:
    """At most one action per member within this long (also the eviction budget's window): the stated cooldown,
    else twice the stall timeout."""
    return stated if stated is not None else 2 * stall_timeout_seconds
