"""The sidecars' events, read back by the operator: one reader thread per Kafka cluster, folded into a StallBook.

The reader joins no group and commits nothing (topic_reader): it reads every partition of the events topic from
LOOKBACK ago by timestamp, so several operator replicas each see every event. A record that is not a vigil event is
counted and skipped, never fatal: the topic is shared with other writers' versions.
"""

import logging
import threading
import time
from datetime import UTC, datetime, timedelta

from confluent_kafka import OFFSET_END, Consumer, TopicPartition

from vigil_core import events
from vigil_core.kafka.security import KafkaConnection
from vigil_operator.domain import stalls
from vigil_operator.topic_reader import TopicReader

log = logging.getLogger(__name__)
LOOKBACK = timedelta(hours=1)
GROUP_ID = "vigil-operator-feed"
"""The reader's `group.id`: never joined, but librdkafka looks its coordinator up (GROUP DESCRIBE)."""


class EventFeed(TopicReader):
    def __init__(self, connection: KafkaConnection, topic: str) -> None:
        super().__init__(
            connection, topic, name=f"vigil-events-{topic}", retry_seconds=5, join_seconds=10,
            config={"group.id": GROUP_ID, "enable.partition.eof": False,
                    "isolation.level": "read_committed"},
        )  # fmt: skip
        self._book = stalls.EMPTY
        self._lock = threading.Lock()
        self.undecodable = 0
        self._last_undecodable: str | None = None
        self.start()

    def book(self) -> stalls.StallBook:
        with self._lock:
            return self._book

    def _starts(self, consumer: Consumer, partitions: list[int]) -> list[TopicPartition]:
        since = int((time.time() - LOOKBACK.total_seconds()) * 1000)
        offsets = consumer.offsets_for_times([TopicPartition(self.topic, p, since) for p in partitions], timeout=10)
        return [TopicPartition(self.topic, o.partition, o.offset if o.offset >= 0 else OFFSET_END) for o in offsets]

    def _read(self, consumer: Consumer) -> None:
        message = consumer.poll(0.5)
        if message is None:
            return
        error = message.error()
        if error is not None:
            self._say_error(error, f"events topic {self.topic!r}: {error}")
            return
        self._take(message.value())

    def _unreadable(self, why: str) -> str:
        return f"events topic {self.topic!r} cannot be read ({why}): stalls reported by sidecars are not seen"

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
