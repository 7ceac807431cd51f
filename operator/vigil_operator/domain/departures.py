"""Members whose consumer is provably gone, removed at once instead of after their session timeout.

A member that vanished without a LeaveGroup keeps its partitions until the coordinator expires it: a session
timeout (45 s by default, often minutes for static members) of partitions nobody consumes. The operator sees
what the coordinator cannot — that the pod is gone or its app container ended — and removes the member by
compare-and-remove (the pair it observed: a member that already left, or an instance id that a newer member
took, makes the coordinator answer so and remove nothing).

What the operator remembers of each member (`Sighting`: when it first saw it, the pod it was last proven to
belong to) is what makes this safe: a restarted app joins as a *new* member of the *same* pod, so "a member of
pod P is present and P's app ended" would also hit the new incarnation. Only a member first seen before the end
(or before the pod was created: a StatefulSet re-creates a pod under the same name) can be the one that ended,
and only by more than `CLOCK_SKEW` (node clocks against the operator's; a restarted app takes longer to rejoin).
Sightings live in the operator's memory: after an operator restart a member's first sighting is the restart, so
an end before it is left to the coordinator (stock behaviour), never guessed at.

Only proof counts, never silence:
- **scale-down** (static members of a StatefulSet): the pod an instance id was seen in had an ordinal at or above
  the set's replicas and is gone; whoever holds that instance id now is removed. Static members never send
  LeaveGroup, so without this they linger a whole session timeout. Not while the pod is still terminating: a
  consumer still running would rejoin at once under a new member id and then linger all the same. A pod below
  the replica count is a restart, which is bridging's business;
- **pod-gone** (dynamic members): the member's pod no longer exists, or exists anew (created after the member
  was first seen);
- **container-terminated** (dynamic members): the member's app container ended after the member was first seen,
  and the member is still there (a graceful stop leaves by itself first; a killed process cannot);
- **crash-loop** (static members): the app container of the pod holding the instance id is in CrashLoopBackOff
  after its second end — removed at most once per `CRASH_LOOP_WINDOW`.

A **KIP-848 static member** whose pod is gone, or exists anew, or whose app container ended (each provably after the
member was first seen) and that none of the rules above removes (a restart, not a scale-down or a crash loop) is
**released** instead (`action` "release"): its instance id freed on its behalf (ConsumerGroupHeartbeat with epoch
-2, what its client sends when it closes; compare-and-release, `GroupClient.release_static_member`, as the sidecar
does on the helper's proof). Its replacement then takes the member and its partitions over at once, with no
rebalance; without it the replacement is refused with UNRELEASED_INSTANCE_ID (fatal in the Java client and
librdkafka: a crash loop) until the dead member's session timeout fences it. Once per member (`released`).

Pure: (spec, sightings, members present now with their instance ids, pods now, replicas) → departures.
"""

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from vigil_operator.domain.reconcile import PodFacts
from vigil_operator.domain.spec import ConsumerGroupSpec, Membership, WorkloadKind
from vigil_operator.domain.status import MemberStatus

Cause = Literal["scale-down", "pod-gone", "container-terminated", "crash-loop", "node-lost"]
"""`vigil_core.events.MemberRemovedPayload.cause` values this module decides."""
Action = Literal["remove", "release"]

CLOCK_SKEW = timedelta(seconds=1)
CRASH_LOOP_WINDOW = timedelta(minutes=10)
"""A crash-looping static member is removed at most once this long (the kubelet's back-off grows to 5 minutes and
is forgiven after 10 minutes of running)."""
"""How far a node's clock (container end, pod creation) may be ahead of the operator's: a member first seen less
than this before an end is not taken for the one that ended."""


@dataclass(frozen=True)
class Sighting:
    first_seen: datetime
    """When the operator first saw the member in the group."""
    pod: str | None
    """The pod it was last proven to belong to (`vigil_core.identity`); kept while the mapping is ambiguous."""
    instance_id: str | None = None


@dataclass(frozen=True)
class Departure:
    member_id: str
    instance_id: str | None
    pod: str
    cause: Cause
    reason: str
    """The LeaveGroup reason (KIP-800), also the Event's message."""
    action: Action = "remove"
    """remove: compare-and-remove (LeaveGroup); release: a KIP-848 static member's instance id released on its
    behalf (ConsumerGroupHeartbeat with epoch -2), its partitions kept for its replacement."""

    @property
    def proven_gone(self) -> bool:
        """Its consumer is provably gone: it is removed (or released) whatever the eviction budget says, and even
        when the budget cannot be read. A crash-looping member or one on a lost node may come back: it waits for
        room in a readable budget."""
        return self.cause not in ("crash-loop", "node-lost")


def remember(sightings: Mapping[str, Sighting], members: Sequence[MemberStatus], now: datetime) -> dict[str, Sighting]:
    """The sightings after a resync that described `members`: members gone are forgotten, new ones first seen
    now, a proven pod replaces the remembered one (an ambiguous mapping keeps it)."""
    updated: dict[str, Sighting] = {}
    for m in members:
        before = sightings.get(m.member_id)
        first = before.first_seen if before is not None else now
        pod = m.pod if m.pod is not None else (before.pod if before is not None else None)
        updated[m.member_id] = Sighting(first, pod, m.instance_id)
    return updated


def departures(
    spec: ConsumerGroupSpec,
    sightings: Mapping[str, Sighting],
    present: Mapping[str, str | None],
    pods: Sequence[PodFacts],
    *,
    replicas: int | None,
    crash_removed: Mapping[str, datetime] | None = None,
    now: datetime | None = None,
    kip848: bool = False,
    released: Collection[str] = (),
) -> list[Departure]:
    """The members to remove (or, KIP-848 static ones, release) now, in pod order. `present`: member id → instance
    id of the members in the group now; `replicas`: the StatefulSet's desired count (None: unknown);
    `crash_removed`: instance id → when a crash-looping member of it was last removed (at most once per
    CRASH_LOOP_WINDOW); `kip848`: the group uses the consumer protocol; `released`: the member ids released
    already (once each)."""
    live = {p.name: p for p in pods}
    if _static_set(spec):
        found = _scaled_away(spec, sightings, present, live, replicas)
        if now is not None:
            found += _crash_looping(present, pods, crash_removed or {}, now, skip={d.member_id for d in found})
    else:
        found = [
            d
            for member_id, seen in sightings.items()
            if seen.pod is not None and seen.instance_id is None and member_id in present
            for d in (_dynamic(member_id, seen, live.get(seen.pod)),)
            if d is not None
        ]
    if kip848:
        found += _releases(sightings, present, live, skip={d.member_id for d in found} | set(released))
    return sorted(found, key=lambda d: (d.pod, d.member_id))


def needs_replicas(spec: ConsumerGroupSpec, sightings: Mapping[str, Sighting], pods: Sequence[PodFacts]) -> bool:
    """Whether a static member's pod is gone, so the StatefulSet's replica count decides (read only then)."""
    if not _static_set(spec):
        return False
    live = {p.name for p in pods}
    return any(s.pod is not None and s.pod not in live for s in sightings.values())


def _scaled_away(
    spec: ConsumerGroupSpec, sightings: Mapping[str, Sighting], present: Mapping[str, str | None],
    live: Mapping[str, PodFacts], replicas: int | None,
) -> list[Departure]:  # fmt: skip
    """The present holders of instance ids last seen in pods the StatefulSet scaled away (ordinal ≥ replicas, gone)."""
    if replicas is None:
        return []
    departed: dict[str, tuple[str, int]] = {}  # instance id -> (pod, ordinal)
    for seen in sightings.values():
        ordinal = _ordinal_of(spec, seen.pod or "")
        if seen.instance_id is not None and seen.pod not in live and ordinal is not None and ordinal >= replicas:
            departed[seen.instance_id] = (seen.pod or "", ordinal)
    found = []
    for member_id, instance_id in present.items():
        if instance_id is not None and instance_id in departed:
            pod, ordinal = departed[instance_id]
            reason = f"vigil: pod {pod} scaled away (ordinal {ordinal}, replicas {replicas})"
            found.append(Departure(member_id, instance_id, pod, "scale-down", reason))
    return found


def _crash_looping(
    present: Mapping[str, str | None], pods: Sequence[PodFacts], removed: Mapping[str, datetime], now: datetime,
    skip: set[str],
) -> list[Departure]:  # fmt: skip
    """Static members whose pod's app is crash-looping (the kubelet backs off restarting it after a second end):
    each keeps its partitions unconsumed while its app is down, and rejoins at once when it starts again — removed,
    at most once per CRASH_LOOP_WINDOW, so the others consume meanwhile (a restart that lasts brings it back)."""
    looping = {p.instance_id: p.name for p in pods if p.crash_looping and p.instance_id is not None}
    found = []
    for member_id, instance_id in present.items():
        if instance_id is None or instance_id not in looping or member_id in skip:
            continue
        last = removed.get(instance_id)
        if last is not None and now - last < CRASH_LOOP_WINDOW:
            continue
        pod = looping[instance_id]
        reason = f"vigil: the app of pod {pod} is crash-looping (CrashLoopBackOff)"
        found.append(Departure(member_id, instance_id, pod, "crash-loop", reason))
    return found


def _releases(
    sightings: Mapping[str, Sighting], present: Mapping[str, str | None], live: Mapping[str, PodFacts],
    skip: set[str],
) -> list[Departure]:  # fmt: skip
    """KIP-848 static members whose consumer provably ended (pod gone or re-created, app container ended), to be
    released for their replacement; not a crash-looping pod's (that is a removal's business, once per window)."""
    found = []
    for member_id, seen in sightings.items():
        instance_id = present.get(member_id)
        if instance_id is None or seen.pod is None or member_id in skip or seen.instance_id != instance_id:
            continue
        pod = live.get(seen.pod)
        if pod is not None and pod.crash_looping:
            continue
        ended = _ended(seen, pod)
        if ended is not None:
            cause, why = ended
            reason = f"{why}: instance id {instance_id} released for its replacement"
            found.append(Departure(member_id, instance_id, seen.pod, cause, reason, action="release"))
    return found


def _ended(seen: Sighting, pod: PodFacts | None) -> tuple[Cause, str] | None:
    """How the consumer of a member first seen as `seen` provably ended, by its pod now (None: gone), or None."""
    name = seen.pod or ""
    if pod is None or _after(pod.created_at, seen):
        return "pod-gone", f"vigil: pod {name} is gone"
    if _after(pod.app_ended_at, seen):
        assert pod.app_ended_at is not None
        at = pod.app_ended_at.strftime("%H:%M:%S")
        return "container-terminated", f"vigil: the app container of pod {name} ended at {at} UTC"
    return None


def _dynamic(member_id: str, seen: Sighting, pod: PodFacts | None) -> Departure | None:
    ended = _ended(seen, pod)
    if ended is None:
        return None
    cause, reason = ended
    if cause == "container-terminated":
        reason += " without leaving the group"
    return Departure(member_id, None, seen.pod or "", cause, reason)


def _after(moment: datetime | None, seen: Sighting) -> bool:
    """`moment` (a node's clock) is provably after the member was first seen (the operator's clock)."""
    return moment is not None and moment >= seen.first_seen + CLOCK_SKEW


def _static_set(spec: ConsumerGroupSpec) -> bool:
    return spec.membership is Membership.STATIC and spec.workload.kind is WorkloadKind.STATEFUL_SET


def _ordinal_of(spec: ConsumerGroupSpec, pod_name: str) -> int | None:
    """A gone pod's ordinal, from its name `<set>-<n>`."""
    prefix = f"{spec.workload.name}-"
    tail = pod_name.removeprefix(prefix)
    if tail == pod_name or not tail.isdigit() or (tail != "0" and tail.startswith("0")):
        return None
    return int(tail)
