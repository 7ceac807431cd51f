"""When a ConsumerGroup is resynced, and when a resync gives way: one loop per Kafka cluster, on the replica that
leads (the operator's Lease).

The loop of a cluster runs rounds: each resyncs, together, the cluster's ConsumerGroups that are due (one round at a
time per cluster, so their broker requests can be batched and a slow cluster never holds up another). A group is due
at once when it is new to the loop (the group is new, or the replica starts leading), at once when asked (a spec
change, a pod's event), otherwise one `interval` after its last resync ended. Nothing of this is kept on the
ConsumerGroup: no finalizer (deleting it, its namespace or the CRD never waits for the operator), no timer per object.

- No resync starts once its stop is set, whatever the reason (leadership lost, the group deleted, exiting).
- A resync asked to stop gives way at its next step: its waits (its turn, a Secret, the broker) are abandoned,
  and no step begins — a member removal, a rollout step, the status write with its Events, the budget Lease, the
  snapshot on the events topic. A step already begun ends (a removal's Event, a rollout step's pod deletion after
  its persisted bridge): the replica that acts next reads a consistent status.

Pure: (stop reason, requested, when the last resync ended, interval, now) → a group's next move; and the paces of
every group → which are due in which cluster, and when the loop looks again.
"""

from collections.abc import Collection, Hashable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class Resync:
    why: str
    """"first", "requested" or "interval"."""


@dataclass(frozen=True)
class Wait:
    seconds: float
    """At most this long, unless a resync is requested or the loop is asked to stop first."""


@dataclass(frozen=True)
class End:
    why: str
    """The stop reason (e.g. "leadership lost")."""


Move = Resync | Wait | End


def next_move(*, stopping: str | None, requested: bool, last_ended: float | None, interval: float,
              now: float) -> Move:  # fmt: skip
    """A group's next move. `stopping`: the stop reason, None while not asked to stop; `requested`: a spec change or a
    pod's event asked for a resync; `last_ended`: when its last resync ended (None: none yet), on `now`'s clock."""
    if stopping is not None:
        return End(stopping)
    if last_ended is None:
        return Resync("first")
    if requested:
        return Resync("requested")
    due = last_ended + interval
    if now >= due:
        return Resync("interval")
    return Wait(due - now)


def may_begin_step(*, stopping: str | None) -> bool:
    """Whether a resync may begin its next step (act or write). Once asked to stop, for any reason, it begins none:
    leadership lost, another replica acts on the same group; deleted, the group is gone; exiting, the next operator
    resyncs."""
    return stopping is None


def stop_reason(reason: object) -> str:
    """A stop reason (words, or a flag enum member or several) as words: LEADERSHIP_LOST → "leadership lost"."""
    name = getattr(reason, "name", None) or str(reason).rsplit(".", 1)[-1]
    return name.lower().replace("_", " ").replace("|", ", ")


@dataclass(frozen=True)
class Pace:
    """A ConsumerGroup's place in its cluster's loop."""

    cluster: str
    """The Kafka cluster it is resynced with (its bootstrap servers): one round at a time per cluster."""
    last_ended: float | None
    """When its last resync ended (None: none yet, on this replica's current leadership)."""
    requested: bool = False


@dataclass(frozen=True)
class Plan(Generic[K]):
    due: Mapping[str, tuple[K, ...]]
    """Per cluster with no round running: the groups to resync in a round now (in the order given)."""
    wake_in: float | None
    """Seconds until the next group of an idle cluster is due; None when none is scheduled (a round's end, a
    request, a new group wake the loop)."""


def plan(paces: Mapping[K, Pace], *, busy: Collection[str], interval: float, now: float) -> Plan[K]:
    """Which groups are due now, per cluster. A cluster in `busy` has a round running: its groups wait for the next
    round (its end wakes the loop), so a cluster never runs two rounds at once."""
    due: dict[str, list[K]] = {}
    waits: list[float] = []
    for key, pace in paces.items():
        if pace.cluster in busy:
            continue
        move = next_move(stopping=None, requested=pace.requested, last_ended=pace.last_ended, interval=interval,
                         now=now)  # fmt: skip
        if isinstance(move, Resync):
            due.setdefault(pace.cluster, []).append(key)
        elif isinstance(move, Wait):
            waits.append(move.seconds)
    return Plan({c: tuple(keys) for c, keys in due.items()}, min(waits) if waits else None)
