"""Classic groups' generations, read from `__consumer_offsets` by one thread per Kafka cluster
(vigil_core.consumer_offsets.generations decides what a record means).

DescribeGroups carries no generation, so this is how the operator counts a classic group's rebalances exactly. The
reader joins no group and commits nothing: it assigns every partition of the topic from its beginning (compacted, so
mostly one record per group and committed partition), reads to the end, then on. It decodes only the keys of
group metadata records (two bytes compared per offset commit). Without READ on the topic (an authorizer that does not
grant it) it says so once and counts nothing: the classic groups' rebalance counters stay still, never wrong.
"""

import logging
import threading

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from vigil_core.consumer_offsets.generations import Generations
from vigil_core.kafka.security import KafkaConnection

log = logging.getLogger(__name__)
TOPIC = "__consumer_offsets"
BATCH = 1000
RETRY_SECONDS = 30.0
"""After the topic could not be read (no access, no broker): when to try again."""


class GenerationFeed:
    def __init__(self, connection: KafkaConnection) -> None:
        self._connection = connection
        self._generations = Generations()
        self._stop = threading.Event()
        self.problem: str | None = None
        """Why the topic cannot be read; None while it is."""
        self._thread = threading.Thread(target=self._run, name="vigil-generations", daemon=True)
        self._thread.start()

    def generation(self, group: str) -> int | None:
        """The classic group's generation; None until the topic was read to its end once, or when no record of the
        group was read (it never completed a rebalance, or it is a KIP-848 group)."""
        return self._generations.generation(group)

    def stop(self) -> None:
        """The reader ends within a poll (0.5 s), or a metadata wait (10 s) when no broker answers: not waited
        for past 2 s, so the operator's exit is never held up by a cluster that is down."""
        self._stop.set()
        self._thread.join(timeout=2)

    def _run(self) -> None:
        config = self._connection.confluent_config() | {
            "group.id": "vigil-operator-generations",  # required by librdkafka; never joined (assign only)
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "log_level": 3,
        }
        consumer = Consumer(config)
        try:
            while not self._stop.is_set() and not self._assign(consumer):
                self._stop.wait(RETRY_SECONDS)
            while not self._stop.is_set():
                for message in consumer.consume(BATCH, timeout=0.5):
                    error = message.error()
                    if error is None:
                        self._generations.read(message.key(), message.value())
                    elif error.code() == KafkaError._PARTITION_EOF:  # noqa: SLF001 - confluent-kafka's public name
                        self._generations.reached_end(message.partition() or 0)
                    else:
                        self._say(f"{TOPIC}: {error}: classic groups' rebalances are not counted meanwhile")
        finally:
            consumer.close()

    def _assign(self, consumer: Consumer) -> bool:
        try:
            topic = consumer.list_topics(TOPIC, timeout=10).topics.get(TOPIC)
            if topic is None or topic.error is not None or not topic.partitions:
                why = topic.error if topic is not None and topic.error is not None else "not found"
                self._say(f"{TOPIC} cannot be read ({why}): classic groups' rebalances are not counted")
                return False
            self._generations.begin(len(topic.partitions))
            consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in topic.partitions])
        except KafkaException as exc:
            self._say(f"{TOPIC}: {exc.args[0] if exc.args else exc}: classic groups' rebalances are not counted")
            return False
        self.problem = None
        return True

    def _say(self, problem: str) -> None:
        if problem != self.problem:
            log.warning("Kafka at %s: %s", self._connection.bootstrap_servers, problem)
        self.problem = problem
