"""Which member of a described group is this pod's: proven by an identity, never guessed from an address.

Acting on the wrong member (a LeaveGroup, a heartbeat) costs someone else's partitions, so a match needs one
of, in order of strength:

1. the pod's `group.instance.id` (a static member; the coordinator maps an instance id to one member);
2. the member id the app itself reported (the helper's beacon);
3. `client.id` equal to the pod name (the webhook sets it). A classic member id is `<client.id>-<uuid>`, but
   only because the broker builds it from the client id; KIP-848 member ids are client-made UUIDs, and a prefix
   `<pod>-` also fits other pods' client ids (`web-1-x` for pod `web-1`). So the prefix proves nothing the
   client id does not, and is not a basis of its own.

The host never counts: every member is 127.0.0.1 in tests and SNAT hides pods in real clusters. Two candidates
on the strongest basis that has any → refuse: two consumers sharing a client.id in one pod, or the old member of
a crashed container still present next to the new one, are exactly when a guess would hit the wrong member.
When the pod knows its instance id, a member carrying a different one is never matched on a weaker basis: it
is someone else's static identity.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum


@dataclass(frozen=True)
class ObservedMember:
    """A member as DescribeGroups / ConsumerGroupDescribe shows it."""

    member_id: str
    instance_id: str | None
    client_id: str
    host: str


@dataclass(frozen=True)
class PodIdentity:
    pod_name: str
    instance_id: str | None = None
    """The `group.instance.id` the pod's app uses (static members)."""
    reported_member_id: str | None = None
    """The member id the app reported through the helper (may be stale after a rejoin)."""


class MatchBasis(StrEnum):
    INSTANCE_ID = "instance_id"
    REPORTED_MEMBER_ID = "reported_member_id"
    CLIENT_ID = "client_id"


@dataclass(frozen=True)
class Match:
    member: ObservedMember
    basis: MatchBasis


@dataclass(frozen=True)
class NoMatch:
    reason: str
    """One sentence saying why no member was chosen."""


def find_member(members: Sequence[ObservedMember], pod: PodIdentity) -> Match | NoMatch:
    """The member that provably belongs to `pod`, or why none does (none found, or more than one: refuse)."""
    if not pod.pod_name:
        return NoMatch("The pod has no name, so no member can be proven to be its own.")
    instance_id = pod.instance_id or None
    # a member holding an instance id other than the pod's is someone else's static identity, whatever else fits
    ours = [m for m in members if instance_id is None or (m.instance_id or None) in (None, instance_id)]
    bases: tuple[tuple[MatchBasis, str, str | None], ...] = (
        (MatchBasis.INSTANCE_ID, "group.instance.id", instance_id),
        (MatchBasis.REPORTED_MEMBER_ID, "reported member id", pod.reported_member_id or None),
        (MatchBasis.CLIENT_ID, "client.id", pod.pod_name),
    )
    for basis, label, wanted in bases:
        if wanted is None:
            continue
        candidates = [m for m in ours if _key(m, basis) == wanted]
        if len(candidates) == 1:
            return Match(candidates[0], basis)
        if candidates:
            ids = ", ".join(sorted(m.member_id for m in candidates))
            return NoMatch(
                f"{len(candidates)} members have {label} {wanted!r} ({ids}), so pod {pod.pod_name!r} cannot be matched"
                " to one of them; refusing to pick."
            )
    for member in sorted(members, key=lambda m: m.member_id):  # sorted: the same reason whatever the order
        if member not in ours and any(_key(member, basis) == wanted for basis, _, wanted in bases[1:]):
            return NoMatch(
                f"Member {member.member_id!r} fits pod {pod.pod_name!r} by member or client id but holds"
                f" group.instance.id {member.instance_id!r}, not the pod's {instance_id!r}; refusing to pick it."
            )
    tried = [f"{label} {wanted!r}" for _, label, wanted in bases if wanted is not None]
    return NoMatch(
        f"No member of the group has {' or '.join(tried)} for pod {pod.pod_name!r} (a host match is never enough)."
    )


def _key(member: ObservedMember, basis: MatchBasis) -> str | None:
    """What of the member a basis compares (the host is deliberately never one of them); "" counts as unset."""
    match basis:
        case MatchBasis.INSTANCE_ID:
            return member.instance_id or None
        case MatchBasis.REPORTED_MEMBER_ID:
            return member.member_id
        case MatchBasis.CLIENT_ID:
            return member.client_id
