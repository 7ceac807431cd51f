"""What every shell of a resync shares: its stop flag and steps (domain.pacing), how it posts a Kubernetes Event,
how it writes a status."""

import asyncio
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
    are the waits before a resync acts (its turn, a Secret, the broker); its steps are checked by `step`."""
    if stop is None:
        return await work
    task = asyncio.ensure_future(work)
    if stop.is_set():
        task.cancel()
        raise SyncStoppedError("before it acted")
    flag = asyncio.ensure_future(_flag(stop))
    try:
        await asyncio.wait({task, flag}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        flag.cancel()
    if task.done():
        return task.result()
    task.cancel()
    raise SyncStoppedError("before it acted")


async def acquire(stop: StopFlag | None, lock: asyncio.Lock | asyncio.Semaphore) -> None:
    """`lock` unless `stop` is set first, as `unless_stopped(stop, lock.acquire())`, but at once and with no task
    when it is free: a round begins thousands of resyncs, and nearly all find their lock and a turn free."""
    if stop is not None and stop.is_set():
        raise SyncStoppedError("before it acted")
    if not lock.locked():
        await lock.acquire()  # free: returns without suspending
        return
    await unless_stopped(stop, lock.acquire())


async def _flag(stop: StopFlag) -> None:
    await stop.wait()


def dump(status: ConsumerGroupStatus) -> dict[str, Any]:
    """The status as the operator applies it (without the report job's `report`)."""
    return status.model_dump(mode="json", by_alias=True, exclude_none=True, exclude={"report"})
