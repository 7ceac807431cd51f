"""Deadlines shaped like the Java consumer's `Heartbeat` (poll timer, session timer, backoff), `now` passed in.

Kafka's `Heartbeat` keeps three `Timer`s that read a shared clock and are mutated in place; here each is a frozen
value whose transitions return a new one, so the same inputs always give the same decision and tests need no clock.

- `PollTimer` is the consumer's poll timer (`max.poll.interval.ms`), with vigil's stall timeout: reset by each poll
  the app reports. A rebalance restarts it (`with_restart`), so the app gets a whole stall timeout once the group is
  Stable again.
- `SessionView` is the session timer seen from outside: reset by every answer the coordinator gives; when it expires
  while requests fail, the coordinator is forgotten and looked up again (the seed's `markCoordinatorUnknown` after
  "session timed out without receiving a heartbeat response").
- `CheckTimer` paces requests: the next check after a success comes one interval later, after failed attempts it
  comes after `vigil_core.kafka.retry.backoff` (doubling, capped).
"""

import math
from dataclasses import dataclass, replace

from vigil_core.kafka import retry


def first_at(start: float, timeout: float) -> float:
    """The first moment `t` with `t - start >= timeout`, exactly in floating point.

    `start + timeout` may round down by one unit, and then an age computed at that moment (`now - last_poll`) is a
    hair short of the timeout: an action "at the deadline" would be, as the properties measure it, early. Every
    deadline here comes from this function, and `now >= deadline` is then the same as `now - start >= timeout`."""
    at = start + timeout
    while at - start < timeout:
        at = math.nextafter(at, math.inf)
    return at


@dataclass(frozen=True)
class PollTimer:
    """When the app last polled, and from when the stall timeout counts (a rebalance may move that later)."""

    last_poll: float
    """When the latest poll was reported (received: never earlier than the poll itself, so never acts early)."""
    stall_timeout: float
    counting_from: float
    """max(last poll, the first Stable view after a rebalance): the stall timeout counts from here."""

    @classmethod
    def started(cls, now: float, stall_timeout: float) -> "PollTimer":
        return cls(last_poll=now, stall_timeout=stall_timeout, counting_from=now)

    @property
    def deadline(self) -> float:
        return first_at(self.counting_from, self.stall_timeout)

    def expired(self, now: float) -> bool:
        return now >= self.deadline

    def poll_age(self, now: float) -> float:
        """Seconds since the last poll (what the reason text reports), whatever restarted the count."""
        return max(0.0, now - self.last_poll)

    def with_poll(self, now: float) -> "PollTimer":
        return replace(self, last_poll=now, counting_from=max(now, self.counting_from))

    def with_restart(self, now: float) -> "PollTimer":
        """Count the stall timeout afresh from `now` (the group is Stable again after a rebalance)."""
        return replace(self, counting_from=max(now, self.counting_from))


@dataclass(frozen=True)
class SessionView:
    """The coordinator's last answer, and how long without one before it is presumed gone."""

    last_answer: float
    session_timeout: float

    def expired(self, now: float) -> bool:
        return now >= self.last_answer + self.session_timeout

    def with_answer(self, now: float) -> "SessionView":
        return replace(self, last_answer=max(now, self.last_answer))


@dataclass(frozen=True)
class CheckTimer:
    """When the next request of one kind may go out: an interval after a success, a backoff after failures."""

    next_at: float = -math.inf
    failures: int = 0
    """Consecutive failed attempts; 0 after a success."""

    def due(self, now: float) -> bool:
        return now >= self.next_at

    def may_retry(self, now: float) -> bool:
        """True unless a failure's backoff is still running (a success does not hold back an urgent request)."""
        return self.failures == 0 or self.due(now)

    def with_success(self, now: float, interval: float) -> "CheckTimer":
        return CheckTimer(next_at=now + interval, failures=0)

    def with_failure(self, now: float, *, base: float, cap: float) -> "CheckTimer":
        return CheckTimer(next_at=now + retry.backoff(self.failures, base=base, cap=cap), failures=self.failures + 1)

    def with_due(self, now: float) -> "CheckTimer":
        """Due at once (an observation made the last answer worthless), keeping any failure backoff."""
        return self if self.failures else replace(self, next_at=min(self.next_at, now))
