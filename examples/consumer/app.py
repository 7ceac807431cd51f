"""The payments consumer: how to wire a Kafka consumer for vigil (see examples/README.md).

- confluent-kafka through vigil's helper, `vigil_sidecar.client.Consumer`: after every poll it tells the injected
  sidecar the app is alive (one UDP datagram: never blocks, never raises), and it holds one idle connection to the
  sidecar that the kernel closes when this process ends, so the sidecar can tell a dead app from a stalled one.
  Without a sidecar (no `VIGIL_BEACON_ADDR`) it is a plain confluent-kafka Consumer.
- Static membership: `group.instance.id` comes from `KAFKA_GROUP_INSTANCE_ID`, which vigil's webhook sets to
  `<namespace>-<pod name>` for a static ConsumerGroup. A StatefulSet pod keeps its name across restarts, so its
  replacement takes the same member back without a rebalance (the sidecar heartbeats for it meanwhile).
- At least once: offsets are committed after each batch is processed, never before.
- SIGTERM (the pod is being deleted): finish the batch, commit, close.

Settings, from the environment (the StatefulSet sets them):

    KAFKA_BOOTSTRAP_SERVERS   required   host:port[,host:port...]
    KAFKA_GROUP_ID            required   the consumer group (the ConsumerGroup's spec.groupId)
    KAFKA_TOPICS              required   comma-separated
    KAFKA_GROUP_INSTANCE_ID   -          static membership (vigil's webhook sets it); unset: a dynamic member
    KAFKA_CLIENT_ID           host name  vigil's webhook sets it to the pod name
    KAFKA_SESSION_TIMEOUT_MS, KAFKA_HEARTBEAT_INTERVAL_MS, KAFKA_MAX_POLL_INTERVAL_MS
                              45000, 3000, 300000: declare the same in the ConsumerGroup's spec.client
    LOG_LEVEL                 INFO       DEBUG logs every record
"""

import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Mapping
from types import FrameType
from typing import Any

from confluent_kafka import KafkaException, Message, TopicPartition

from vigil_sidecar.client import Consumer

log = logging.getLogger("payments")

BATCH = 500
"""Records per consume() call: one commit per batch."""
POLL_SECONDS = 1.0
"""The longest a consume() call blocks: how late a SIGTERM is noticed at most."""


def settings(env: Mapping[str, str]) -> tuple[dict[str, Any], list[str]]:
    """librdkafka's configuration and the topics; a missing required variable exits with one line naming it."""

    def required(name: str) -> str:
        value = env.get(name, "").strip()
        if not value:
            raise SystemExit(f"payments: {name} is required")
        return value

    config: dict[str, Any] = {
        "bootstrap.servers": required("KAFKA_BOOTSTRAP_SERVERS"),
        "group.id": required("KAFKA_GROUP_ID"),
        "client.id": env.get("KAFKA_CLIENT_ID") or socket.gethostname(),
        "session.timeout.ms": int(env.get("KAFKA_SESSION_TIMEOUT_MS") or 45000),
        "heartbeat.interval.ms": int(env.get("KAFKA_HEARTBEAT_INTERVAL_MS") or 3000),
        "max.poll.interval.ms": int(env.get("KAFKA_MAX_POLL_INTERVAL_MS") or 300000),
        "partition.assignment.strategy": "cooperative-sticky",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    if env.get("KAFKA_GROUP_INSTANCE_ID"):
        config["group.instance.id"] = env["KAFKA_GROUP_INSTANCE_ID"]
    topics = [t.strip() for t in required("KAFKA_TOPICS").split(",") if t.strip()]
    return config, topics


def process(message: Message) -> None:
    """The business logic (replace it with yours). Raising stops the app before the batch is committed: its
    records are read again after the restart."""
    log.debug(
        "%s[%d]@%d: %d bytes", message.topic(), message.partition(), message.offset(), len(message.value() or b"")
    )


def run(config: dict[str, Any], topics: list[str], stopping: threading.Event) -> None:
    consumer = Consumer(config)
    consumer.subscribe(topics, on_assign=_assigned, on_revoke=_revoked)
    processed = 0
    try:
        while not stopping.is_set():
            records = [m for m in consumer.consume(BATCH, timeout=POLL_SECONDS) if _record(m)]
            for message in records:
                process(message)
            if records:
                _commit(consumer)
                processed += len(records)
    finally:
        consumer.close()  # a static member sends no LeaveGroup: its partitions wait for the restarted pod
        log.info("closed after %d records", processed)


def _record(message: Message) -> bool:
    """A record to process; an error is logged (librdkafka retries on its own) or, if fatal, raised."""
    error = message.error()
    if error is None:
        return True
    if error.fatal():
        raise KafkaException(error)
    log.warning("consume: %s", error)
    return False


def _commit(consumer: Consumer) -> None:
    try:
        consumer.commit(asynchronous=False)
    except KafkaException as exc:  # e.g. a rebalance took the partitions: their new owner reads the batch again
        log.warning("commit failed, the batch will be read again: %s", exc.args[0])


def _assigned(_consumer: object, partitions: list[TopicPartition]) -> None:
    if partitions:  # cooperative rebalances call this with only what changed, often nothing
        log.info("assigned %s", _names(partitions))


def _revoked(_consumer: object, partitions: list[TopicPartition]) -> None:
    if partitions:
        log.info("revoked %s", _names(partitions))


def _names(partitions: list[TopicPartition]) -> str:
    return ", ".join(f"{p.topic}[{p.partition}]" for p in partitions)


def main() -> int:
    logging.basicConfig(
        level=os.environ.get("LOG_LEVEL", "INFO"),
        stream=sys.stdout,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    config, topics = settings(os.environ)
    stopping = threading.Event()

    def stop(signum: int, _frame: FrameType | None) -> None:
        log.info("%s: finishing the batch, then closing", signal.Signals(signum).name)
        stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    log.info(
        "consuming %s as %s (client.id %s, group.instance.id %s, sidecar %s)",
        ",".join(topics),
        config["group.id"],
        config["client.id"],
        config.get("group.instance.id", "none: a dynamic member"),
        os.environ.get("VIGIL_BEACON_ADDR") or "none",
    )
    run(config, topics, stopping)
    return 0


if __name__ == "__main__":
    sys.exit(main())
