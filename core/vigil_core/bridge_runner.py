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

BridgeRequest = bridge.SendHeartbeat | bridge.Remove


def send_request(client: GroupClient, request: BridgeRequest) -> Outcome:
    """One Heartbeat or compare-and-remove through `client` (blocking: call it on the client's thread), every
    failure as an Outcome."""
    api = Api.HEARTBEAT if isinstance(request, bridge.SendHeartbeat) else Api.LEAVE_GROUP
    try:
        if isinstance(request, bridge.SendHeartbeat):
            return client.heartbeat(request.group_id, request.generation, request.member_id, request.instance_id)
        outcome = client.remove_member(request.group_id, request.member_id, request.instance_id, request.reason)
        log.warning("bridge removed member %s: %s (%s)", request.member_id, outcome.name, request.reason)
        return outcome
    except GroupClientError as exc:
        return exc.outcome
    except (ConnectionError, OSError) as exc:
        log.warning("bridge %s: %s", api.value, exc)
        return classify(api, TRANSPORT_ERROR)


class BridgeRunner:
    """Runs one `bridge.engine` state to its end on the event loop: `SendHeartbeat` and `Remove` through `send` (on
    the Kafka worker thread), `Wait` as a timer, `Ended` as `run`'s result. Observations from outside (a view the
    watchdog took, a new end of the app) come in through `observe` and are stepped in arrival order with the
    answers, on `clock` (the sidecar's: monotonic seconds; the operator's: Unix time, its states are persisted)."""

    def __init__(
        self,
        state: bridge.BridgeState,
        send: Callable[[BridgeRequest], Awaitable[Outcome]],
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
                        case bridge.SendHeartbeat() | bridge.Remove():
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
                outcome = await self._send(request)
            except Exception as exc:  # noqa: BLE001 - an answer must come, or the bridge would wait forever
                log.warning("bridge %s failed: %r", type(request).__name__, exc)
                api = Api.HEARTBEAT if isinstance(request, bridge.SendHeartbeat) else Api.LEAVE_GROUP
                outcome = classify(api, TRANSPORT_ERROR)
            if isinstance(request, bridge.SendHeartbeat):
                self._queue.put_nowait(bridge.HeartbeatAnswered(outcome))
            else:
                self._queue.put_nowait(bridge.RemoveAnswered(outcome))

        self._request = asyncio.create_task(answer())

    async def _next(self, wake: float | None) -> bridge.Observation:
        if wake is None:  # a request is in flight: its answer (or something observed) comes next
            return await self._queue.get()
        timeout = max(0.0, wake - self._clock())
        with contextlib.suppress(TimeoutError):
            return await asyncio.wait_for(self._queue.get(), timeout)
        return bridge.Tick()
