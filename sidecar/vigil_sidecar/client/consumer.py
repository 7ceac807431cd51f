"""A confluent-kafka Consumer that beacons to its sidecar after each poll()/consume().

Never blocks, never raises into the app: the beacon is one non-blocking UDP datagram, rate-limited, and any
failure to send is counted and ignored. The generation comes from librdkafka's consumer group metadata
(`vigil_core.kafka.cgmd`, parsed strictly: unparseable → -1, never a guess).

When it is made, the helper also opens one idle TCP connection to the sidecar (`POST /v1/hold`, a chunked body
that never ends) and keeps it for the life of the process, from a daemon thread: the kernel closes it when the
process ends (exit, crash, kill -9), and that close is the sidecar's proof that the app ended (the heartbeat bridge
starts only on proof; silence never is). One per process and sidecar address; it reconnects if the sidecar
restarts. The first Consumer waits for the sidecar's go-ahead on it, at most `HOLD_READY_WAIT` seconds, before the
app can subscribe: a KIP-848 static member the sidecar kept alive while the app was away must have its instance id
released before the restarted app joins, or the coordinator refuses the join (fatally, in librdkafka).

`Consumer(conf, signal="stats")` is the helper for the stats signal (`VIGIL_SIGNAL=stats`, signals/STATS.md): no
beacons; instead it sets `statistics.interval.ms` (1 s) unless the app set it, wraps the app's own `stats_cb` (still
called first, with the same document), and hands each statistics document to a daemon thread that POSTs it to
`/v1/stats`: the newest document only (an older one still queued is dropped), never blocking the app's poll (where
librdkafka calls stats_cb), never raising into it, and nothing at all without a sidecar address.
"""

import http.client
import json
import os
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, ClassVar, Literal

import confluent_kafka

from vigil_core.kafka import cgmd
from vigil_core.sidecar_contract import BEACON_ADDR_ENV, STATS_PATH
from vigil_sidecar.signals.beacon import encode_beacon

#: At most one datagram per this many seconds while nothing changes (a stall timeout is tens of seconds).
MIN_INTERVAL = 0.2


#: The statistics interval the stats helper sets when the app did not (a stall timeout is tens of seconds).
STATS_INTERVAL_MS = 1000


class Consumer(confluent_kafka.Consumer):
    def __init__(
        self,
        config: dict[str, Any],
        *,
        beacon_addr: str | None = None,
        signal: Literal["beacon", "stats"] = "beacon",
    ) -> None:
        addr = beacon_addr or os.environ.get(BEACON_ADDR_ENV, "")
        self._stats = _StatsForwarder.from_addr(addr) if signal == "stats" else None
        if self._stats is not None:
            config = dict(config)
            config.setdefault("statistics.interval.ms", STATS_INTERVAL_MS)
            config["stats_cb"] = self._stats.callback(config.get("stats_cb"))
        super().__init__(config)
        self._beacon = _BeaconSender.from_addr(addr) if signal == "beacon" else None
        if self._beacon is not None:
            _Hold.ensure(self._beacon.addr).wait_ready()

    @property
    def stats_forwarded(self) -> int:
        """Statistics documents the sidecar accepted (the stats signal)."""
        return self._stats.sent if self._stats else 0

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
            hold = _Hold.ensure(self._beacon.addr)  # its token names this process in every beacon
            self._beacon.send(member_id, generation, instance_id, len(self.assignment()), hold.process)
        except Exception:  # noqa: BLE001 - the app's poll loop must never see a beacon problem
            self._beacon.failed += 1


class _BeaconSender:
    """Beacons over a UDP socket connected to the sidecar at the first send: bound to the route's source address
    (loopback for a sidecar in the pod), not to every interface as an unconnected `sendto` binds it, and deaf to
    datagrams from anyone else; its name is resolved once, not at every beacon."""

    def __init__(self, addr: tuple[str, int]) -> None:
        self.addr = addr
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._sock.setblocking(False)
        self._connected = False
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

    def send(self, member_id: str, generation: int, instance_id: str | None, assigned: int, process: str) -> None:
        state = (member_id, generation, instance_id, assigned)
        now = time.monotonic()
        if state == self._last and now - self._last_at < MIN_INTERVAL:
            return
        try:
            datagram = encode_beacon(member_id, generation, instance_id, assigned, time.time(), process=process)
            if not self._connected:
                self._sock.connect(self.addr)
                self._connected = True
            self._sock.send(datagram)  # no sidecar listening: refused at a later send, counted as failed
        except OSError:
            self.failed += 1
            return
        self._last, self._last_at = state, now
        self.sent += 1


class _StatsForwarder:
    """Posts the newest statistics document to the sidecar from its own daemon thread (started on first use)."""

    def __init__(self, addr: tuple[str, int]) -> None:
        self.addr = addr
        self.sent = 0
        self.failed = 0
        self._pending: str | None = None
        self._ready = threading.Condition()
        self._thread: threading.Thread | None = None

    @classmethod
    def from_addr(cls, addr: str) -> "_StatsForwarder | None":
        host, _, port = addr.rpartition(":")
        if not host or not port.isdigit():
            return None
        return cls((host, int(port)))

    def callback(self, user_cb: Callable[[str], Any] | None) -> Callable[[str], None]:
        def stats_cb(document: str) -> None:
            try:
                if user_cb is not None:
                    user_cb(document)
            finally:  # the app's own callback may raise: that is the app's, forwarding still happens
                self.offer(document)

        return stats_cb

    def offer(self, document: str) -> None:
        try:
            with self._ready:
                self._pending = document
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name="vigil-stats", daemon=True)
                    self._thread.start()
                self._ready.notify()
        except Exception:  # noqa: BLE001 - never into the app's poll
            self.failed += 1

    def _run(self) -> None:
        while True:
            with self._ready:
                while self._pending is None:
                    self._ready.wait()
                document, self._pending = self._pending, None
            try:
                conn = http.client.HTTPConnection(*self.addr, timeout=2.0)
                try:
                    conn.request("POST", STATS_PATH, body=document.encode(),
                                 headers={"Content-Type": "application/json"})  # fmt: skip
                    ok = conn.getresponse().status < 300
                finally:
                    conn.close()
            except OSError:
                ok = False
            if ok:
                self.sent += 1
            else:
                self.failed += 1


HOLD_PATH = "/v1/hold"
#: Waits between attempts to (re)connect the hold: doubling from the first to the last.
HOLD_BACKOFF = (0.5, 5.0)
#: After the sidecar answered instead of holding (one without /v1/hold): try again this much later.
HOLD_REFUSED_BACKOFF = 60.0
#: The first Consumer waits at most this long (from the hold's start) for the sidecar's go-ahead to join; an older
#: sidecar never gives one, and costs this wait once.
HOLD_READY_WAIT = 3.0
_GO_AHEAD = re.compile(rb'"ready"\s*:\s*true')


class _Hold:
    """The process's idle connection to its sidecar: opened once, closed by the kernel when the process ends."""

    _lock = threading.Lock()
    _started: ClassVar[dict[tuple[tuple[str, int], int], "_Hold"]] = {}
    """Per (sidecar address, pid): a forked child opens its own."""

    def __init__(self, addr: tuple[str, int]) -> None:
        self.addr = addr
        self.process = uuid.uuid4().hex
        """This process's token: pids repeat across containers (each is often pid 1 in its own namespace)."""
        self.connected = 0
        """Connections made so far (1 unless the sidecar restarted)."""
        self.ready = False
        """The sidecar gave the go-ahead to join."""
        self._settled = threading.Event()
        """The first connection has its go-ahead, or will not get one (refused, answered otherwise, closed)."""
        self._deadline = time.monotonic() + HOLD_READY_WAIT
        self._thread = threading.Thread(target=self._run, name="vigil-hold", daemon=True)

    @classmethod
    def ensure(cls, addr: tuple[str, int]) -> "_Hold":
        """The hold for `addr` in this process, started on first use (cheap after that: one dict lookup)."""
        key = (addr, os.getpid())
        hold = cls._started.get(key)
        if hold is not None:
            return hold
        with cls._lock:
            hold = cls._started.get(key)
            if hold is None:
                hold = cls._started[key] = cls(addr)
                hold._thread.start()
        return hold

    def wait_ready(self) -> bool:
        """Wait for the sidecar's go-ahead until `HOLD_READY_WAIT` after the hold started; whether it came."""
        self._settled.wait(max(0.0, self._deadline - time.monotonic()))
        return self.ready

    def _request(self) -> bytes:
        host, port = self.addr
        first = json.dumps({"pid": os.getpid(), "process": self.process, "ready": True}).encode() + b"\n"
        head = (
            f"POST {HOLD_PATH} HTTP/1.1\r\nHost: {host}:{port}\r\nUser-Agent: vigil-helper\r\n"
            "Content-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        return head.encode() + f"{len(first):x}\r\n".encode() + first + b"\r\n"

    def _run(self) -> None:
        wait, longest = HOLD_BACKOFF
        while True:
            answered = False
            try:
                with socket.create_connection(self.addr, timeout=2.0) as sock:
                    sock.sendall(self._request())
                    sock.settimeout(None)  # idle from now on, but for the go-ahead
                    self.connected += 1
                    wait = HOLD_BACKOFF[0]
                    answered = not self._go_ahead(sock)
                    self._settled.set()
                    while not answered and sock.recv(1024):  # blocks for the life of the process, or of the sidecar
                        pass
            except OSError:
                pass  # no sidecar (yet, or any more): try again, never bother the app
            self._settled.set()
            time.sleep(HOLD_REFUSED_BACKOFF if answered else wait)
            wait = min(wait * 2, longest)

    def _go_ahead(self, sock: socket.socket) -> bool:
        """Read the sidecar's go-ahead (a 200 whose body says `"ready": true`); False if it answered anything else.
        Blocks until it comes or the sidecar goes away (an older sidecar never answers: the wait ends at its bound,
        the hold goes on)."""
        data = b""
        while chunk := sock.recv(4096):
            data += chunk
            if len(data) >= 12 and not data.startswith((b"HTTP/1.1 200", b"HTTP/1.0 200")):
                return False
            body = data.find(b"\r\n\r\n")
            if body >= 0 and _GO_AHEAD.search(data, body):
                self.ready = True
                return True
        return not data  # closed before a word: the sidecar went away, not an answer
