"""Write vigil's events to Kafka, keyed by group, without ever blocking or failing the caller.

The events topic is created by whoever owns it (the Helm chart's setup job, or the platform team; see README
"Events topic"): vigil never auto-creates it. A delivery failure is counted and reported in one line; the
watchdog keeps running without its audit trail rather than stopping.
"""

import logging
import threading
from typing import Any

from confluent_kafka import KafkaException, Producer

from vigil_core.events import EVENTS_TOPIC_DEFAULT, Event, encode_event, event_key
from vigil_core.kafka.security import KafkaConnection

log = logging.getLogger(__name__)


class EventSink:
    def __init__(
        self,
        connection: KafkaConnection,
        topic: str = EVENTS_TOPIC_DEFAULT,
        client_id: str = "vigil",
        delivery_timeout: float = 30.0,
    ) -> None:
        """`delivery_timeout`: seconds an event may wait for its topic and broker before it counts as failed."""
        self.topic = topic
        self._producer = Producer(
            connection.confluent_config()
            | {
                "client.id": client_id,
                "enable.idempotence": True,
                "linger.ms": 50,
                "message.timeout.ms": int(delivery_timeout * 1000),
                "log_level": 3,
            }
        )
        self._lock = threading.Lock()
        self.delivered = 0
        self.failed = 0
        self.last_error: str | None = None

    def emit(self, event: Event) -> None:
        """Queue one event; never raises (a full queue or a bad topic is counted as a failure)."""
        try:
            self._producer.produce(self.topic, key=event_key(event), value=encode_event(event), on_delivery=self._done)
        except (BufferError, KafkaException, ValueError) as exc:
            self._failure(f"{type(exc).__name__}: {exc}")
        self._producer.poll(0)

    def flush(self, timeout: float = 10.0) -> int:
        """Wait for queued events; returns how many are still undelivered."""
        return int(self._producer.flush(timeout))

    def _done(self, err: Any, _msg: Any) -> None:
        if err is None:
            with self._lock:
                self.delivered += 1
        else:
            self._failure(str(err))

    def _failure(self, reason: str) -> None:
        with self._lock:
            self.failed += 1
            first = self.last_error != reason
            self.last_error = reason
        if first:
            log.warning("events topic %s: an event was not delivered: %s", self.topic, reason)
