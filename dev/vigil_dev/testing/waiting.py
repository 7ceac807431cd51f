"""Polling with deadlines instead of sleeps (a test rule): fail with what was awaited and the last value seen."""

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class WaitTimeoutError(AssertionError):
    """A condition did not hold in time; the message says which, and what was last observed."""


def wait_for(
    probe: Callable[[], T],
    accept: Callable[[T], bool] = bool,
    *,
    timeout: float,
    what: str,
    interval: float = 0.2,
) -> T:
    """Call `probe` until `accept` takes its result; return that result."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while True:
        last = probe()
        if accept(last):
            return last
        if time.monotonic() >= deadline:
            raise WaitTimeoutError(f"{what}: not within {timeout:.1f}s (last: {last!r})"[:2000])
        time.sleep(interval)


def bound(floor: float, slack: float = 3.0) -> float:
    """The time bound a test allows for something whose floor is `floor` seconds (test rule: × 1.5 + slack)."""
    return floor * 1.5 + slack
