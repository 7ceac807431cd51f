"""Runs one bridge to its end on an asyncio loop: the engine's decisions carried out. Beside the `bridge` package,
which holds only the pure engine (its tests check it imports no I/O).

Used by the sidecar (an app container restart; monotonic clock) and by the operator (a pod deleted during a
coordinated rollout; Unix time, because its bridge state is persisted and resumed across an operator restart).
"""

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

from vigil_core.bridge import engine as bridge
from vigil_core.kafka.group_client import GroupClient, GroupClientError
from vigil_core.kafka.outcomes import TRANSPORT_ERROR, Api, Outcome, classify

log = logging.getLogger(__name__)

BridgeRequest = bridge.SendHeartbeat | bridge.KeepAlive | bridge.Remove | bridge.Release
Answer = bridge.HeartbeatAnswered | bridge.RemoveAnswered | bridge.ReleaseAnswered
"""A request's answer as the engine observes it (every answer has its `outcome`)."""


def api_of(request: BridgeRequest) -> Api:
    """The Kafka request that carries `request` (metric labels, the outcome table)."""
    match request:
        case bridge.SendHeartbeat():
            return Api.HEARTBEAT
        case bridge.Remove():
            return Api.LEAVE_GROUP
    return Api.CONSUMER_GROUP_HEARTBEAT


def answer(request: BridgeRequest, outcome: Outcome, epoch: int | None = None) -> Answer:
    """`outcome` as the answer to `request` (`epoch`: a keep-alive's answer's)."""
    match request:
        case bridge.Remove():
            return bridge.RemoveAnswered(outcome)
        case bridge.Release():
            return bridge.ReleaseAnswered(outcome)
    return bridge.HeartbeatAnswered(outcome, epoch)


def unanswered(request: BridgeRequest) -> Answer:
    """No answer came (no client, no connection, a crash): a transport error, which the engine retries or waits out."""
    return answer(request, classify(api_of(request), TRANSPORT_ERROR))


def send_request(client: GroupClient, request: BridgeRequest) -> Answer:
    """One request through `client` (blocking: call it on the client's thread), every failure as an answer."""
    try:
        match request:
            case bridge.SendHeartbeat():
                hb = client.heartbeat(request.group_id, request.generation, request.member_id, request.instance_id)
                return answer(request, hb)
            case bridge.KeepAlive():
                outcome, epoch = client.keep_alive(request.group_id, request.member_id, request.epoch,
                                                   request.instance_id)  # fmt: skip
                return answer(request, outcome, epoch)
            case bridge.Release():
                released = client.release_static_member(request.group_id, request.member_id, request.instance_id)
                log.warning("bridge released instance id %s of member %s: %s", request.instance_id,
                            request.member_id, released.name)  # fmt: skip
                return answer(request, released)
        removed = client.remove_member(request.group_id, request.member_id, request.instance_id, request.reason)
        log.warning("bridge removed member %s: %s (%s)", request.member_id, removed.name, request.reason)
        return answer(request, removed)
    except GroupClientError as exc:
        return answer(request, exc.outcome)
    except (ConnectionError, OSError) as exc:
        log.warning("bridge %s: %s", api_of(request).value, exc)
        return unanswered(request)


class BridgeRunner:
    """Runs one `bridge.engine` state to its end on the event loop: its requests through `send` (on the Kafka worker
    thread), `Wait` as a timer, `Ended` as `run`'s result. Observations from outside (a view the
    watchdog took, a new end of the app) come in through `observe` and are stepped in arrival order with the
    answers, on `clock` (the sidecar's: monotonic seconds; the operator's: Unix time, its states are persisted)."""

    def __init__(
        self,
        state: bridge.BridgeState,
        send: Callable[[BridgeRequest], Awaitable[Answer]],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._state = state
        self._send = send
        self._clock = clock
        self._queue: asyncio.Queue[bridge.Observation] = asyncio.Queue()
        self._request: asyncio.Task[None] | None = None

    @property
    def state(self) -> bridge.BridgeState:
        return self._state

    def observe(self, observation: bridge.Observation) -> None:
        """Something seen outside the bridge (`Described`, `AppEnded`): stepped after what is already queued."""
        self._queue.put_nowait(observation)

    async def run(self) -> bridge.Ended:
        """Step until the engine says `Ended`; cancelling stops it where it is (the in-flight request is dropped)."""
        observation: bridge.Observation = bridge.Tick()
        try:
            while True:
                self._state, actions = bridge.step(self._state, observation, self._clock())
                wake: float | None = None
                for action in actions:
                    match action:
                        case bridge.SendHeartbeat() | bridge.KeepAlive() | bridge.Remove() | bridge.Release():
                            self._start(action)
                        case bridge.Wait(until=until):
                            wake = until
                        case bridge.Ended():
                            return action
                observation = await self._next(wake)
        finally:
            if self._request is not None and not self._request.done():
                self._request.cancel()

    def _start(self, request: BridgeRequest) -> None:
        async def answer() -> None:
            try:
                answered = await self._send(request)
            except Exception as exc:  # noqa: BLE001 - an answer must come, or the bridge would wait forever
                log.warning("bridge %s failed: %r", type(request).__name__, exc)
                answered = unanswered(request)
            self._queue.put_nowait(answered)

        self._request = asyncio.create_task(answer())

    async def _next(self, wake: float | None) -> bridge.Observation:
        if wake is None:  # a request is in flight: its answer (or something observed) comes next
            return await self._queue.get()
        timeout = max(0.0, wake - self._clock())
        with contextlib.suppress(TimeoutError):
            return await asyncio.wait_for(self._queue.get(), timeout)
        return bridge.Tick()
