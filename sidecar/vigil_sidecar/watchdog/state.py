"""The watchdog's vocabulary: its configuration, what it observes, what it asks for, and its immutable state.

Observations come from the edge (the beacon listener, the group client); actions go back to it. The state is a
frozen dataclass changed only through `with_*` transitions (kopf's `HandlerState.with_outcome` habit), so a
decision is a function of (state, observation, now) and a test is a list of them.
"""

import math
from dataclasses import dataclass, field, replace
from enum import StrEnum

from vigil_core.kafka.model import GroupView, MemberView
from vigil_core.kafka.outcomes import Outcome
from vigil_core.liveness import StallAction
from vigil_sidecar.watchdog.timers import CheckTimer, PollTimer, SessionView

# --- configuration ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WatchdogConfig:
    """One sidecar's watchdog settings; times in seconds. Validated here too, so a bad one never runs silently."""

    pod_name: str
    """The pod this sidecar runs in: the identity a member must be proven to have (`vigil_core.identity`)."""
    stall_timeout: float
    """How long without a poll before the member counts as stalled."""
    check_interval: float
    """The longest the watchdog sleeps, and the pace of describes while it needs them; an action comes at most this
    long after the stall timeout (given answers faster than it)."""
    cooldown: float
    """At most one action per member within this long."""
    session_timeout: float
    """Without any answer from the coordinator for this long while requests fail, look it up again."""
    action: StallAction = StallAction.LEAVE_GROUP
    instance_id: str | None = None
    """The pod's `group.instance.id` when its app is a static member; else the one the app reports is used."""
    backoff_base: float = 0.5
    """First wait after a failed request (then doubling)."""
    backoff_cap: float = 30.0
    """Longest wait after failed requests."""

    def __post_init__(self) -> None:
        for name in ("stall_timeout", "check_interval", "session_timeout", "backoff_base", "backoff_cap"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise ValueError(f"watchdog {name} must be a positive number of seconds, not {value!r}")
        if not (math.isfinite(self.cooldown) and self.cooldown >= 0):
            raise ValueError(f"watchdog cooldown must be 0 or more seconds, not {self.cooldown!r}")
        if not self.pod_name:
            raise ValueError("watchdog pod_name must be set: without it no member can be proven to be this pod's")


# --- observations -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Beacon:
    """The app polled: reported by the helper on loopback (`POST /v1/beacon` or UDP)."""

    member_id: str
    generation: int
    instance_id: str | None
    assigned_partitions: int
    app_time: float
    """The app's own clock (informational: decisions use the sidecar's `now` at receipt, never earlier than the
    poll itself, so an action can only come later than the threshold, never sooner)."""
    process: str | None = None
    """The app process that sent it (the helper's token, the one its `/v1/hold` connection names): binds a proof
    of exit to the member that process reported. None from apps without the helper (and older helpers)."""


@dataclass(frozen=True)
class DescribeResult:
    """A DescribeGroups / ConsumerGroupDescribe answer: the view, or the classified failure."""

    result: GroupView | Outcome


@dataclass(frozen=True)
class CoordinatorResult:
    """A FindCoordinator answer: the coordinator's node id, or the classified failure."""

    result: int | Outcome


@dataclass(frozen=True)
class ActionResult:
    """The answer to the LeaveGroup an `Evict` asked for."""

    outcome: Outcome


@dataclass(frozen=True)
class Tick:
    """Time passed (a `Wait` ended)."""


Observation = Beacon | DescribeResult | CoordinatorResult | ActionResult | Tick


# --- actions ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LookupCoordinator:
    """Send FindCoordinator for the group; answer with `CoordinatorResult`."""


@dataclass(frozen=True)
class Describe:
    """Describe the group; answer with `DescribeResult`."""


@dataclass(frozen=True)
class Evict:
    """Compare-and-remove exactly this (member id, instance id) pair with `reason`; answer with `ActionResult`.

    Every attempt, retries included, goes out only while `decide.eviction_due` holds: the app has not polled since
    `silent_since` (the edge asks it right before each send)."""

    member_id: str
    instance_id: str | None
    reason: str
    silent_since: float = field(default=-math.inf, compare=False)
    """The last poll the stall was judged from (monotonic seconds)."""


@dataclass(frozen=True)
class Restart:
    """Start failing `/v1/probe/app` so the kubelet restarts the app container (no answer expected)."""

    member_id: str
    instance_id: str | None
    reason: str


class AlertKind(StrEnum):
    """Vocabulary shared with the events (`EvictionRefusedPayload.cause` and the stall event)."""

    STALL = "stall"
    """A stall was proven and the configured action is `alert`."""
    IDENTITY = "identity"
    """A stall, but no member of the group is provably this pod's: nothing is done."""
    COOLDOWN = "cooldown"
    """A stall within the cooldown of the last action on the member: the action waits for the cooldown to end."""
    REPORT = "report"
    """Kafka answered something only a human can fix; the watchdog keeps running and backs off."""


@dataclass(frozen=True)
class Alert:
    kind: AlertKind
    message: str


@dataclass(frozen=True)
class Wait:
    """Nothing to do before `until` (monotonic seconds) unless an observation arrives; then send a `Tick`."""

    until: float


Action = LookupCoordinator | Describe | Evict | Restart | Alert | Wait


# --- state ------------------------------------------------------------------------------------------------------


class Request(StrEnum):
    LOOKUP = "lookup"
    DESCRIBE = "describe"
    EVICT = "evict"


@dataclass(frozen=True)
class Episode:
    """An eviction under way: the pair asked to be removed, kept until Kafka's answer ends it."""

    member_id: str
    instance_id: str | None
    reason: str
    attempts: int = 1


@dataclass(frozen=True)
class WatchdogState:
    """Everything the watchdog remembers. Build with `WatchdogState.initial(config)`; change with `with_*`."""

    config: WatchdogConfig
    coordinator: int | None = None
    lookup: CheckTimer = field(default_factory=CheckTimer)
    check: CheckTimer = field(default_factory=CheckTimer)
    """Paces describes (and eviction retries)."""
    session: SessionView | None = None
    in_flight: Request | None = None
    in_flight_since: float = -math.inf
    beacon: Beacon | None = None
    poll: PollTimer | None = None
    view: GroupView | None = None
    view_at: float = -math.inf
    suspended: bool = False
    """The latest view was not Stable: the stall timeout counts afresh once it is; meanwhile no action, unless the
    group is rebalancing (waiting on its members) and the member has not polled for the stall timeout."""
    member: MemberView | None = None
    """The member proven to be this pod's and the one the app last reported, from the latest view."""
    identity_problem: str | None = None
    """Why no member is proven (from `vigil_core.identity.NoMatch`, or a changed member)."""
    gone: bool = False
    """The member the app reported was proven before and is no longer in the group (left, expired, evicted)."""
    handled_poll: float | None = None
    """The `last_poll` of the silence already dealt with: nothing more until the app polls again."""
    episode: Episode | None = None
    acted: tuple[tuple[str, float], ...] = ()
    """(member id, when) of the actions within the cooldown."""
    alerted: frozenset[str] = field(default_factory=frozenset)
    """Keys of the alerts already raised (each is raised once until its condition clears)."""
    evicted_at: float | None = None
    """When this pod's silent member was last removed: until the cooldown ends or the app polls, describes check
    that it stays out (librdkafka KIP-848 members, and apps without a rebalance callback, rejoin from a background
    thread without polling: the eviction is undone)."""
    evicted_member: str | None = None
    """The member id removed then: a KIP-848 member rejoins under it (KIP-1082: the client makes its id once)."""
    back_since: float | None = None
    """When a view first showed this pod's member back after the eviction (views since showing it too). Back is not
    yet undone: the app's own poll rejoins inside that poll, and beacons only once it returns (a Spring container's
    poll returns after its poll timeout). Undone is back and silent for a whole stall timeout."""
    escalation: int = 0
    """Undone evictions answered: 1 → a restart was asked for; 2 → evicting is pointless, only alert."""
    escalated_at: float = -math.inf

    @classmethod
    def initial(cls, config: WatchdogConfig) -> "WatchdogState":
        return cls(config=config)

    # derived

    @property
    def stall_handled(self) -> bool:
        return self.poll is not None and self.handled_poll == self.poll.last_poll

    def last_action_on(self, member_id: str) -> float | None:
        return max((at for mid, at in self.acted if mid == member_id), default=None)

    # transitions

    def with_coordinator(self, node_id: int, now: float) -> "WatchdogState":
        return replace(
            self,
            coordinator=node_id,
            lookup=self.lookup.with_success(now, 0.0),
            session=SessionView(now, self.config.session_timeout),
        )

    def without_coordinator(self) -> "WatchdogState":
        return replace(self, coordinator=None)

    def with_lookup_failed(self, now: float) -> "WatchdogState":
        return replace(self, lookup=self.lookup.with_failure(now, base=self.config.backoff_base, cap=self._cap))

    def with_request(self, request: Request, now: float) -> "WatchdogState":
        return replace(self, in_flight=request, in_flight_since=now)

    def without_request(self) -> "WatchdogState":
        return replace(self, in_flight=None, in_flight_since=-math.inf)

    def with_beacon(self, beacon: Beacon, now: float) -> "WatchdogState":
        poll = PollTimer.started(now, self.config.stall_timeout) if self.poll is None else self.poll.with_poll(now)
        changed = self.beacon is None or (beacon.member_id, beacon.instance_id) != (
            self.beacon.member_id,
            self.beacon.instance_id,
        )
        # the app polled: the silence an unfinished eviction was about is over (a later one is a new act)
        state = replace(self, beacon=beacon, poll=poll, episode=None, evicted_at=None, back_since=None)
        if state.escalation and now - state.escalated_at >= self.config.cooldown:
            state = replace(state, escalation=0)  # polling again a cooldown after the escalation: start afresh
        if changed or state.gone:
            # a new member (a rejoin, a restart), or one back after it was gone (a KIP-848 member rejoins under the
            # same id): prove it again before anything is done about it
            state = replace(state, member=None, identity_problem=None, gone=False, check=state.check.with_due(now))
        return state

    def with_view(self, view: GroupView, now: float) -> "WatchdogState":
        poll = self.poll
        if view.stable and self.suspended and poll is not None:
            poll = poll.with_restart(now)
        return replace(
            self,
            view=view,
            view_at=now,
            suspended=not view.stable,
            poll=poll,
            check=self.check.with_success(now, self.config.check_interval),
            session=self._answered(now),
        )

    def with_view_stale(self) -> "WatchdogState":
        return replace(self, view_at=-math.inf)

    def with_check_failed(self, now: float) -> "WatchdogState":
        return replace(self, check=self.check.with_failure(now, base=self.config.backoff_base, cap=self._cap))

    def with_identity(self, member: MemberView | None, problem: str | None, *, gone: bool = False) -> "WatchdogState":
        return replace(self, member=member, identity_problem=problem, gone=gone)

    def with_handled(self) -> "WatchdogState":
        return replace(self, handled_poll=None if self.poll is None else self.poll.last_poll, episode=None)

    def with_episode(self, episode: Episode | None) -> "WatchdogState":
        return replace(self, episode=episode)

    def with_acted(self, member_id: str, now: float) -> "WatchdogState":
        recent = tuple((mid, at) for mid, at in self.acted if now - at < self.config.cooldown)
        return replace(self, acted=(*recent, (member_id, now)))

    def with_evicted(self, now: float, member_id: str) -> "WatchdogState":
        return replace(
            self,
            evicted_at=now,
            evicted_member=member_id,
            check=self.check.with_success(now, self.config.check_interval),
        )

    def without_eviction_watch(self) -> "WatchdogState":
        return replace(self, evicted_at=None, back_since=None)

    def with_back_since(self, at: float | None) -> "WatchdogState":
        return replace(self, back_since=at)

    def with_escalated(self, now: float) -> "WatchdogState":
        return replace(self, escalation=self.escalation + 1, escalated_at=now, evicted_at=None, back_since=None)

    def with_alerted(self, key: str) -> "WatchdogState":
        return replace(self, alerted=self.alerted | {key})

    def without_alerts(self, prefix: str) -> "WatchdogState":
        kept = frozenset(k for k in self.alerted if not k.startswith(prefix))
        return self if kept == self.alerted else replace(self, alerted=kept)

    @property
    def _cap(self) -> float:
        return max(self.config.backoff_cap, self.config.backoff_base)

    def _answered(self, now: float) -> SessionView:
        if self.session is None:
            return SessionView(now, self.config.session_timeout)
        return self.session.with_answer(now)
