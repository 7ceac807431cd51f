"""A census round: many consumer groups observed with a number of broker requests that grows with the brokers and
the coordinators, not with the groups: the operator observes thousands of groups every resync period.

`GroupClient` observes one group with ~3 requests (describe, committed offsets, end offsets), one group after the
other; at 10,000 groups that is 30,000 requests a round. A round here asks every broker at once which groups it
coordinates (ListGroups: their coordinator, type and state, no FindCoordinator per group), then per coordinator, in
parallel with the others, sends one batched request of each kind for all its asked groups. Each observation equals
what `GroupClient` gives for the same group (`census_plan` says how); a group the round could not observe is a miss
naming the broker and the request that failed.

Request budget of one round (B brokers; per coordinator c: its asked classic groups with members k_c, KIP-848
groups n_c, share and streams groups with members s_c and t_c, groups that exist g_c (share groups left out), share
groups that exist h_c, leaders L_c of its groups' assigned partitions; chunk = GROUPS_PER_REQUEST, 500):

    requests = B                                   ListGroups, one per broker
             + Σ_c ⌈k_c/chunk⌉                     DescribeGroups (classic groups listed Empty or Dead need none)
             + Σ_c ⌈n_c/chunk⌉                     ConsumerGroupDescribe
             + Σ_c (⌈s_c/chunk⌉ + ⌈t_c/chunk⌉)     ShareGroupDescribe, StreamsGroupDescribe (those with members)
             + Σ_c ⌈g_c/chunk⌉                     OffsetFetch v8+ (many groups per request)
             + Σ_c ⌈n_c/chunk⌉                     DescribeConfigs of the KIP-848 groups (their timings)
             + Σ_c ⌈h_c/chunk⌉                     DescribeShareGroupOffsets v1 of the share groups (their lag)
             + Σ_c (1 Metadata + L_c ListOffsets)  when c's groups have assigned partitions
             + ⌈u/chunk⌉                           FindCoordinator v4, only for the u asked groups no broker listed

so on one broker a round is 8 requests for up to 500 groups of each kind (measured: 8 for 5 groups and for 60,
tests/integration/test_census.py), and 21 + 6 = 27 for 10,000 groups of which a few hundred live (20 OffsetFetch;
the operator's budget is ≤ 100 a round). Each term is 0 when there is nothing to ask. The Metadata, ListOffsets and
DescribeConfigs are per coordinator rather than once per round so that nothing of a coordinator's groups waits for
another coordinator: a silent broker (SIGSTOPped) costs its own requests their timeout — its groups are misses naming
it — and never delays the others' observations (`Observation.seconds` shows it). With one broker this is one of each.

Why a group is Dead and not a miss: when its coordinator (batched FindCoordinator) answered ListGroups without it,
as `GroupClient.describe` says of a group that does not exist. When its coordinator did not answer, the group may
exist: a miss. A group created between the ListGroups and the FindCoordinator is Dead for this round only.
FindCoordinator is asked for every unlisted group, even when every broker answered: describe names the coordinator of
a group that does not exist, and ListGroups silently leaves out the groups the principal may not Describe, which
FindCoordinator answers GROUP_AUTHORIZATION_FAILED (a miss, where describe raises that) instead of Dead.

Not retried within a round: a round is cheap and the next one asks again; the misses say what to retry.
"""

import dataclasses
import time
from collections.abc import Callable, Iterable

from vigil_core.kafka import census_plan as plan
from vigil_core.kafka.census_plan import GROUPS_PER_REQUEST, Batch, CensusRound, Failure, Listing, Miss, Observation
from vigil_core.kafka.model import GroupView, TopicPartitionRef
from vigil_core.kafka.wire import Exchange, GroupWire, Pending

Result = Observation | Miss


class Census:
    """Batched observations of many groups; blocking, use from one thread (as `GroupWire`)."""

    def __init__(
        self,
        wire: GroupWire,
        *,
        groups_per_request: int = GROUPS_PER_REQUEST,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`wire`'s request timeout bounds every request of a round: a silent broker's groups are missed after it."""
        self._wire = wire
        self._size = groups_per_request
        self._clock = clock

    def round(self, group_ids: Iterable[str]) -> CensusRound:
        """Observe every group in `group_ids` once: an Observation or a Miss for each."""
        asked = tuple(dict.fromkeys(group_ids))
        started = self._clock()
        if not asked:
            return CensusRound({}, 0, 0.0)

        async def work(exchange: Exchange) -> tuple[dict[str, Result], int]:
            return await self._round(exchange, asked, started), exchange.sent

        results, requests = self._wire.exchange(work)
        return CensusRound({g: results[g] for g in asked}, requests, self._clock() - started)

    async def _round(self, ex: Exchange, asked: tuple[str, ...], started: float) -> dict[str, Result]:
        listings = {node: ex.start(ex.list_groups(node)) for node in ex.brokers()}
        coordinators = [ex.start(self._coordinator(ex, listing, asked, started)) for listing in listings.values()]
        rest = ex.start(self._unlisted(ex, listings, asked, started))
        results: dict[str, Result] = {}
        for chain in coordinators:
            for group_id, result in (await chain).items():
                results[group_id] = plan.preferred(results[group_id], result) if group_id in results else result
        results.update(await rest)
        return results

    def _stamp(self, result: Result, started: float) -> Result:
        return dataclasses.replace(result, seconds=self._clock() - started)

    async def _coordinator(
        self, ex: Exchange, pending: Pending[Listing], asked: tuple[str, ...], started: float
    ) -> dict[str, Result]:
        """One coordinator's asked groups: described, their offsets and timings read, all requests at once."""
        listing = await pending
        if listing.failure is not None:
            return {}  # its groups are unlisted: `_unlisted` names this broker for them
        node = listing.node
        todo = plan.plan(node, plan.listed_here(asked, listing), self._size)
        if not todo.types:
            return {}
        classic = [ex.start(ex.describe_classic(node, batch)) for batch in todo.classic]
        consumer = [ex.start(ex.describe_consumer(node, batch)) for batch in todo.consumer]
        share = [ex.start(ex.describe_share(node, batch)) for batch in todo.share]
        streams = [ex.start(ex.describe_streams(node, batch)) for batch in todo.streams]
        offsets = [ex.start(ex.committed(node, batch)) for batch in todo.offsets]
        configs = [ex.start(ex.group_configs(node, batch)) for batch in todo.configs]
        shared = [ex.start(ex.share_offsets(node, batch)) for batch in todo.share_offsets]
        described = plan.merge_batches([await b for b in classic + consumer + share + streams])
        ends = await self._end_offsets(ex, node, plan.views(todo, described).values())
        committed = plan.merge_batches([await b for b in offsets])
        timings = plan.merge_batches([await b for b in configs])
        lags = plan.merge_batches([await b for b in shared])
        results = plan.observe_all(todo, described, committed, timings, ends, share_offsets=lags)
        return {group_id: self._stamp(result, started) for group_id, result in results.items()}

    @staticmethod
    async def _end_offsets(
        ex: Exchange, node: int, views: Iterable[GroupView | Failure]
    ) -> dict[TopicPartitionRef, int | Failure]:
        """The end offsets of every partition the coordinator's groups are assigned: one Metadata to the coordinator
        (it answered, so it is alive), then one ListOffsets per leader, the leaders at once."""
        partitions = {tp for v in views if isinstance(v, GroupView) for tp in plan.assigned(v)}
        if not partitions:
            return {}
        leaders = await ex.leaders(node, sorted({tp.topic for tp in partitions}))
        grouped, ends = plan.by_leader(node, partitions, leaders)
        out: dict[TopicPartitionRef, int | Failure] = dict(ends)
        for answer in [ex.start(ex.end_offsets(leader, tps)) for leader, tps in grouped.items()]:
            out.update(await answer)
        return out

    async def _unlisted(
        self, ex: Exchange, pending: dict[int, Pending[Listing]], asked: tuple[str, ...], started: float
    ) -> dict[str, Result]:
        """The asked groups no broker listed, once every broker answered ListGroups or failed to: Dead where their
        coordinator answered, misses where it did not."""
        listings = {node: await listing for node, listing in pending.items()}
        missing = plan.unlisted(asked, listings.values())
        if not missing:
            return {}
        answering = [node for node, listing in sorted(listings.items()) if listing.failure is None]
        found: Batch[plan.Coordinator] | None = None
        if answering:
            node = answering[0]
            batches = [ex.start(ex.find_coordinators(node, batch)) for batch in plan.chunks(missing, self._size)]
            found = plan.merge_batches([await b for b in batches])
        resolved = plan.resolve_unlisted(missing, found, listings)
        return {g: self._stamp(r, started) for g, r in resolved.items()}


__all__ = ["Census", "CensusRound", "Miss", "Observation"]
