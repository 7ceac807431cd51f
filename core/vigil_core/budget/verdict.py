"""What the sidecar does with a budget answer that is no permit. Pure.

The watchdog asked to evict (`Evict`); the budget refused (`ledger.Refusal`) or could not be consulted
(`lease_api.BudgetUnavailable`). Each says itself whether asking again may succeed (`retriable`); here it becomes
the watchdog's answer to its Evict — retry with backoff, or end the episode — under its own cause, and whether it
is told (an `eviction-refused` event and a log line: every cause but "settle", which is the budget's ordinary wait
for a group to settle).
"""

import dataclasses
from typing import Protocol

from vigil_core.kafka.outcomes import Api, Outcome, Reaction, classify

BUDGET_REFUSED = -3
"""The code of a LeaveGroup vigil did not send (the budget refused it): below Kafka's and TRANSPORT_ERROR's."""


class NoPermit(Protocol):
    """A budget answer that is no permit: `ledger.Refusal` or `lease_api.BudgetUnavailable` (named by shape, so this
    module stays free of the Lease's I/O)."""

    @property
    def cause(self) -> str: ...

    @property
    def message(self) -> str: ...

    @property
    def retriable(self) -> bool: ...


def answer(refused: NoPermit) -> Outcome:
    """The watchdog's answer to an Evict the budget did not permit: retry later when the answer is retriable, stop
    otherwise; named after its cause ("budget" → BUDGET_BUDGET, "no-api" → BUDGET_NO_API)."""
    return dataclasses.replace(
        classify(Api.LEAVE_GROUP, 0),
        code=BUDGET_REFUSED,
        name=f"BUDGET_{refused.cause.upper().replace('-', '_')}",
        reaction=Reaction.RETRY_BACKOFF if refused.retriable else Reaction.NOTHING_TO_DO,
        retriable=refused.retriable,
        message=refused.message,
    )


def told(refused: NoPermit) -> bool:
    """Whether the refusal is logged and sent as an `eviction-refused` event: not while the group settles."""
    return refused.cause != "settle"
