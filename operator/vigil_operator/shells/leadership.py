"""The operator's leader election (domain.leadership) run against the real Lease.

One `Leadership` per operator process: `run()` is the election loop; each stretch of leadership is a `Term`, a
`shells.base.StopFlag` set when leadership is lost, released or the loop stops — so work run under it gives way as a
resync does today when kopf pauses it. The wiring, in short:

    leadership = Leadership(kube, namespace, LEASE_NAME, pod_name)
    election = asyncio.create_task(leadership.run())
    while True:                                  # e.g. one resync loop per Kafka cluster
        term = await leadership.leading()
        await resync_loop(stop=term)             # gives way once term.is_set()
    ...                                          # on a graceful exit, once the loops have given way:
    await leadership.release()                   # a standby takes over at its next try

An error from the API server (unreachable, 403, a timeout) is one log line (again only when it changes) and means
"not leader": a standby stays one, a leader leads on only until its renew deadline. Nothing here raises out of
`run()`: no crash loop, and the compare-and-swap and the deadlines (domain.leadership) keep it to one leader.

RBAC: `get`, `create` and `patch` on `leases` (coordination.k8s.io) in the Lease's namespace — an update is a JSON
merge patch under the resourceVersion read (`KubeApi.update_lease`), not a PUT.

The Lease calls run in a thread pool of their own (one thread): a renewal never waits behind the resyncs' calls
in asyncio's default pool, and a write left running by a cancelled loop lands before the release's write.
"""

import asyncio
import enum
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

from vigil_operator.domain.leadership import (
    DEFAULT_TIMING,
    LeaseRecord,
    Lost,
    Observation,
    StandBy,
    Timing,
    decide,
    leads,
    lease_spec,
    observe,
    record_of,
    released,
)
from vigil_operator.k8s.api import KubeApi, KubeError
from vigil_operator.shells.base import Callbacks

log = logging.getLogger(__name__)

Outcome = Literal["written", "conflict", "failed"]


class TermEnd(enum.Enum):
    """Why a term ended: its stop flag's reason (`pacing.stop_reason` words: "leadership lost", ...)."""

    LEADERSHIP_LOST = enum.auto()
    """No renewal succeeded within the renew deadline, or another replica holds the Lease."""
    LEADERSHIP_RELEASED = enum.auto()
    """`release()`: a graceful exit."""
    ELECTION_STOPPED = enum.auto()
    """The election loop was cancelled without a release: the Lease stays ours until it expires."""


class Term:
    """One stretch of leadership: a `shells.base.StopFlag`, set when it ends. `is_set()` reads the clock itself, so
    work that checks it stops at the renew deadline even if the event loop is late to end the term."""

    def __init__(self, number: int, deadline: float, clock: Callable[[], float]) -> None:
        self.number = number
        """1 for the first term of this `Leadership`, then counting up."""
        self.why = ""
        """Once ended: in words, why."""
        self._deadline = deadline
        self._clock = clock
        self._ended: TermEnd | None = None
        self._event = asyncio.Event()
        self._callbacks = Callbacks()

    def is_set(self) -> bool:
        return self._ended is not None or self._clock() >= self._deadline

    @property
    def reason(self) -> object:
        """A `TermEnd` once set, else None."""
        if self._ended is None and self.is_set():
            return TermEnd.LEADERSHIP_LOST
        return self._ended

    async def wait(self) -> object:
        await self._event.wait()
        return self._ended

    def on_set(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Called when the term ends (`_finish`)."""
        return self._callbacks.add(callback)

    def _extend(self, deadline: float) -> None:
        self._deadline = deadline

    def _finish(self, reason: TermEnd, why: str) -> None:
        if self._ended is None:
            self._ended, self.why = reason, why
            self._event.set()
            self._callbacks.fire()


class Leadership:
    """Leader election for one operator replica on the Lease `namespace`/`name`, as `identity`."""

    def __init__(
        self,
        kube: KubeApi,
        namespace: str,
        name: str,
        identity: str,
        *,
        timing: Timing = DEFAULT_TIMING,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.kube = kube
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.timing = timing
        self._clock = clock
        self._wall = wall
        self._where = f"leader election on Lease {namespace}/{name} as {identity}"
        self._who = f"leader election as {identity}"
        """For a KubeError's line: it names the Lease itself."""
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="vigil-leadership")
        self._seen: Observation | None = None
        """The record last read or written, and when first seen as it is; None: none known or none stored."""
        self._fresh = False
        """`_seen` is current enough to decide on (just read, or our own write): no read first."""
        self._renewed_at: float | None = None
        self._term: Term | None = None
        self._terms = 0
        self._timer: asyncio.TimerHandle | None = None
        self._led = asyncio.Event()
        """Set while a term runs."""
        self._task: asyncio.Task[None] | None = None
        self._released = False
        self._trouble: str | None = None
        self._standing_by_for: str | None = None
        self.reads = 0
        self.writes = 0
        """Successful writes (creates, takeovers, renewals, the release)."""
        self.conflicts = 0
        """Writes the API server refused with 409 (another replica wrote first)."""
        self.failures = 0
        """Requests that failed otherwise (unreachable, a timeout, 403, ...)."""

    # -- what the rest of the operator reads ---------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self._term is not None and not self._term.is_set()

    @property
    def term(self) -> Term | None:
        """The current term while this replica leads, else None."""
        return self._term if self.is_leader else None

    @property
    def holder(self) -> str | None:
        """Who holds the Lease as last read or written (None: free, or not known yet)."""
        return self._seen.record.holder if self._seen is not None else None

    async def leading(self) -> Term:
        """Wait until this replica leads; its term (already set if it ended meanwhile: check before each step)."""
        while True:
            term = self._term
            if term is not None and not term.is_set():
                return term
            if term is not None:
                await term.wait()  # its deadline passed: the timer ends it at once
            else:
                await self._led.wait()

    # -- the loop ------------------------------------------------------------------------------------------------

    async def run(self) -> None:
        """The election loop (one per `Leadership`), until `release()` or cancellation. Cancelled without a release
        (the operator exits abruptly), the term ends but the Lease stays ours until it expires, as after a crash."""
        if self._released:
            return
        self._task = asyncio.current_task()
        conflicts_in_a_row = 0
        try:
            while True:
                if not self._fresh and not await self._read():
                    await self._sleep_until(self._clock() + self.timing.retry_period)
                    continue
                now = self._clock()
                decision = decide(
                    self._seen.record if self._seen is not None else None,
                    self._seen.at if self._seen is not None else now,
                    self.identity,
                    now,
                    wall=self._wall(),
                    renewed_at=self._renewed_at,
                    timing=self.timing,
                )
                if isinstance(decision, Lost):
                    self._end(TermEnd.LEADERSHIP_LOST, decision.why)
                    continue
                if isinstance(decision, StandBy):
                    self._fresh = False
                    if decision.holder != self._standing_by_for:
                        self._standing_by_for = decision.holder
                        log.info("%s: %s leads; standing by", self._where, decision.holder)
                    await self._sleep_until(decision.until)
                    continue
                sent = self._clock()
                outcome = await self._write(decision.record, sent)
                if outcome == "written":
                    conflicts_in_a_row = 0
                    await self._sleep_until(sent + self.timing.retry_period)
                elif outcome == "conflict":  # read again at once: who won decides; twice in a row, breathe first
                    conflicts_in_a_row += 1
                    if conflicts_in_a_row > 1:
                        await self._sleep_until(self._clock() + self.timing.retry_period)
                else:
                    await self._sleep_until(self._clock() + self.timing.retry_period)
        finally:
            self._end(TermEnd.ELECTION_STOPPED, "the election loop stopped")

    async def release(self) -> None:
        """Stop leading and hand the Lease over (a graceful exit): the term ends at once, the loop stops, and the
        holder is cleared under compare-and-swap, so a standby takes over at its next try. Call it once the work
        under the term has given way. If the release cannot be written, the Lease expires as after a crash. Once:
        a second call does nothing."""
        if self._released:
            return
        self._released = True
        self._end(TermEnd.LEADERSHIP_RELEASED, "released")
        task = self._task
        if task is not None and task is not asyncio.current_task() and not task.done():
            task.cancel()
            await asyncio.wait({task})
        record = self._seen.record if self._seen is not None else None
        try:
            for _attempt in range(3):
                if record is None or record.holder != self.identity:
                    return
                if await self._update(released(record, self._wall())) is not None:
                    self.writes += 1
                    log.info("%s: released", self._where)
                    return
                self.conflicts += 1  # a write of ours left running by the cancelled loop landed first: read it
                stored = await self.kube.lease(self.namespace, self.name, **self._request())
                record = record_of(stored) if stored is not None else None
            log.warning("%s: not released (the Lease kept changing); it expires after the lease duration", self._where)
        except KubeError as exc:
            log.warning("%s: not released: %s; it expires after the lease duration", self._who, exc)
        finally:
            self._executor.shutdown(wait=False)

    # -- steps ---------------------------------------------------------------------------------------------------

    async def _read(self) -> bool:
        try:
            stored = await self.kube.lease(self.namespace, self.name, **self._request())
        except KubeError as exc:
            self._failed(exc)
            return False
        self._answered()
        self.reads += 1
        self._seen = None if stored is None else observe(self._seen, record_of(stored), self._clock())
        self._fresh = True
        return True

    async def _write(self, record: LeaseRecord, sent: float) -> Outcome:
        self._fresh = False
        try:
            if record.version:
                stored = await self._update(record)
            else:
                stored = await self.kube.create_lease(self.namespace, self.name, lease_spec(record), **self._request())
        except KubeError as exc:
            if exc.status == 404 and record.version:  # deleted since we read it: read again (and create it)
                return "conflict"
            self._failed(exc)
            return "failed"
        self._answered()
        if stored is None:
            self.conflicts += 1
            return "conflict"
        self.writes += 1
        now = self._clock()
        self._seen = Observation(record_of(stored), now)
        self._fresh = True
        if leads(sent, now, self.timing):  # else the answer came too late to lead on; the next attempt renews
            self._lead(sent)
        return "written"

    def _lead(self, sent: float) -> None:
        """A write of ours sent at `sent` succeeded: lead until the renew deadline after it."""
        term = self._term
        if term is not None and term.is_set():  # its deadline passed before the timer ended it
            self._end(TermEnd.LEADERSHIP_LOST, f"no renewal succeeded for {self.timing.renew_deadline:g}s")
            term = None
        self._renewed_at = sent
        deadline = sent + self.timing.renew_deadline
        if term is None:
            self._terms += 1
            term = self._term = Term(self._terms, deadline, self._clock)
            self._led.set()
            self._standing_by_for = None
            record = self._seen.record if self._seen is not None else None
            transitions = record.transitions if record is not None else 0
            log.info("%s: leading (term %d, leaseTransitions %d)", self._where, term.number, transitions)
        else:
            term._extend(deadline)  # noqa: SLF001 - Term's owner
        if self._timer is not None:
            self._timer.cancel()
        self._timer = asyncio.get_running_loop().call_later(max(0.0, deadline - self._clock()), self._expire, term)

    def _expire(self, term: Term) -> None:
        """The timer at a term's renew deadline: end it (unless a renewal moved the deadline meanwhile)."""
        if term is not self._term:
            return
        if term.is_set():
            self._end(TermEnd.LEADERSHIP_LOST, f"no renewal succeeded for {self.timing.renew_deadline:g}s")
        elif self._renewed_at is not None:
            delay = max(0.0, self._renewed_at + self.timing.renew_deadline - self._clock())
            self._timer = asyncio.get_running_loop().call_later(delay, self._expire, term)

    def _end(self, reason: TermEnd, why: str) -> None:
        self._renewed_at = None
        term, self._term = self._term, None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if term is None:
            return
        self._led.clear()
        term._finish(reason, why)  # noqa: SLF001 - Term's owner
        level = logging.WARNING if reason is TermEnd.LEADERSHIP_LOST else logging.INFO
        log.log(level, "%s: stopped leading (term %d): %s", self._where, term.number, why)

    def _failed(self, exc: KubeError) -> None:
        self.failures += 1
        message = str(exc)
        if message != self._trouble:
            self._trouble = message
            state = "leading until the renew deadline" if self.is_leader else "not leading"
            log.warning("%s: %s; %s", self._who, message, state)

    def _answered(self) -> None:
        if self._trouble is not None:
            self._trouble = None
            log.info("%s: the API server answers again", self._where)

    async def _update(self, record: LeaseRecord) -> dict[str, Any] | None:
        """Write `record` under its version (compare-and-swap); None on 409."""
        spec = lease_spec(record)
        return await self.kube.update_lease(
            self.namespace, self.name, spec, resource_version=record.version, **self._request()
        )

    def _request(self) -> dict[str, Any]:
        return {"timeout": self.timing.request_timeout, "executor": self._executor}

    async def _sleep_until(self, until: float) -> None:
        await asyncio.sleep(max(0.0, until - self._clock()))
