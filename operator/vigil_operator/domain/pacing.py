"""When a ConsumerGroup is resynced, and when a resync gives way: one loop per Kafka cluster, on the replica that
leads (the operator's Lease).

The loop of a cluster runs rounds: each resyncs, together, the cluster's ConsumerGroups that are due (one round at a
time per cluster, so their broker requests are batched in one census and a slow cluster never holds up another).
Every `interval` a cluster's periodic round takes all its groups: they stay one round however their resyncs end, so
at 10,000 groups a cluster costs one census an interval, not one per group whose last resync ended at its own time.
Between periodic rounds a round takes only the groups new to the loop (a new group, or the replica starts leading)
or asked for (a spec change, a pod's event). Nothing of this is kept on the ConsumerGroup: no finalizer (deleting
it, its namespace or the CRD never waits for the operator), no timer per object.

- No resync starts once its stop is set, whatever the reason (leadership lost, the group deleted, exiting).
- A resync asked to stop gives way at its next step: its waits (its turn, a Secret, the broker) are abandoned,
  and no step begins — a member removal, a rollout step, the status write with its Events, the budget Lease, the
  snapshot on the events topic. A step already begun ends (a removal's Event, a rollout step's pod deletion after
  its persisted bridge): the replica that acts next reads a consistent status.

Pure: the paces of every group and each cluster's cadence → which groups are due in which cluster, and when the
loop looks again.
"""

from collections.abc import Collection, Hashable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


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
    resynced: bool
    """Whether a round took it in since this replica began leading (False: it is new to the loop)."""
    requested: bool = False


@dataclass(frozen=True)
class Plan(Generic[K]):
    due: Mapping[str, tuple[K, ...]]
    """Per cluster with no round running: the groups to resync in a round now (in the order given)."""
    periodic: frozenset[str]
    """The clusters of `due` whose round is their periodic one: every group of the cluster (its cadence restarts)."""
    wake_in: float | None
    """Seconds until an idle cluster's next periodic round; None when none is scheduled (a round's end, a request, a
    new group wake the loop)."""


def plan(paces: Mapping[K, Pace], *, cadence: Mapping[str, float], busy: Collection[str], interval: float,
         now: float) -> Plan[K]:  # fmt: skip
    """Which groups are due now, per cluster. `cadence`: per cluster, when its last periodic round began (none yet:
    due at once). A cluster's periodic round takes every group of the cluster, one `interval` after the last began,
    so its groups stay one round — one census — however their resyncs end or were asked for in between. Between
    periodic rounds, a round takes only the groups new to the loop or asked for (a spec change, a pod's event). A
    cluster in `busy` has a round running: its groups wait for the next round (its end wakes the loop), so a cluster
    never runs two rounds at once."""
    groups: dict[str, list[tuple[K, Pace]]] = {}
    for key, pace in paces.items():
        if pace.cluster not in busy:
            groups.setdefault(pace.cluster, []).append((key, pace))
    due: dict[str, tuple[K, ...]] = {}
    periodic: set[str] = set()
    waits: list[float] = []
    for cluster, members in groups.items():
        began = cadence.get(cluster)
        if began is None or now >= began + interval:
            due[cluster] = tuple(key for key, _ in members)
            periodic.add(cluster)
            continue
        waits.append(began + interval - now)
        asked = tuple(key for key, pace in members if pace.requested or not pace.resynced)
        if asked:
            due[cluster] = asked
    return Plan(due, frozenset(periodic), min(waits) if waits else None)
