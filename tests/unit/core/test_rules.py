"""Timing rules as tables (each case lists every finding it must produce), plus properties over all configs."""

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vigil_core.rules import (
    CLIENT_DEFAULTS,
    BrokerLimits,
    ClientTimings,
    Finding,
    GroupProtocol,
    Severity,
    check_timings,
    session_raise,
)

CLASSIC, CONSUMER = GroupProtocol.CLASSIC, GroupProtocol.CONSUMER
ERROR, WARNING, INFO = Severity.ERROR, Severity.WARNING, Severity.INFO
READ = BrokerLimits(from_defaults=False)
"""Kafka's default limits, but read from the broker (no INFO finding)."""
ONLY_CLASSIC = BrokerLimits(protocols=("classic",), from_defaults=False)
"""A 3.9 coordinator's default: group.coordinator.rebalance.protocols=classic."""
SERVES_848 = BrokerLimits(protocols=("classic", "consumer"), from_defaults=False)
DEV = BrokerLimits(min_session_ms=1000, consumer_session_ms=10000, consumer_heartbeat_ms=1000, from_defaults=False)
"""The local test broker (tests/README.md)."""


def classic(
    session: int | None = 45000, heartbeat: int | None = 3000, max_poll: int | None = 300000, stall: int | None = 30000
) -> ClientTimings:
    return ClientTimings(CLASSIC, session, heartbeat, max_poll, stall)


def consumer(
    max_poll: int | None = 300000, stall: int | None = 30000, session: int | None = None, heartbeat: int | None = None
) -> ClientTimings:
    return ClientTimings(CONSUMER, session, heartbeat, max_poll, stall)


# (case, client, broker, [(severity, setting, a phrase of the message)] in the order check_timings returns them)
CASES = [
    ("classic, sound", classic(), READ, []),
    ("classic, sound on the dev broker", classic(6000, 1000, 30000, 5000), DEV, []),
    ("classic, nothing set, limits not readable", classic(None, None, None, None), BrokerLimits(), [
        (INFO, "group.min.session.timeout.ms", "used Kafka's defaults (6000–1800000 ms)"),
    ]),
    ("heartbeat equal to session", classic(10000, 10000), READ, [
        (ERROR, "heartbeat.interval.ms", "must be below session.timeout.ms (10000 ms)"),
    ]),
    ("heartbeat above session, session defaulted", classic(None, 50000, stall=None), READ, [
        (ERROR, "heartbeat.interval.ms", "session.timeout.ms (45000 ms, the default)"),
    ]),
    ("heartbeat above a third", classic(10000, 4000), READ, [
        (WARNING, "heartbeat.interval.ms", "above a third of session.timeout.ms (10000 ms)"),
    ]),
    ("heartbeat exactly a third", classic(9000, 3000), READ, []),
    ("session below the broker's minimum", classic(3000, 1000), READ, [
        (ERROR, "session.timeout.ms", "outside the broker's group.min/max.session.timeout.ms (6000–1800000 ms)"),
    ]),
    ("session above the broker's maximum", classic(2_000_000, 3000, 3_000_000), READ, [
        (ERROR, "session.timeout.ms", "INVALID_SESSION_TIMEOUT"),
    ]),
    ("session at the broker's bounds", classic(6000, 2000, 300000, 30000), READ, []),
    ("session raised alone, max.poll left at its default: librdkafka's rule, a warning (Java accepts it)",
     classic(600000, 3000, None), READ, [
        (WARNING, "max.poll.interval.ms", "max.poll.interval.ms (300000 ms, the default) is below session.timeout.ms"),
    ]),
    ("stall equal to max.poll", classic(stall=300000), READ, [
        (WARNING, "stallTimeout", "a dynamic member leaves the group by itself first, so vigil adds nothing"),
    ]),
    ("stall beyond a defaulted max.poll", classic(max_poll=None, stall=400000), READ, [
        (WARNING, "stallTimeout", "max.poll.interval.ms (300000 ms, the default)"),
    ]),
    ("stall below two heartbeats", classic(stall=5000), READ, [
        (WARNING, "stallTimeout", "below 2× heartbeat.interval.ms (3000 ms)"),
    ]),
    ("stall at two heartbeats", classic(stall=6000), READ, []),
    ("no watchdog", classic(stall=None), READ, []),
    ("everything at once, errors first", classic(3000, 3000, 1000, 1500), BrokerLimits(), [
        (ERROR, "heartbeat.interval.ms", "must be below"),
        (ERROR, "session.timeout.ms", "outside the broker's"),
        (WARNING, "max.poll.interval.ms", "librdkafka refuses to create the consumer (the Java client accepts it)"),
        (WARNING, "stallTimeout", "a dynamic member leaves"),
        (WARNING, "stallTimeout", "below 2×"),
        (INFO, "group.min.session.timeout.ms", "could not be read"),
    ]),
    ("zero heartbeat: only that", classic(heartbeat=0, max_poll=10), BrokerLimits(), [
        (ERROR, "heartbeat.interval.ms", "heartbeat.interval.ms is 0 ms; it must be a positive number of ms."),
    ]),
    ("negative stall", classic(stall=-1), READ, [
        (ERROR, "stallTimeout", "must be a positive"),
    ]),
    ("KIP-848, sound", consumer(), READ, []),
    ("KIP-848, sound on the dev broker", consumer(30000, 3000), DEV, []),
    ("KIP-848, limits not readable", consumer(), BrokerLimits(), [
        (INFO, "group.consumer.session.timeout.ms", "defaults (session 45000 ms, heartbeat 5000 ms)"),
    ]),
    ("KIP-848 with a client session", consumer(session=45000), READ, [
        (ERROR, "session.timeout.ms", "group config consumer.session.timeout.ms"),
    ]),
    ("KIP-848 with a client heartbeat", consumer(heartbeat=3000), READ, [
        (ERROR, "heartbeat.interval.ms", "broker's group.consumer.heartbeat.interval.ms"),
    ]),
    ("KIP-848 ignores the classic session/max.poll rule", consumer(max_poll=1000, stall=None), READ, []),
    ("KIP-848, stall below two of the group's heartbeats", consumer(stall=8000), READ, [
        (WARNING, "stallTimeout", "below 2× the group's heartbeat interval (5000 ms)"),
    ]),
    ("KIP-848, stall equal to max.poll", consumer(max_poll=60000, stall=60000), READ, [
        (WARNING, "stallTimeout", "leaves the group by itself first"),
    ]),
    ("KIP-848 on a 3.9 coordinator (classic only)", consumer(), ONLY_CLASSIC, [
        (ERROR, "group.coordinator.rebalance.protocols", "serves only classic"),
    ]),
    ("KIP-848 on a 4.x coordinator", consumer(), SERVES_848, []),
    ("classic on a 3.9 coordinator", classic(), ONLY_CLASSIC, []),
]  # fmt: skip


@pytest.mark.parametrize(("client", "broker", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_rules(client: ClientTimings, broker: BrokerLimits, expected: list[tuple[Severity, str, str]]) -> None:
    findings = check_timings(client, broker)
    assert [(f.severity, f.setting) for f in findings] == [(severity, setting) for severity, setting, _ in expected]
    for finding, (_, _, phrase) in zip(findings, expected, strict=True):
        assert phrase in finding.message


def test_client_defaults_are_librdkafka_and_java() -> None:
    assert CLIENT_DEFAULTS == {
        "session.timeout.ms": 45000,
        "heartbeat.interval.ms": 3000,
        "max.poll.interval.ms": 300000,
    }


def test_broker_defaults_are_kafkas() -> None:
    limits = BrokerLimits()
    assert (limits.min_session_ms, limits.max_session_ms) == (6000, 1800000)
    assert (limits.consumer_min_session_ms, limits.consumer_max_session_ms) == (45000, 60000)
    assert (limits.consumer_min_heartbeat_ms, limits.consumer_max_heartbeat_ms) == (5000, 15000)
    assert (limits.consumer_session_ms, limits.consumer_heartbeat_ms) == (45000, 5000)
    assert limits.from_defaults


# --- properties ---------------------------------------------------------------------------------------------------


@st.composite
def brokers(draw: st.DrawFn) -> BrokerLimits:
    low = draw(st.integers(1, 60000))
    consumer_hb = draw(st.integers(1, 15000))
    return BrokerLimits(
        min_session_ms=low,
        max_session_ms=draw(st.integers(max(low, 3), 3_600_000)),
        consumer_heartbeat_ms=consumer_hb,
        consumer_session_ms=draw(st.integers(consumer_hb + 1, 120000)),
        from_defaults=draw(st.booleans()),
        protocols=draw(
            st.none() | st.sampled_from([("classic",), ("classic", "consumer"), ("classic", "consumer", "streams")])
        ),
    )


@st.composite
def sound_classic(draw: st.DrawFn, broker: BrokerLimits) -> ClientTimings:
    session = draw(st.integers(max(broker.min_session_ms, 3), broker.max_session_ms))
    heartbeat = draw(st.integers(1, session // 3))
    max_poll = draw(st.integers(session, 10 * session))
    stall = draw(st.none() | st.integers(2 * heartbeat, max_poll - 1))
    return classic(session, heartbeat, max_poll, stall)


@st.composite
def sound_consumer(draw: st.DrawFn, broker: BrokerLimits) -> ClientTimings:
    floor = 2 * broker.consumer_heartbeat_ms
    max_poll = draw(st.integers(floor + 1, 10 * floor))
    return consumer(max_poll, draw(st.none() | st.integers(floor, max_poll - 1)))


@given(data=st.data(), broker=brokers(), protocol=st.sampled_from(GroupProtocol))
def test_a_config_that_satisfies_every_rule_has_no_error_and_no_warning(
    data: st.DataObject, broker: BrokerLimits, protocol: GroupProtocol
) -> None:
    if protocol is CONSUMER and broker.protocols is not None and "consumer" not in broker.protocols:
        broker = replace(broker, protocols=(*broker.protocols, "consumer"))  # sound includes a coordinator serving it
    client = data.draw(sound_classic(broker) if protocol is CLASSIC else sound_consumer(broker))
    findings = check_timings(client, broker)
    assert [f.severity for f in findings] == ([INFO] if broker.from_defaults else [])


times = st.none() | st.integers(-10, 4_000_000)


@given(
    protocol=st.sampled_from(GroupProtocol),
    session=times,
    heartbeat=times,
    max_poll=times,
    stall=times,
    broker=brokers(),
)
def test_an_error_exactly_when_kafka_or_the_client_would_refuse(
    *,
    protocol: GroupProtocol,
    session: int | None,
    heartbeat: int | None,
    max_poll: int | None,
    stall: int | None,
    broker: BrokerLimits,
) -> None:
    client = ClientTimings(protocol, session, heartbeat, max_poll, stall)
    findings = check_timings(client, broker)
    assert all(_one_line(f) for f in findings)
    assert [f.severity for f in findings] == sorted((f.severity for f in findings), key=[ERROR, WARNING, INFO].index)
    assert any(f.severity is ERROR for f in findings) == _refused(client, broker)


def _one_line(finding: Finding) -> bool:
    return bool(finding.message) and "\n" not in finding.message and finding.message.endswith(".")


def _refused(client: ClientTimings, broker: BrokerLimits) -> bool:
    """An independent statement of what is refused."""
    values = (client.session_timeout_ms, client.heartbeat_interval_ms, client.max_poll_interval_ms)
    if any(v is not None and v <= 0 for v in (*values, client.stall_timeout_ms)):
        return True
    if client.protocol is CONSUMER:
        unserved = broker.protocols is not None and "consumer" not in broker.protocols
        return unserved or client.session_timeout_ms is not None or client.heartbeat_interval_ms is not None
    session = 45000 if client.session_timeout_ms is None else client.session_timeout_ms
    heartbeat = 3000 if client.heartbeat_interval_ms is None else client.heartbeat_interval_ms
    # max.poll below the session is refused by librdkafka only: a warning (the Java client accepts it)
    return heartbeat >= session or not broker.min_session_ms <= session <= broker.max_session_ms


def test_a_group_s_own_timings_are_the_ones_in_effect_for_kip848() -> None:
    """The group config (or the broker's value it defaults to) decides the KIP-848 session and heartbeat, not
    Kafka's 45 s / 5 s: a stall timeout of 8 s is fine against a 1 s heartbeat, not against 5 s."""
    broker = BrokerLimits(from_defaults=False)
    assert [f.setting for f in check_timings(consumer(stall=8000), broker)] == ["stallTimeout"]
    assert check_timings(consumer(stall=8000), broker.for_group(session_ms=10000, heartbeat_ms=1000)) == []


@pytest.mark.parametrize(
    ("wanted", "expected", "note"),
    [
        (50000, 50000, None),
        (600000, 60000, "capped at the broker's group.consumer.max.session.timeout.ms (60000 ms), below the 600000 ms"),
        (60000, 60000, None),
        (1000, 45000, "raised to the broker's group.consumer.min.session.timeout.ms (45000 ms)"),
    ],
)
def test_a_kip848_session_raise_stays_within_the_broker_s_bounds_and_says_so(
    wanted: int, expected: int, note: str | None
) -> None:
    raised = session_raise(wanted, BrokerLimits())
    assert raised.session_ms == expected
    if note is None:
        assert raised.note is None
    else:
        assert raised.note is not None
        assert note in raised.note


@given(st.integers(1, 10_000_000), st.integers(1, 100_000), st.integers(0, 100_000))
def test_a_session_raise_is_always_within_bounds_and_noted_exactly_when_changed(
    wanted: int, low: int, span: int
) -> None:
    limits = BrokerLimits(consumer_min_session_ms=low, consumer_max_session_ms=low + span)
    raised = session_raise(wanted, limits)
    assert limits.consumer_min_session_ms <= raised.session_ms <= limits.consumer_max_session_ms
    assert (raised.note is None) is (raised.session_ms == wanted)
