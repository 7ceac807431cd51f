"""The sidecar's loop: feed observations to the pure watchdog and carry out the actions it returns.

All of the watchdog's Kafka I/O runs on one worker thread (the group client is blocking and used from one thread);
its answers come back as observations through the same queue as the beacons, so `decide` sees one ordered stream.
Start never waits for Kafka: the client is created on first use, and an unreachable broker is just a transport
outcome the watchdog backs off from.

The other features are shells of their own (vigil_sidecar.shells), each owning its state: the app's end and the
heartbeat bridge (`bridge.AppEnds`), the eviction budget (`budget.Budget`), the progress and stats signals
(`signals.Signals`); the runtime composes them with the watchdog and serves /v1/status.
"""

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from vigil_core import events, rules
from vigil_core.kafka.group_client import GroupClientError
from vigil_core.kafka.model import GroupView
from vigil_core.kafka.outcomes import APP_POLLED, TRANSPORT_ERROR, Api, Outcome, Reaction, classify
from vigil_core.kafka.security import KafkaConnection
from vigil_core.liveness import StallAction
from vigil_core.sidecar_contract import NO_BROKER_LIMITS, StatusMember
from vigil_sidecar.config import BudgetMode, SidecarSettings
from vigil_sidecar.metrics import Metrics
from vigil_sidecar.shells.bridge import AppEnds
from vigil_sidecar.shells.budget import Budget
from vigil_sidecar.shells.common import Background, Emitter, KafkaWorker, MemberKey, Said, Shared, utc_now
from vigil_sidecar.shells.signals import Signals
from vigil_sidecar.signals import stats as stats_signal
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

__all__ = ["Sidecar"]

#: The LeaveGroup client (kafka-python: its import and bootstrap, ~0.1 s) is made once the app has been silent for
#: this share of its stall timeout (the loop wakes for it): a silence that may end in an eviction, which then does not
#: wait for it.
PREPARE_EVICTION_AT = 0.5

log = logging.getLogger("vigil.sidecar")


class Sidecar:
    _timings_checked: bool = False
    """The app's timings were checked against the cluster's (once, at the coordinator's first answer)."""

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
        self.last_beacon: Beacon | None = None
        """The app's last beacon as received (the watchdog may not have taken it in yet): the member to bridge."""
        self._queue: asyncio.Queue[Observation] = asyncio.Queue()
        self._wake_at: float | None = None
        self._stall_reported: MemberKey | None = None
        """The (member id, instance id) of the last stall-detected event until the app polls again."""
        self._eviction_prepared = False
        """The LeaveGroup client was made (or is being made) ahead of an eviction (`PREPARE_EVICTION_AT`)."""
        self.worker = KafkaWorker(
            connection, settings.pod_name, other_types_after=PREPARE_EVICTION_AT * settings.stall_timeout_seconds
        )
        self.emitter = Emitter(settings, connection)
        self.said = Said()
        self.background = Background()
        shared = Shared(settings, metrics, self.emitter, self.said, self.worker)
        self.app_ends = AppEnds(
            shared, connection, watches=lambda instance_id: watchdog.watches(self.state.config, instance_id),
            acted=self._acted,
        )  # fmt: skip
        self.budget = Budget(shared, poll_age=self._poll_age)
        self.signals = Signals(shared, beacon=self.beacon)

    @property
    def stopping(self) -> bool:
        """Set when the sidecar itself shuts down: helper connections it closes then are no end of the app."""
        return self.app_ends.stopping

    @stopping.setter
    def stopping(self, value: bool) -> None:
        self.app_ends.stopping = value

    # -- inputs ------------------------------------------------------------------------------------------------
    def beacon(self, beacon: Beacon, transport: str) -> None:
        self.metrics.beacons.labels(transport).inc()
        self.app_ends.reported(beacon)
        if not watchdog.watches(self.state.config, beacon.instance_id):
            self.said.once("beacon", f"beacons of instance {beacon.instance_id!r} are not watched: this sidecar"
                           f" watches {self.settings.instance_id!r} (another consumer process in the pod)")  # fmt: skip
            return
        now = time.monotonic()
        if self._stall_reported is not None:  # the app polls again: tell the operator the stall is over
            stalled = now - self.last_beacon_at if self.last_beacon_at is not None else 0.0
            self.emitter.emit(events.StallEnded, {"stalled_for_ms": round(stalled * 1000)}, member=self._stall_reported)
            self._stall_reported = None
        self.last_beacon_at = now
        self.last_beacon = beacon
        self.app_ends.warm(now)
        if self.app_probe_failing:  # the app polls again: the restart it needed has happened
            self.app_probe_failing = False
            self.metrics.app_probe_failing.set(0)
        self._queue.put_nowait(beacon)

    def hold_opened(self, process: object) -> None:
        """A helper connection opened (`process`: the app process as it named itself, else the connection)."""
        self.app_ends.hold_opened(process)

    async def app_back(self) -> bool:
        """A new app process waits to join its group (`AppEnds.app_back`)."""
        return await self.app_ends.app_back()

    def hold_closed(self, process: object) -> None:
        """A helper connection closed (the app process ended once its last one is gone)."""
        self.app_ends.hold_closed(process)

    def stats(self, doc: stats_signal.StatsDoc) -> stats_signal.Verdict:
        """A forwarded statistics document (the stats signal)."""
        return self.signals.stats(doc)

    # -- the loop ----------------------------------------------------------------------------------------------
    async def run(self) -> None:
        if self.settings.budget is BudgetMode.LEASE:
            self.budget.open(self.background)
        self.signals.start(self.background)
        observation: Observation = Tick()
        while True:
            self.loop_alive_at = now = time.monotonic()
            if self.last_beacon_at is not None:
                self.metrics.poll_age.set(now - self.last_beacon_at)
            self.app_ends.observe(observation)
            if not self._timings_checked and isinstance(observation, DescribeResult):  # noqa: SIM102 - one per line
                if isinstance(observation.result, GroupView):
                    self._timings_checked = True
                    self.worker.run(self._check_timings)
            self.state, actions = watchdog.decide(self.app_ends.silence(self.state), observation, now)
            self._wake_at = None
            for action in actions:
                self._carry_out(action)
            prepare_at = self._prepare_eviction(now)
            if prepare_at is not None:
                self._wake_at = prepare_at if self._wake_at is None else min(self._wake_at, prepare_at)
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
                    self.background.start(self._permit_then_leave(evict))
            case Restart() as restart:
                self._stall_event(restart.member_id, restart.instance_id, "restart")
                self.app_probe_failing = True
                self.metrics.app_probe_failing.set(1)
                self.metrics.actions.labels("restart", "NONE").inc()
                self.last_action = {"action": "restart", "reason": restart.reason, "at": utc_now().isoformat()}
                log.warning("failing /v1/probe/app so the app container restarts: %s", restart.reason)
            case Alert(kind=kind, message=message):
                self.metrics.alerts.labels(kind.value).inc()
                log.warning("%s: %s", kind.value, message)
                if kind is AlertKind.STALL and self.state.member is not None:
                    self._stall_event(self.state.member.member_id, self.state.member.instance_id, "alert")
            case _:
                raise TypeError(f"unknown watchdog action {action!r}")

    def _prepare_eviction(self, now: float) -> float | None:
        """Once per sidecar, when the app has been silent for `PREPARE_EVICTION_AT` of its stall timeout and a stall
        would be acted on by a LeaveGroup: make the kafka-python half of the worker's client (loaded on demand, not at
        start: a healthy sidecar's RSS), so the first eviction does not wait for its import and bootstrap. Returns
        when to look again (the loop wakes then, whatever its check interval), None when there is nothing to wait
        for."""
        if self._eviction_prepared or self.last_beacon_at is None:
            return None
        if self.settings.stall_action is not StallAction.LEAVE_GROUP:
            return None
        prepare_at = self.last_beacon_at + PREPARE_EVICTION_AT * self.settings.stall_timeout_seconds
        if now < prepare_at:
            return prepare_at
        self._eviction_prepared = True

        def prepare() -> None:
            try:
                self.worker.client().open_wire()
            except (ConnectionError, OSError) as exc:  # the eviction itself will try again, and say what it gets
                log.info("the LeaveGroup client could not be made ahead of need: %s", exc)

        self.worker.run(prepare)
        return None

    def _poll_age(self) -> float | None:
        return None if self.last_beacon_at is None else time.monotonic() - self.last_beacon_at

    def _acted(self, action: dict[str, Any]) -> None:
        self.last_action = action

    async def _permit_then_leave(self, evict: Evict) -> None:
        """Evict with the budget's permit; without one, its answer goes to the watchdog as the answer to its Evict
        (`budget.verdict`: retry later, or stop)."""
        refused = await self.budget.permit(evict, self.state.view)
        if refused is None:
            self._leave(evict)
        else:
            self._queue.put_nowait(ActionResult(refused))

    def _leave(self, evict: Evict) -> None:
        self.emitter.emit(
            events.EvictionRequested,
            {"action": "leave-group", "reason": evict.reason},
            member=(evict.member_id, evict.instance_id),
        )
        log.warning("evicting member %s: %s", evict.member_id, evict.reason)
        self._in_worker(Api.LEAVE_GROUP, lambda: self._evict(evict))

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

        future = self.worker.run(guarded)
        future.add_done_callback(lambda f: self._answered(api, f))

    def _answered(self, api: Api, future: "asyncio.Future[Observation]") -> None:
        observation = future.result()
        outcome = _outcome_of(observation)
        self.metrics.requests.labels(api.value, outcome.name if outcome else "NONE").inc()
        self._queue.put_nowait(observation)

    def _check_timings(self) -> None:
        """On the worker, once: the timing rules against the broker's limits and, KIP-848, the group's own session and
        heartbeat (its group configs, which default to the broker's) — what start could not know. Each finding is
        one log line; none stops the sidecar. Unreadable (no DESCRIBE_CONFIGS) → Kafka's defaults, said so."""
        try:
            limits = self.worker.client().broker_limits()
            served = limits.protocols is None or rules.GroupProtocol.CONSUMER.value in limits.protocols
            if self.settings.group_protocol is rules.GroupProtocol.CONSUMER and served:
                timings = self.worker.client().group_timings(self.settings.group_id)
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
        return CoordinatorResult(self.worker.client().locate(self.settings.group_id))  # no kafka-python needed

    def _describe(self) -> Observation:
        return DescribeResult(self.worker.describe(self.settings.group_id))

    def _evict(self, evict: Evict) -> Observation:
        view = self.state.view
        group_type = view.type if view is not None else None
        kwargs = {"group_type": group_type} if group_type is not None else {}
        outcome = self.worker.client().remove_member(
            self.settings.group_id, evict.member_id, evict.instance_id, evict.reason, **kwargs,
            proceed=lambda: watchdog.eviction_due(evict, self.last_beacon_at),
        )  # fmt: skip
        self.metrics.actions.labels("leave-group", outcome.name).inc()
        self.last_action = {
            "action": "leave-group",
            "reason": evict.reason,
            "outcome": outcome.name,
            "at": utc_now().isoformat(),
        }
        if outcome.reaction in (Reaction.DONE, Reaction.ALREADY_GONE):
            self.emitter.emit(
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
            self.emitter.emit(
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
        self.emitter.emit(
            events.StallDetected,
            member=(member_id, instance_id),
            payload={
                "signal": self.settings.signal.value,
                "stalled_for_ms": round(stalled * 1000),
                "stall_timeout_ms": round(self.settings.stall_timeout_seconds * 1000),
                "generation": beacon.generation if beacon is not None and beacon.generation >= 0 else None,
                "assigned_partitions": beacon.assigned_partitions if beacon is not None else None,
                "action": action,
            },
        )

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
            "in_flight": self._in_flight(now),
            "app_probe_failing": self.app_probe_failing,
            "last_action": self.last_action,
            "budget": self.budget.status(),
            "app": self.app_ends.app(),
            "bridge_enabled": self.settings.bridge_enabled,
            "bridge_ready": self.app_ends.bridge_ready,
            "bridge": self.app_ends.status(now),
        }

    def _in_flight(self, now: float) -> dict[str, Any] | None:
        """The watchdog's request under way (lookup, describe, evict) and for how long: a silent broker shows here."""
        request = self.state.in_flight
        if request is None:
            return None
        return {"request": request.value, "seconds": round(now - self.state.in_flight_since, 3)}

    def _member_status(self, member_id: str, instance_id: str | None) -> dict[str, Any]:
        """The proven member, with the generation its app last reported (the operator's rollout bridges with it;
        DescribeGroups does not give it): None unless the last beacon names this member."""
        beacon = self.last_beacon
        generation = beacon.generation if beacon is not None and beacon.member_id == member_id else None
        return StatusMember(member_id, instance_id, generation).to_json()

    def close(self) -> None:
        self.app_ends.close()
        self.background.close()
        self.signals.close()
        self.emitter.close()
        self.worker.close()


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
