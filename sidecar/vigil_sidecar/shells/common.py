"""What the sidecar's shells share: the Kafka worker thread and its client, the events they send, problems logged
once, background tasks."""

import asyncio
import contextlib
import functools
import logging
import queue
import threading
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ParamSpec, TypeVar

from vigil_core.kafka.event_sink import EventSink
from vigil_core.kafka.group_client import GroupClient
from vigil_core.kafka.model import GroupView
from vigil_core.kafka.security import KafkaConnection
from vigil_sidecar.config import SidecarSettings
from vigil_sidecar.metrics import Metrics

log = logging.getLogger("vigil.sidecar")
T = TypeVar("T")
P = ParamSpec("P")
MemberKey = tuple[str, str | None]
"""A member as events name it: (member id, instance id)."""


class Said:
    """Recurring problems logged once until they change (never once per check), per source."""

    def __init__(self) -> None:
        self._said: dict[str, str] = {}

    def once(self, source: str, problem: str) -> None:
        if self._said.get(source) != problem:
            log.warning("%s", problem)
            self._said[source] = problem

    def over(self, source: str) -> None:
        """The source's problem is over: the next one is logged again."""
        self._said.pop(source, None)


#: At stop, the events still queued (a bridge's end among them) get this long to be delivered: the sidecar exits
#: within 1 s of SIGTERM whatever the broker does (one that answers, answers in milliseconds).
EVENTS_FLUSH_AT_STOP = 0.5


class DaemonWorker(Executor):
    """One daemon thread that runs the calls it is given in order (submit and shut down from the event loop).

    Why not a ThreadPoolExecutor: Python joins its threads at interpreter exit, after `shutdown(wait=False)` too, so
    a blocking Kafka call (kafka-python's bootstrap to a broker that answers nothing: 10 s; a describe retrying
    against a silent coordinator: a minute) held the process that long after SIGTERM. A daemon thread is not
    joined: the call is abandoned with the process. Nothing the sidecar must keep is done on it (the events are
    flushed at stop, on the event loop)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._calls: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._shut = False

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        if self._shut:
            raise RuntimeError(f"{self._name}: shut down")
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()
        future: Future[T] = Future()
        self._calls.put((future, functools.partial(fn, *args, **kwargs)))
        return future

    def _run(self) -> None:
        while (call := self._calls.get()) is not None:
            future, work = call
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(work())
            except BaseException as exc:  # noqa: BLE001 - the caller's to see, as ThreadPoolExecutor does
                future.set_exception(exc)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """No more calls; the queued ones cancelled if `cancel_futures`; the one running is waited for only if
        `wait`."""
        self._shut = True
        if cancel_futures:
            with contextlib.suppress(queue.Empty):
                while (call := self._calls.get_nowait()) is not None:
                    call[0].cancel()
        self._calls.put(None)
        if wait and self._thread is not None:
            self._thread.join()


class KafkaWorker:
    """All of the watchdog's and the signals' Kafka I/O, on one thread with one client (it is blocking and used
    from one thread), made on first use: start never waits for Kafka. Its kafka-python half is made at the first
    request that needs it (a LeaveGroup, a KIP-848 describe): the beacon and progress signals' describes, offsets
    and coordinator lookups go through confluent-kafka alone, so kafka-python is not in a healthy sidecar's RSS."""

    def __init__(
        self,
        connection: KafkaConnection,
        pod_name: str,
        *,
        other_types_after: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`other_types_after`: seconds a group stays not found before it is asked whether it is a share or
        streams group (which loads kafka-python)."""
        self.connection = connection
        self.client_id = f"vigil-sidecar-{pod_name}"
        self._pool = DaemonWorker("vigil-kafka")
        self._client: GroupClient | None = None
        self._other_types_after = other_types_after
        self._clock = clock
        self._not_found_since: float | None = None

    def client(self) -> GroupClient:
        if self._client is None:
            self._client = GroupClient(self.connection, client_id=self.client_id, wire_on_demand=True)
        return self._client

    def describe(self, group_id: str) -> GroupView:
        """The group as `GroupClient.describe` gives it (no subscriptions). librdkafka calls a share or streams
        group not found, as a group not there yet (an app still starting): once the group has been not found for
        `other_types_after`, the client's kafka-python half is made and their own describes are asked."""
        client = self.client()
        view = client.describe(group_id, subscriptions=False)
        if not view.not_found or client.wire_made:
            self._not_found_since = None
            return view
        now = self._clock()
        if self._not_found_since is None:
            self._not_found_since = now
        if now - self._not_found_since < self._other_types_after:
            return view
        client.open_wire()
        return client.describe(group_id, subscriptions=False)

    def run(self, work: Callable[..., T], *args: Any) -> "asyncio.Future[T]":
        """`work(*args)` on the worker thread."""
        return asyncio.get_running_loop().run_in_executor(self._pool, work, *args)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self._client is not None:
            with contextlib.suppress(Exception):
                self._client.close()


class Emitter:
    """The sidecar's events on the events topic (none configured: nothing), with its pod, group and cluster."""

    def __init__(self, settings: SidecarSettings, connection: KafkaConnection) -> None:
        self.settings = settings
        self.connection = connection
        self._sink: EventSink | None = None

    def emit(self, model: Any, payload: dict[str, Any], *, member: MemberKey | None = None) -> None:
        """Queue one event (never blocks, never raises); `member` is the (member id, instance id) concerned."""
        s = self.settings
        if not s.events_topic:
            return
        if self._sink is None:
            self._sink = EventSink(self.connection, s.events_topic, f"vigil-sidecar-{s.pod_name}")
        if member is not None:
            payload = {"member": {"member_id": member[0], "instance_id": member[1]}, **payload}
        event = model.model_validate(
            {
                "time": utc_now(),
                "cluster": s.cluster,
                "group": s.group_id,
                "source": "sidecar",
                "namespace": s.namespace,
                "pod": s.pod_name,
                "payload": payload,
            }
        )
        self._sink.emit(event)

    def close(self) -> None:
        """Deliver what is queued, for at most `EVENTS_FLUSH_AT_STOP` (what is not delivered by then is said)."""
        if self._sink is not None:
            left = self._sink.flush(EVENTS_FLUSH_AT_STOP)
            if left:
                log.warning("events topic %s: %d event(s) not delivered at stop (no answer within %gs)",
                            self.settings.events_topic, left, EVENTS_FLUSH_AT_STOP)  # fmt: skip


@dataclass(frozen=True)
class Shared:
    """What every shell of the sidecar is given: the settings and metrics, the events it sends, the problems it logs
    once, the Kafka worker."""

    settings: SidecarSettings
    metrics: Metrics
    emitter: Emitter
    said: Said
    worker: KafkaWorker


class Shell:
    """A feature of the sidecar: it owns its state, and reaches the rest through what is shared."""

    def __init__(self, shared: Shared) -> None:
        self.settings = shared.settings
        self.metrics = shared.metrics
        self.emitter = shared.emitter
        self.said = shared.said
        self.worker = shared.worker


class Background:
    """The sidecar's background tasks (loops, permit requests): cancelled at close, a crash said loudly."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self, work: Coroutine[Any, Any, None]) -> "asyncio.Task[None]":
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(report_crash)
        return task

    def close(self) -> None:
        for task in self._tasks:
            task.cancel()


def report_crash(task: "asyncio.Task[None]") -> None:
    """A background task that ended by an unexpected error says so loudly."""
    if not task.cancelled() and task.exception() is not None:
        log.error("a background task of the sidecar stopped: %r", task.exception())


def utc_now() -> datetime:
    return datetime.now(UTC)
