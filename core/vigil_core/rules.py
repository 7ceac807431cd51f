"""Timing rules: is a consumer's configuration one Kafka accepts, and one where vigil's stall timeout helps?

Small named predicates in the manner of Burrow's evaluator, each returning a finding or nothing, run in a fixed
order and reported most severe first. Pure: the caller supplies the client's settings (from the ConsumerGroup
or the sidecar's env) and the broker's limits (from describe configs, or Kafka's defaults when that is denied).

Sources: Kafka's `GroupCoordinatorConfig` defaults (classic `group.min/max.session.timeout.ms` 6000/1800000;
KIP-848 `group.consumer.{min,max}.session.timeout.ms` 45000/60000, heartbeat 5000/15000, effective values
`group.consumer.session.timeout.ms` 45000 and `group.consumer.heartbeat.interval.ms` 5000, overridable per group
by `consumer.session.timeout.ms` / `consumer.heartbeat.interval.ms`: the caller reads both from the cluster,
`GroupClient.broker_limits` and `BrokerLimits.for_group`); the Java client's `Heartbeat` ("Heartbeat must be set
lower than the session timeout") and `ConsumerConfig` (session.timeout.ms and heartbeat.interval.ms refused with
group.protocol=consumer); librdkafka (2.16, rdkafka_conf.c: "`max.poll.interval.ms`must be >=
`session.timeout.ms`" — librdkafka's rule only, the Java client accepts it — and "`session.timeout.ms` is not
supported for `group.protocol=consumer` ... It is defined broker side"); the seeds' advice that the heartbeat
interval stay below a third of the session timeout.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Final


class Severity(StrEnum):
    ERROR = "error"
    """Kafka or the client refuses it, or the group cannot work as configured."""
    WARNING = "warning"
    """It works, badly: false expiries, or vigil adds nothing."""
    INFO = "info"
    """Worth knowing about how the check itself was done."""


@dataclass(frozen=True)
class Finding:
    severity: Severity
    setting: str
    """The setting to change, as its owner spells it (a client property, a broker config, or vigil's own)."""
    message: str
    """One sentence: what is wrong and what follows from it."""


class GroupProtocol(StrEnum):
    CLASSIC = "classic"
    CONSUMER = "consumer"
    """KIP-848: session and heartbeat are set on the broker or the group, not in the client."""


@dataclass(frozen=True)
class BrokerLimits:
    """The broker's group timing limits; the defaults are Kafka's (GroupCoordinatorConfig, 3.9–4.1)."""

    min_session_ms: int = 6000
    """group.min.session.timeout.ms"""
    max_session_ms: int = 1800000
    """group.max.session.timeout.ms"""
    consumer_min_session_ms: int = 45000
    """group.consumer.min.session.timeout.ms"""
    consumer_max_session_ms: int = 60000
    """group.consumer.max.session.timeout.ms"""
    consumer_min_heartbeat_ms: int = 5000
    """group.consumer.min.heartbeat.interval.ms"""
    consumer_max_heartbeat_ms: int = 15000
    """group.consumer.max.heartbeat.interval.ms"""
    from_defaults: bool = True
    """True when describe configs was denied or unavailable and these are Kafka's defaults, not the broker's."""
    consumer_session_ms: int = 45000
    """The KIP-848 session timeout in effect: group config consumer.session.timeout.ms, else the broker's
    group.consumer.session.timeout.ms."""
    consumer_heartbeat_ms: int = 5000
    """The KIP-848 heartbeat interval in effect: group config consumer.heartbeat.interval.ms, else the broker's
    group.consumer.heartbeat.interval.ms."""
    protocols: tuple[str, ...] | None = None
    """group.coordinator.rebalance.protocols: the group protocols the coordinator serves (3.9: classic only by
    default; 4.0+: classic and consumer); None when not read."""

    def for_group(self, session_ms: int, heartbeat_ms: int) -> "BrokerLimits":
        """These limits with one KIP-848 group's own timings in effect (its group configs, which default to the
        broker's)."""
        return replace(self, consumer_session_ms=session_ms, consumer_heartbeat_ms=heartbeat_ms)


@dataclass(frozen=True)
class SessionRaise:
    """A KIP-848 group's session timeout raised to outlast a restart, as the broker lets it be."""

    session_ms: int
    note: str | None
    """Why it is not what was asked (capped at the broker's maximum, raised to its minimum), else None."""


def session_raise(wanted_ms: int, limits: BrokerLimits) -> SessionRaise:
    """The group session timeout to set for a restart taking up to `wanted_ms`: within the broker's
    group.consumer.min/max.session.timeout.ms (the broker refuses anything else with INVALID_CONFIG), saying so
    when that changes it — a restart longer than a capped session still loses the member."""
    low, high = limits.consumer_min_session_ms, limits.consumer_max_session_ms
    if wanted_ms > high:
        note = (
            f"capped at the broker's group.consumer.max.session.timeout.ms ({high} ms), below the {wanted_ms} ms"
            " asked for: a restart taking longer loses the member"
        )
        return SessionRaise(high, note)
    if wanted_ms < low:
        return SessionRaise(low, f"raised to the broker's group.consumer.min.session.timeout.ms ({low} ms)")
    return SessionRaise(wanted_ms, None)


@dataclass(frozen=True)
class ClientTimings:
    """What the consumer is configured with; None means "not set": the client's default (CLIENT_DEFAULTS) applies."""

    protocol: GroupProtocol
    session_timeout_ms: int | None
    heartbeat_interval_ms: int | None
    max_poll_interval_ms: int | None
    stall_timeout_ms: int | None
    """vigil's own: how long without a poll (or progress) before the member counts as stalled; None: no watchdog."""


CLIENT_DEFAULTS: Final[Mapping[str, int]] = {
    "session.timeout.ms": 45000,
    "heartbeat.interval.ms": 3000,
    "max.poll.interval.ms": 300000,
}
"""librdkafka's and the Java client's (3.0+) defaults, which agree."""

STALL_TIMEOUT: Final = "stallTimeout"
"""How findings name vigil's own setting."""

SESSION: Final = "session.timeout.ms"
HEARTBEAT: Final = "heartbeat.interval.ms"
PROTOCOLS: Final = "group.coordinator.rebalance.protocols"
MAX_POLL: Final = "max.poll.interval.ms"

STALL_FLOOR_HEARTBEATS: Final = 2
"""A stall timeout below this many heartbeat intervals is finer than the group can react to."""


@dataclass(frozen=True)
class _Effective:
    """The client's timings with defaults filled in, and which of them came from a default."""

    session_ms: int
    heartbeat_ms: int
    max_poll_ms: int
    defaulted: frozenset[str]

    def show(self, setting: str, value: int) -> str:
        return f"{setting} ({value} ms{', the default' if setting in self.defaulted else ''})"


def _effective(client: ClientTimings, broker: BrokerLimits) -> _Effective:
    given = {
        SESSION: client.session_timeout_ms,
        HEARTBEAT: client.heartbeat_interval_ms,
        MAX_POLL: client.max_poll_interval_ms,
    }
    defaulted = frozenset(name for name, value in given.items() if value is None)
    if client.protocol is GroupProtocol.CONSUMER:
        # the broker's values are the ones in force whatever the client says (it refuses to start if it says any)
        session, heartbeat = broker.consumer_session_ms, broker.consumer_heartbeat_ms
    else:
        session = _or(client.session_timeout_ms, CLIENT_DEFAULTS[SESSION])
        heartbeat = _or(client.heartbeat_interval_ms, CLIENT_DEFAULTS[HEARTBEAT])
    max_poll = _or(client.max_poll_interval_ms, CLIENT_DEFAULTS[MAX_POLL])
    return _Effective(session, heartbeat, max_poll, defaulted)


def _or(value: int | None, default: int) -> int:
    return default if value is None else value


Rule = Callable[[ClientTimings, BrokerLimits, _Effective], Finding | None]


# --- both protocols ---------------------------------------------------------------------------------------------


def positive_values(client: ClientTimings, broker: BrokerLimits, eff: _Effective) -> Finding | None:
    """0 or a negative time is a typo; checked first and alone, since every other rule would reason about it."""
    values = {
        SESSION: client.session_timeout_ms,
        HEARTBEAT: client.heartbeat_interval_ms,
        MAX_POLL: client.max_poll_interval_ms,
        STALL_TIMEOUT: client.stall_timeout_ms,
    }
    for setting, value in values.items():
        if value is not None and value <= 0:
            return Finding(Severity.ERROR, setting, f"{setting} is {value} ms; it must be a positive number of ms.")
    return None


def stall_before_client_leaves(client: ClientTimings, broker: BrokerLimits, eff: _Effective) -> Finding | None:
    """At max.poll.interval.ms a dynamic member leaves by itself; a watchdog that waits longer never fires first."""
    stall = client.stall_timeout_ms
    if stall is None or stall < eff.max_poll_ms:
        return None
    return Finding(
        Severity.WARNING,
        STALL_TIMEOUT,
        f"{STALL_TIMEOUT} ({stall} ms) is not below {eff.show(MAX_POLL, eff.max_poll_ms)}: a dynamic member leaves"
        " the group by itself first, so vigil adds nothing for it (a static member still gains, its stock outcome"
        " being max.poll.interval.ms plus the session timeout).",
    )


def stall_above_heartbeat_floor(client: ClientTimings, broker: BrokerLimits, eff: _Effective) -> Finding | None:
    """The group reacts to an eviction at heartbeat pace; judging faster than that mostly catches ordinary pauses."""
    stall = client.stall_timeout_ms
    floor = STALL_FLOOR_HEARTBEATS * eff.heartbeat_ms
    if stall is None or stall >= floor:
        return None
    where = "the group's heartbeat interval" if client.protocol is GroupProtocol.CONSUMER else HEARTBEAT
    return Finding(
        Severity.WARNING,
        STALL_TIMEOUT,
        f"{STALL_TIMEOUT} ({stall} ms) is below {STALL_FLOOR_HEARTBEATS}× {where} ({eff.heartbeat_ms} ms): the other"
        " members learn of an eviction only at their next heartbeat, so a shorter timeout gains little and takes"
        " ordinary pauses between polls for stalls.",
    )


def broker_limits_are_defaults(client: ClientTimings, broker: BrokerLimits, eff: _Effective) -> Finding | None:
    """Say when the broker's limits could not be read, so a passing check is not over-trusted."""
    if not broker.from_defaults:
        return None
    if client.protocol is GroupProtocol.CONSUMER:
        setting, shown = "group.consumer.session.timeout.ms", f"session {broker.consumer_session_ms} ms"
        shown += f", heartbeat {broker.consumer_heartbeat_ms} ms"
    else:
        setting, shown = "group.min.session.timeout.ms", f"{broker.min_session_ms}–{broker.max_session_ms} ms"
    return Finding(
        Severity.INFO,
        setting,
        f"The broker's group timing configs could not be read (describe configs denied or unsupported), so these"
        f" checks used Kafka's defaults ({shown}).",
    )


# --- classic protocol -------------------------------------------------------------------------------------------


def heartbeat_below_session(client: ClientTimings, broker: BrokerLimits, eff: _Effective) -> Finding | None:
    """The Java client refuses heartbeat >= session; any client so configured is expired between heartbeats."""
    if eff.heartbeat_ms < eff.session_ms:
        return None
    return Finding(
        Severity.ERROR,
        HEARTBEAT,
        f"{eff.show(HEARTBEAT, eff.heartbeat_ms)} must be below {eff.show(SESSION, eff.session_ms)}: the Java client"
        " refuses to start and any other client is expired between two heartbeats.",
    )


def heartbeat_within_a_third(client: ClientTimings, broker: BrokerLimits, eff: _Effective) -> Finding | None:
    """Kafka's advice (the seeds): at most a third of the session, so one lost heartbeat is not an expiry."""
    if 3 * eff.heartbeat_ms <= eff.session_ms or eff.heartbeat_ms >= eff.session_ms:
        return None
    return Finding(
        Severity.WARNING,
        HEARTBEAT,
        f"{eff.show(HEARTBEAT, eff.heartbeat_ms)} is above a third of {eff.show(SESSION, eff.session_ms)}: one or two"
        " delayed heartbeats expire the member and rebalance the group.",
    )


def session_within_broker_limits(client: ClientTimings, broker: BrokerLimits, eff: _Effective) -> Finding | None:
    """The coordinator rejects a JoinGroup whose session timeout is outside its limits (INVALID_SESSION_TIMEOUT)."""
    if broker.min_session_ms <= eff.session_ms <= broker.max_session_ms:
        return None
    return Finding(
        Severity.ERROR,
        SESSION,
        f"{eff.show(SESSION, eff.session_ms)} is outside the broker's group.min/max.session.timeout.ms"
        f" ({broker.min_session_ms}–{broker.max_session_ms} ms): the coordinator rejects the member's JoinGroup"
        " with INVALID_SESSION_TIMEOUT.",
    )


def max_poll_not_below_session(client: ClientTimings, broker: BrokerLimits, eff: _Effective) -> Finding | None:
    """librdkafka refuses max.poll.interval.ms < session.timeout.ms (easy to hit by raising only the session); the
    Java client has no such rule, so the config is valid there: a warning, never a refusal."""
    if eff.max_poll_ms >= eff.session_ms:
        return None
    return Finding(
        Severity.WARNING,
        MAX_POLL,
        f"{eff.show(MAX_POLL, eff.max_poll_ms)} is below {eff.show(SESSION, eff.session_ms)}: librdkafka refuses to"
        " create the consumer (the Java client accepts it).",
    )


# --- KIP-848 consumer protocol ----------------------------------------------------------------------------------


def no_client_session_with_consumer_protocol(
    client: ClientTimings, broker: BrokerLimits, eff: _Effective
) -> Finding | None:
    """With group.protocol=consumer the session timeout lives on the broker or the group; both clients refuse it."""
    if client.session_timeout_ms is None:
        return None
    return Finding(
        Severity.ERROR,
        SESSION,
        f"{SESSION} is set ({client.session_timeout_ms} ms) but group.protocol=consumer takes it from the group config"
        " consumer.session.timeout.ms or the broker's group.consumer.session.timeout.ms: the client (librdkafka,"
        " kafka-clients) refuses to start.",
    )


def no_client_heartbeat_with_consumer_protocol(
    client: ClientTimings, broker: BrokerLimits, eff: _Effective
) -> Finding | None:
    """With group.protocol=consumer the coordinator dictates the heartbeat interval; both clients refuse it."""
    if client.heartbeat_interval_ms is None:
        return None
    return Finding(
        Severity.ERROR,
        HEARTBEAT,
        f"{HEARTBEAT} is set ({client.heartbeat_interval_ms} ms) but group.protocol=consumer takes it from the group"
        " config consumer.heartbeat.interval.ms or the broker's group.consumer.heartbeat.interval.ms: the client"
        " (librdkafka, kafka-clients) refuses to start.",
    )


def consumer_protocol_served(client: ClientTimings, broker: BrokerLimits, eff: _Effective) -> Finding | None:
    """A KIP-848 group on a coordinator that does not serve the consumer protocol (Kafka 3.x by default) has no
    member to act on: said once at start, and removal is refused by broker version, never attempted."""
    if broker.protocols is None or GroupProtocol.CONSUMER.value in broker.protocols:
        return None
    return Finding(
        Severity.ERROR,
        PROTOCOLS,
        f"group.protocol=consumer but this cluster's coordinator serves only {','.join(broker.protocols) or 'none'}"
        f" ({PROTOCOLS}; KIP-848 is GA from Kafka 4.0): the app cannot join, and vigil removes no member of it.",
    )


CLASSIC_RULES: Final[tuple[Rule, ...]] = (
    heartbeat_below_session,
    heartbeat_within_a_third,
    session_within_broker_limits,
    max_poll_not_below_session,
    stall_before_client_leaves,
    stall_above_heartbeat_floor,
    broker_limits_are_defaults,
)
CONSUMER_RULES: Final[tuple[Rule, ...]] = (
    consumer_protocol_served,
    no_client_session_with_consumer_protocol,
    no_client_heartbeat_with_consumer_protocol,
    stall_before_client_leaves,
    stall_above_heartbeat_floor,
    broker_limits_are_defaults,
)

_ORDER: Final = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}


def check_timings(client: ClientTimings, broker: BrokerLimits) -> list[Finding]:
    """Every finding for this configuration, most severe first (rule order within a severity)."""
    eff = _effective(client, broker)
    invalid = positive_values(client, broker, eff)
    if invalid is not None:
        return [invalid]
    rules = CONSUMER_RULES if client.protocol is GroupProtocol.CONSUMER else CLASSIC_RULES
    findings = [finding for rule in rules if (finding := rule(client, broker, eff)) is not None]
    return sorted(findings, key=lambda finding: _ORDER[finding.severity])
