"""Classic groups' generations, read from `__consumer_offsets` by one thread per Kafka cluster
(vigil_core.consumer_offsets.generations decides what a record means).

DescribeGroups carries no generation, so this is how the operator counts a classic group's rebalances exactly. The
reader joins no group and commits nothing (topic_reader): it reads every partition of the topic from its beginning
(compacted, so mostly one record per group and committed partition) to the end, then on. It decodes only the keys of
group metadata records (two bytes compared per offset commit). Without READ on the topic (an authorizer that does not
grant it) it says so once and counts nothing: the classic groups' rebalance counters stay still, never wrong.
"""

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from vigil_core.consumer_offsets.generations import Generations
from vigil_core.kafka.security import KafkaConnection
from vigil_operator.topic_reader import TopicReader

TOPIC = "__consumer_offsets"
GROUP_ID = "vigil-operator-generations"
"""The reader's `group.id`: never joined, but librdkafka looks its coordinator up (GROUP DESCRIBE)."""
BATCH = 1000
RETRY_SECONDS = 30.0
"""After the topic could not be read (no access, no broker): when to try again."""


class GenerationFeed(TopicReader):
    def __init__(self, connection: KafkaConnection) -> None:
        """Reads from now on. `stop` waits at most 2 s: the reader ends within a poll (0.5 s), or a metadata wait
        (10 s) when no broker answers, and the operator's exit is never held up by a cluster that is down."""
        super().__init__(
            connection, TOPIC, name="vigil-generations", retry_seconds=RETRY_SECONDS, join_seconds=2,
            config={"group.id": GROUP_ID, "enable.partition.eof": True},
        )  # fmt: skip
        self._generations = Generations()
        self.start()

    def generation(self, group: str) -> int | None:
        """The classic group's generation; None until the topic was read to its end once, or when no record of the
        group was read (it never completed a rebalance, or it is a KIP-848 group)."""
        return self._generations.generation(group)

    def _starts(self, consumer: Consumer, partitions: list[int]) -> list[TopicPartition]:
        self._generations.begin(len(partitions))
        return [TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in partitions]

    def _read(self, consumer: Consumer) -> None:
        for message in consumer.consume(BATCH, timeout=0.5):
            error = message.error()
            if error is None:
                self._generations.read(message.key(), message.value())
            elif error.code() == KafkaError._PARTITION_EOF:  # noqa: SLF001 - confluent-kafka's public name
                self._generations.reached_end(message.partition() or 0)
            else:
                self._say_error(error, f"{TOPIC}: {error}: classic groups' rebalances are not counted meanwhile")

    def _unreadable(self, why: str) -> str:
        return f"{TOPIC} cannot be read ({why}): classic groups' rebalances are not counted"
