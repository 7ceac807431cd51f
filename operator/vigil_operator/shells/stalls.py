"""Stalls the sidecars reported on the events topic (vigil_operator.event_feed), one feed per Kafka connection,
read each resync for the group's current stalls."""

from datetime import datetime, timedelta
from typing import Any

from vigil_core.kafka.security import KafkaConnection
from vigil_operator.domain.reconcile import GroupFacts, Unreachable
from vigil_operator.domain.spec import ConsumerGroupSpec
from vigil_operator.event_feed import EventFeed


class StallFeeds:
    def __init__(self, topic: str | None, resync_seconds: float) -> None:
        self.topic = topic
        self.resync_seconds = resync_seconds
        self._feeds: dict[KafkaConnection, EventFeed] = {}

    def current(
        self, connection: KafkaConnection | None, spec: ConsumerGroupSpec, facts: GroupFacts | Unreachable,
        now: datetime,
    ) -> tuple[Any, ...]:  # fmt: skip
        """The group's stalls still current (none without an events topic or a described group)."""
        if connection is None or not isinstance(facts, GroupFacts) or not self.topic:
            return ()
        feed = self._feeds.get(connection)
        if feed is None:
            feed = self._feeds[connection] = EventFeed(connection, self.topic)
        live = spec.liveness
        window = timedelta(seconds=live.cooldown + live.stall_timeout_seconds + self.resync_seconds)
        present = [m.member_id for m in facts.view.members]
        return feed.book().current(spec.group_id, present, now, window)

    def close(self) -> None:
        for feed in self._feeds.values():
            feed.stop()
