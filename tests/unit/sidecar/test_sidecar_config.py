"""The sidecar's settings: defaults, flags over env, and one line naming the variable or flag for anything bad."""

import subprocess
import sys

import pytest

from vigil_core.bridge.engine import BridgeConfig
from vigil_core.errors import ConfigError
from vigil_core.liveness import StallAction
from vigil_sidecar import config

BASE = {"VIGIL_GROUP_ID": "orders", "VIGIL_POD_NAME": "orders-0", "VIGIL_KAFKA_BOOTSTRAP_SERVERS": "k:9092"}


def test_defaults_derive_from_the_stall_timeout() -> None:
    settings, conn, findings = config.load(BASE | {"VIGIL_STALL_TIMEOUT_SECONDS": "8"})
    assert settings.cooldown == 16
    assert settings.check_interval == 2
    assert settings.stall_action is StallAction.LEAVE_GROUP
    assert settings.watchdog().stall_timeout == 8
    assert conn.bootstrap_servers == "k:9092"
    assert all(f.severity.value != "error" for f in findings)


def test_the_progress_signal_alerts_by_default_and_obeys_an_explicit_action() -> None:
    assert config.load(BASE | {"VIGIL_SIGNAL": "progress"})[0].stall_action is StallAction.ALERT
    explicit = BASE | {"VIGIL_SIGNAL": "progress", "VIGIL_ACTION": "leave-group"}
    assert config.load(explicit)[0].stall_action is StallAction.LEAVE_GROUP


def test_bridging_is_off_by_default_and_paced_by_the_apps_heartbeat() -> None:
    settings, _, _ = config.load(BASE)
    assert settings.bridge_enabled is False
    assert settings.bridge() == BridgeConfig(heartbeat_interval=3.0, max_bridge_seconds=120.0, session_timeout=45.0)
    on = BASE | {
        "VIGIL_BRIDGE_ENABLED": "true",
        "VIGIL_INSTANCE_ID": "orders-0",
        "VIGIL_HEARTBEAT_INTERVAL_SECONDS": "1",
        "VIGIL_SESSION_TIMEOUT_SECONDS": "6",
        "VIGIL_MAX_BRIDGE_SECONDS": "90",
        "VIGIL_ON_FOREIGN_REBALANCE": "hold",
        "VIGIL_EXPECTED_RETURN_SECONDS": "20",
    }
    settings, _, _ = config.load(on)
    assert settings.bridge_enabled is True
    assert settings.bridge() == BridgeConfig(
        heartbeat_interval=1.0,
        max_bridge_seconds=90.0,
        on_foreign_rebalance="hold",
        expected_return_seconds=20.0,
        session_timeout=6.0,  # a hold ends at most a session after the rebalance began
    )


def test_an_empty_events_topic_turns_events_off_and_an_absent_one_is_the_default() -> None:
    assert config.load(BASE)[0].events_topic == "vigil.events"
    assert config.load(BASE | {"VIGIL_EVENTS_TOPIC": ""})[0].events_topic == ""
    assert config.load(BASE | {"VIGIL_STALL_TIMEOUT_SECONDS": ""})[0].stall_timeout_seconds == 60  # empty: unset


def test_check_interval_is_capped_at_five_seconds() -> None:
    settings, _, _ = config.load(BASE | {"VIGIL_STALL_TIMEOUT_SECONDS": "120"})
    assert settings.check_interval == 5


def test_flags_win_over_env() -> None:
    settings, _, _ = config.load(
        BASE | {"VIGIL_ACTION": "alert"}, ["--action", "restart", "--stall-timeout-seconds", "9"]
    )
    assert settings.stall_action is StallAction.RESTART
    assert settings.stall_timeout_seconds == 9


@pytest.mark.parametrize(
    ("env", "argv", "message"),
    [
        ({"VIGIL_GROUP_ID": None}, [], "VIGIL_GROUP_ID: required, not set"),
        ({"VIGIL_POD_NAME": ""}, [], "VIGIL_POD_NAME: required, not set"),
        ({"VIGIL_STALL_TIMEOUT_SECONDS": "0"}, [], "VIGIL_STALL_TIMEOUT_SECONDS: Input should be greater than 0"),
        ({"VIGIL_STALL_TIMEOUT_SECONDS": "nan"}, [], "VIGIL_STALL_TIMEOUT_SECONDS: Input should be a finite number"),
        ({}, ["--stall-timeout-seconds", "-1"], "--stall-timeout-seconds: Input should be greater than 0"),
        ({"VIGIL_ACTION": "kill"}, [], "VIGIL_ACTION: Input should be 'leave-group', 'restart' or 'alert'"),
        ({"VIGIL_BEACON_PORT": "70000"}, [], "VIGIL_BEACON_PORT: Input should be less than or equal to 65535"),
        (
            {"VIGIL_HEALTH_PORT": "7390", "VIGIL_HEALTH_BIND": "127.0.0.1"},
            [],
            "VIGIL_BEACON_PORT and VIGIL_HEALTH_PORT must differ on one address",
        ),
        ({"VIGIL_GROUP_PROTOCOL": "eager"}, [], "VIGIL_GROUP_PROTOCOL: Input should be 'classic' or 'consumer'"),
        ({"VIGIL_KAFKA_BOOTSTRAP_SERVERS": None}, [], "VIGIL_KAFKA_BOOTSTRAP_SERVERS: required, not set"),
        (
            {"VIGIL_SESSION_TIMEOUT_SECONDS": "10", "VIGIL_HEARTBEAT_INTERVAL_SECONDS": "12"},
            [],
            "VIGIL_HEARTBEAT_INTERVAL_SECONDS: heartbeat.interval.ms (12000 ms) must be below session.timeout.ms",
        ),
        ({"VIGIL_BRIDGE_ENABLED": "maybe"}, [], "VIGIL_BRIDGE_ENABLED: Input should be a valid boolean"),
        ({"VIGIL_EVENTS_TOPIC": "vigil events"}, [], "VIGIL_EVENTS_TOPIC: expected a Kafka topic name ("),
        ({"VIGIL_EVENTS_TOPIC": ".."}, [], "VIGIL_EVENTS_TOPIC: expected a Kafka topic name ("),
        ({"VIGIL_MAX_BRIDGE_SECONDS": "0"}, [], "VIGIL_MAX_BRIDGE_SECONDS: Input should be greater than 0"),
        ({"VIGIL_MAX_BRIDGE_SECONDS": "7200"}, [], "VIGIL_MAX_BRIDGE_SECONDS: Input should be less than or equal"),
        ({"VIGIL_ON_FOREIGN_REBALANCE": "wait"}, [], "VIGIL_ON_FOREIGN_REBALANCE: Input should be 'remove' or 'hold'"),
        ({"VIGIL_EXPECTED_RETURN_SECONDS": "-5"}, [], "VIGIL_EXPECTED_RETURN_SECONDS: Input should be greater than 0"),
        ({"VIGIL_BRIDGE_ENABLED": "true"}, [], "VIGIL_INSTANCE_ID: bridging (VIGIL_BRIDGE_ENABLED) needs a static"),
        (
            {"VIGIL_BRIDGE_ENABLED": "true", "VIGIL_INSTANCE_ID": "orders-0", "VIGIL_SIGNAL": "progress"},
            [],
            "VIGIL_SIGNAL: bridging (VIGIL_BRIDGE_ENABLED) needs the beacon signal",
        ),
        (
            {"VIGIL_INSTANCE_ID": "orders-0"},
            ["--bridge-enabled", "true", "--signal", "progress"],
            "--signal: bridging (VIGIL_BRIDGE_ENABLED) needs the beacon signal",
        ),
        (
            {"VIGIL_BRIDGE_ENABLED": "true", "VIGIL_INSTANCE_ID": "orders-0", "VIGIL_SESSION_TIMEOUT_SECONDS": "3"},
            [],
            "VIGIL_HEARTBEAT_INTERVAL_SECONDS: unset, so bridging (VIGIL_BRIDGE_ENABLED) heartbeats every 3s",
        ),
        (
            {"VIGIL_BRIDGE_ENABLED": "true", "VIGIL_INSTANCE_ID": "orders-0", "VIGIL_MAX_BRIDGE_SECONDS": "2"},
            [],
            "VIGIL_MAX_BRIDGE_SECONDS: 2s leaves no room for a second heartbeat (interval 3s)",
        ),
    ],
)
def test_bad_settings_are_one_line(env: dict[str, str | None], argv: list[str], message: str) -> None:
    merged = {k: v for k, v in (BASE | env).items() if v is not None}
    with pytest.raises(ConfigError) as info:
        config.load(merged, argv)
    assert str(info.value).startswith(message), str(info.value)
    assert "\n" not in str(info.value)


def test_a_valid_java_config_with_max_poll_below_the_session_is_accepted_with_a_warning() -> None:
    """max.poll.interval.ms below session.timeout.ms is librdkafka's refusal, not Java's: the sidecar starts."""
    env = BASE | {"VIGIL_SESSION_TIMEOUT_SECONDS": "60", "VIGIL_MAX_POLL_INTERVAL_SECONDS": "30"}
    _, _, findings = config.load(env)
    [finding] = [f for f in findings if f.setting == "max.poll.interval.ms"]
    assert finding.severity.value == "warning"
    assert "librdkafka refuses to create the consumer (the Java client accepts it)" in finding.message


def test_the_process_exits_2_with_one_line_and_no_traceback() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "vigil_sidecar"],
        env=BASE | {"VIGIL_STALL_TIMEOUT_SECONDS": "soon", "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 2
    expected = "VIGIL_STALL_TIMEOUT_SECONDS: Input should be a valid number, unable to parse string as a number"
    assert result.stderr == f"vigil sidecar: {expected}\n"
