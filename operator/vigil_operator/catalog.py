"""The ConsumerGroups as last seen, kept by the operator itself instead of in kopf indexes.

kopf holds back every object's handlers until every indexed object of every kind is indexed, and each object it
indexes wakes every object waiting (its `ToggleSet`): at startup that is N² wake-ups for N indexed ConsumerGroups —
measured, an operator with 10,000 of them had not resynced one after 3 minutes. So kopf indexes no ConsumerGroup: its
events on them keep this catalog, and only the groups seen in them are resynced. The claims (which ConsumerGroup owns
a Kafka group: the oldest) must not be judged from a half-seen catalog, so the ConsumerGroups are also listed once at
startup for their claims, and the resync loops begin once kopf has shown every one of them: the first round takes
them all, in one census. One deleted before kopf's own list is never shown by kopf: `settle` forgets it (a minute
after startup, handlers.SETTLE), and the loops begin then.
"""

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from vigil_operator.domain import claims

Key = tuple[str, str]
"""A ConsumerGroup's (namespace, name)."""


@dataclass(frozen=True)
class Record:
    """What the catalog keeps of a ConsumerGroup."""

    claim: claims.Claim
    spec: Mapping[str, Any]
    body: Mapping[str, Any]
    """The whole object as last seen: a pod's event resyncs the group with it (no read)."""


def record_of(body: Mapping[str, Any]) -> tuple[Key, Record]:
    meta = body.get("metadata") or {}
    namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    spec, status = body.get("spec") or {}, body.get("status") or {}
    created = str(meta.get("creationTimestamp") or "")
    claim = claims.Claim(created, namespace, name, str(status.get("clusterId") or ""), str(spec.get("groupId") or ""))
    return (namespace, name), Record(claim, dict(spec), body)


class Catalog:
    def __init__(self) -> None:
        self._records: dict[Key, Record] = {}
        """Seen in kopf's events (its own list and watch): they exist, they are resynced."""
        self._listed: dict[Key, Record] = {}
        """From the list made at startup, not seen in kopf's events yet: claims only (`settle`)."""
        self._claims: dict[str, dict[Key, claims.Claim]] = {}
        """By Kafka group id, of both: a resync reads the claims on its own group only, and from the start sees the
        claim of an older ConsumerGroup on it (never owning a group because its owner was not seen yet)."""

    def fill(self, bodies: Iterable[Mapping[str, Any]]) -> None:
        """The ConsumerGroups listed at startup (kopf's events confirm them)."""
        for body in bodies:
            key, record = record_of(body)
            if key not in self._records:
                self._unclaim(key)
                self._listed[key] = record
                self._claims.setdefault(record.claim.group_id, {})[key] = record.claim

    def put(self, body: Mapping[str, Any]) -> Key:
        """The ConsumerGroup as kopf's event shows it (a copy is kept)."""
        key, record = record_of(copy.deepcopy(dict(body)))
        self.drop(key)
        self._records[key] = record
        self._claims.setdefault(record.claim.group_id, {})[key] = record.claim
        return key

    def drop(self, key: Key) -> None:
        self._unclaim(key)
        self._records.pop(key, None)
        self._listed.pop(key, None)

    def settle(self) -> int:
        """Forget the listed ConsumerGroups kopf never showed (deleted before its own list): how many."""
        gone = list(self._listed)
        for key in gone:
            self.drop(key)
        return len(gone)

    @property
    def settled(self) -> bool:
        """Every ConsumerGroup listed at startup was shown by kopf (or forgotten by `settle`)."""
        return not self._listed

    def get(self, key: Key) -> Record | None:
        """The ConsumerGroup as kopf's events last showed it."""
        return self._records.get(key)

    def lookup(self, key: Key) -> Record | None:
        """The ConsumerGroup as last seen, listed at startup included (the webhook: from its first request on)."""
        return self._records.get(key) or self._listed.get(key)

    def records(self) -> Mapping[Key, Record]:
        """The ConsumerGroups seen in kopf's events."""
        return MappingProxyType(self._records)

    def claims(self, group_id: str) -> list[claims.Claim]:
        """Every ConsumerGroup's claim on the Kafka group `group_id` (whatever its cluster), listed ones included."""
        return list(self._claims.get(group_id, {}).values())

    def _unclaim(self, key: Key) -> None:
        record = self._records.get(key) or self._listed.get(key)
        if record is None:
            return
        same = self._claims.get(record.claim.group_id, {})
        same.pop(key, None)
        if not same:
            self._claims.pop(record.claim.group_id, None)
