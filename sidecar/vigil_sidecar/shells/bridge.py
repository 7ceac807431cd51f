"""The app's end and what follows it: the helper's idle connections (`POST /v1/hold`) prove an app
process ended; its member is then bridged (heartbeats from the sidecar until the restarted app takes it back: the
`bridge` engine decides, `BridgeRunner` sends) or, a KIP-848 static member, its instance id released for the
restart. Owns the holds, the members each app process reported, the app's ends, the running bridge with its own
thread and client (connected ahead of need while the app is healthy)."""

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from vigil_core import events, rules
from vigil_core.bridge import engine as bridge
from vigil_core.bridge_runner import Answer, BridgeRequest, BridgeRunner, api_of, send_request, unanswered
from vigil_core.kafka.group_client import GroupClient, GroupClientError
from vigil_core.kafka.model import GroupView
from vigil_core.kafka.outcomes import TRANSPORT_ERROR, Api, Outcome, classify
from vigil_core.kafka.security import KafkaConnection
from vigil_sidecar.shells.common import DaemonWorker, Shared, Shell, report_crash, utc_now
from vigil_sidecar.watchdog.state import Beacon, DescribeResult, Observation, WatchdogState

log = logging.getLogger("vigil.sidecar")

#: The bridge's GroupClient retries this few times itself (a moved coordinator is found again once): the engine
#: sets the pace, one heartbeat per interval, and a client retrying for longer would delay the next one.
BRIDGE_CLIENT_ATTEMPTS = 2
#: How often the bridge's connection to the coordinator is refreshed while the app is healthy: below kafka-python's
#: idle close (9 minutes) and the broker's (`connections.max.idle.ms`, 10 minutes).
BRIDGE_WARM_SECONDS = 240.0
#: App ends further back than this are forgotten (the engine's crash window is at most this).
APP_ENDS_KEPT_SECONDS = 3600.0
#: The members of this many app processes are remembered (a restarted process has a new token; an ended one's is
#: dropped at its end): more than any pod runs at once.
REPORTED_PROCESSES_KEPT = 16
#: How a bridge ended when the sidecar stopped under it (not the engine's: it never decided; the event's outcome).
STOPPED = "stopped"
#: A returning app's process waits at most this long for its KIP-848 member's instance id to be released (the
#: helpers wait 3 s for the answer, then join anyway).
READY_WAIT_SECONDS = 2.5


class AppEnds(Shell):
    def __init__(
        self, shared: Shared, connection: KafkaConnection, *, watches: Callable[[str | None], bool],
        acted: Callable[[dict[str, Any]], None],
    ) -> None:  # fmt: skip
        super().__init__(shared)
        self.connection = connection
        """The bridge's own client connects with it."""
        self.watches = watches
        """Whether this sidecar watches the member of that instance id (others are another process's)."""
        self.acted = acted
        """Records an action for /v1/status (a release)."""
        self.stopping = False
        """Set when the sidecar itself shuts down: helper connections it closes then are no end of the app."""
        self.bridge_ready = False
        """The bridge's client is connected to the group's coordinator ahead of need (its last refresh succeeded)."""
        self.last_bridge: dict[str, Any] | None = None
        """The last bridge that ended, or the last refusal: for /v1/status."""
        self._holds: dict[object, int] = {}
        """Open helper connections per app process (by the token or pid it reported)."""
        self._reported: dict[str | None, bridge.Member] = {}
        """The member each app process last reported, by its token (None: beacons that named no process): the
        proof of one process's end binds to the member that process reported."""
        self._app_ends: list[float] = []
        """When the app ended (monotonic), oldest first: the engine's crash-loop input."""
        self._bridge: BridgeRunner | None = None
        self._bridge_task: asyncio.Task[None] | None = None
        self._starting: asyncio.Task[None] | None = None
        """A KIP-848 bridge reading its member's epoch before it starts."""
        self._bridge_worker = DaemonWorker("vigil-bridge")
        """The bridge's own thread and client: a describe retrying through a coordinator move on the watchdog's
        thread must not hold a heartbeat back past the member's session."""
        self._bridge_client: GroupClient | None = None
        self._bridge_warmed_at: float | None = None
        """When the bridge's connection was last opened or refreshed ahead of need (monotonic)."""

    def reported(self, beacon: Beacon) -> None:
        """The member the app process that sent `beacon` is (the newest processes kept)."""
        self._reported[beacon.process] = bridge.Member(beacon.member_id, beacon.generation, beacon.instance_id)
        while len(self._reported) > REPORTED_PROCESSES_KEPT:
            del self._reported[next(iter(self._reported))]  # the oldest process first (dicts keep insertion order)

    def app(self) -> dict[str, int]:
        """The app's helper connections and ends, for /v1/status."""
        return {"helper_connections": sum(self._holds.values()), "ends": len(self._app_ends)}

    def hold_opened(self, process: object) -> None:
        """A helper connection opened (`process`: the app process as it named itself, else the connection)."""
        self._holds[process] = self._holds.get(process, 0) + 1
        self.metrics.app_holds.set(sum(self._holds.values()))

    def hold_closed(self, process: object) -> None:
        """A helper connection closed: the app process ended once its last one is gone, unless the sidecar itself
        is stopping (it closed them)."""
        left = self._holds.get(process, 1) - 1
        if left > 0:
            self._holds[process] = left
        else:
            self._holds.pop(process, None)
        self.metrics.app_holds.set(sum(self._holds.values()))
        if left <= 0 and not self.stopping:
            self._app_ended(time.monotonic(), process if isinstance(process, str) else None)

    def _app_ended(self, now: float, process: str | None) -> None:
        member = bridge.ended_member(process, self._reported, others_open=len(self._holds))
        if process is not None:
            self._reported.pop(process, None)  # that process is gone: a token is never reused
        if member is not None and not self.watches(member.instance_id):
            log.info("another consumer process in the pod ended (member %r, instance %r)", member.member_id,
                     member.instance_id)  # fmt: skip
            return  # not this sidecar's member: no end of its app, nothing to bridge
        self.metrics.app_ends.inc()
        earlier = tuple(self._app_ends)
        self._app_ends = [t for t in self._app_ends if now - t < APP_ENDS_KEPT_SECONDS] + [now]
        who = "no member reported" if member is None else f"its member {member.member_id!r}"
        log.info("the app ended: its helper connection closed (%s)", who)
        if self._bridge is not None:
            self._bridge.observe(bridge.AppEnded())  # a new end while bridged (crash loop?)
            return
        kip848 = self.settings.group_protocol is rules.GroupProtocol.CONSUMER
        if kip848 and self.settings.instance_id and not self.settings.bridge_enabled:
            self._release(member, earlier, now)
            return
        if not self.settings.bridge_enabled:
            return
        if kip848:
            self._start_kept(member, earlier, now)
            return
        self._started(self._start(member, earlier, now, "classic"), now)

    def _start(
        self, member: bridge.Member | None, earlier: tuple[float, ...], now: float, protocol: bridge.GroupProtocol
    ) -> bridge.BridgeState | bridge.Refused:
        return bridge.start(
            self.settings.group_id, member, proof="helper-connection-closed", earlier_ends=earlier, now=now,
            config=self.settings.bridge(), instance_id=self.settings.instance_id, protocol=protocol,
        )  # fmt: skip

    def _started(self, started: bridge.BridgeState | bridge.Refused, now: float) -> None:
        """Run the bridge `start` allowed, or say why not."""
        if isinstance(started, bridge.Refused):
            self.metrics.bridges_refused.labels(started.cause).inc()
            self.said.once("bridge", started.message)
            self.last_bridge = {"state": "refused", "cause": started.cause, "message": started.message,
                                "at": utc_now().isoformat()}  # fmt: skip
            return
        self.said.over("bridge")
        self._start_bridge(started, now)

    def _start_kept(self, member: bridge.Member | None, earlier: tuple[float, ...], now: float) -> None:
        """A KIP-848 static member is kept alive at its current epoch, read from the coordinator first (the app's last
        report may be behind it). Refused (no epoch: the coordinator could not be asked, or the member left for now
        with -2), its instance id is released at once instead, as without bridging."""

        def epoch() -> int:
            if member is None:
                return -1
            try:
                return self._bridge_group_client().member_epochs(self.settings.group_id).get(member.member_id, -1)
            except (GroupClientError, ConnectionError, OSError) as exc:
                log.warning("bridge: could not read the epoch of member %s: %s", member.member_id, exc)
                return -1

        async def start() -> None:
            try:
                read = await asyncio.get_running_loop().run_in_executor(self._bridge_worker, epoch)
            finally:
                self._starting = None
            known = None if member is None else bridge.Member(member.member_id, read, member.instance_id)
            started = self._start(known, earlier, now, "consumer")
            if isinstance(started, bridge.Refused) and started.cause == "no-generation":
                self._release(member, earlier, now)
            else:
                self._started(started, now)

        self._starting = asyncio.create_task(start())
        self._starting.add_done_callback(report_crash)

    async def app_back(self) -> bool:
        """A new process of the app waits to join (its helper asked for the go-ahead): a KIP-848 member kept alive
        for it has its instance id released first, or the coordinator would refuse the join (fatally). At most
        `READY_WAIT_SECONDS`; True if the kept member was handed over (released, or already replaced)."""
        deadline = time.monotonic() + READY_WAIT_SECONDS
        if self._starting is not None:
            await _until(self._starting, deadline)
        runner, task = self._bridge, self._bridge_task
        if runner is None or task is None or runner.state.protocol != "consumer":
            return False
        runner.observe(bridge.AppBack())
        await _until(task, deadline)
        return runner.state.ended == "rejoined"

    def _release(self, member: bridge.Member | None, earlier: tuple[float, ...], now: float) -> None:
        """A KIP-848 static member's app ended (proof): release its instance id so the restarted app takes the member
        over at once (`bridge.release`); on the Kafka worker, answered in a log line, a metric and /v1/status."""
        decided = bridge.release(
            self.settings.group_id, member, proof="helper-connection-closed", earlier_ends=earlier, now=now,
            config=self.settings.bridge(), instance_id=self.settings.instance_id,
        )  # fmt: skip
        if isinstance(decided, bridge.Refused):
            self.metrics.bridges_refused.labels(decided.cause).inc()
            self.said.once("bridge", decided.message)
            return
        self.said.over("bridge")
        self._send_release(decided, "its app ended")

    def _send_release(self, decided: bridge.Release, why: str) -> None:
        """Release a KIP-848 static member's instance id for its restarted app (epoch -2 on its behalf), on the Kafka
        worker; answered in a log line, a metric and /v1/status."""

        def send() -> Outcome:
            try:
                return self.worker.client().release_static_member(
                    decided.group_id, decided.member_id, decided.instance_id
                )
            except GroupClientError as exc:
                return exc.outcome
            except (ConnectionError, OSError):
                return classify(Api.CONSUMER_GROUP_HEARTBEAT, TRANSPORT_ERROR)

        def answered(future: "asyncio.Future[Outcome]") -> None:
            outcome = future.result()
            self.metrics.requests.labels(Api.CONSUMER_GROUP_HEARTBEAT.value, outcome.name).inc()
            self.metrics.actions.labels("release", outcome.name).inc()
            reason = f"static member {decided.member_id}: {why}; its instance id released for its restart"
            self.acted({"action": "release", "reason": reason, "outcome": outcome.name, "at": utc_now().isoformat()})
            log.warning("released instance id %s of member %s (%s): %s", decided.instance_id, decided.member_id,
                        why, outcome)  # fmt: skip

        future = self.worker.run(send)
        future.add_done_callback(answered)

    def _start_bridge(self, state: bridge.BridgeState, now: float) -> None:
        self.metrics.bridges_started.labels(state.proof).inc()
        self.metrics.bridging.set(1)
        cfg = state.config
        log.warning(
            "bridging member %s (instance %s, %s %d): the app ended (%s); heartbeats every %gs for at most %gs%s",
            state.member_id, state.instance_id, "epoch" if state.protocol == "consumer" else "generation",
            state.generation, state.proof, cfg.heartbeat_interval, cfg.max_bridge_seconds,
            "" if state.protocol == "consumer" else f", foreign rebalance: {cfg.on_foreign_rebalance}",
        )  # fmt: skip
        self.emitter.emit(
            events.BridgeStarted,
            {
                "generation": state.generation,
                "proof": state.proof,
                "deadline": utc_now() + timedelta(seconds=state.deadline - now),
            },
            member=(state.member_id, state.instance_id),
        )
        runner = BridgeRunner(state, self._bridge_send)
        self._bridge = runner

        async def run() -> None:
            ended = await runner.run()
            self._bridge_ended(
                runner.state, outcome=ended.outcome, reason=ended.reason, seconds=ended.seconds_bridged,
                heartbeats=ended.heartbeats_sent, kafka_error=ended.kafka_error,
            )  # fmt: skip

        task = asyncio.create_task(run())
        task.add_done_callback(report_crash)
        self._bridge_task = task

    def _bridge_ended(
        self,
        state: bridge.BridgeState,
        *,
        outcome: str,
        reason: str,
        seconds: float,
        heartbeats: int,
        kafka_error: str | None,
    ) -> None:
        self._bridge = self._bridge_task = None
        self.metrics.bridging.set(0)
        owed = bridge.parting_release(state, outcome)
        if owed is not None:
            self._send_release(owed, f"its bridge ended ({outcome})")
        self.metrics.bridges_ended.labels(outcome).inc()
        self.metrics.bridged_seconds.inc(seconds)
        log.warning(
            "bridge of member %s ended: %s after %.1fs and %d heartbeats%s: %s",
            state.member_id, outcome, seconds, heartbeats, f" ({kafka_error})" if kafka_error else "", reason,
        )  # fmt: skip
        self.last_bridge = {
            "state": "ended",
            "outcome": outcome,
            "reason": reason,
            "member_id": state.member_id,
            "instance_id": state.instance_id,
            "generation": state.generation,
            "seconds_bridged": round(seconds, 3),
            "heartbeats_sent": heartbeats,
            "kafka_error": kafka_error,
            "at": utc_now().isoformat(),
        }
        self.emitter.emit(
            events.BridgeEnded,
            {
                "outcome": outcome,
                "heartbeats_sent": heartbeats,
                "bridged_ms": round(seconds * 1000),
                "kafka_error": kafka_error,
            },
            member=(state.member_id, state.instance_id),
        )

    def stop(self) -> None:
        """The sidecar is stopping (SIGTERM: the pod is going away): end a running bridge where it is, no Remove."""
        runner, task = self._bridge, self._bridge_task
        if runner is None:
            return
        if task is not None:
            task.cancel()
        state = runner.state
        seconds = state.seconds_bridged(time.monotonic())
        reason = "The sidecar stopped (the pod is going away): heartbeats stop, the member expires at its session"
        reason += " timeout unless the app is back."
        self._bridge_ended(
            state, outcome=STOPPED, reason=reason, seconds=seconds, heartbeats=state.heartbeats_sent,
            kafka_error=state.last_error,
        )  # fmt: skip

    async def _bridge_send(self, request: BridgeRequest) -> Answer:
        if isinstance(request, bridge.SendHeartbeat | bridge.KeepAlive):
            self.metrics.bridge_heartbeats.inc()
        answered = await asyncio.get_running_loop().run_in_executor(self._bridge_worker, self._bridge_request, request)
        self.metrics.requests.labels(api_of(request).value, answered.outcome.name).inc()
        return answered

    def _bridge_request(self, request: BridgeRequest) -> Answer:
        """On the bridge's thread: its own client (connected while the app was healthy, else now), one request."""
        try:
            client = self._bridge_group_client()
        except (ConnectionError, OSError) as exc:
            log.warning("bridge: %s", exc)
            return unanswered(request)
        return send_request(client, request)

    def _bridge_group_client(self) -> GroupClient:
        """The bridge's own client, made once (on the bridge's thread: it connects, blocking)."""
        if self._bridge_client is None:
            self._bridge_client = GroupClient(
                self.connection,
                client_id=f"vigil-sidecar-{self.settings.pod_name}",
                max_attempts=BRIDGE_CLIENT_ATTEMPTS,
                request_timeout=self.settings.bridge_heartbeat_interval,
            )
        return self._bridge_client

    def warm(self, now: float) -> None:
        """While the app is healthy (bridging on, no bridge running), keep the bridge's client made and its connection
        to the group's coordinator open, so a bridge's first heartbeat does not wait for a TLS/SASL handshake: at the
        first watched beacon, then once per `BRIDGE_WARM_SECONDS` (one DescribeGroups; idle connections are closed by
        kafka-python after 9 minutes, by the broker after 10)."""
        if not self.settings.bridge_enabled or self._bridge is not None:
            return
        if self._bridge_warmed_at is not None and now - self._bridge_warmed_at < BRIDGE_WARM_SECONDS:
            return
        self._bridge_warmed_at = now

        def warm() -> None:
            try:
                self._bridge_group_client().connect(self.settings.group_id)
                self.metrics.requests.labels(Api.DESCRIBE_GROUP.value, "NONE").inc()
                self.said.over("bridge-warm")
                self.bridge_ready = True
            except (GroupClientError, ConnectionError, OSError) as exc:
                self.bridge_ready = False
                self.said.once("bridge-warm", f"bridge: could not connect ahead of need: {exc}")

        asyncio.get_running_loop().run_in_executor(self._bridge_worker, warm)

    def observe(self, observation: Observation) -> None:
        """A view the watchdog took anyway may show the app back (a new member under the instance id) or the member
        gone, before the next heartbeat's answer does."""
        if self._bridge is not None and isinstance(observation, DescribeResult):  # noqa: SIM102 - one per line
            if isinstance(observation.result, GroupView):
                self._bridge.observe(bridge.Described(observation.result))

    def silence(self, state: WatchdogState) -> WatchdogState:
        """While the app that ended is bridged, its silence is no stall (the app is known dead, not stuck): the
        watchdog must neither evict nor restart for it. A beacon from another member (the app is back) is watched
        as usual."""
        runner = self._bridge
        same = runner is not None and state.beacon is not None and state.beacon.member_id == runner.state.member_id
        return state.with_handled() if same and not state.stall_handled else state

    def status(self, now: float) -> dict[str, Any] | None:
        if self._bridge is None:
            return self.last_bridge
        state = self._bridge.state
        holding = state.holding_until
        return {
            "state": "running",
            "member_id": state.member_id,
            "instance_id": state.instance_id,
            "generation": state.generation,
            "proof": state.proof,
            "seconds_bridged": round(state.seconds_bridged(now), 3),
            "deadline_in_seconds": round(max(0.0, state.deadline - now), 3),
            "heartbeats_sent": state.heartbeats_sent,
            "in_flight": state.in_flight,
            "remove_due_in_seconds": None if state.remove_at is None else round(max(0.0, state.remove_at - now), 3),
            "holding": holding is not None,
            "last_error": state.last_error,
        }

    def close(self) -> None:
        self.stopping = True
        self.stop()
        self._bridge_worker.shutdown(wait=False, cancel_futures=True)
        if self._bridge_client is not None:
            with contextlib.suppress(Exception):
                self._bridge_client.close()


async def _until(task: "asyncio.Task[None]", deadline: float) -> None:
    """Wait for `task` until `deadline` (monotonic) at the latest; the task goes on either way."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(task), max(0.0, deadline - time.monotonic()))
