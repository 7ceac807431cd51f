"""A confluent-kafka Consumer that beacons to its sidecar after each poll()/consume().

Never blocks, never raises into the app: the beacon is one non-blocking UDP datagram, rate-limited, and any
failure to send is counted and ignored. The generation comes from librdkafka's consumer group metadata
(`vigil_core.kafka.cgmd`, parsed strictly: unparseable → -1, never a guess).
"""

import os
import socket
import time
from typing import Any

import confluent_kafka

from vigil_core.kafka import cgmd
from vigil_sidecar.signals.beacon import encode_beacon

BEACON_ADDR_ENV = "VIGIL_BEACON_ADDR"
#: At most one datagram per this many seconds while nothing changes (a stall timeout is tens of seconds).
MIN_INTERVAL = 0.2


class Consumer(confluent_kafka.Consumer):
    def __init__(self, config: dict[str, Any], *, beacon_addr: str | None = None) -> None:
        super().__init__(config)
        self._beacon = _BeaconSender.from_addr(beacon_addr or os.environ.get(BEACON_ADDR_ENV, ""))

    def poll(self, *args: Any, **kwargs: Any) -> Any:
        message = super().poll(*args, **kwargs)
        self._beacon_now()
        return message

    def consume(self, *args: Any, **kwargs: Any) -> Any:
        messages = super().consume(*args, **kwargs)
        self._beacon_now()
        return messages

    @property
    def beacons_sent(self) -> int:
        return self._beacon.sent if self._beacon else 0

    def _beacon_now(self) -> None:
        if self._beacon is None:
            return
        try:
            member_id = self.memberid() or ""
            if not member_id:
                return  # not a member yet: nothing for the sidecar to watch
            meta = cgmd.parse(self.consumer_group_metadata())
            generation = meta.generation if meta is not None and meta.member_id == member_id else -1
            instance_id = meta.instance_id if meta is not None else None
            self._beacon.send(member_id, generation, instance_id, len(self.assignment()))
        except Exception:  # noqa: BLE001 - the app's poll loop must never see a beacon problem
            self._beacon.failed += 1


class _BeaconSender:
    def __init__(self, addr: tuple[str, int]) -> None:
        self._addr = addr
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._sock.setblocking(False)
        self._last: tuple[str, int, str | None, int] | None = None
        self._last_at = 0.0
        self.sent = 0
        self.failed = 0

    @classmethod
    def from_addr(cls, addr: str) -> "_BeaconSender | None":
        host, _, port = addr.rpartition(":")
        if not host or not port.isdigit():
            return None
        return cls((host, int(port)))

    def send(self, member_id: str, generation: int, instance_id: str | None, assigned: int) -> None:
        state = (member_id, generation, instance_id, assigned)
        now = time.monotonic()
        if state == self._last and now - self._last_at < MIN_INTERVAL:
            return
        try:
            self._sock.sendto(encode_beacon(member_id, generation, instance_id, assigned, time.time()), self._addr)
        except OSError:
            self.failed += 1
            return
        self._last, self._last_at = state, now
        self.sent += 1
