"""The eviction budget's ledger: what the sidecars of one group share through their Lease, and the permit rule.

Why a shared ledger: when many members stall at once the cause is outside them (a database, the network), and
evicting them only adds rebalances (vigil's first rule: do no harm). A sidecar sees only its own pod, so the sidecars of
a group publish their poll ages into one Kubernetes Lease and an eviction needs a permit granted against that
shared view, written back with compare-and-swap (`lease_api`).

Where the data lives: a Lease's spec has room for one holder (`holderIdentity`, `acquireTime`, `renewTime`,
`leaseDurationSeconds`, `leaseTransitions`), not for one poll age per member, so the ledger is a compact JSON
document in one annotation (`vigil.dev/budget`) and the spec is left alone. The whole object is replaced under
its `resourceVersion`, so the annotation gets the same compare-and-swap as the spec would. The API server caps an
object's annotations at 256 KiB in total; the document is capped at `MAX_BYTES` (64 KiB, about 800 members),
dropping the oldest records first.

Format (version 1), times in Unix seconds (wall clock: the writers are different pods, so a monotonic clock
would not compare; the nodes' clocks must agree to well within `settle` and the freshness window)::

    {"v": 1,
     "members": {"<pod>": {"age": 31.2, "at": 1763700000.123, "asked": 1763699998.5}},
     "permits": [{"pod": "<pod>", "member": "<member id>", "at": 1763700001.5}],
     "handoffs": [{"topic": "orders", "partition": 3, "at": 1763700001.5, "until": 1763700121.5}],
     "poison": [{"topic": "orders", "partition": 3, "offset": 1200, "at": 1763700070.2}]}

`age` is the pod's poll age when it published at `at`; `asked` (optional) is when the pod first asked for a
permit for its current stall, so the settle delay survives the asking sidecar's restart and is one shared clock.
`handoffs` and `poison` (optional, absent when empty) are the poison-pill guard (`poison`): the partitions an
eviction handed over, and the partitions suspected of a poison pill. Evolution is additive (as for events):
readers ignore and keep unknown fields, `v` is the writer's version, and a change that cannot be additive takes a
new annotation key.

Pure: no I/O, no clock — `now` is an argument.
"""

import hashlib
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from typing import Annotated, Any, Final, Literal, TypeVar

from pydantic import Field, TypeAdapter

from vigil_core import codec
from vigil_core.budget import poison
from vigil_core.budget.poison import Handoff, PoisonMark, TopicPartition

ANNOTATION: Final = "vigil.dev/budget"
"""The Lease annotation holding the ledger."""
VERSION: Final = 1
"""The version this code writes."""
MAX_BYTES: Final = 64 * 1024
"""Cap on the serialized ledger (the API server allows 256 KiB for all annotations of an object together)."""
DEFAULT_FRESHNESS: Final = 120.0
"""Seconds after which a member's published poll age no longer counts (its pod is gone or its sidecar silent).
A sidecar republishes well within it (`should_publish`)."""

LEASE_PREFIX: Final = "vigil-budget-"


def lease_name(group_id: str) -> str:
    """The name of a group's budget Lease: shared by the operator (creates it) and the sidecars (use it).

    A hash, because a group id may be longer than a Kubernetes name allows or contain characters it does not.
    """
    return LEASE_PREFIX + hashlib.sha256(group_id.encode()).hexdigest()[:16]


RefusalCause = Literal["budget", "systemic-stall", "settle", "poison-suspected"]
"""The same strings as `EvictionRefusedPayload.cause` in `vigil_core.events`."""


class LedgerDecodeError(ValueError):
    """The annotation is not a ledger this code understands (one line, naming what is wrong)."""


@dataclass(frozen=True)
class Entry:
    """One pod's last published poll age."""

    poll_age: float
    published: float
    asked: float | None = None
    """When the pod first asked for a permit for its current stall; cleared when it polls again or is granted."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Fields a newer writer added: kept so an older sidecar's rewrite does not erase them."""


@dataclass(frozen=True)
class PermitRecord:
    """A granted permit: this pod may evict this member; counts against the budget for one cooldown."""

    pod: str
    member_id: str
    granted: float
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Ledger:
    members: Mapping[str, Entry] = field(default_factory=dict)
    permits: tuple[PermitRecord, ...] = ()
    """Oldest first."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    handoffs: tuple[Handoff, ...] = ()
    """Partitions evictions handed over, oldest first (`poison`)."""
    poison: tuple[PoisonMark, ...] = ()
    """Partitions suspected of a poison pill, oldest first (`poison`)."""


@dataclass(frozen=True)
class Count:
    """The view a decision was taken on; also what a `SystemicStall` event reports."""

    stalled: int
    members: int
    """Members with a fresh entry (the requester included)."""


@dataclass(frozen=True)
class Permit:
    """Evict `member_id`; `ledger` (with the permit recorded) must be written back before acting."""

    pod: str
    member_id: str
    granted: float
    ledger: Ledger
    count: Count
    reused: bool = False
    """The same pod and member already held a permit within the cooldown (a retried request): not counted twice."""


@dataclass(frozen=True)
class Refusal:
    """No eviction now. `ledger` still carries the published age (and the settle start): write it back too."""

    cause: RefusalCause
    message: str
    ledger: Ledger
    count: Count
    retry_at: float | None = None
    """When asking again may succeed (settle over, or the oldest permit leaves the cooldown); None: no sooner."""
    suspects: tuple[PoisonMark, ...] = ()
    """For "poison-suspected": the poisoned partitions the member owns."""

    @property
    def retriable(self) -> bool:
        """Asking again later may succeed ("settle": once the group settled, "budget": once a permit leaves the
        cooldown); a systemic stall or a suspected poison pill is no reason to evict, however long it lasts."""
        return self.cause in ("settle", "budget")


# -- the rule ------------------------------------------------------------------------------------------------------


def publish(
    ledger: Ledger,
    pod: str,
    poll_age: float,
    now: float,
    *,
    stall_timeout: float | None = None,
    freshness: float = DEFAULT_FRESHNESS,
) -> Ledger:
    """Record `pod`'s poll age as of `now`; drop entries older than `freshness` (gone pods).

    The settle start (`asked`) is kept while the pod is still past half its stall timeout and cleared once it
    polls again (age at or below `stall_timeout / 2`); without `stall_timeout` it is kept.
    """
    now = _ms(now)
    old = ledger.members.get(pod)
    asked = old.asked if old is not None else None
    if stall_timeout is not None and poll_age <= stall_timeout / 2:
        asked = None
    entry = Entry(_ms(max(0.0, poll_age)), now, asked, old.extra if old is not None else {})
    members = {p: e for p, e in ledger.members.items() if p != pod and _fresh(e, now, freshness)}
    members[pod] = entry
    return replace(ledger, members=members)


def count(ledger: Ledger, stall_timeout: float, now: float, *, freshness: float = DEFAULT_FRESHNESS) -> Count:
    """Members with a fresh entry, and how many of them are past half their stall timeout."""
    fresh = [e for e in ledger.members.values() if _fresh(e, now, freshness)]
    return Count(sum(1 for e in fresh if e.poll_age > stall_timeout / 2), len(fresh))


def decide_permit(
    ledger: Ledger,
    pod: str,
    stall_timeout: float,
    now: float,
    *,
    member_id: str,
    max_concurrent: int,
    cooldown: float,
    systemic_percent: float,
    settle: float,
    freshness: float = DEFAULT_FRESHNESS,
    partitions: Collection[TopicPartition] = (),
    committed: Mapping[TopicPartition, int] | None = None,
) -> Permit | Refusal:
    """May `pod` evict its member `member_id` now? The caller has just published its own poll age.

    `partitions` are the ones the member owns and `committed` their committed offsets, as far as known.

    In order: the member owns a poisoned partition, or one an eviction handed over shortly before its stall began
    → "poison-suspected" (`poison`; first, because the member evicted before it is usually still stalled on the
    same record and would make this look systemic in a small group); more than `systemic_percent` of the fresh
    members past `stall_timeout / 2` → "systemic-stall" (the cause is outside the members; checked before the
    rest, so even a granted permit is not handed out again then); a permit this pod already holds for this member
    within the cooldown is returned again (a retry after a lost answer must not be refused by its own permit);
    less than `settle` since the pod first asked → "settle" (members that stalled at the same moment get time to
    publish); `max_concurrent` permits granted within `cooldown` → "budget"; else a permit, recorded in the
    returned ledger with a handoff per partition it hands over.
    """
    now = _ms(now)
    ledger = _current(ledger, now, cooldown, freshness, committed)
    permits, members = ledger.permits, ledger.members
    seen = count(ledger, stall_timeout, now, freshness=freshness)

    entry = members.get(pod)
    if entry is None:
        raise ValueError(f"{pod} asks for a permit without a fresh poll age of its own: publish it first")
    asked = entry.asked if entry.asked is not None else now
    ledger = replace(ledger, members={**members, pod: replace(entry, asked=asked)})

    suspicion = poison.suspect(
        ledger.handoffs, ledger.poison, partitions, _ms(entry.published - entry.poll_age), now,
        stall_timeout=stall_timeout, committed=committed,
    )  # fmt: skip
    if suspicion is not None:
        return Refusal(
            "poison-suspected",
            f"{poison.describe(suspicion.hits)}: the member stalled on a partition vigil handed over from a stalled "
            "member shortly before (a record that stalls every consumer?); not evicting it again",
            replace(ledger, handoffs=suspicion.handoffs, poison=suspicion.marks),
            seen,
            suspects=suspicion.hits,
        )
    if seen.members and seen.stalled * 100 > systemic_percent * seen.members:
        return Refusal(
            "systemic-stall",
            f"{seen.stalled} of {seen.members} members have not polled for over {stall_timeout / 2:g}s "
            f"(more than {systemic_percent:g}%): the cause is outside them, evicting would only add rebalances",
            ledger,
            seen,
        )
    for held in permits:
        if held.pod == pod and held.member_id == member_id:
            settled = replace(ledger, members={**members, pod: replace(entry, asked=None)})
            return Permit(pod, member_id, held.granted, settled, seen, reused=True)
    if now - asked < settle:
        return Refusal(
            "settle",
            f"waiting {settle:g}s from the first request for other members' poll ages before counting",
            ledger,
            seen,
            retry_at=asked + settle,
        )
    over = _over_budget(ledger, permits, seen, max_concurrent, cooldown)
    if over is not None:
        return over
    granted = PermitRecord(pod, member_id, now)
    handed = poison.released(partitions, now, stall_timeout=stall_timeout, settle=settle)
    ledger = replace(
        ledger,
        members={**ledger.members, pod: replace(entry, asked=None)},
        permits=(*permits, granted),
        handoffs=(*ledger.handoffs, *handed),
    )
    return Permit(pod, member_id, now, ledger, seen)


def decide_removal(
    ledger: Ledger,
    pod: str,
    now: float,
    *,
    member_id: str,
    proven_gone: bool,
    max_concurrent: int,
    cooldown: float,
    freshness: float = DEFAULT_FRESHNESS,
) -> Permit | Refusal:
    """May the operator remove `member_id` of `pod` now? Its removals share the sidecars' budget.

    A member whose consumer is proven gone (pod deleted, container ended, scaled down) is always permitted: it
    is leaving anyway at its session timeout, and removing it now brings that rebalance forward rather than
    adding one. Its permit is still recorded, so stall evictions within the cooldown count it. A member that may
    come back (a crash-looping static member) needs room in the budget like any eviction. No settle delay and
    no systemic-stall check: those judge poll ages, and the operator removes for other evidence.
    """
    now = _ms(now)
    ledger = _current(ledger, now, cooldown, freshness, None)
    permits, members = ledger.permits, ledger.members
    seen = Count(0, len(members))
    for held in permits:
        if held.pod == pod and held.member_id == member_id:
            return Permit(pod, member_id, held.granted, ledger, seen, reused=True)
    over = None if proven_gone else _over_budget(ledger, permits, seen, max_concurrent, cooldown)
    if over is not None:
        return over
    ledger = replace(ledger, permits=(*permits, PermitRecord(pod, member_id, now)))
    return Permit(pod, member_id, now, ledger, seen)


def _current(
    ledger: Ledger, now: float, cooldown: float, freshness: float, committed: Mapping[TopicPartition, int] | None
) -> Ledger:
    """The ledger without what has run out: permits past the cooldown, stale entries, expired handoffs and marks."""
    permits = tuple(sorted((p for p in ledger.permits if now - p.granted < cooldown), key=lambda p: p.granted))
    members = {p: e for p, e in ledger.members.items() if _fresh(e, now, freshness)}
    handoffs, marks = poison.current(ledger.handoffs, ledger.poison, now, committed)
    return replace(ledger, members=members, permits=permits, handoffs=handoffs, poison=marks)


def _over_budget(
    ledger: Ledger, permits: tuple[PermitRecord, ...], seen: Count, max_concurrent: int, cooldown: float
) -> Refusal | None:
    if len(permits) < max_concurrent:
        return None
    return Refusal(
        "budget",
        f"{len(permits)} eviction(s) already granted in this group within the {cooldown:g}s cooldown "
        f"(maxConcurrentEvictions {max_concurrent})",
        ledger,
        seen,
        retry_at=permits[-max_concurrent].granted + cooldown if max_concurrent > 0 else None,
    )


def should_publish(
    entry: Entry | None, poll_age: float, stall_timeout: float, now: float, *, refresh: float = DEFAULT_FRESHNESS / 3
) -> bool:
    """Whether a sidecar should write its poll age now: never published, last write older than `refresh`, or it
    crossed half its stall timeout either way since (a stalled peer must show up before anyone asks to evict).

    Publishing every check would be one Lease write per pod per second; this is a few per pod per minute.
    """
    if entry is None or now - entry.published >= refresh:
        return True
    return (poll_age > stall_timeout / 2) != (entry.poll_age > stall_timeout / 2)


def _fresh(entry: Entry, now: float, freshness: float) -> bool:
    return now - entry.published <= freshness  # a writer's clock ahead of ours reads as fresh, not as expired


def _ms(t: float) -> float:
    """Times and ages are kept to the millisecond, so a ledger survives serialization unchanged."""
    return round(t, 3)


# -- the annotation ------------------------------------------------------------------------------------------------


class _EntryDoc(codec.Record):
    OMITTED_WHEN_EMPTY = frozenset({"asked"})
    age: float
    at: float
    asked: float | None = None


class _PermitDoc(codec.Record):
    pod: str
    member: str
    at: float


class _HandoffDoc(codec.Record):
    topic: str
    partition: Annotated[int, Field(ge=0)]
    at: float
    until: float


class _MarkDoc(codec.Record):
    topic: str
    partition: Annotated[int, Field(ge=0)]
    offset: int | None = None
    at: float


class _LedgerDoc(codec.Record):
    """The annotation's document (the format in the module's docstring)."""

    OMITTED_WHEN_EMPTY = frozenset({"handoffs", "poison"})
    v: codec.Version
    members: dict[str, _EntryDoc] = Field(default_factory=dict)
    permits: list[_PermitDoc] = Field(default_factory=list)
    handoffs: list[_HandoffDoc] = Field(default_factory=list)
    poison: list[_MarkDoc] = Field(default_factory=list)


_LEDGER: Final = TypeAdapter(_LedgerDoc)
_Doc = TypeVar("_Doc", bound=codec.Record)


def dumps(ledger: Ledger, *, max_bytes: int = MAX_BYTES) -> str:
    """The annotation value: compact JSON of at most `max_bytes` bytes.

    Over the cap, the oldest records go first: member entries by publish time (the least recently heard pods),
    then permits (oldest first) only once no entry is left.
    """
    members = sorted(ledger.members.items(), key=lambda kv: (kv[1].published, kv[0]))
    permits = list(ledger.permits)
    handoffs, marks = list(ledger.handoffs), list(ledger.poison)
    while True:
        text = _encode(ledger.extra, members, permits, handoffs, marks)
        size = len(text.encode())
        if size <= max_bytes:
            return text
        if members:
            # drop enough at once that a huge ledger does not re-encode once per entry
            excess = max(1, (size - max_bytes) * len(members) // max(size, 1))
            del members[: min(excess, len(members))]
        elif handoffs:
            del handoffs[0]
        elif permits:
            del permits[0]
        elif marks:
            del marks[0]
        else:
            raise ValueError(f"a ledger of only unknown fields does not fit in {max_bytes} bytes")


def _encode(
    extra: Mapping[str, Any],
    members: list[tuple[str, Entry]],
    permits: list[PermitRecord],
    handoffs: list[Handoff],
    marks: list[PoisonMark],
) -> str:
    doc = _built(
        _LedgerDoc, extra, v=VERSION,
        members={pod: _built(_EntryDoc, e.extra, age=e.poll_age, at=e.published, asked=e.asked) for pod, e in members},
        permits=[_built(_PermitDoc, p.extra, pod=p.pod, member=p.member_id, at=p.granted) for p in permits],
        handoffs=[_built(_HandoffDoc, h.extra, topic=h.topic, partition=h.partition, at=h.released, until=h.until)
                  for h in handoffs],
        poison=[_built(_MarkDoc, m.extra, topic=m.topic, partition=m.partition, offset=m.offset, at=m.marked)
                for m in marks],
    )  # fmt: skip
    return codec.dumps(_LEDGER.dump_python(doc), ensure_ascii=False)


def _built(model: type[_Doc], extra: Mapping[str, Any], **known: Any) -> _Doc:
    """A record of this code's values (trusted: not validated again), the fields it did not know kept ahead."""
    return model.model_construct(**{**extra, **known})


def loads(text: str | None) -> Ledger:
    """The ledger in an annotation value; an absent or empty annotation is an empty ledger (a new Lease).
    `LedgerDecodeError` (one line, naming the field) for anything else; unknown fields are kept."""
    if not text:
        return Ledger()
    doc = codec.decode(_LEDGER, text, ANNOTATION, LedgerDecodeError)
    return Ledger(
        members={pod: Entry(e.age, e.at, e.asked, e.extra) for pod, e in doc.members.items()},
        permits=tuple(sorted((PermitRecord(p.pod, p.member, p.at, p.extra) for p in doc.permits),
                             key=lambda p: p.granted)),
        extra=doc.extra,
        handoffs=tuple(Handoff(h.topic, h.partition, h.at, h.until, h.extra) for h in doc.handoffs),
        poison=tuple(PoisonMark(m.topic, m.partition, m.offset, m.at, m.extra) for m in doc.poison),
    )  # fmt: skip
