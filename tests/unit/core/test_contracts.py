"""The contracts in vigil_core that the operator and the sidecar both build on: one definition, used by both."""

import pytest

from vigil_core import liveness
from vigil_core.liveness import ForeignRebalance, Signal, StallAction
from vigil_core.sidecar_contract import ENV_PREFIX, StatusMember, env_var
from vigil_operator.domain.spec import Bridge, Liveness
from vigil_sidecar.config import SidecarSettings


@pytest.mark.parametrize(
    ("signal", "stated", "expected"),
    [
        (Signal.BEACON, None, StallAction.LEAVE_GROUP),
        (Signal.STATS, None, StallAction.LEAVE_GROUP),
        (Signal.PROGRESS, None, StallAction.ALERT),
        (Signal.PROGRESS, StallAction.RESTART, StallAction.RESTART),
    ],
)
def test_the_spec_and_the_settings_take_one_default_action(
    signal: Signal, stated: StallAction | None, expected: StallAction
) -> None:
    spec = Liveness(signal=signal, action=stated)
    settings = SidecarSettings(group_id="g", pod_name="p", signal=signal, action=stated)
    assert spec.effective_action is settings.stall_action is expected


@pytest.mark.parametrize(("stated", "expected"), [(None, 60.0), (7.0, 7.0)])
def test_the_spec_and_the_settings_take_one_default_cooldown(stated: float | None, expected: float) -> None:
    spec = Liveness(stall_timeout_seconds=30, cooldown_seconds=stated)
    settings = SidecarSettings(group_id="g", pod_name="p", stall_timeout_seconds=30, cooldown_seconds=stated)
    assert spec.cooldown == settings.cooldown == expected


def test_the_spec_and_the_settings_share_their_defaults() -> None:
    """What a ConsumerGroup leaves unset is what the sidecar assumes when the webhook writes nothing."""
    spec, bridge = Liveness(), Bridge()
    settings = SidecarSettings(group_id="g", pod_name="p")
    assert (spec.signal, settings.signal) == (liveness.DEFAULT_SIGNAL,) * 2
    assert spec.stall_timeout_seconds == settings.stall_timeout_seconds == liveness.DEFAULT_STALL_TIMEOUT_SECONDS
    assert spec.max_concurrent_evictions == settings.max_concurrent_evictions
    assert spec.systemic_stall_percent == settings.systemic_stall_percent
    assert bridge.max_bridge_seconds == settings.max_bridge_seconds
    assert bridge.on_foreign_rebalance is settings.on_foreign_rebalance is ForeignRebalance.REMOVE


def test_every_sidecar_setting_has_its_variable() -> None:
    assert env_var("stall_timeout_seconds") == "VIGIL_STALL_TIMEOUT_SECONDS"
    assert all(env_var(name).startswith(ENV_PREFIX) for name in SidecarSettings.model_fields)


def test_the_status_member_reads_back_what_it_writes() -> None:
    member = StatusMember("orders-0-5f0c2a9e", "shop-orders-0", 7)
    assert StatusMember.from_status({"member": member.to_json(), "other": 1}) == member
    dynamic = StatusMember("m", None, None)
    assert StatusMember.from_status({"member": dynamic.to_json()}) == dynamic


@pytest.mark.parametrize(
    "status",
    [
        {},
        {"member": None},
        {"member": ["m", 7]},
        {"member": {"member_id": 5, "instance_id": "i", "generation": 7}},
        {"member": {"member_id": "m", "instance_id": "i", "generation": "7"}},
        {"member": {"member_id": "m", "instance_id": "i", "generation": True}},
    ],
)
def test_a_status_member_of_another_shape_is_none(status: dict[str, object]) -> None:
    assert StatusMember.from_status(status) is None
