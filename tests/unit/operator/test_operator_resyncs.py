"""The resync loops (vigil_operator.resyncs) run with plain callables for the resync: one round at a time per Kafka
cluster, a request answered at once, a deletion or the end of the leadership stopping the resync in flight and
forgetting the group, and a standby that exits at once."""

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

from vigil_operator.resyncs import DELETED, Resyncs, Stop
from vigil_operator.shells.base import StopFlag

Key = tuple[str, str]
INTERVAL = 0.2
BOUND = 5.0
"""Seconds any wait here may take at most."""


@dataclass
class Leader:
    """Terms handed out on demand: the test starts and ends them."""

    terms: "asyncio.Queue[Stop]" = field(default_factory=asyncio.Queue)

    async def leading(self) -> StopFlag:
        return await self.terms.get()


@dataclass
class Loops:
    records: dict[Key, str]
    """key → its cluster (the record is the cluster's name here)."""
    synced: list[Key] = field(default_factory=list)
    forgotten: list[Key] = field(default_factory=list)
    stops: dict[Key, StopFlag] = field(default_factory=dict)
    running: dict[str, int] = field(default_factory=dict)
    most: dict[str, int] = field(default_factory=dict)
    hold: asyncio.Event | None = None
    """Set: syncs return at once; clear: they wait for it (or their stop)."""
    in_round: list[int] = field(default_factory=list)
    """Per resync in `synced`: how many rounds had ended when it began (one cluster: the same within a round)."""

    def make(self) -> Resyncs[Key, str]:
        async def sync(key: Key, cluster: str, stop: StopFlag) -> None:
            began = resyncs.rounds
            self.running[cluster] = self.running.get(cluster, 0) + 1
            self.most[cluster] = max(self.most.get(cluster, 0), self.running[cluster])
            self.stops[key] = stop
            try:
                if self.hold is not None:
                    await asyncio.wait(
                        {asyncio.ensure_future(self.hold.wait()), asyncio.ensure_future(stop.wait())},
                        return_when=asyncio.FIRST_COMPLETED,
                    )
                self.synced.append(key)
                self.in_round.append(began)
            finally:
                self.running[cluster] -= 1

        resyncs: Resyncs[Key, str] = Resyncs(sync, lambda cluster: cluster, lambda key, _: self.forgotten.append(key),
                                             interval=INTERVAL)  # fmt: skip
        resyncs.indexed(lambda: dict(self.records))
        return resyncs


async def until(check: Callable[[], bool], what: str) -> None:
    async def poll() -> None:
        while not check():
            await asyncio.sleep(0.01)

    try:
        await asyncio.wait_for(poll(), BOUND)
    except TimeoutError:
        raise AssertionError(f"not within {BOUND} s: {what}") from None


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(test())  # type: ignore[arg-type]


@contextlib.asynccontextmanager
async def leading(loops: Loops, interval: float = INTERVAL) -> AsyncIterator[Resyncs[Key, str]]:
    """The loops run, this replica leading one term, until the block ends."""
    leader, resyncs = Leader(), loops.make()
    resyncs._interval = interval  # noqa: SLF001 - the pace each test needs
    task = asyncio.create_task(resyncs.run(leader))
    await leader.terms.put(Stop())
    try:
        yield resyncs
    finally:
        task.cancel()


def test_every_group_resyncs_at_once_then_each_interval_one_round_at_a_time_per_cluster() -> None:
    async def test() -> None:
        loops = Loops({("a", "g1"): "k1", ("a", "g2"): "k1", ("b", "g3"): "k2"})
        async with leading(loops) as resyncs:
            await until(lambda: len(loops.synced) >= 3, "the first round of each cluster")
            assert sorted(loops.synced[:3]) == sorted(loops.records)
            await until(lambda: loops.synced.count(("b", "g3")) >= 3, "two more rounds, one per interval")
            assert resyncs.rounds >= 3

    run(test)


def test_a_request_resyncs_at_once_after_the_round_in_flight() -> None:
    async def test() -> None:
        loops = Loops({("a", "g1"): "k1"})
        async with leading(loops, 3600.0) as resyncs:
            await until(lambda: len(loops.synced) == 1, "the first resync")
            resyncs.request(("a", "g1"))
            await until(lambda: len(loops.synced) == 2, "the requested resync")

    run(test)


def test_a_deletion_stops_the_resync_in_flight_and_forgets_the_group() -> None:
    async def test() -> None:
        loops = Loops({("a", "g1"): "k1", ("a", "g2"): "k1"}, hold=asyncio.Event())
        async with leading(loops) as resyncs:
            await until(lambda: len(loops.stops) == 2, "both resyncs in flight")
            del loops.records[("a", "g1")]
            resyncs.deleted(("a", "g1"))
            assert loops.stops[("a", "g1")].is_set()
            assert loops.stops[("a", "g1")].reason == DELETED
            assert not loops.stops[("a", "g2")].is_set()
            assert loops.forgotten == [("a", "g1")]

    run(test)


def test_the_end_of_the_leadership_stops_every_resync_and_the_next_term_starts_afresh() -> None:
    async def test() -> None:
        loops = Loops({("a", "g1"): "k1", ("b", "g2"): "k2"}, hold=asyncio.Event())
        leader, resyncs = Leader(), loops.make()
        task = asyncio.create_task(resyncs.run(leader))
        first = Stop()
        await leader.terms.put(first)
        await until(lambda: len(loops.stops) == 2, "both resyncs in flight")
        first.set("leadership lost")
        await until(lambda: sorted(loops.forgotten) == sorted(loops.records), "every group forgotten")
        assert all(stop.is_set() for stop in loops.stops.values())
        assert resyncs.rounds == 2
        loops.stops.clear()
        assert loops.hold is not None
        loops.hold.set()
        await leader.terms.put(Stop())
        await until(lambda: len(loops.stops) == 2, "both groups resynced at once in the next term")
        task.cancel()

    run(test)


def test_a_standby_exits_at_once() -> None:
    async def test() -> None:
        loops = Loops({("a", "g1"): "k1"})
        resyncs = loops.make()
        task = asyncio.create_task(resyncs.run(Leader()))
        await asyncio.sleep(0.05)
        resyncs.exit()
        await asyncio.wait_for(task, BOUND)
        assert loops.synced == []

    run(test)


def test_a_cluster_never_runs_two_rounds_at_once() -> None:
    async def test() -> None:
        loops = Loops({("a", f"g{i}"): "k1" for i in range(5)})
        async with leading(loops, 0.0):
            await until(lambda: len(loops.synced) >= 25, "five rounds")
            assert loops.most["k1"] <= 5  # one round's groups at most, never two rounds' worth

    run(test)


def test_a_group_added_while_nothing_is_due_resyncs_once_asked() -> None:
    """A loop with nothing due sleeps until asked: the event of a new ConsumerGroup asks (handlers)."""

    async def test() -> None:
        loops = Loops({})
        async with leading(loops) as resyncs:
            await asyncio.sleep(0.05)
            loops.records[("a", "new")] = "k1"
            resyncs.request(("a", "new"))
            await until(lambda: loops.synced == [("a", "new")], "the new group resynced")

    run(test)


def test_a_rounds_resyncs_are_all_in_flight_together() -> None:
    """No gate in the loop: a round's observations can meet in one census (the sync paces its Kubernetes work)."""

    async def test() -> None:
        loops = Loops({("a", f"g{i}"): "k1" for i in range(50)}, hold=asyncio.Event())
        async with leading(loops):
            await until(lambda: loops.running.get("k1") == 50, "all 50 resyncs in flight at once")

    run(test)


def test_a_clusters_groups_stay_one_round_whenever_their_resyncs_end_or_are_asked_for() -> None:
    async def test() -> None:
        loops = Loops({("a", f"g{i}"): "k1" for i in range(3)})
        async with leading(loops, 0.5) as resyncs:
            await until(lambda: len(loops.synced) == 3, "the first round")
            resyncs.request(("a", "g1"))
            await until(lambda: len(loops.synced) == 4, "the requested resync")
            await until(lambda: len(loops.synced) >= 7, "the next periodic round")
            assert loops.in_round[3] not in (loops.in_round[2], loops.in_round[4])  # the request: a round of its own
            assert sorted(loops.synced[4:7]) == sorted(loops.records)
            assert len(set(loops.in_round[4:7])) == 1  # the asked group is back in its cluster's one round

    run(test)
