"""The sidecars' events, read back by the operator: one reader thread per Kafka cluster, folded into a StallBook.

The reader joins no group (it assigns every partition of the events topic, starting LOOKBACK ago by timestamp),
so several operator replicas each see every event and commit nothing. A record that is not a vigil event is
counted and skipped, never fatal: the topic is shared with other writers' versions.
"""

import logging
import threading
import time
from datetime import UTC, datetime, timedelta

from confluent_kafka import OFFSET_END, Consumer, KafkaException, TopicPartition

from vigil_core import events
from vigil_core.kafka.security import KafkaConnection
from vigil_operator.domain import stalls

log = logging.getLogger(__name__)
LOOKBACK = timedelta(hours=1)


class EventFeed:
    def __init__(self, connection: KafkaConnection, topic: str) -> None:
        self.topic = topic
        self._connection = connection
        self._book = stalls.EMPTY
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.undecodable = 0
        self._last_undecodable: str | None = None
        self.problem: str | None = None
        """Why the feed cannot read (topic missing, no access), for the status; None while it reads."""
        self._thread = threading.Thread(target=self._run, name=f"vigil-events-{topic}", daemon=True)
        self._thread.start()

    def book(self) -> stalls.StallBook:
        with self._lock:
            return self._book

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        config = self._connection.confluent_config() | {
            "group.id": "vigil-operator-feed",  # required by librdkafka; never joined (assign only)
            "enable.auto.commit": False,
            "enable.partition.eof": False,
            "isolation.level": "read_committed",
            "log_level": 3,
        }
        consumer = Consumer(config)
        try:
            while not self._stop.is_set() and not self._assign(consumer):
                self._stop.wait(5)
            while not self._stop.is_set():
                message = consumer.poll(0.5)
                if message is None:
                    continue
                if message.error() is not None:
                    self._say(f"events topic {self.topic!r}: {message.error()}")
                    continue
                self._take(message.value())
        finally:
            consumer.close()

    def _assign(self, consumer: Consumer) -> bool:
        try:
            topic = consumer.list_topics(self.topic, timeout=10).topics.get(self.topic)
            if topic is None or topic.error is not None or not topic.partitions:
                self._say(f"events topic {self.topic!r} not found: stalls reported by sidecars are not seen")
                return False
            since = int((time.time() - LOOKBACK.total_seconds()) * 1000)
            wanted = [TopicPartition(self.topic, p, since) for p in topic.partitions]
            offsets = consumer.offsets_for_times(wanted, timeout=10)
            consumer.assign([TopicPartition(self.topic, o.partition, o.offset if o.offset >= 0 else OFFSET_END)
                             for o in offsets])  # fmt: skip
        except KafkaException as exc:
            self._say(f"events topic {self.topic!r}: {exc.args[0] if exc.args else exc}")
            return False
        self.problem = None
        return True

    def _take(self, value: bytes | None) -> None:
        try:
            event = events.parse_event(value or b"")
        except events.EventDecodeError as exc:
            self.undecodable += 1
            if str(exc) != self._last_undecodable:  # each distinct problem once (a newer sidecar's event type)
                log.warning("events topic %r: skipped a record: %s", self.topic, exc)
                self._last_undecodable = str(exc)
            return
        with self._lock:
            book = self._book.record(event)
            horizon = datetime.now(UTC) - LOOKBACK
            self._book = book.forget_before(horizon) if len(book.reports) > 10_000 else book

    def _say(self, problem: str) -> None:
        if problem != self.problem:
            log.warning("%s", problem)
        self.problem = problem
