"""A status written by a newer operator (a downgrade, or two versions during a rollout of the operator) parses:
condition types and rollout phases are strings in the CRD, so a newer operator may add some; this one keeps what it
knows and never acts on what it does not."""

from typing import Any

import pytest

from vigil_operator.domain.status import ConditionType, ConsumerGroupStatus, RolloutPhase

WHEN = "2026-11-26T12:00:00Z"


def condition(kind: str, status: str = "True") -> dict[str, Any]:
    return {"type": kind, "status": status, "reason": "Because", "lastTransitionTime": WHEN}


def test_condition_types_this_operator_does_not_know_are_left_out_the_rest_kept() -> None:
    stored = {
        "memberCount": 3,
        "conditions": [condition("Ready"), condition("SidecarVersionSkew"), condition("Stalled", "False")],
        "rollout": {"targetRevision": "r2", "phase": "Rolling", "total": 3, "done": 1},
    }
    status = ConsumerGroupStatus.model_validate(stored)
    assert [(c.type, c.status) for c in status.conditions] == [
        (ConditionType.READY, "True"),
        (ConditionType.STALLED, "False"),
    ]
    assert status.member_count == 3
    assert status.rollout is not None
    assert (status.rollout.phase, status.rollout.done) == (RolloutPhase.ROLLING, 1)


@pytest.mark.parametrize("phase", ["Verifying", "rolling", ""])
def test_a_rollout_phase_this_operator_does_not_know_reads_as_paused_naming_it(phase: str) -> None:
    stored = {"rollout": {"targetRevision": "r2", "phase": phase, "total": 3, "done": 1, "currentPod": "app-1"}}
    status = ConsumerGroupStatus.model_validate(stored)
    assert status.rollout is not None
    assert status.rollout.phase is RolloutPhase.PAUSED
    assert repr(phase) in status.rollout.message
    assert (status.rollout.target_revision, status.rollout.done, status.rollout.current_pod) == ("r2", 1, "app-1")


@pytest.mark.parametrize("phase", list(RolloutPhase))
def test_a_known_phase_is_read_as_written(phase: RolloutPhase) -> None:
    status = ConsumerGroupStatus.model_validate({"rollout": {"targetRevision": "r", "phase": phase.value}})
    assert status.rollout is not None
    assert (status.rollout.phase, status.rollout.message) == (phase, "")


def test_a_known_condition_type_with_a_bad_status_still_fails_to_parse() -> None:
    """Leniency is for what a newer operator may add, not for a status that breaks this one's own rules."""
    with pytest.raises(ValueError, match="status"):
        ConsumerGroupStatus.model_validate({"conditions": [condition("Ready", "Maybe")]})
