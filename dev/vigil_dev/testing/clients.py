"""Real confluent-kafka clients for tests and the demo: topics, producers, consumer members in a group."""

import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, ConsumerGroupDescription, NewTopic

from vigil_core import events
from vigil_core.kafka.security import ClientConfig, KafkaConnection
from vigil_dev.testing.waiting import wait_for
from vigil_testapps import config as testapps_config

# the test rules' client settings: defined with the test apps (which run in pods without vigil_dev), used here too
CONSUMER_DEFAULTS = testapps_config.CONSUMER_DEFAULTS
KIP848_BROKER_SIDE = testapps_config.KIP848_BROKER_SIDE
QUIET = testapps_config.QUIET


def unique(prefix: str) -> str:
    """A topic or group name no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def admin(conn: KafkaConnection) -> AdminClient:
    return AdminClient(conn.confluent_config() | QUIET)


def create_topic(conn: KafkaConnection, name: str, partitions: int = 3, replication: int = 1) -> str:
    """Create a topic and wait until its partitions have leaders (auto-creation is off in tests)."""
    client = admin(conn)  # keep the handle alive until its futures resolve (else: _DESTROY)
    futures = client.create_topics([NewTopic(name, partitions, replication)], operation_timeout=30)
    futures[name].result(timeout=60)
    wait_for(
        lambda: _leaders(conn, name),
        lambda leaders: leaders == partitions,
        timeout=30,
        what=f"leaders for topic {name}",
    )
    return name


def _leaders(conn: KafkaConnection, topic: str) -> int:
    meta = admin(conn).list_topics(topic=topic, timeout=5).topics.get(topic)
    if meta is None or meta.error is not None:
        return 0
    return sum(1 for p in meta.partitions.values() if p.leader >= 0)


def produce(
    conn: KafkaConnection, topic: str, values: Iterable[str], key: str | None = None, partition: int | None = None
) -> int:
    """Produce every value (acks=all, idempotent) and flush; returns how many were delivered. Without a key or a
    partition, librdkafka's sticky partitioner may put a whole batch on one partition."""
    producer = Producer(conn.confluent_config() | QUIET | {"enable.idempotence": True, "linger.ms": 5})
    failures: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            failures.append(str(err))

    count = 0
    for value in values:
        while True:
            try:
                producer.produce(
                    topic,
                    value=value.encode(),
                    key=key.encode() if key else None,
                    on_delivery=on_delivery,
                    partition=-1 if partition is None else partition,  # -1: librdkafka's partitioner decides
                )
                break
            except BufferError:
                producer.poll(0.1)
        count += 1
    remaining = producer.flush(60)
    if remaining or failures:
        raise AssertionError(f"produce to {topic}: {remaining} undelivered, errors: {failures[:3]}")
    return count


def produce_spread(conn: KafkaConnection, topic: str, values: list[str], partitions: int) -> int:
    """Produce `values` round-robin over every partition, explicitly: a test that needs data on a given
    partition (the stalled member's) must not depend on where the sticky partitioner happens to put a batch."""
    return sum(produce(conn, topic, values[p::partitions], partition=p) for p in range(partitions))


def describe_group(conn: KafkaConnection, group: str) -> ConsumerGroupDescription:
    client = admin(conn)
    desc: ConsumerGroupDescription = client.describe_consumer_groups([group], request_timeout=10)[group].result(15)
    return desc


def committed(conn: KafkaConnection, group: str) -> dict[int, int]:
    """partition → committed offset of `group` (every topic it committed on; -1001, none, is left out)."""
    client = admin(conn)
    request = [ConsumerGroupTopicPartitions(group)]
    answer = client.list_consumer_group_offsets(request, request_timeout=10)[group].result(15)
    return {tp.partition: tp.offset for tp in answer.topic_partitions if tp.offset >= 0}


def stable_members(conn: KafkaConnection, group: str) -> int:
    """Members of `group` if it is Stable with every member assigned something, else -1."""
    try:
        desc = describe_group(conn, group)
    except KafkaException:
        return -1
    if str(desc.state).split(".")[-1].upper() != "STABLE":
        return -1
    if any(not m.assignment.topic_partitions for m in desc.members):
        return -1
    return len(desc.members)


@dataclass
class Member:
    """One real consumer in a group, polling in its own thread and recording what it consumed.

    `paused_polling` stops calling poll() while librdkafka keeps heartbeating in the background: the
    stalled-but-alive member vigil exists for.
    """

    conn: KafkaConnection
    group: str
    topics: list[str]
    client_id: str
    extra: ClientConfig = field(default_factory=dict)
    consumed: list[tuple[int, int, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    paused_polling: threading.Event = field(default_factory=threading.Event)
    parked: threading.Event = field(default_factory=threading.Event)
    """Set while the member's thread has seen `paused_polling` and calls poll() no more."""
    polls: int = 0
    """poll() calls so far (the member's liveness, as a watchdog would see it)."""
    member_id: str | None = None
    """As the client last reported it; read from the member's own thread (the consumer is not shared)."""
    assigned: list[tuple[str, int]] = field(default_factory=list)
    group_metadata: bytes | None = None
    """librdkafka's CGMDv2 bytes (generation, member id, instance id) as of the last poll."""
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    consumer: Any = None
    consumer_factory: Callable[[ClientConfig], Any] = Consumer
    """What builds the client: confluent-kafka's Consumer, or the app helper that beacons to a sidecar."""
    listener: bool = False
    """Subscribe with rebalance callbacks (they do nothing): librdkafka then hands every revocation to the app's
    poll, as the Java client does with a `ConsumerRebalanceListener` — a member that does not poll holds it up."""
    stall_on: str | None = None
    """A poison pill: on a record with this value the member stops polling (it hangs "processing" it). With
    `enable.auto.offset.store` False in `extra` the member stores each other record's offset once processed, so the
    pill's offset is never committed and the partition's next owner reads it again."""

    def start(self) -> "Member":
        defaults = dict(CONSUMER_DEFAULTS)
        if self.extra.get("group.protocol") == "consumer":
            # KIP-848: session, heartbeat and assignor live on the broker; librdkafka rejects them client-side
            for key in KIP848_BROKER_SIDE:
                defaults.pop(key, None)
        identity: ClientConfig = {"group.id": self.group, "client.id": self.client_id}
        conf = self.conn.confluent_config() | defaults | identity | self.extra
        self.consumer = self.consumer_factory(conf)
        if self.listener:
            noop: Callable[[Any, list[TopicPartition]], None] = lambda _consumer, _partitions: None  # noqa: E731
            self.consumer.subscribe(self.topics, on_assign=noop, on_revoke=noop, on_lost=noop)
        else:
            self.consumer.subscribe(self.topics)
        self._thread = threading.Thread(target=self._run, name=f"member-{self.client_id}", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            if self.paused_polling.is_set():
                self.parked.set()
                time.sleep(0.05)
                continue
            self.parked.clear()
            msg = self.consumer.poll(0.2)
            self.polls += 1
            self.member_id = self.consumer.memberid()
            self.assigned = sorted((tp.topic, tp.partition) for tp in self.consumer.assignment())
            self.group_metadata = self.consumer.consumer_group_metadata()
            if msg is None:
                continue
            if msg.error() is not None:
                self.errors.append(str(msg.error()))
                continue
            value = msg.value().decode()
            if value == self.stall_on:
                self.paused_polling.set()
                continue
            self.consumed.append((msg.partition(), msg.offset(), value))
            if self.extra.get("enable.auto.offset.store") is False:
                self.consumer.store_offsets(msg)

    def close(self) -> None:
        """Leave the group the graceful way (LeaveGroup from the client).

        A member with rebalance callbacks (`listener`) that stopped polling (a stall) is first let poll again for a
        moment, so that what the group did meanwhile (vigil evicted it while its revocation was pending) is served
        in poll, as every rebalance is. Served inside close instead, librdkafka 2.16 can leave the automatic unassign
        of confluent-kafka's rebalance callback unanswered for good, and that call holds the GIL: the whole test
        process stopped (CI, 2026-11-27, `py-spy dump --native`: Consumer_close → rd_kafka_consumer_close →
        Consumer_rebalance_cb → rd_kafka_assign waiting), which no timeout here or in pytest-timeout can interrupt.
        Without callbacks confluent-kafka registers none, and a stalled member is closed as it is (polling again
        would rejoin it: a rebalance the test did not make). The close itself runs on its own thread, left behind
        with a warning after CLOSE_TIMEOUT. The test's assertions were made before."""
        if self.listener and self.paused_polling.is_set() and self._thread is not None and self._thread.is_alive():
            polled = self.polls
            self.paused_polling.clear()
            deadline = time.monotonic() + POLL_BEFORE_CLOSE
            while self.polls < polled + 5 and time.monotonic() < deadline:
                time.sleep(0.05)
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self.consumer is not None:
            closing = threading.Thread(target=self.consumer.close, name=f"close-{self.client_id}", daemon=True)
            closing.start()
            closing.join(timeout=CLOSE_TIMEOUT)
            if closing.is_alive():
                warnings.warn(f"{self.client_id}: librdkafka's close did not return within {CLOSE_TIMEOUT:.0f}s; "
                              "left behind", stacklevel=2)  # fmt: skip


POLL_BEFORE_CLOSE = 5.0
"""How long a stalled member polls again before it closes, at most (five polls of 0.2 s serve what is pending)."""
CLOSE_TIMEOUT = 30.0
"""How long a test member's close may take before it is left behind (librdkafka's own leave timeout is 5 s)."""


def start_group(
    conn: KafkaConnection, group: str, topics: list[str], size: int, extra: ClientConfig | None = None
) -> list[Member]:
    """Start `size` members and wait until the broker says the group is Stable with all of them assigned."""
    members = [
        Member(conn, group, topics, client_id=f"{group}-m{i}", extra=dict(extra or {})).start() for i in range(size)
    ]
    wait_stable(conn, group, size)
    return members


def wait_stable(conn: KafkaConnection, group: str, size: int, timeout: float = 60) -> None:
    """Until the broker says `group` is Stable with `size` members, each assigned something."""
    wait_for(
        lambda: stable_members(conn, group),
        lambda n: n == size,
        timeout=timeout,
        what=f"group {group} Stable with {size} assigned members",
    )


OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_PARTITIONS = 4
"""offsets.topic.num.partitions of the test broker (tests/README.md)."""


RawRecord = tuple[int, int, bytes | None, bytes | None]
"""(partition, offset, key, value) as the broker stored them."""


def read_offsets_topic(conn: KafkaConnection, partitions: int = OFFSETS_PARTITIONS) -> list[RawRecord]:
    """Every record of __consumer_offsets up to the current end: (partition, offset, key, value), raw."""
    reader = Consumer(
        conn.confluent_config() | QUIET | {"group.id": unique("offsets-reader"), "enable.auto.commit": False}
    )
    try:
        ends = {p: reader.get_watermark_offsets(TopicPartition(OFFSETS_TOPIC, p), timeout=10)[1]
                for p in range(partitions)}  # fmt: skip
        reader.assign([TopicPartition(OFFSETS_TOPIC, p, OFFSET_BEGINNING) for p in range(partitions)])
        out: list[RawRecord] = []
        position = dict.fromkeys(ends, -1)
        deadline = time.monotonic() + 60
        while any(position[p] + 1 < ends[p] for p in ends):
            assert time.monotonic() < deadline, f"__consumer_offsets not read to its end: {position} vs {ends}"
            msg = reader.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            partition, offset = msg.partition(), msg.offset()
            assert partition is not None
            assert offset is not None
            out.append((partition, offset, msg.key(), msg.value()))
            position[partition] = offset
        return out
    finally:
        reader.close()


def group_events(conn: KafkaConnection, topic: str, group: str, *, count: int) -> list[events.Event]:
    """The first `count` of vigil's events about `group` on the events topic `topic`, in their order."""
    consumer = Consumer(conn.confluent_config() | QUIET | {"group.id": unique("g-ev"), "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    received: list[events.Event] = []

    def drain() -> int:
        msg = consumer.poll(0.5)
        value = None if msg is None or msg.error() is not None else msg.value()
        if value is not None and (event := events.parse_event(value)).group == group:
            received.append(event)
        return len(received)

    try:
        wait_for(drain, lambda n: n >= count, timeout=30, what=f"{count} events of {group}")
    finally:
        consumer.close()
    return received
