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


def let_time_pass(seconds: float, *, since: float, why: str) -> float:
    """Wait until `seconds` have passed since the monotonic moment `since`; return the seconds passed by then.

    Not a wait for a condition, and no substitute for one: for a claim about time itself, where no event marks the
    moment (a member kept through two session timeouts; nothing happening for a session after the last heartbeat; an
    act timed after another). An absence asserted after it is only as good as `seconds` is long: where a positive
    signal can show the wrong act would have happened by now, wait for that instead. `why` says what the time lets
    happen (printed: a test's output shows every such wait)."""
    remaining = since + seconds - time.monotonic()
    print(f"letting {max(remaining, 0.0):.1f}s pass ({seconds:g}s in all): {why}")
    if remaining > 0:
        time.sleep(remaining)
    return time.monotonic() - since
