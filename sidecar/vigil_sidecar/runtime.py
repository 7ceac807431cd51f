"""The sidecar's loop: feed observations to the pure watchdog and carry out the actions it returns.

All Kafka I/O runs on one worker thread (the group client is blocking and used from one thread); its answers
come back as observations through the same queue as the beacons, so `decide` sees one ordered stream.
Start never waits for Kafka: the client is created on first use, and an unreachable broker is just a
transport outcome the watchdog backs off from.
"""

import asyncio
import contextlib
import dataclasses
import logging
import os
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

from vigil_core import events, identity, rules
from vigil_core.bridge import engine as bridge
from vigil_core.bridge_runner import BridgeRequest, BridgeRunner, send_request
from vigil_core.budget import ledger
from vigil_core.budget.lease_api import BudgetPolicy, BudgetUnavailable, LeaseApi, publish, request_permit
from vigil_core.kafka.event_sink import EventSink
from vigil_core.kafka.group_client import GroupClient, GroupClientError
from vigil_core.kafka.model import GroupView
from vigil_core.kafka.outcomes import APP_POLLED, TRANSPORT_ERROR, Api, Outcome, Reaction, classify
from vigil_core.kafka.security import KafkaConnection
from vigil_core.liveness import Signal
from vigil_core.sidecar_contract import NO_BROKER_LIMITS, StatusMember
from vigil_sidecar.config import BudgetMode, SidecarSettings
from vigil_sidecar.metrics import Metrics
from vigil_sidecar.signals import stats as stats_signal
from vigil_sidecar.signals.progress import ProgressSampler
from vigil_sidecar.signals.progress_adapter import UNKNOWN_GENERATION, AdapterState, NoCommits, ProgressOutput, adapt
from vigil_sidecar.watchdog import decide as watchdog
from vigil_sidecar.watchdog.state import (
    ActionResult,
    Alert,
    AlertKind,
    Beacon,
    CoordinatorResult,
    Describe,
    DescribeResult,
    Evict,
    LookupCoordinator,
    Observation,
    Restart,
    Tick,
    Wait,
    WatchdogState,
)

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


class Sidecar:
    _timings_checked: bool = False
    """The app's timings were checked against the cluster's (once, at the coordinator's first answer)."""
    _bridge_warmed_at: float | None = None
    """When the bridge's connection was last opened or refreshed ahead of need (monotonic)."""
    bridge_ready = False
    """The bridge's client is connected to the group's coordinator ahead of need (its last refresh succeeded)."""

    def __init__(self, settings: SidecarSettings, connection: KafkaConnection, metrics: Metrics) -> None:
        self.settings = settings
        self.connection = connection
        self.metrics = metrics
        self.state = WatchdogState.initial(settings.watchdog())
        self.app_probe_failing = False
        self.loop_alive_at = time.monotonic()
        self.last_beacon_at: float | None = None
        self.last_action: dict[str, Any] | None = None
        self.last_bad_beacon: str | None = None
        """The last malformed beacon's problem: each kind is logged once, not per datagram."""
        self._queue: asyncio.Queue[Observation] = asyncio.Queue()
        self._wake_at: float | None = None
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vigil-kafka")
        self._bridge_worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vigil-bridge")
        """The bridge's own thread and client: a describe retrying through a coordinator move on the watchdog's
        thread must not hold a heartbeat back past the member's session."""
        self._client: GroupClient | None = None
        self._sink: EventSink | None = None
        self._sampler: ProgressSampler | None = None
        self._adapter = AdapterState()
        self._stats = stats_signal.StatsState()
        self._stats_progressed = False
        """A forwarded statistics document counted as progress since the last check (the stats signal)."""
        self._stats_member: tuple[int, Beacon] | None = None
        """The member proven this pod's, by the rebalance count it was found under (found again after a change)."""
        self._said: dict[str, str] = {}
        """The last problem logged per source (budget, progress): each is logged once until it changes."""
        self._lease: LeaseApi | None = None
        self._budget_problem: BudgetUnavailable | None = None
        self._published: ledger.Entry | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._stall_reported: tuple[str, str | None] | None = None
        """The (member id, instance id) of the last stall-detected event until the app polls again."""
        self.stopping = False
        """Set when the sidecar itself shuts down: helper connections it closes then are no end of the app."""
        self.last_beacon: Beacon | None = None
        """The app's last beacon as received (the watchdog may not have taken it in yet): the member to bridge."""
        self._holds: dict[object, int] = {}
        """Open helper connections per app process (by the token or pid it reported)."""
        self._reported: dict[str | None, bridge.Member] = {}
        """The member each app process last reported, by its token (None: beacons that named no process): the
        proof of one process's end binds to the member that process reported."""
        self._app_ends: list[float] = []
        """When the app ended (monotonic), oldest first: the engine's crash-loop input."""
        self._bridge: BridgeRunner | None = None
        self._bridge_task: asyncio.Task[None] | None = None
        self._bridge_client: GroupClient | None = None
        self.last_bridge: dict[str, Any] | None = None
        """The last bridge that ended, or the last refusal: for /v1/status."""

    # -- inputs ------------------------------------------------------------------------------------------------
    def beacon(self, beacon: Beacon, transport: str) -> None:
        self.metrics.beacons.labels(transport).inc()
        self._reported[beacon.process] = bridge.Member(beacon.member_id, beacon.generation, beacon.instance_id)
        while len(self._reported) > REPORTED_PROCESSES_KEPT:
            del self._reported[next(iter(self._reported))]  # the oldest process first (dicts keep insertion order)
        if not watchdog.watches(self.state.config, beacon.instance_id):
            self._say_once("beacon", f"beacons of instance {beacon.instance_id!r} are not watched: this sidecar"
                           f" watches {self.settings.instance_id!r} (another consumer process in the pod)")  # fmt: skip
            return
        now = time.monotonic()
        if self._stall_reported is not None:  # the app polls again: tell the operator the stall is over
            stalled = now - self.last_beacon_at if self.last_beacon_at is not None else 0.0
            self._emit(events.StallEnded, {"stalled_for_ms": round(stalled * 1000)}, member=self._stall_reported)
            self._stall_reported = None
        self.last_beacon_at = now
        self.last_beacon = beacon
        self._warm_bridge(now)
        if self.app_probe_failing:  # the app polls again: the restart it needed has happened
            self.app_probe_failing = False
            self.metrics.app_probe_failing.set(0)
        self._queue.put_nowait(beacon)

    # -- the loop ----------------------------------------------------------------------------------------------
    async def run(self) -> None:
        if self.settings.budget is BudgetMode.LEASE:
            self._open_budget()
        if self.settings.signal is Signal.PROGRESS:
            self._background(self._progress_loop())
        if self.settings.signal is Signal.STATS:
            self._background(self._stats_loop())
        observation: Observation = Tick()
        while True:
            self.loop_alive_at = now = time.monotonic()
            if self.last_beacon_at is not None:
                self.metrics.poll_age.set(now - self.last_beacon_at)
            self._bridge_observes(observation)
            if not self._timings_checked and isinstance(observation, DescribeResult):  # noqa: SIM102 - one per line
                if isinstance(observation.result, GroupView):
                    self._timings_checked = True
                    asyncio.get_running_loop().run_in_executor(self._worker, self._check_timings)
            self.state, actions = watchdog.decide(self._silence_bridged(), observation, now)
            self._wake_at = None
            for action in actions:
                self._carry_out(action)
            observation = await self._next_observation()

    async def _next_observation(self) -> Observation:
        # wake at least every check interval so /livez and the poll-age metric stay fresh
        limit = self.settings.check_interval
        timeout = limit if self._wake_at is None else min(limit, max(0.0, self._wake_at - time.monotonic()))
        try:
            return await asyncio.wait_for(self._queue.get(), timeout)
        except TimeoutError:
            return Tick()

    def _carry_out(self, action: object) -> None:
        match action:
            case Wait(until=until):
                self._wake_at = until
            case LookupCoordinator():
                self._in_worker(Api.FIND_COORDINATOR, self._lookup)
            case Describe():
                self._in_worker(Api.DESCRIBE_GROUP, self._describe)
            case Evict() as evict:
                self._stall_event(evict.member_id, evict.instance_id, "leave-group")
                if self.settings.budget is BudgetMode.NONE:
                    self._leave(evict)
                else:
                    self._background(self._permit_then_leave(evict))
            case Restart() as restart:
                self._stall_event(restart.member_id, restart.instance_id, "restart")
                self.app_probe_failing = True
                self.metrics.app_probe_failing.set(1)
                self.metrics.actions.labels("restart", "NONE").inc()
                self.last_action = {"action": "restart", "reason": restart.reason, "at": _utc_now().isoformat()}
                log.warning("failing /v1/probe/app so the app container restarts: %s", restart.reason)
            case Alert(kind=kind, message=message):
                self.metrics.alerts.labels(kind.value).inc()
                log.warning("%s: %s", kind.value, message)
                if kind is AlertKind.STALL and self.state.member is not None:
                    self._stall_event(self.state.member.member_id, self.state.member.instance_id, "alert")
            case _:
                raise TypeError(f"unknown watchdog action {action!r}")

    # -- the app's end and the heartbeat bridge (issue #6) -----------------------------------------------------
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
        if member is not None and not watchdog.watches(self.state.config, member.instance_id):
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
        if self.settings.group_protocol is rules.GroupProtocol.CONSUMER and self.settings.instance_id:
            self._release(member, earlier, now)
            return
        if not self.settings.bridge_enabled:
            return
        started = bridge.start(
            self.settings.group_id,
            member,
            proof="helper-connection-closed",
            earlier_ends=earlier,
            now=now,
            config=self.settings.bridge(),
            instance_id=self.settings.instance_id,
        )
        if isinstance(started, bridge.Refused):
            self.metrics.bridges_refused.labels(started.cause).inc()
            self._say_once("bridge", started.message)
            self.last_bridge = {"state": "refused", "cause": started.cause, "message": started.message,
                                "at": _utc_now().isoformat()}  # fmt: skip
            return
        self._said.pop("bridge", None)
        self._start_bridge(started, now)

    def _release(self, member: bridge.Member | None, earlier: tuple[float, ...], now: float) -> None:
        """A KIP-848 static member's app ended (proof): release its instance id so the restarted app takes the member
        over at once (`bridge.release`); on the Kafka worker, answered in a log line, a metric and /v1/status."""
        decided = bridge.release(
            self.settings.group_id, member, proof="helper-connection-closed", earlier_ends=earlier, now=now,
            config=self.settings.bridge(), instance_id=self.settings.instance_id,
        )  # fmt: skip
        if isinstance(decided, bridge.Refused):
            self.metrics.bridges_refused.labels(decided.cause).inc()
            self._say_once("bridge", decided.message)
            return
        self._said.pop("bridge", None)

        def send() -> Outcome:
            try:
                return self.client().release_static_member(decided.group_id, decided.member_id, decided.instance_id)
            except GroupClientError as exc:
                return exc.outcome
            except (ConnectionError, OSError):
                return classify(Api.CONSUMER_GROUP_HEARTBEAT, TRANSPORT_ERROR)

        def answered(future: "asyncio.Future[Outcome]") -> None:
            outcome = future.result()
            self.metrics.requests.labels(Api.CONSUMER_GROUP_HEARTBEAT.value, outcome.name).inc()
            self.metrics.actions.labels("release", outcome.name).inc()
            reason = f"the app of static member {decided.member_id} ended: its instance id released for its restart"
            self.last_action = {"action": "release", "reason": reason, "outcome": outcome.name,
                                "at": _utc_now().isoformat()}  # fmt: skip
            log.warning("released instance id %s of member %s (its app ended): %s", decided.instance_id,
                        decided.member_id, outcome)  # fmt: skip

        future = asyncio.get_running_loop().run_in_executor(self._worker, send)
        future.add_done_callback(answered)

    def _start_bridge(self, state: bridge.BridgeState, now: float) -> None:
        self.metrics.bridges_started.labels(state.proof).inc()
        self.metrics.bridging.set(1)
        cfg = state.config
        log.warning(
            "bridging member %s (instance %s, generation %d): the app ended (%s); heartbeats every %gs for at most"
            " %gs, foreign rebalance: %s",
            state.member_id, state.instance_id, state.generation, state.proof, cfg.heartbeat_interval,
            cfg.max_bridge_seconds, cfg.on_foreign_rebalance,
        )  # fmt: skip
        self._emit(
            events.BridgeStarted,
            {
                "generation": state.generation,
                "proof": state.proof,
                "deadline": _utc_now() + timedelta(seconds=state.deadline - now),
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
        task.add_done_callback(_report_crash)
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
            "at": _utc_now().isoformat(),
        }
        self._emit(
            events.BridgeEnded,
            {
                "outcome": outcome,
                "heartbeats_sent": heartbeats,
                "bridged_ms": round(seconds * 1000),
                "kafka_error": kafka_error,
            },
            member=(state.member_id, state.instance_id),
        )

    def _stop_bridge(self) -> None:
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

    async def _bridge_send(self, request: BridgeRequest) -> Outcome:
        api = Api.HEARTBEAT if isinstance(request, bridge.SendHeartbeat) else Api.LEAVE_GROUP
        if api is Api.HEARTBEAT:
            self.metrics.bridge_heartbeats.inc()
        outcome = await asyncio.get_running_loop().run_in_executor(self._bridge_worker, self._bridge_request, request)
        self.metrics.requests.labels(api.value, outcome.name).inc()
        return outcome

    def _bridge_request(self, request: BridgeRequest) -> Outcome:
        """On the bridge's thread: its own client (connected while the app was healthy, else now), one request."""
        try:
            client = self._bridge_group_client()
        except (ConnectionError, OSError) as exc:
            log.warning("bridge: %s", exc)
            api = Api.HEARTBEAT if isinstance(request, bridge.SendHeartbeat) else Api.LEAVE_GROUP
            return classify(api, TRANSPORT_ERROR)
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

    def _warm_bridge(self, now: float) -> None:
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
                self._said.pop("bridge-warm", None)
                self.bridge_ready = True
            except (GroupClientError, ConnectionError, OSError) as exc:
                self.bridge_ready = False
                self._say_once("bridge-warm", f"bridge: could not connect ahead of need: {exc}")

        asyncio.get_running_loop().run_in_executor(self._bridge_worker, warm)

    def _bridge_observes(self, observation: Observation) -> None:
        """A view the watchdog took anyway may show the app back (a new member under the instance id) or the member
        gone, before the next heartbeat's answer does."""
        if self._bridge is not None and isinstance(observation, DescribeResult):  # noqa: SIM102 - one per line
            if isinstance(observation.result, GroupView):
                self._bridge.observe(bridge.Described(observation.result))

    def _silence_bridged(self) -> WatchdogState:
        """While the app that ended is bridged, its silence is no stall (the app is known dead, not stuck): the
        watchdog must neither evict nor restart for it. A beacon from another member (the app is back) is watched
        as usual."""
        runner, state = self._bridge, self.state
        same = runner is not None and state.beacon is not None and state.beacon.member_id == runner.state.member_id
        return state.with_handled() if same and not state.stall_handled else state

    # -- the eviction budget ------------------------------------------------------------------------------------
    def _open_budget(self) -> None:
        name = self.settings.budget_lease or ledger.lease_name(self.settings.group_id)
        answer = LeaseApi.in_cluster(
            name, namespace=self.settings.namespace, env=os.environ, account_dir=self.settings.service_account_dir
        )
        if isinstance(answer, BudgetUnavailable):
            self._budget_problem = answer
            log.warning("eviction budget unavailable (%s): %s; vigil will only alert", answer.cause, answer.message)
            return
        self._lease = answer
        self._background(self._publish_loop())

    def _policy(self) -> BudgetPolicy:
        s = self.settings
        return BudgetPolicy(
            stall_timeout=s.stall_timeout_seconds,
            max_concurrent=s.max_concurrent_evictions,
            cooldown=s.cooldown,
            systemic_percent=s.systemic_stall_percent,
            settle=s.settle_seconds,
        )

    def _poll_age(self) -> float | None:
        return None if self.last_beacon_at is None else time.monotonic() - self.last_beacon_at

    async def _publish_loop(self) -> None:
        """Keep this pod's poll age in the group's ledger, so peers can count stalls before they evict."""
        assert self._lease is not None
        stall = self.settings.stall_timeout_seconds
        while True:
            age = self._poll_age()
            if age is not None and ledger.should_publish(self._published, age, stall, time.time()):
                written = await publish(self._lease, self.settings.pod_name, age, stall_timeout=stall)
                if isinstance(written, ledger.Ledger):
                    self._published = written.members.get(self.settings.pod_name)
                else:
                    self._say_once("budget", f"eviction budget: {written.cause}: {written.message}")
            await asyncio.sleep(self.settings.check_interval)

    async def _permit_then_leave(self, evict: Evict) -> None:
        """Ask the group's budget for a permit; evict with one, else tell the watchdog why not (as the answer to
        its Evict) so it retries later (settle, budget) or stops (systemic stall, no access)."""
        age = self._poll_age() or self.settings.stall_timeout_seconds
        answer: ledger.Permit | ledger.Refusal | BudgetUnavailable
        if self._lease is None:
            assert self._budget_problem is not None
            answer = self._budget_problem
        else:
            member = self.state.view.member(evict.member_id) if self.state.view is not None else None
            owned = tuple((tp.topic, tp.partition) for tp in member.assignment) if member is not None else ()
            committed = await asyncio.get_running_loop().run_in_executor(self._worker, self._committed, owned)
            answer = await request_permit(
                self._lease, self.settings.pod_name, evict.member_id, age, self._policy(),
                partitions=owned, committed=committed,
            )  # fmt: skip
        if isinstance(answer, ledger.Permit):
            self._leave(evict)
            return
        cause: str
        if isinstance(answer, ledger.Refusal):
            cause, retry = answer.cause, answer.cause in ("settle", "budget")
            if cause == "poison-suspected":
                self._emit(
                    events.PoisonSuspected,
                    {
                        "partitions": [
                            {"topic": m.topic, "partition": m.partition, "committed_offset": m.offset}
                            for m in answer.suspects
                        ],
                        "message": answer.message,
                    },
                    member=(evict.member_id, evict.instance_id),
                )
            if cause == "systemic-stall":
                self._emit(
                    events.SystemicStall,
                    {
                        "stalled_members": answer.count.stalled,
                        "members": answer.count.members,
                        "threshold_percent": self.settings.systemic_stall_percent,
                    },
                )
        else:
            cause, retry = "no-permission", answer.transient
        self.metrics.alerts.labels(f"budget-{cause}").inc()
        if cause != "settle":
            log.warning("eviction of %s refused (%s): %s", evict.member_id, cause, answer.message)
            self._emit(
                events.EvictionRefused,
                {"action": "leave-group", "cause": cause, "message": answer.message},
                member=(evict.member_id, evict.instance_id),
            )
        self._queue.put_nowait(ActionResult(_refused(cause, answer.message, retry=retry)))

    def _committed(self, owned: tuple[tuple[str, int], ...]) -> dict[tuple[str, int], int]:
        """The group's committed offsets of `owned` (the poison-pill guard's evidence); empty when unknown."""
        if not owned:
            return {}
        try:
            offsets = self.client().committed_offsets(self.settings.group_id)
        except (GroupClientError, ConnectionError, OSError) as exc:
            log.warning("committed offsets of %s unknown for the poison-pill guard: %s", self.settings.group_id, exc)
            return {}
        self.metrics.requests.labels(Api.OFFSET_FETCH.value, "NONE").inc()
        wanted = set(owned)
        return {(tp.topic, tp.partition): o for tp, o in offsets.items() if (tp.topic, tp.partition) in wanted}

    def _leave(self, evict: Evict) -> None:
        self._emit(
            events.EvictionRequested,
            {"action": "leave-group", "reason": evict.reason},
            member=(evict.member_id, evict.instance_id),
        )
        log.warning("evicting member %s: %s", evict.member_id, evict.reason)
        self._in_worker(Api.LEAVE_GROUP, lambda: self._evict(evict))

    def _background(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(_report_crash)

    # -- the progress signal: committed offsets instead of beacons ---------------------------------------------
    async def _progress_loop(self) -> None:
        """Each check: judge the member's progress on the worker; while it progresses, the adapter's synthetic
        beacons keep the watchdog's stall timer from expiring, exactly as the app's own beacons would."""
        loop = asyncio.get_running_loop()
        while True:
            for item in await loop.run_in_executor(self._worker, self._progress_check):
                if isinstance(item, NoCommits):
                    self.metrics.alerts.labels("no-commits").inc()
                    log.warning("no-commits: %s", item.message)
                else:
                    self.beacon(item, "progress")
            await asyncio.sleep(self.settings.check_interval)

    def _progress_check(self) -> list[ProgressOutput]:
        try:
            view = self.client().describe(self.settings.group_id)
            observed = [identity.ObservedMember(m.member_id, m.instance_id, m.client_id, m.host) for m in view.members]
            pod = identity.PodIdentity(self.settings.pod_name, self.settings.instance_id)
            match = identity.find_member(observed, pod)
            if isinstance(match, identity.NoMatch):
                self._say_once("progress", f"progress: no member of the group is this pod's: {match.reason}")
                return []
            member = view.member(match.member.member_id)
            if member is None:
                return []
            if self._sampler is None:
                self._sampler = ProgressSampler(
                    self.client(), self.connection, self.settings.group_id, pod_name=self.settings.pod_name
                )
            now = time.monotonic()
            progress = self._sampler.check(view, member, now, stall_timeout=self.settings.stall_timeout_seconds)
            self._count_progress_requests(self._sampler)
            self._adapter, out = adapt(self._adapter, progress, member, now)
            self._said.pop("progress", None)
            return out
        except GroupClientError as exc:
            self._say_once("progress", f"progress: {exc}")
        except (ConnectionError, OSError) as exc:
            self._say_once("progress", f"progress: Kafka unreachable: {exc}")
        return []

    # -- the stats signal: librdkafka's statistics forwarded by the app ---------------------------------------
    def stats(self, doc: stats_signal.StatsDoc) -> stats_signal.Verdict:
        """A forwarded statistics document: judged at once (no broker request); a progressing one becomes a
        synthetic beacon at the next check, through the same path as the progress signal's."""
        self._stats, verdict = stats_signal.judge(
            self._stats, doc, time.monotonic(), stall_timeout=self.settings.stall_timeout_seconds
        )
        if verdict is stats_signal.Verdict.FIRST:
            self._stats_member = None  # a restarted app is a new member: prove it again
        if verdict.progressed:
            self._stats_progressed = True
        return verdict

    async def _stats_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if self._stats_progressed and self._stats.last is not None:
                self._stats_progressed = False
                beacon = await loop.run_in_executor(self._worker, self._stats_member_beacon, self._stats.last)
                if beacon is not None:
                    self.beacon(dataclasses.replace(beacon, app_time=time.monotonic()), "stats")
            await asyncio.sleep(self.settings.check_interval)

    def _stats_member_beacon(self, doc: stats_signal.StatsDoc) -> Beacon | None:
        """This pod's member as a beacon (identity as for the progress signal: the app sends no member id); one
        describe per assignment change, none while the rebalance count stays."""
        if self._stats_member is not None and self._stats_member[0] == doc.rebalance_cnt:
            return self._stats_member[1]
        try:
            view = self.client().describe(self.settings.group_id)
            self.metrics.requests.labels(Api.DESCRIBE_GROUP.value, "NONE").inc()
            observed = [identity.ObservedMember(m.member_id, m.instance_id, m.client_id, m.host) for m in view.members]
            pod = identity.PodIdentity(self.settings.pod_name, self.settings.instance_id)
            match = identity.find_member(observed, pod)
            if isinstance(match, identity.NoMatch):
                self._say_once("stats", f"stats: no member of the group is this pod's: {match.reason}")
                return None
            member = view.member(match.member.member_id)
            if member is None:
                return None
        except GroupClientError as exc:
            self._say_once("stats", f"stats: {exc}")
            return None
        except (ConnectionError, OSError) as exc:
            self._say_once("stats", f"stats: Kafka unreachable: {exc}")
            return None
        self._said.pop("stats", None)
        beacon = Beacon(
            member_id=member.member_id,
            generation=UNKNOWN_GENERATION,
            instance_id=member.instance_id,
            assigned_partitions=len(member.assignment),
            app_time=0.0,
        )
        self._stats_member = (doc.rebalance_cnt, beacon)
        return beacon

    def _count_progress_requests(self, sampler: ProgressSampler) -> None:
        """The progress signal's own requests: its describe and what the sampler sent (the footprint benchmark)."""
        sent = sampler.last_requests
        requests = self.metrics.requests
        requests.labels(Api.DESCRIBE_GROUP.value, "NONE").inc()
        requests.labels(Api.OFFSET_FETCH.value, "NONE").inc(sent.offset_fetch)
        requests.labels(Api.LIST_OFFSETS.value, "NONE").inc(sent.list_offsets)
        requests.labels("Fetch", "NONE").inc(sent.probes)

    def _say_once(self, source: str, problem: str) -> None:
        """Log a recurring problem once until it changes (never once per check), per source."""
        if self._said.get(source) != problem:
            log.warning("%s", problem)
            self._said[source] = problem

    # -- Kafka, on the worker thread ---------------------------------------------------------------------------
    def _in_worker(self, api: Api, request: Callable[[], Observation]) -> None:
        def guarded() -> Observation:
            try:
                return request()
            except GroupClientError as exc:
                return _failure(api, exc.outcome)
            except (ConnectionError, OSError) as exc:
                log.warning("%s: %s", api.value, exc)
                return _failure(api, classify(api, TRANSPORT_ERROR))

        future = asyncio.get_running_loop().run_in_executor(self._worker, guarded)
        future.add_done_callback(lambda f: self._answered(api, f))

    def _answered(self, api: Api, future: "asyncio.Future[Observation]") -> None:
        observation = future.result()
        outcome = _outcome_of(observation)
        self.metrics.requests.labels(api.value, outcome.name if outcome else "NONE").inc()
        self._queue.put_nowait(observation)

    def client(self) -> GroupClient:
        if self._client is None:
            self._client = GroupClient(self.connection, client_id=f"vigil-sidecar-{self.settings.pod_name}")
        return self._client

    def _check_timings(self) -> None:
        """On the worker, once: the timing rules against the broker's limits and, KIP-848, the group's own session and
        heartbeat (its group configs, which default to the broker's) — what start could not know. Each finding is
        one log line; none stops the sidecar. Unreadable (no DESCRIBE_CONFIGS) → Kafka's defaults, said so."""
        try:
            limits = self.client().broker_limits()
            if self.settings.group_protocol is rules.GroupProtocol.CONSUMER:
                timings = self.client().group_timings(self.settings.group_id)
                limits = limits.for_group(timings.session_ms, timings.heartbeat_ms)
        except (GroupClientError, ConnectionError, OSError) as exc:
            log.warning("the cluster's group timings could not be read (%s): checked at start only", exc)
            return
        said = set(rules.check_timings(self.settings.timings(), NO_BROKER_LIMITS))  # logged at start
        for finding in rules.check_timings(self.settings.timings(), limits):
            if finding not in said:
                log.warning("config %s (%s, from the cluster): %s", finding.severity.value, finding.setting,
                            finding.message)  # fmt: skip

    def _lookup(self) -> Observation:
        return CoordinatorResult(self.client().coordinator(self.settings.group_id))

    def _describe(self) -> Observation:
        return DescribeResult(self.client().describe(self.settings.group_id))

    def _evict(self, evict: Evict) -> Observation:
        view = self.state.view
        group_type = view.type if view is not None else None
        kwargs = {"group_type": group_type} if group_type is not None else {}
        outcome = self.client().remove_member(
            self.settings.group_id, evict.member_id, evict.instance_id, evict.reason, **kwargs,
            proceed=lambda: watchdog.eviction_due(evict, self.last_beacon_at),
        )  # fmt: skip
        self.metrics.actions.labels("leave-group", outcome.name).inc()
        self.last_action = {
            "action": "leave-group",
            "reason": evict.reason,
            "outcome": outcome.name,
            "at": _utc_now().isoformat(),
        }
        if outcome.reaction in (Reaction.DONE, Reaction.ALREADY_GONE):
            self._emit(
                events.EvictionDone,
                member=(evict.member_id, evict.instance_id),
                payload={
                    "action": "leave-group",
                    "kafka_error": outcome.name,
                    "already_gone": outcome.reaction is Reaction.ALREADY_GONE,
                },
            )
        elif outcome.reaction is Reaction.NOTHING_TO_DO:
            cause = "app-polled" if outcome.code == APP_POLLED else "fenced"
            log.info("eviction of member %s not done (%s): %s", evict.member_id, cause, outcome.message)
            self._emit(
                events.EvictionRefused,
                member=(evict.member_id, evict.instance_id),
                payload={"action": "leave-group", "cause": cause, "message": outcome.message},
            )
        return ActionResult(outcome)

    # -- events ------------------------------------------------------------------------------------------------
    def _stall_event(self, member_id: str, instance_id: str | None, action: str) -> None:
        stalled = time.monotonic() - self.last_beacon_at if self.last_beacon_at is not None else 0.0
        beacon = self.state.beacon
        self._stall_reported = (member_id, instance_id)
        self._emit(
            events.StallDetected,
            member=(member_id, instance_id),
            payload={
                "signal": self.settings.signal.value,
                "stalled_for_ms": round(stalled * 1000),
                "stall_timeout_ms": round(self.settings.stall_timeout_seconds * 1000),
                "generation": beacon.generation if beacon is not None and beacon.generation >= 0 else None,
                "assigned_partitions": beacon.assigned_partitions if beacon is not None else None,
            },
        )

    def _emit(self, model: Any, payload: dict[str, Any], *, member: tuple[str, str | None] | None = None) -> None:
        """Queue one event (never blocks, never raises); `member` is the (member id, instance id) concerned."""
        if not self.settings.events_topic:
            return
        if self._sink is None:
            self._sink = EventSink(
                self.connection, self.settings.events_topic, f"vigil-sidecar-{self.settings.pod_name}"
            )
        if member is not None:
            payload = {"member": {"member_id": member[0], "instance_id": member[1]}, **payload}
        event = model.model_validate(
            {
                "time": _utc_now(),
                "cluster": self.settings.cluster,
                "group": self.settings.group_id,
                "source": "sidecar",
                "namespace": self.settings.namespace,
                "pod": self.settings.pod_name,
                "payload": payload,
            }
        )
        self._sink.emit(event)

    def status(self) -> dict[str, Any]:
        """What /v1/status shows: enough to see at a glance what the watchdog believes."""
        member = self.state.member
        now = time.monotonic()
        return {
            "group": self.settings.group_id,
            "pod": self.settings.pod_name,
            "signal": self.settings.signal.value,
            "action": self.settings.stall_action.value,
            "stall_timeout_seconds": self.settings.stall_timeout_seconds,
            "poll_age_seconds": None if self.last_beacon_at is None else round(now - self.last_beacon_at, 3),
            "member": None if member is None else self._member_status(member.member_id, member.instance_id),
            "identity_problem": self.state.identity_problem,
            "group_state": None if self.state.view is None else self.state.view.state.value,
            "coordinator": self.state.coordinator,
            "app_probe_failing": self.app_probe_failing,
            "last_action": self.last_action,
            "budget": self.settings.budget.value
            if self._budget_problem is None
            else f"unavailable ({self._budget_problem.cause}): alert only",
            "app": {"helper_connections": sum(self._holds.values()), "ends": len(self._app_ends)},
            "bridge_enabled": self.settings.bridge_enabled,
            "bridge_ready": self.bridge_ready,
            "bridge": self._bridge_status(now),
        }

    def _member_status(self, member_id: str, instance_id: str | None) -> dict[str, Any]:
        """The proven member, with the generation its app last reported (the operator's rollout bridges with it;
        DescribeGroups does not give it): None unless the last beacon names this member."""
        beacon = self.last_beacon
        generation = beacon.generation if beacon is not None and beacon.member_id == member_id else None
        return StatusMember(member_id, instance_id, generation).to_json()

    def _bridge_status(self, now: float) -> dict[str, Any] | None:
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
        self._stop_bridge()
        for task in self._tasks:
            task.cancel()
        if self._sampler is not None:
            self._sampler.close()
        if self._sink is not None:
            self._sink.flush(5)
        self._worker.shutdown(wait=False, cancel_futures=True)
        self._bridge_worker.shutdown(wait=False, cancel_futures=True)
        if self._client is not None:
            with contextlib.suppress(Exception):
                self._client.close()
        if self._bridge_client is not None:
            with contextlib.suppress(Exception):
                self._bridge_client.close()


def _report_crash(task: "asyncio.Task[None]") -> None:
    """A background task that ended by an unexpected error says so loudly."""
    if not task.cancelled() and task.exception() is not None:
        log.error("a background task of the sidecar stopped: %r", task.exception())


#: How a bridge ended when the sidecar stopped under it (not the engine's: it never decided; the event's outcome).
STOPPED = "stopped"

#: The code of a LeaveGroup vigil did not send (the budget refused it): below Kafka's and TRANSPORT_ERROR's.
BUDGET_REFUSED = -3


def _refused(cause: str, message: str, *, retry: bool) -> Outcome:
    """The watchdog's answer to an Evict the budget refused: retry later (settle, budget) or stop (the rest)."""
    return dataclasses.replace(
        classify(Api.LEAVE_GROUP, 0),
        code=BUDGET_REFUSED,
        name=f"BUDGET_{cause.upper().replace('-', '_')}",
        reaction=Reaction.RETRY_BACKOFF if retry else Reaction.NOTHING_TO_DO,
        retriable=retry,
        message=message,
    )


def _failure(api: Api, outcome: Outcome) -> Observation:
    return (
        CoordinatorResult(outcome)
        if api is Api.FIND_COORDINATOR
        else (ActionResult(outcome) if api is Api.LEAVE_GROUP else DescribeResult(outcome))
    )


def _outcome_of(observation: Observation) -> Outcome | None:
    match observation:
        case ActionResult(outcome=outcome):
            return outcome
        case CoordinatorResult(result=Outcome() as outcome) | DescribeResult(result=Outcome() as outcome):
            return outcome
    return None


def _utc_now() -> datetime:
    return datetime.now(UTC)
