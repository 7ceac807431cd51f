"""The resync loops: one per Kafka cluster, run by the replica that leads (domain.pacing decides what is due).

Nothing is kept on the ConsumerGroups: no kopf daemon or timer per object, so no finalizer (deleting a ConsumerGroup,
its namespace or the CRD never waits for the operator, running, stopped or uninstalled) and no task per object. The
handlers feed the loops: the groups once the operator's catalog has them all (handlers, catalog: no round sees half
of them), spec changes and pods' events ask for resyncs, a deletion stops the group's resync in flight and drops what
was kept of it. A replica that stops leading stops every resync in flight: each
gives way at its next step (shells.base), and the next leader starts every group afresh.
"""

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Hashable, Mapping
from typing import Generic, Protocol, TypeVar

from vigil_operator.domain import pacing
from vigil_operator.shells.base import Callbacks, StopFlag

log = logging.getLogger(__name__)
K = TypeVar("K", bound=Hashable)
R = TypeVar("R")
PLAN_QUIET = 0.1
"""Seconds the loop waits after being woken before it plans: a burst of events (kopf's listing of thousands of
ConsumerGroups, a rollout's pod events) is planned once, not once per event (a plan reads every group)."""
EXITING = "operator exiting"
DELETED = "resource deleted"


class Stop:
    """A stop flag (shells.base.StopFlag): set once, with its reason."""

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self._reason = ""
        self._callbacks = Callbacks()

    def set(self, reason: str) -> None:
        if not self._event.is_set():
            self._reason = reason
            self._event.set()
            self._callbacks.fire()

    def is_set(self) -> bool:
        return self._event.is_set()

    @property
    def reason(self) -> object:
        return self._reason

    def wait(self) -> Awaitable[object]:
        return self._event.wait()

    def on_set(self, callback: Callable[[], None]) -> Callable[[], None]:
        return self._callbacks.add(callback)


class Leader(Protocol):
    async def leading(self) -> StopFlag:
        """Until this replica leads; then the flag of its term, set when it stops leading."""
        ...


class Always:
    """`--standalone`: the one replica leads from its start until it exits."""

    def __init__(self) -> None:
        self._term = Stop()

    async def leading(self) -> StopFlag:
        if self._term.is_set():  # ended: no other term ever
            await asyncio.get_running_loop().create_future()
        return self._term

    def end(self) -> None:
        self._term.set(EXITING)


Sync = Callable[[K, R, StopFlag], Awaitable[None]]
"""One group's resync with its record as the index holds it; gives way to the flag."""


class Resyncs(Generic[K, R]):
    def __init__(self, sync: Sync[K, R], cluster_of: Callable[[R], str], forget: Callable[[K, R], None], *,
                 interval: float, clock: Callable[[], float] | None = None) -> None:  # fmt: skip
        """`cluster_of`: the Kafka cluster a record names (its loop); `forget`: drop what is kept of a group whose
        resyncs end here (deleted, leadership lost, exiting)."""
        self._sync, self._cluster_of, self._forget = sync, cluster_of, forget
        self._interval = interval
        self._clock = clock or asyncio.get_running_loop().time
        self._records: Callable[[], Mapping[K, R]] | None = None
        self._indexed = asyncio.Event()
        self._wake = asyncio.Event()
        self._resynced: set[K] = set()
        """The groups a round took in since this replica began leading."""
        self._cadence: dict[str, float] = {}
        """Per cluster: when its last periodic round began (domain.pacing)."""
        self._clusters: dict[K, tuple[R, str]] = {}
        """Per group: the cluster of its record, as long as the index holds that record (read once per record)."""
        self._known: dict[K, R] = {}
        self._requested: set[K] = set()
        self._inflight: dict[K, Stop] = {}
        self._rounds: dict[str, asyncio.Task[None]] = {}
        self._exiting = asyncio.Event()
        self.rounds = 0

    # -- fed by kopf's handlers --------------------------------------------------------------------------------
    def indexed(self, records: Callable[[], Mapping[K, R]]) -> None:
        """The groups are all known: `records` reads them (the catalog) from now on."""
        if self._records is None:
            self._records = records
            self._indexed.set()
            self._wake.set()

    def request(self, key: K) -> None:
        """A resync of `key` now (after the one in flight, if any)."""
        self._requested.add(key)
        self._wake.set()

    def deleted(self, key: K) -> None:
        """The group is gone: its resync in flight gives way, what was kept of it goes."""
        stop = self._inflight.get(key)
        if stop is not None:
            stop.set(DELETED)
        self._drop(key)
        self._wake.set()

    # -- the loops ------------------------------------------------------------------------------------------------
    def exit(self) -> None:
        """The operator exits: once the current term ends, no other begins here (a standby returns at once)."""
        self._exiting.set()

    async def run(self, leader: Leader) -> None:
        """Lead when this replica may, run the rounds while it does; until the operator exits (`exit`, then the
        term ends) or cancelled."""
        await first_of(self._indexed.wait(), self._exiting.wait(), timeout=None)
        while not self._exiting.is_set():
            leading = asyncio.ensure_future(leader.leading())
            await first_of(leading, self._exiting.wait(), timeout=None)
            if not leading.done() or leading.cancelled():
                return
            term = leading.result()
            if term.is_set():
                continue
            log.info("leading: the resync loops begin")
            try:
                await self._lead(term)
            finally:
                await self._end(pacing.stop_reason(term.reason) if term.is_set() else EXITING)
            log.info("not leading any more (%s): the resync loops stop", pacing.stop_reason(term.reason))

    async def _lead(self, term: StopFlag) -> None:
        while not term.is_set():
            self._wake.clear()
            records = self._current()
            paces = {key: pacing.Pace(self._cluster(key, record), key in self._resynced, key in self._requested)
                     for key, record in records.items()}  # fmt: skip
            now = self._clock()
            plan = pacing.plan(paces, cadence=self._cadence, busy=self._rounds.keys(), interval=self._interval, now=now)
            for cluster, keys in plan.due.items():
                if cluster in plan.periodic:
                    self._cadence[cluster] = now
                self._requested.difference_update(keys)
                self._resynced.update(keys)
                task = asyncio.create_task(self._round([(key, records[key]) for key in keys], term))
                self._rounds[cluster] = task
                task.add_done_callback(functools.partial(self._round_ended, cluster))
            await first_of(self._wake.wait(), term.wait(), timeout=plan.wake_in)
            if self._wake.is_set():
                await first_of(term.wait(), timeout=PLAN_QUIET)

    def _cluster(self, key: K, record: R) -> str:
        known = self._clusters.get(key)
        if known is None or known[0] is not record:
            known = self._clusters[key] = (record, self._cluster_of(record))
        return known[1]

    def _current(self) -> Mapping[K, R]:
        """The groups in the index now; those that left it (deleted while no event said so) are dropped."""
        records = dict(self._records()) if self._records is not None else {}
        for key in [k for k in self._known if k not in records]:
            self._drop(key)
        self._known.update(records)
        clusters = {cluster for _, cluster in self._clusters.values()}
        for cluster in [c for c in self._cadence if c not in clusters]:  # its last group left it
            del self._cadence[cluster]
        return records

    def _round_ended(self, cluster: str, _: "asyncio.Task[None]") -> None:
        self._rounds.pop(cluster, None)
        self.rounds += 1
        self._wake.set()

    async def _round(self, due: list[tuple[K, R]], term: StopFlag) -> None:
        """One round of a cluster: its due groups resynced together (each gives way to its own stop). All begin at
        once, so their observations meet in one census (`brokers`); the sync paces its own Kubernetes work."""

        async def one(key: K, record: R) -> None:
            if term.is_set() or key not in self._known:
                return
            stop = self._inflight[key] = Stop()
            try:
                await self._sync(key, record, stop)
            except Exception:  # one resync's bug must not end the loop: logged, and on to the next
                log.exception("resync of %s failed", key)
            finally:
                self._inflight.pop(key, None)

        await asyncio.gather(*(one(key, record) for key, record in due))

    async def _end(self, reason: str) -> None:
        """The leadership ended: every resync in flight gives way, the rounds end, every group is forgotten (the
        next leadership, here or elsewhere, starts them afresh from their status)."""
        for stop in list(self._inflight.values()):
            stop.set(reason)
        rounds = list(self._rounds.values())
        if rounds:
            await asyncio.wait(rounds)
        for key in list(self._known):
            self._drop(key)
        self._cadence.clear()

    def _drop(self, key: K) -> None:
        record = self._known.pop(key, None)
        self._resynced.discard(key)
        self._clusters.pop(key, None)
        self._requested.discard(key)
        if record is not None:
            self._forget(key, record)


async def first_of(*waits: Awaitable[object], timeout: float | None) -> None:
    """Until one of `waits` ends, or `timeout` seconds (None: no timeout)."""
    tasks = [asyncio.ensure_future(w) for w in waits]
    try:
        await asyncio.wait(tasks, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
