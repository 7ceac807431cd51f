"""What the sidecar does with a budget answer that is no permit (`budget.verdict`), as a table: every cause of a
ledger refusal and of an unusable Lease, reported as itself, says itself whether asking again may succeed."""

import typing

import pytest

from vigil_core.budget import ledger as lg
from vigil_core.budget import verdict
from vigil_core.budget.lease_api import BudgetUnavailable, UnavailableCause
from vigil_core.kafka.outcomes import Api, Reaction

COUNT = lg.Count(stalled=1, members=3)


def refusal(cause: lg.RefusalCause) -> lg.Refusal:
    return lg.Refusal(cause, f"refused: {cause}", lg.Ledger(), COUNT)


# (answer, retriable, the watchdog's answer by name, told as an eviction-refused event and a log line)
TABLE: list[tuple[verdict.NoPermit, bool, str, bool]] = [
    (refusal("settle"), True, "BUDGET_SETTLE", False),  # the group's ordinary settle wait: asked again, quietly
    (refusal("budget"), True, "BUDGET_BUDGET", True),  # a permit leaves the cooldown: asked again
    (refusal("systemic-stall"), False, "BUDGET_SYSTEMIC_STALL", True),
    (refusal("poison-suspected"), False, "BUDGET_POISON_SUSPECTED", True),
    (BudgetUnavailable("unreachable", "down"), True, "BUDGET_UNREACHABLE", True),
    (BudgetUnavailable("contention", "busy"), True, "BUDGET_CONTENTION", True),
    (BudgetUnavailable("no-api", "no token"), False, "BUDGET_NO_API", True),
    (BudgetUnavailable("no-permission", "403"), False, "BUDGET_NO_PERMISSION", True),
    (BudgetUnavailable("no-lease", "404"), False, "BUDGET_NO_LEASE", True),
    (BudgetUnavailable("bad-ledger", "not a ledger"), False, "BUDGET_BAD_LEDGER", True),
]


@pytest.mark.parametrize(("answer", "retriable", "name", "told"), TABLE, ids=[row[0].cause for row in TABLE])
def test_a_refusal_says_whether_it_is_retried_and_is_reported_as_its_own_cause(
    answer: verdict.NoPermit, retriable: bool, name: str, told: bool
) -> None:
    assert answer.retriable is retriable
    outcome = verdict.answer(answer)
    assert (outcome.api, outcome.code, outcome.name) == (Api.LEAVE_GROUP, verdict.BUDGET_REFUSED, name)
    assert outcome.reaction is (Reaction.RETRY_BACKOFF if retriable else Reaction.NOTHING_TO_DO)
    assert outcome.retriable is retriable
    assert outcome.message == answer.message
    assert verdict.told(answer) is told


def test_the_table_covers_every_cause() -> None:
    causes = {row[0].cause for row in TABLE}
    assert causes == set(typing.get_args(lg.RefusalCause)) | set(typing.get_args(UnavailableCause))
