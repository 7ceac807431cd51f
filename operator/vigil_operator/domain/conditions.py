"""Kubernetes-style conditions as pure transitions: `lastTransitionTime` moves only when `status` changes."""

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Literal

from vigil_operator.domain.status import CONDITION_ORDER, MESSAGE_LIMIT, Condition, ConditionType

Truth = Literal["True", "False", "Unknown"]


def rfc3339(moment: datetime) -> str:
    """UTC, seconds precision, `Z`: the form Kubernetes writes and its date-time format accepts."""
    return moment.astimezone(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def with_condition(
    conditions: Iterable[Condition],
    kind: ConditionType,
    status: Truth,
    reason: str,
    message: str,
    *,
    generation: int,
    now: datetime,
) -> tuple[Condition, ...]:
    """The conditions with `kind` set; kept in CONDITION_ORDER so the written status is stable. A message past the
    apiserver's bound is cut (a refusal quoting a user's overlong value must still be written, never raise)."""
    current = {c.type: c for c in conditions}
    previous = current.get(kind)
    since = previous.last_transition_time if previous is not None and previous.status == status else rfc3339(now)
    current[kind] = Condition(
        type=kind,
        status=status,
        reason=reason,
        message=message if len(message) <= MESSAGE_LIMIT else message[: MESSAGE_LIMIT - 1] + "…",
        last_transition_time=since,
        observed_generation=generation,
    )
    return tuple(current[k] for k in CONDITION_ORDER if k in current)


def find(conditions: Iterable[Condition], kind: ConditionType) -> Condition | None:
    return next((c for c in conditions if c.type is kind), None)
