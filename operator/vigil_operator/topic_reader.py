"""A topic read whole by one thread that joins no group: it assigns every partition, so several operator replicas
each read every record and commit nothing (the events topic, `__consumer_offsets`).

A subclass says where each partition starts and what a batch of records does; this owns the thread, the
consumer's life, the retry while the topic cannot be read, and logging each problem once.
"""

import logging
import threading
from abc import ABC, abstractmethod
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from vigil_core.kafka.security import KafkaConnection

log = logging.getLogger(__name__)


class TopicReader(ABC):
    def __init__(self, connection: KafkaConnection, topic: str, *, name: str, config: dict[str, Any],
                 retry_seconds: float, join_seconds: float) -> None:  # fmt: skip
        """`config`: librdkafka settings over the connection's (a `group.id` librdkafka requires and never joins);
        `retry_seconds`: how long after the topic could not be read to try again; `join_seconds`: how long `stop`
        waits for the thread."""
        self.topic = topic
        self._connection = connection
        self._config = config
        self._retry_seconds = retry_seconds
        self._join_seconds = join_seconds
        self._stop = threading.Event()
        self.problem: str | None = None
        """The problem logged last (`_say`); None while the topic is read."""
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self._join_seconds)

    @abstractmethod
    def _starts(self, consumer: Consumer, partitions: list[int]) -> list[TopicPartition]:
        """Where each partition is read from. Raises KafkaException."""

    @abstractmethod
    def _read(self, consumer: Consumer) -> None:
        """Read what is there (a poll or a batch), waiting at most about half a second."""

    @abstractmethod
    def _unreadable(self, why: str) -> str:
        """The problem, in words for the operator's log, when the topic cannot be read for `why`."""

    def _run(self) -> None:
        consumer = Consumer(self._connection.confluent_config() | {"enable.auto.commit": False, "log_level": 3}
                            | self._config)  # fmt: skip
        try:
            while not self._stop.is_set() and not self._assign(consumer):
                self._stop.wait(self._retry_seconds)
            while not self._stop.is_set():
                self._read(consumer)
        finally:
            consumer.close()

    def _assign(self, consumer: Consumer) -> bool:
        try:
            topic = consumer.list_topics(self.topic, timeout=10).topics.get(self.topic)
            if topic is None or topic.error is not None or not topic.partitions:
                why = topic.error if topic is not None and topic.error is not None else "not found"
                self._say(self._unreadable(str(why)))
                return False
            consumer.assign(self._starts(consumer, list(topic.partitions)))
        except KafkaException as exc:
            self._say(self._unreadable(str(exc.args[0] if exc.args else exc)))
            return False
        self.problem = None
        return True

    def _say_error(self, error: KafkaError, line: str) -> None:
        """Say a consumer's error (`line`) once. A refused coordinator lookup of the reader's own group id says the
        grant it lacks instead: the reader joins no group and commits nothing, so its records are read all the same."""
        if error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
            group = self._config.get("group.id")
            line = (f"{self.topic}: the reader's group id {group!r} may not be looked up ({error.str()}); its records"
                    " are read all the same: GROUP DESCRIBE on it silences this")  # fmt: skip
        self._say(line)

    def _say(self, problem: str) -> None:
        """Log a problem once, until it changes."""
        if problem != self.problem:
            log.warning("Kafka at %s: %s", self._connection.bootstrap_servers, problem)
        self.problem = problem
