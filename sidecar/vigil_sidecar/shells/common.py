"""What the sidecar's shells share: the Kafka worker thread and its client, the events they send, problems logged
once, background tasks."""

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from vigil_core.kafka.event_sink import EventSink
from vigil_core.kafka.group_client import GroupClient
from vigil_core.kafka.security import KafkaConnection
from vigil_sidecar.config import SidecarSettings
from vigil_sidecar.metrics import Metrics

log = logging.getLogger("vigil.sidecar")
T = TypeVar("T")
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


class KafkaWorker:
    """All of the watchdog's and the signals' Kafka I/O, on one thread with one client (it is blocking and used
    from one thread), made on first use: start never waits for Kafka."""

    def __init__(self, connection: KafkaConnection, pod_name: str) -> None:
        self.connection = connection
        self.client_id = f"vigil-sidecar-{pod_name}"
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vigil-kafka")
        self._client: GroupClient | None = None

    def client(self) -> GroupClient:
        if self._client is None:
            self._client = GroupClient(self.connection, client_id=self.client_id)
        return self._client

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
        if self._sink is not None:
            self._sink.flush(5)


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
