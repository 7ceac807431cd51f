"""A resync's waits under its stop flag (shells.base.unless_stopped, acquire): the flag interrupts them without a task
per wait, and a cancellation from outside stays a cancellation."""

import asyncio

import pytest

from vigil_operator.resyncs import Stop
from vigil_operator.shells.base import SyncStoppedError, acquire, unless_stopped


def run(coro: object) -> object:
    return asyncio.run(coro)  # type: ignore[arg-type]


def test_the_work_s_result_when_the_flag_stays_down() -> None:
    async def main() -> int:
        stop = Stop()
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_soon(future.set_result, 7)
        return await unless_stopped(stop, future)

    assert run(main()) == 7


def test_a_flag_set_during_the_wait_interrupts_it_and_cancels_the_work() -> None:
    async def main() -> tuple[bool, bool]:
        stop = Stop()
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_soon(stop.set, "resource deleted")
        with pytest.raises(SyncStoppedError):
            await unless_stopped(stop, future)
        task = asyncio.current_task()
        assert task is not None
        return future.cancelled(), task.cancelling() == 0

    assert run(main()) == (True, True)


def test_a_flag_already_set_begins_no_work() -> None:
    started = []

    async def work() -> None:
        started.append(1)

    async def main() -> None:
        stop = Stop()
        stop.set("operator exiting")
        with pytest.raises(SyncStoppedError):
            await unless_stopped(stop, work())

    run(main())
    assert started == []


def test_a_cancellation_from_outside_is_not_taken_for_the_flag() -> None:
    async def main() -> tuple[bool, int]:
        stop = Stop()
        waiting = asyncio.create_task(unless_stopped(stop, asyncio.Event().wait()))
        await asyncio.sleep(0)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        stop.set("resource deleted")  # after the wait ended: calls nothing of it
        return waiting.cancelled(), len(stop._callbacks._calls)  # noqa: SLF001

    assert run(main()) == (True, 0)


def test_the_flag_set_after_the_wait_ended_leaves_the_task_alone() -> None:
    async def main() -> str:
        stop = Stop()
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        future.set_result("done")
        result = await unless_stopped(stop, future)
        stop.set("leadership lost")
        await asyncio.sleep(0)  # a cancellation left behind would land here
        return result

    assert run(main()) == "done"


def test_turns_are_taken_in_order_and_a_stopped_waiter_leaves_the_queue() -> None:
    async def main() -> list[str]:
        turns = asyncio.Semaphore(1)
        order: list[str] = []
        stops = {name: Stop() for name in "abc"}

        async def one(name: str) -> None:
            try:
                await acquire(stops[name], turns)
            except SyncStoppedError:
                order.append(f"{name} stopped")
                return
            order.append(name)
            await asyncio.sleep(0)
            turns.release()

        await turns.acquire()
        tasks = [asyncio.create_task(one(n)) for n in "abc"]
        await asyncio.sleep(0)
        stops["b"].set("resource deleted")
        turns.release()
        await asyncio.gather(*tasks)
        return order

    assert run(main()) == ["b stopped", "a", "c"]
