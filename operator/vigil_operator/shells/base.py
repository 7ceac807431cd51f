"""What every shell of a resync shares: its stop flag and steps (domain.pacing), how it posts a Kubernetes Event,
how it writes a status."""

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from vigil_operator.domain import pacing
from vigil_operator.domain.reconcile import Notice
from vigil_operator.domain.status import ConsumerGroupStatus

Post = Callable[[Notice], None]
"""Posts a Kubernetes Event on the ConsumerGroup being resynced."""
T = TypeVar("T")


class StopFlag(Protocol):
    """A resync's stop flag (`resyncs.Stop`): set when the replica stops leading, the ConsumerGroup is deleted or the
    operator exits."""

    def is_set(self) -> bool: ...

    @property
    def reason(self) -> object: ...

    def wait(self) -> Awaitable[object]: ...

    def on_set(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call `callback` once, when the flag is set; returns what forgets it."""
        ...


class Callbacks:
    """What a stop flag calls when it is set (`StopFlag.on_set`): a wait under the flag is interrupted from there,
    with no task of its own — a round begins thousands of resyncs, each with several waits."""

    def __init__(self) -> None:
        self._calls: set[Callable[[], None]] = set()

    def add(self, callback: Callable[[], None]) -> Callable[[], None]:
        self._calls.add(callback)
        return functools.partial(self._calls.discard, callback)

    def fire(self) -> None:
        calls, self._calls = self._calls, set()
        for call in calls:
            call()


class SyncStoppedError(Exception):
    """The resync gave way to its stop flag; the message says where (e.g. "before it acted")."""


def stopping(stop: StopFlag | None) -> str | None:
    """The stop reason in words once the flag is set (domain.pacing), None while it is not."""
    return None if stop is None or not stop.is_set() else pacing.stop_reason(stop.reason)


def step(stop: StopFlag | None, where: str) -> None:
    """Raise SyncStoppedError(where) unless the resync may begin its next step (domain.pacing.may_begin_step)."""
    if not pacing.may_begin_step(stopping=stopping(stop)):
        raise SyncStoppedError(where)


async def unless_stopped(stop: StopFlag | None, work: Awaitable[T]) -> T:
    """`work`, unless `stop` is set first (or already): then `work` is cancelled and SyncStoppedError raised. These
    are the waits before a resync acts (its turn, a Secret, the broker); its steps are checked by `step`. The flag
    interrupts the wait by cancelling the task that waits (as `asyncio.timeout` does), so no task is made per wait."""
    if stop is None:
        return await work
    if stop.is_set():
        _abandon(work)
        raise SyncStoppedError("before it acted")
    task = asyncio.current_task()
    if task is None:  # awaited outside a task (never in the operator): nothing to interrupt
        return await work
    interrupted = False

    def interrupt() -> None:
        nonlocal interrupted
        interrupted = True
        task.cancel()

    forget = stop.on_set(interrupt)
    try:
        return await work
    except asyncio.CancelledError:
        if interrupted and task.uncancel() == 0:  # ours alone: not a cancellation from outside
            raise SyncStoppedError("before it acted") from None
        raise
    finally:
        forget()


async def acquire(stop: StopFlag | None, lock: asyncio.Lock | asyncio.Semaphore) -> None:
    """`lock` unless `stop` is set first, as `unless_stopped(stop, lock.acquire())`."""
    await unless_stopped(stop, lock.acquire())


def _abandon(work: Awaitable[object]) -> None:
    """Work that will not be awaited: a coroutine closed (never started), a future cancelled."""
    if asyncio.iscoroutine(work):
        work.close()
    elif isinstance(work, asyncio.Future):
        work.cancel()


def dump(status: ConsumerGroupStatus) -> dict[str, Any]:
    """The status as the operator applies it (without the report job's `report`)."""
    return status.model_dump(mode="json", by_alias=True, exclude_none=True, exclude={"report"})
