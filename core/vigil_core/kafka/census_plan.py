"""The pure half of a census round (`vigil_core.kafka.census`): which batched requests to send for which groups
given what the brokers listed, and how the answers become, per asked group, one observation or one miss.

Plain values in, plain values out, no I/O: the wire (`vigil_core.kafka.wire.Exchange`) builds the answer types
below from the brokers' responses, the census sends what `plan` says, and `observe_all` (per coordinator) and
`resolve_unlisted` (the groups no broker listed) merge the answers.

What an observation must equal, and why the plan can leave requests out:
- `GroupClient.describe(group, subscriptions=False)`: librdkafka's describe asks ConsumerGroupDescribe and falls
  back to DescribeGroups; a group no coordinator knows comes back Dead, type classic, no assignor, no members, at
  the coordinator FindCoordinator names (measured on Kafka 4.1). A classic group listed Empty or Dead has no members
  and no protocol to describe (the coordinator answers an empty protocol for both), so it needs no DescribeGroups.
  A share or streams group, which librdkafka describes as not found (Dead, classic), is described by
  ShareGroupDescribe or StreamsGroupDescribe, as `GroupClient.describe` then asks them too.
- `GroupClient.committed_offsets`: OffsetFetch with require_stable, every partition the group committed for.
- `GroupClient.end_offsets` of the partitions the members are assigned: ListOffsets read_committed latest (the LSO).
- `GroupClient.group_timings` for a KIP-848 group: DescribeConfigs of the GROUP resource.
"""

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Generic, TypeVar

from vigil_core.kafka import model
from vigil_core.kafka.model import GroupState, GroupTimings, GroupType, GroupView, MemberView, TopicPartitionRef
from vigil_core.kafka.outcomes import TRANSPORT_ERROR, Api, Outcome, classify, code_of

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)

GROUPS_PER_REQUEST: Final = 500
"""Groups in one batched request (DescribeGroups, ConsumerGroupDescribe, OffsetFetch, DescribeConfigs,
FindCoordinator). Kafka sets no limit, so the bound is the answer's size and the coordinator's time on one request:
500 groups of a dozen committed partitions answer ~0.2 MB, of a thousand each ~15 MB, under kafka-python's 100 MB
frame limit either way, while 10,000 groups on one broker still cost only 20 OffsetFetch (the operator's budget
is ≤ 100 requests per round)."""

UNSTABLE_OFFSET_COMMIT: Final = code_of("UNSTABLE_OFFSET_COMMIT")
_NOT_IN_ANSWER: Final = code_of("UNKNOWN_SERVER_ERROR")
_NO_LEADER: Final = code_of("LEADER_NOT_AVAILABLE")


def chunks(items: Sequence[T], size: int = GROUPS_PER_REQUEST) -> tuple[tuple[T, ...], ...]:
    """`items` in order, cut into batches of at most `size` (none for no items)."""
    if size < 1:
        raise ValueError(f"a batch holds at least one item, not {size}")
    return tuple(tuple(items[i : i + size]) for i in range(0, len(items), size))


# -- answers, as the wire reads them -------------------------------------------------------------------------


@dataclass(frozen=True)
class Failure:
    """A request that got no usable answer for a group: which request, to which broker, the error code."""

    api: Api
    node: int
    code: int
    detail: str = ""
    """What went wrong in words (the library's exception, the broker's error message), "" when the code says it."""

    def line(self) -> str:
        name = classify(self.api, self.code).name
        return f"{self.api.value} to broker {self.node}: {name}" + (f" ({self.detail})" if self.detail else "")


@dataclass(frozen=True)
class ListedGroup:
    """One group of a ListGroups answer."""

    group_id: str
    state: str
    """As the broker names it: Stable, Empty, PreparingRebalance, Reconciling, ..."""
    type: str = ""
    """classic, consumer, share, streams; "" from a broker older than ListGroups v5 (Kafka 3.8): classic then."""


@dataclass(frozen=True)
class Listing:
    """One broker's ListGroups answer: the groups it coordinates, or why it gave none."""

    node: int
    groups: tuple[ListedGroup, ...] = ()
    failure: Failure | None = None


@dataclass(frozen=True)
class Batch(Generic[T_co]):
    """The answer to one batched request: per group, or the failure of the whole request."""

    items: Mapping[str, T_co] = field(default_factory=dict)
    failure: Failure | None = None


@dataclass(frozen=True)
class Coordinator:
    """FindCoordinator v4's answer for one group."""

    code: int
    node: int
    message: str = ""


@dataclass(frozen=True)
class Description:
    """One group as DescribeGroups (classic) or ConsumerGroupDescribe (KIP-848) describes it."""

    code: int
    state: str = ""
    assignor: str = ""
    """DescribeGroups' protocol (the assignor: range, ...) or ConsumerGroupDescribe's server-side assignor."""
    members: tuple[MemberView, ...] = ()
    """Assignments sorted, as `GroupClient.describe` gives them; no subscriptions."""
    epoch: int | None = None
    """The group epoch of a KIP-848, share or streams group (None for a classic group)."""
    member_epochs: Mapping[str, int] = field(default_factory=dict)
    """member id -> its epoch, KIP-848, share and streams groups (-2: a static member that left for now)."""
    message: str = ""


@dataclass(frozen=True)
class Offsets:
    """One group's OffsetFetch answer."""

    code: int
    committed: Mapping[TopicPartitionRef, int] = field(default_factory=dict)
    """The partitions with a committed offset (≥ 0), as `GroupClient.committed_offsets` gives them."""
    unstable: tuple[TopicPartitionRef, ...] = ()
    """Partitions answered UNSTABLE_OFFSET_COMMIT: a transaction's offsets pending (require_stable)."""


@dataclass(frozen=True)
class ShareOffsets:
    """One share group's DescribeShareGroupOffsets answer."""

    code: int
    lag: Mapping[TopicPartitionRef, int] = field(default_factory=dict)
    """Per share-partition the broker knows the lag of: its records not yet delivered and acknowledged."""
    message: str = ""


@dataclass(frozen=True)
class GroupConfigs:
    """One GROUP resource's DescribeConfigs answer: config name -> (value, not set on the group itself)."""

    code: int
    values: Mapping[str, tuple[str | None, bool]] = field(default_factory=dict)
    message: str = ""


@dataclass(frozen=True)
class Leaders:
    """A Metadata answer for some topics: the leader of each partition that has one, the error of each topic or
    partition that has none."""

    leaders: Mapping[TopicPartitionRef, int] = field(default_factory=dict)
    topic_errors: Mapping[str, int] = field(default_factory=dict)
    partition_errors: Mapping[TopicPartitionRef, int] = field(default_factory=dict)


# -- what a round gives per group ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Observation:
    """One group observed in a round: what `GroupClient` gives for it, from batched requests."""

    view: GroupView
    committed: Mapping[TopicPartitionRef, int]
    end_offsets: Mapping[TopicPartitionRef, int]
    """read_committed end offsets (LSO) of the partitions the members are assigned."""
    group_epoch: int | None = None
    """KIP-848, share and streams groups."""
    timings: GroupTimings | None = None
    """KIP-848 only; None too when DescribeConfigs failed (the timings are advice, the observation stands)."""
    member_epochs: Mapping[str, int] = field(default_factory=dict)
    """KIP-848, share and streams groups: member id -> its epoch (-2: a static member that left for now)."""
    share_lag: Mapping[TopicPartitionRef, int] = field(default_factory=dict)
    """Share groups only: per share-partition, the records not yet delivered and acknowledged, as the broker counts
    them (KIP-1226); empty too when the broker could not say (advice, like `timings`: the observation stands)."""
    seconds: float = 0.0
    """From the round's start to this group's last answer: a silent broker shows here as its timeout, on its own
    groups only."""


@dataclass(frozen=True)
class Miss:
    """A group the round could not observe: the request that failed for it, its broker, its error code."""

    api: Api
    node: int
    """The broker that failed (-1: none answered)."""
    code: int
    line: str
    """One line naming the broker, the request and the error."""
    seconds: float = 0.0

    @property
    def outcome(self) -> Outcome:
        return classify(self.api, self.code)


def miss(failure: Failure) -> Miss:
    return Miss(failure.api, failure.node, failure.code, failure.line())


@dataclass(frozen=True)
class CensusRound:
    """Every asked group id -> its observation or miss, and what the round cost."""

    groups: Mapping[str, Observation | Miss]
    requests: int
    """Requests sent to brokers in the round (ones not sent because their broker had failed already not counted)."""
    seconds: float

    @property
    def observed(self) -> dict[str, Observation]:
        return {g: o for g, o in self.groups.items() if isinstance(o, Observation)}

    @property
    def missed(self) -> dict[str, Miss]:
        return {g: o for g, o in self.groups.items() if isinstance(o, Miss)}


# -- planning -------------------------------------------------------------------------------------------------


def listed_here(asked: Iterable[str], listing: Listing) -> tuple[ListedGroup, ...]:
    """The asked groups one broker lists (in the order asked): the groups it coordinates."""
    mine = {g.group_id: g for g in listing.groups}
    return tuple(mine[g] for g in dict.fromkeys(asked) if g in mine)


def unlisted(asked: Iterable[str], listings: Iterable[Listing]) -> tuple[str, ...]:
    """The asked groups no broker lists (in the order asked)."""
    seen = {g.group_id for listing in listings for g in listing.groups}
    return tuple(g for g in dict.fromkeys(asked) if g not in seen)


def preferred(first: Observation | Miss, second: Observation | Miss) -> Observation | Miss:
    """Of two results for one group (two brokers listed it for a moment, mid-move): an observation over a miss,
    else the first (the lower node's). The next round sees the group at one coordinator."""
    return second if isinstance(first, Miss) and isinstance(second, Observation) else first


def listed_type(group: ListedGroup) -> GroupType:
    """The group's type; a broker that does not say (ListGroups < v5, before KIP-848 was GA) has classic groups."""
    return model.by_name(GroupType, group.type or GroupType.CLASSIC.value, GroupType.UNKNOWN)


def not_found(group_id: str, coordinator: int) -> GroupView:
    """What `GroupClient.describe` says of a group its coordinator does not know (Kafka 4.1, librdkafka 2.16)."""
    return GroupView(group_id, GroupState.DEAD, GroupType.CLASSIC, "", coordinator, ())


@dataclass(frozen=True)
class CoordinatorPlan:
    """The batched requests one coordinator gets for the asked groups it lists."""

    node: int
    classic: tuple[tuple[str, ...], ...]
    """DescribeGroups batches: classic groups that may have members."""
    consumer: tuple[tuple[str, ...], ...]
    """ConsumerGroupDescribe batches: every KIP-848 group (its epoch and assignor, even Empty)."""
    share: tuple[tuple[str, ...], ...]
    """ShareGroupDescribe batches: share groups that may have members."""
    streams: tuple[tuple[str, ...], ...]
    """StreamsGroupDescribe batches: streams groups that may have members."""
    offsets: tuple[tuple[str, ...], ...]
    """OffsetFetch batches: every group that exists."""
    configs: tuple[tuple[str, ...], ...]
    """DescribeConfigs batches: the KIP-848 groups' timings."""
    share_offsets: tuple[tuple[str, ...], ...]
    """DescribeShareGroupOffsets batches: every share group that exists (their lag, even Empty)."""
    settled: Mapping[str, GroupView]
    """Groups described by the listing alone: classic, share and streams groups listed Empty or Dead, and types
    vigil does not know (Dead, as describe says)."""
    types: Mapping[str, GroupType]

    @property
    def requests(self) -> int:
        described = len(self.classic) + len(self.consumer) + len(self.share) + len(self.streams)
        return described + len(self.offsets) + len(self.configs) + len(self.share_offsets)

    @property
    def fetched(self) -> frozenset[str]:
        """The groups OffsetFetch asks for (the others do not exist: nothing committed)."""
        return frozenset(g for batch in self.offsets for g in batch)

    @property
    def lagged(self) -> frozenset[str]:
        """The share groups DescribeShareGroupOffsets asks for."""
        return frozenset(g for batch in self.share_offsets for g in batch)


def plan(node: int, listed: Sequence[ListedGroup], size: int = GROUPS_PER_REQUEST) -> CoordinatorPlan:
    """The batched requests for the groups `node` lists: a classic group with members is described by
    DescribeGroups, a KIP-848 one by ConsumerGroupDescribe (and DescribeConfigs for its timings), a share or streams
    group with members by its own describe; a classic, share or streams group listed Empty or Dead by its listing
    alone. Every group that exists gets its offsets fetched: share groups by DescribeShareGroupOffsets, since their
    offsets are kept apart (`__share_group_state`: OffsetFetch answers none); a listed group of a type vigil does not
    know is what describe calls it, not found."""
    classic: list[str] = []
    consumer: list[str] = []
    share: list[str] = []
    streams: list[str] = []
    offsets: list[str] = []
    share_offsets: list[str] = []
    settled: dict[str, GroupView] = {}
    types: dict[str, GroupType] = {}
    described_by = {GroupType.CLASSIC: classic, GroupType.SHARE: share, GroupType.STREAMS: streams}
    for group in listed:
        kind = types[group.group_id] = listed_type(group)
        state = model.by_name(GroupState, group.state, GroupState.UNKNOWN)
        if kind is GroupType.CONSUMER:
            consumer.append(group.group_id)
        elif kind not in described_by:
            settled[group.group_id] = not_found(group.group_id, node)
            continue
        elif state in (GroupState.EMPTY, GroupState.DEAD):
            settled[group.group_id] = GroupView(group.group_id, state, kind, "", node, ())
        else:
            described_by[kind].append(group.group_id)
        if state is not GroupState.DEAD:
            (share_offsets if kind is GroupType.SHARE else offsets).append(group.group_id)
    return CoordinatorPlan(
        node=node,
        classic=chunks(classic, size),
        consumer=chunks(consumer, size),
        share=chunks(share, size),
        streams=chunks(streams, size),
        offsets=chunks(offsets, size),
        configs=chunks(consumer, size),
        share_offsets=chunks(share_offsets, size),
        settled=settled,
        types=types,
    )


def merge_batches(batches: Iterable[Batch[T]]) -> Batch[T]:
    """The answers to one request's chunks as one: every chunk's items, each failed chunk's groups failed."""
    items: dict[str, T] = {}
    failure: Failure | None = None
    for batch in batches:
        items.update(batch.items)
        failure = failure or batch.failure
    return Batch(items, failure)


def answer_for(batch: Batch[T], group_id: str, api: Api, node: int) -> T | Failure:
    """The group's item of a batched answer, or the failure that stands for it."""
    item = batch.items.get(group_id)
    if item is not None:
        return item
    if batch.failure is not None:
        return batch.failure
    return Failure(api, node, _NOT_IN_ANSWER, "the answer left the group out")


def view_of(group_id: str, kind: GroupType, node: int, answer: Description | Failure) -> GroupView | Failure:
    """The GroupView `GroupClient.describe` makes of the same answer: the same state mapping (librdkafka's state,
    ConsumerGroupDescribe's where librdkafka names none), members and assignments."""
    api = Api.DESCRIBE_GROUP
    if isinstance(answer, Failure):
        return answer
    if answer.code != 0:
        return Failure(api, node, answer.code, answer.message)
    reported = model.by_name(GroupState, answer.state, GroupState.UNKNOWN)
    described = (answer.code, answer.state) if kind is GroupType.CONSUMER else None
    state = model.group_state(kind, reported, described)
    return GroupView(group_id, state, kind, answer.assignor, node, answer.members)


def committed_of(node: int, answer: Offsets | Failure) -> Mapping[TopicPartitionRef, int] | Failure:
    if isinstance(answer, Failure):
        return answer
    if answer.code != 0:
        return Failure(Api.OFFSET_FETCH, node, answer.code)
    if answer.unstable:
        shown = ", ".join(map(str, answer.unstable[:3]))
        return Failure(Api.OFFSET_FETCH, node, UNSTABLE_OFFSET_COMMIT, f"pending transactional offsets on {shown}")
    return answer.committed


def share_lag_of(answer: ShareOffsets | Failure) -> Mapping[TopicPartitionRef, int]:
    """The share group's lag per share-partition; none when the broker could not say (the lag is advice)."""
    if isinstance(answer, Failure) or answer.code != 0:
        return {}
    return answer.lag


def timings_of(answer: GroupConfigs | Failure | None) -> GroupTimings | None:
    if answer is None or isinstance(answer, Failure) or answer.code != 0:
        return None
    return model.group_timings(answer.values)


def assigned(view: GroupView) -> tuple[TopicPartitionRef, ...]:
    return tuple(sorted({tp for m in view.members for tp in m.assignment}))


def by_leader(
    node: int, partitions: Iterable[TopicPartitionRef], leaders: Leaders | Failure
) -> tuple[dict[int, tuple[TopicPartitionRef, ...]], dict[TopicPartitionRef, Failure]]:
    """Partitions per leader (one ListOffsets each), and the partitions without one, with why (`node`: the broker
    that answered the Metadata)."""
    grouped: dict[int, list[TopicPartitionRef]] = {}
    failed: dict[TopicPartitionRef, Failure] = {}
    for tp in sorted(set(partitions)):
        if isinstance(leaders, Failure):
            failed[tp] = leaders
        elif tp in leaders.leaders:
            grouped.setdefault(leaders.leaders[tp], []).append(tp)
        else:
            code = leaders.topic_errors.get(tp.topic) or leaders.partition_errors.get(tp) or _NO_LEADER
            failed[tp] = Failure(Api.METADATA, node, code, f"no leader for {tp}")
    return {n: tuple(tps) for n, tps in grouped.items()}, failed


def ends_of(
    partitions: Sequence[TopicPartitionRef], ends: Mapping[TopicPartitionRef, int | Failure]
) -> dict[TopicPartitionRef, int] | Failure:
    """The end offsets of `partitions`, or the failure of the first without one."""
    out: dict[TopicPartitionRef, int] = {}
    for tp in partitions:
        end = ends.get(tp)
        if end is None:
            return Failure(Api.LIST_OFFSETS, -1, _NOT_IN_ANSWER, f"no end offset for {tp} in the answer")
        if isinstance(end, Failure):
            return end
        out[tp] = end
    return out


def observe(
    view: GroupView | Failure,
    committed: Mapping[TopicPartitionRef, int] | Failure,
    ends: Mapping[TopicPartitionRef, int] | Failure,
    description: Description | None = None,
    timings: GroupTimings | None = None,
    *,
    share_lag: Mapping[TopicPartitionRef, int] | None = None,
) -> Observation | Miss:
    """One group's answers as one observation, or the miss of the first that failed (describe, offsets, ends)."""
    if isinstance(view, Failure):
        return miss(view)
    if isinstance(committed, Failure):
        return miss(committed)
    if isinstance(ends, Failure):
        return miss(ends)
    epoch = description.epoch if description is not None else None
    epochs = description.member_epochs if description is not None else {}
    timings = timings if view.type is GroupType.CONSUMER else None
    lag = share_lag if share_lag is not None and view.type is GroupType.SHARE else {}
    return Observation(view, committed, ends, epoch, timings, epochs, lag)


def views(todo: CoordinatorPlan, described: Batch[Description]) -> dict[str, GroupView | Failure]:
    """Every group of the plan as described (or settled by its listing), or the failure of its describe."""
    out: dict[str, GroupView | Failure] = {}
    for group_id, kind in todo.types.items():
        settled = todo.settled.get(group_id)
        if settled is not None:
            out[group_id] = settled
        else:
            answer = answer_for(described, group_id, Api.DESCRIBE_GROUP, todo.node)
            out[group_id] = view_of(group_id, kind, todo.node, answer)
    return out


def observe_all(
    todo: CoordinatorPlan,
    described: Batch[Description],
    committed: Batch[Offsets],
    configs: Batch[GroupConfigs],
    ends: Mapping[TopicPartitionRef, int | Failure],
    *,
    share_offsets: Batch[ShareOffsets] | None = None,
) -> dict[str, Observation | Miss]:
    """One coordinator's answers merged: an observation or a miss for each group of its plan."""
    node, fetched, lagged = todo.node, todo.fetched, todo.lagged
    out: dict[str, Observation | Miss] = {}
    for group_id, view in views(todo, described).items():
        offsets: Mapping[TopicPartitionRef, int] | Failure = {}
        if group_id in fetched:
            offsets = committed_of(node, answer_for(committed, group_id, Api.OFFSET_FETCH, node))
        group_ends = view if isinstance(view, Failure) else ends_of(assigned(view), ends)
        timings = timings_of(answer_for(configs, group_id, Api.DESCRIBE_CONFIGS, node))
        lag = None
        if group_id in lagged:
            lag = share_lag_of(answer_for(share_offsets or Batch(), group_id, Api.SHARE_OFFSETS, node))
        out[group_id] = observe(view, offsets, group_ends, described.items.get(group_id), timings, share_lag=lag)
    return out


def resolve_unlisted(
    unlisted: Sequence[str], coordinators: Batch[Coordinator] | None, listings: Mapping[int, Listing]
) -> dict[str, Observation | Miss]:
    """The asked groups no answering broker listed. A group whose coordinator answered ListGroups without it does
    not exist there: Dead, as `GroupClient.describe` says. One whose coordinator did not answer is a miss naming
    that broker: it may well exist. `coordinators` is None when no broker answered ListGroups (nobody to ask)."""
    out: dict[str, Observation | Miss] = {}
    if coordinators is None:
        failures = [li.failure for li in sorted(listings.values(), key=lambda li: li.node) if li.failure]
        first = failures[0] if failures else Failure(Api.LIST_GROUPS, -1, TRANSPORT_ERROR, "no broker known")
        line = "no broker answered ListGroups: " + "; ".join(f.line() for f in failures or [first])
        return {g: Miss(Api.LIST_GROUPS, -1, first.code, line) for g in unlisted}
    for group_id in unlisted:
        found = answer_for(coordinators, group_id, Api.FIND_COORDINATOR, -1)
        if isinstance(found, Failure):
            out[group_id] = miss(found)
            continue
        if found.code != 0:
            out[group_id] = miss(Failure(Api.FIND_COORDINATOR, -1, found.code, found.message))
            continue
        listing = listings.get(found.node)
        if listing is None:
            detail = f"broker {found.node} coordinates the group but is not in the client's metadata yet"
            out[group_id] = Miss(Api.LIST_GROUPS, found.node, TRANSPORT_ERROR, detail)
        elif listing.failure is not None:
            out[group_id] = miss(listing.failure)
        else:
            out[group_id] = Observation(not_found(group_id, found.node), {}, {})
    return out
