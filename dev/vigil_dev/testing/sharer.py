"""A real share-group member (KIP-932, confluent-kafka's ShareConsumer) polling in its own thread."""

import threading

from confluent_kafka import ShareConsumer

from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.testing import clients


class Sharer:
    """A share-group member that polls until closed (a share member that stops polling is removed)."""

    def __init__(self, kafka: KafkaCluster, group: str, topic: str, client_id: str = "rdkafka") -> None:
        config = kafka.connection().confluent_config() | clients.QUIET | {"group.id": group, "client.id": client_id}
        self._consumer = ShareConsumer(config)
        self._consumer.subscribe([topic])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"share-{group}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._consumer.poll(0.2)

    def close(self) -> None:
        """Stop polling and close: the member leaves the group."""
        self._stop.set()
        self._thread.join(10)
        self._consumer.close()
