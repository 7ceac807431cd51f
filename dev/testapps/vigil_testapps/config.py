"""Client settings of the test rules, shared by the test apps in pods and the tests that drive them
(`vigil_dev.testing.clients` re-exports them: one definition)."""

from vigil_core.kafka.security import ClientConfig

#: Client settings the test rules require: explicit heartbeat, session, poll interval and assignor.
CONSUMER_DEFAULTS: ClientConfig = {
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 1000,
    "max.poll.interval.ms": 300000,
    "partition.assignment.strategy": "range",
    "auto.offset.reset": "earliest",
    "enable.auto.commit": True,
    "auto.commit.interval.ms": 500,
}

#: Settings a KIP-848 (`group.protocol=consumer`) client must not set.
KIP848_BROKER_SIDE = ("session.timeout.ms", "heartbeat.interval.ms", "partition.assignment.strategy")

#: librdkafka logs only errors: its retries while a fresh broker loads are expected here, not news.
QUIET: ClientConfig = {"log_level": 3}
