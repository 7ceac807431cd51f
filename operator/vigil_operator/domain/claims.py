"""Which ConsumerGroup owns a Kafka group: one CR per (cluster id, group id); the oldest wins.

Two CRs observing one group would write conflicting policy (two budgets, two injections). The first created
keeps it; later ones are refused with a condition naming the owner. Ties on the creation time (a second's
resolution) fall back to namespace/name, so every operator replica and every resync picks the same owner.
"""

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Claim:
    created: str
    """metadata.creationTimestamp (RFC 3339 UTC sorts as text)."""
    namespace: str
    name: str
    cluster_id: str
    group_id: str

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


def owner(claims: Iterable[Claim], cluster_id: str, group_id: str) -> Claim | None:
    """The claim that owns (cluster_id, group_id), or None when nobody claims it."""
    mine = [c for c in claims if c.cluster_id == cluster_id and c.group_id == group_id]
    return min(mine, default=None)
