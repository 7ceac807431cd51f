"""The sidecar's settings: env vars (`VIGIL_<NAME>`, what the injected container gets) or the same names as
flags (`--stall-timeout-seconds 30`); flags win (`vigil_core.settings`, the loader the operator uses too).
Validated at start: a bad value is one line naming the variable or flag, and the process exits 2 (a config error
never becomes a crash loop of tracebacks).
"""

import argparse
import sys
from collections.abc import Mapping, Sequence
from enum import StrEnum
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from vigil_core import liveness, markdown, names, rules
from vigil_core import settings as settings_loader
from vigil_core.bridge.engine import BridgeConfig
from vigil_core.errors import ConfigError
from vigil_core.kafka import security
from vigil_core.kafka.security import KafkaConnection
from vigil_core.liveness import CLIENT_DEFAULT_HEARTBEAT_SECONDS, ForeignRebalance, Signal, StallAction
from vigil_core.settings import Unset
from vigil_core.sidecar_contract import DEFAULT_BEACON_PORT, DEFAULT_HEALTH_PORT, ENV_PREFIX, NO_BROKER_LIMITS
from vigil_sidecar.watchdog.state import WatchdogConfig


class BudgetMode(StrEnum):
    """`SidecarSettings.budget`: what each mode means is said there (the help and the docs show it)."""

    LEASE = "lease"
    NONE = "none"


Seconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]
Port = Annotated[int, Field(ge=1, le=65535)]


class SidecarSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    group_id: Annotated[str, Field(min_length=1)]
    """The consumer group of the app next to this sidecar."""
    pod_name: Annotated[str, Field(min_length=1)]
    """This pod's name (downward API): the identity a member must be proven to have."""
    namespace: str | None = None
    """This pod's namespace (downward API), named in its events; unset, the budget's Lease is looked up in the
    service account's namespace."""
    instance_id: str | None = None
    """The app's `group.instance.id` when it is a static member (unset: a dynamic member)."""
    stall_timeout_seconds: Seconds = liveness.DEFAULT_STALL_TIMEOUT_SECONDS
    """No poll for this long → the app counts as stalled."""
    signal: Signal = liveness.DEFAULT_SIGNAL
    """How the app's liveness is seen: beacon (the app's helper reports each poll), progress (no app change:
    committed offsets) or stats (librdkafka's statistics forwarded by the app)."""
    action: Annotated[StallAction | None, Unset("leave-group, alert with the progress signal")] = None
    """What to do about a stall: leave-group (compare-and-remove the member), restart (fail the app's liveness
    probe), alert (an event only). The default follows the signal: beacons and statistics show the app's own
    consumption, committed offsets only suggest a stall."""
    cooldown_seconds: Annotated[Seconds | None, Unset("2 × stall timeout")] = None
    """At most one action per member within this long."""
    check_interval_seconds: Annotated[Seconds | None, Unset("stall timeout / 4, at most 5")] = None
    """The longest the watchdog sleeps between checks."""
    session_timeout_seconds: Seconds = 45.0
    """The app's `session.timeout.ms` in seconds (classic groups; a KIP-848 group has its own)."""
    heartbeat_interval_seconds: Annotated[
        Seconds | None, Unset(f"the client's, {CLIENT_DEFAULT_HEARTBEAT_SECONDS:g}")
    ] = None
    """The app's `heartbeat.interval.ms` in seconds; a bridge heartbeats at this pace."""
    max_poll_interval_seconds: Annotated[
        Seconds | None, Unset(f"the client's, {rules.CLIENT_DEFAULTS[rules.MAX_POLL] / 1000:g}")
    ] = None
    """The app's `max.poll.interval.ms` in seconds."""
    group_protocol: rules.GroupProtocol = rules.GroupProtocol.CLASSIC
    """The app's `group.protocol`: consumer for KIP-848 apps."""
    beacon_bind: str = "127.0.0.1"
    """Where the beacon listener (HTTP `POST /v1/beacon` and UDP, one port) binds: loopback by default; the
    injected sidecar binds the pod IP (the webhook's layout: one address for both listeners)."""
    beacon_port: Port = DEFAULT_BEACON_PORT
    """The beacon listener's port, for HTTP and UDP alike."""
    health_bind: str = "0.0.0.0"  # noqa: S104 - the kubelet probes the pod IP
    """Where the health listener (`/livez`, `/v1/probe/app`, `/metrics`, `/v1/status`) binds: every address, as
    the kubelet probes the pod IP."""
    health_port: Port = DEFAULT_HEALTH_PORT
    """The health listener's port."""
    budget: BudgetMode = BudgetMode.LEASE
    """lease: do no harm across the group, an eviction needs a permit from the group's Lease (created by the
    operator): at most max concurrent evictions per cooldown, none in a systemic stall; without API access the
    sidecar only alerts. none: every sidecar evicts on its own (a single consumer outside Kubernetes, tests)."""
    budget_lease: Annotated[str | None, Unset("the name the operator derives from the group id")] = None
    """The group's budget Lease."""
    max_concurrent_evictions: Annotated[int, Field(ge=1)] = liveness.DEFAULT_MAX_CONCURRENT_EVICTIONS
    """At most this many of the group's members evicted within a cooldown."""
    systemic_stall_percent: Annotated[float, Field(gt=0, le=100)] = liveness.DEFAULT_SYSTEMIC_STALL_PERCENT
    """More than this share of the group stalled at once → no eviction, a systemic-stall event instead."""
    settle_seconds: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 2.0
    """Wait this long after the first permit request, so stalled peers can publish first."""
    service_account_dir: Path = Path("/var/run/secrets/kubernetes.io/serviceaccount")
    """Where the pod's service account token, CA and namespace are mounted (the budget's Lease is read with
    them)."""
    events_topic: Annotated[str, AfterValidator(names.topic_or_off)] = "vigil.events"
    """Where events go ("" turns them off); created by its owner, never by vigil."""
    cluster: str = "kafka"
    """A name for the Kafka cluster in events."""
    bridge_enabled: bool = False
    """Heartbeat for this static member while its app is known to be restarting (the heartbeat bridge): the helper's
    connection closing is the proof; silence never is. Needs the instance id and the beacon signal (a KIP-848 member:
    Kafka 4.0+)."""
    max_bridge_seconds: Annotated[float, Field(gt=0, le=3600, allow_inf_nan=False)] = (
        liveness.DEFAULT_MAX_BRIDGE_SECONDS
    )
    """A bridge gives up this long after the app ended; the member then expires at its session timeout."""
    on_foreign_rebalance: ForeignRebalance = liveness.DEFAULT_FOREIGN_REBALANCE
    """What a bridge does when someone else starts a rebalance: remove the member, or hold it (the group waits,
    at most one session timeout after the rebalance began)."""
    expected_return_seconds: Annotated[Seconds | None, Unset("the bridge's deadline")] = None
    """How long the app usually takes to come back: a hold ends then at the latest."""

    @model_validator(mode="after")
    def _ports_differ(self) -> "SidecarSettings":
        if self.beacon_port == self.health_port and self.beacon_bind == self.health_bind:
            raise ValueError(f"{ENV_PREFIX}BEACON_PORT and {ENV_PREFIX}HEALTH_PORT must differ on one address")
        return self

    @model_validator(mode="after")
    def _bridge_can_work(self) -> "SidecarSettings":
        if not self.bridge_enabled:
            return self
        needs = f"bridging ({ENV_PREFIX}BRIDGE_ENABLED)"
        if self.signal is not Signal.BEACON:
            raise ValueError(
                f"{ENV_PREFIX}SIGNAL: {needs} needs the beacon signal: the app helper's connection is the proof the"
                f" app ended, and its beacons give the generation; got {self.signal.value!r}"
            )
        if not self.instance_id:
            raise ValueError(
                f"{ENV_PREFIX}INSTANCE_ID: {needs} needs a static member (its group.instance.id): a dynamic member"
                " rejoins under a new member id, with a rebalance anyway"
            )
        if self.heartbeat_interval_seconds is None and self.session_timeout_seconds <= CLIENT_DEFAULT_HEARTBEAT_SECONDS:
            raise ValueError(
                f"{ENV_PREFIX}HEARTBEAT_INTERVAL_SECONDS: unset, so {needs} heartbeats every"
                f" {CLIENT_DEFAULT_HEARTBEAT_SECONDS:g}s (the client's default), not below"
                f" {ENV_PREFIX}SESSION_TIMEOUT_SECONDS ({self.session_timeout_seconds:g}s); set the app's interval"
            )
        if self.bridge_heartbeat_interval >= self.max_bridge_seconds:
            raise ValueError(
                f"{ENV_PREFIX}MAX_BRIDGE_SECONDS: {self.max_bridge_seconds:g}s leaves no room for a second heartbeat"
                f" (interval {self.bridge_heartbeat_interval:g}s)"
            )
        return self

    @property
    def bridge_heartbeat_interval(self) -> float:
        """The app's heartbeat interval, the pace the coordinator knows from this member: the client's 3 s
        default when `heartbeat_interval_seconds` is unset."""
        if self.heartbeat_interval_seconds is not None:
            return self.heartbeat_interval_seconds
        return CLIENT_DEFAULT_HEARTBEAT_SECONDS

    @property
    def stall_action(self) -> StallAction:
        return liveness.stall_action(self.action, self.signal)

    @property
    def cooldown(self) -> float:
        return liveness.cooldown(self.cooldown_seconds, self.stall_timeout_seconds)

    @property
    def check_interval(self) -> float:
        if self.check_interval_seconds is not None:
            return self.check_interval_seconds
        return min(5.0, self.stall_timeout_seconds / 4)

    def watchdog(self) -> WatchdogConfig:
        return WatchdogConfig(
            pod_name=self.pod_name,
            stall_timeout=self.stall_timeout_seconds,
            check_interval=self.check_interval,
            cooldown=self.cooldown,
            session_timeout=self.session_timeout_seconds,
            action=self.stall_action,
            instance_id=self.instance_id,
        )

    def bridge(self) -> BridgeConfig:
        """The settings every bridge of this sidecar starts with."""
        return BridgeConfig(
            heartbeat_interval=self.bridge_heartbeat_interval,
            max_bridge_seconds=self.max_bridge_seconds,
            on_foreign_rebalance=self.on_foreign_rebalance,
            expected_return_seconds=self.expected_return_seconds,
            session_timeout=self.session_timeout_seconds,
        )

    def timings(self) -> rules.ClientTimings:
        def ms(value: float | None) -> int | None:
            return None if value is None else round(value * 1000)

        classic = self.group_protocol is rules.GroupProtocol.CLASSIC
        return rules.ClientTimings(
            protocol=self.group_protocol,
            session_timeout_ms=ms(self.session_timeout_seconds) if classic else None,
            heartbeat_interval_ms=ms(self.heartbeat_interval_seconds),
            max_poll_interval_ms=ms(self.max_poll_interval_seconds),
            stall_timeout_ms=ms(self.stall_timeout_seconds),
        )


#: Settings whose empty value, set explicitly, means "off" (elsewhere an empty variable is an unset one).
EMPTY_MEANS_OFF = frozenset({"events_topic"})


#: The sections of `vigil sidecar --help` and of the docs' settings reference, each from the field that starts it.
SECTIONS = {
    "group_id": "the app",
    "stall_timeout_seconds": "the watch",
    "session_timeout_seconds": "the app's consumer settings (checked by the timing rules)",
    "beacon_bind": "listeners",
    "budget": "the eviction budget",
    "events_topic": "events",
    "bridge_enabled": "heartbeat bridging",
}
KAFKA_SECTION = "Kafka connection (env only)"

DESCRIPTION = f"""Kafka consumer liveness sidecar.

Every setting is an env var {ENV_PREFIX}<NAME> (what the injected container gets) or the flag --<name>; a flag wins.
A bad value is one line naming the variable or flag, and exit code 2."""


def build_parser() -> argparse.ArgumentParser:
    """Flags named after the fields (`--stall-timeout-seconds`), the Kafka connection's variables listed in the
    help; unknown flags are a usage error."""
    parser = argparse.ArgumentParser(
        prog="vigil sidecar", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    settings_loader.add_flags(parser, SidecarSettings, prefix=ENV_PREFIX, sections=SECTIONS)
    settings_loader.add_variables(parser, KafkaConnection, prefix=security.ENV_PREFIX, title=KAFKA_SECTION)
    return parser


def parse_args(argv: Sequence[str]) -> dict[str, str]:
    return {k: v for k, v in vars(build_parser().parse_args(list(argv))).items() if v is not None}


def load(
    env: Mapping[str, str], argv: Sequence[str] = ()
) -> tuple[SidecarSettings, KafkaConnection, list[rules.Finding]]:
    """Settings, the Kafka connection and the start-time timing findings; ConfigError (one line) if invalid."""
    settings = settings_loader.load(
        SidecarSettings, prefix=ENV_PREFIX, env=env, flags=parse_args(argv), keep_empty=EMPTY_MEANS_OFF
    )
    connection = KafkaConnection.from_env(env)
    findings = rules.check_timings(settings.timings(), NO_BROKER_LIMITS)
    errors = [f for f in findings if f.severity is rules.Severity.ERROR]
    if errors:
        raise ConfigError(f"{SETTING_VARIABLES.get(errors[0].setting, errors[0].setting)}: {errors[0].message}")
    return settings, connection, findings


#: How the sidecar spells the settings the timing rules name (the rules speak Kafka's property names).
SETTING_VARIABLES = {
    rules.SESSION: f"{ENV_PREFIX}SESSION_TIMEOUT_SECONDS",
    rules.HEARTBEAT: f"{ENV_PREFIX}HEARTBEAT_INTERVAL_SECONDS",
    rules.MAX_POLL: f"{ENV_PREFIX}MAX_POLL_INTERVAL_SECONDS",
    rules.STALL_TIMEOUT: f"{ENV_PREFIX}STALL_TIMEOUT_SECONDS",
}


#: The line in docs/sidecar.md above which the text is hand-written; below it, `reference()`.
MARKER = "<!-- generated below by `python -m vigil_sidecar.config` (make generate-docs); do not edit by hand -->"


def reference() -> str:
    """Every setting as the docs' Markdown tables: the same text as `--help`, from the same models."""
    kafka = settings_loader.describe(
        KafkaConnection, prefix=security.ENV_PREFIX, sections={"bootstrap_servers": KAFKA_SECTION}, flags=False
    )
    own = settings_loader.describe(SidecarSettings, prefix=ENV_PREFIX, sections=SECTIONS)
    return settings_loader.markdown_reference([*own, *kafka])


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m vigil_sidecar.config`: print the settings reference, or refresh or check docs/sidecar.md's."""
    parser = argparse.ArgumentParser(
        prog="python -m vigil_sidecar.config",
        description="Print the sidecar's settings reference (docs/sidecar.md), or refresh a document's or check it.",
    )
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--write", metavar="FILE", help="rewrite FILE below its marker line")
    target.add_argument("--check", metavar="FILE", help="exit 1 when FILE below its marker is stale")
    args = parser.parse_args(argv)
    return markdown.reference(
        reference(), MARKER, write=args.write, check=args.check, prog=parser.prog, how="make generate-docs"
    )


if __name__ == "__main__":
    sys.exit(main())
