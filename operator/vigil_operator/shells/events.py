"""The operator's events on the events topic: one sink per Kafka connection, made on first use (no topic
configured: nothing is sent)."""

from datetime import datetime

from vigil_core import events
from vigil_core.kafka.event_sink import EventSink
from vigil_core.kafka.security import KafkaConnection
from vigil_operator.domain.status import ConsumerGroupStatus


class Emitter:
    def __init__(self, topic: str | None) -> None:
        self.topic = topic
        self._sinks: dict[KafkaConnection, EventSink] = {}

    def emit(self, connection: KafkaConnection, event: events.Event) -> None:
        """One event on the events topic (none configured: nothing)."""
        if not self.topic:
            return
        sink = self._sinks.get(connection)
        if sink is None:
            sink = self._sinks[connection] = EventSink(connection, self.topic, "vigil-operator")
        sink.emit(event)

    def snapshot(
        self, connection: KafkaConnection, namespace: str, group_id: str, status: ConsumerGroupStatus, *,
        lag: int | None, now: datetime,
    ) -> None:  # fmt: skip
        """A group-snapshot event each resync, so the report works where __consumer_offsets cannot be read."""
        self.emit(connection, snapshot(namespace, group_id, status, lag, now))

    def close(self) -> None:
        for sink in self._sinks.values():
            sink.flush(5)


def snapshot(
    namespace: str, group_id: str, status: ConsumerGroupStatus, lag: int | None, now: datetime
) -> events.GroupSnapshot:
    """The group as this resync's status shows it, with its committed lag (`reconcile.lag`)."""
    return events.GroupSnapshot(
        time=now,
        cluster=status.cluster_id or "",
        group=group_id,
        source="operator",
        namespace=namespace,
        payload=events.GroupSnapshotPayload(
            state=status.state or "Unknown",
            protocol=status.protocol or "unknown",
            generation=status.generation,
            coordinator=status.coordinator,
            members=tuple(
                events.SnapshotMember(
                    member=events.MemberRef(member_id=m.member_id, instance_id=m.instance_id, client_id=m.client_id),
                    host=m.host,
                    pod=m.pod,
                )
                for m in status.members
            ),
            total_lag=lag,
        ),
    )
