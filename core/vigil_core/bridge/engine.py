"""The heartbeat bridge as pure decisions: `start` (may it?) and `step(state, observation, now) -> (state, actions)`.

A static member (KIP-345) that rejoins inside its session timeout, in a Stable group with an unchanged protocol,
replaces its old member id without a rebalance. While the app is known to be restarting, the bridge sends the
classic Heartbeat the app would have sent (its last member id, generation and instance id) at the app's heartbeat
interval, so users can keep a short session timeout. Nothing here does I/O or reads a clock: `now` is seconds on
one clock for the life of a state (Unix time where the state is persisted: the operator writes it to a status
before it deletes a pod and resumes it after its own restart).

The rules (`start` applies the first, `step` the others):

1. Only on proof that the app ended (`PROOFS`): silence is never proof, so a stalled but live member expires
   exactly as it would without vigil. Only static members (the instance id is what lets the app take its member
   back), and only with the generation the app reported through the helper (DescribeGroups does not give it).
   A crash loop (`crash_loop_restarts` ends of the app within `crash_window_seconds`) is not bridged, and an end
   that makes one stops a running bridge: its member should expire and its partitions move on. The proof binds to
   one process (`ended_member`: the member that process reported), and only a member under the caller's own
   instance id is bridged: in a pod running two consumer processes, the end of one never bridges the other's
   healthy member (whose bridged heartbeats would meet the dead one's expiry and end in removing it).
2. One request at a time. A heartbeat goes out at once, then at most and at least once per interval, timed from
   send to send as Java's `Heartbeat` timer does (an answer slower than an interval is followed by the next
   heartbeat at once). None at or after the deadline, none after the end.
3. Heartbeat answers, by the reaction in `vigil_core.kafka.outcomes` (the client already re-finds a moved
   coordinator and retries load-in-progress and transport failures before it answers):
   - DONE → keep going;
   - FENCED_INSTANCE_ID (a STOP) → "rejoined": the instance id maps to a new member id, the app is back;
   - UNKNOWN_MEMBER_ID and the other STOPs → "member-gone": the coordinator dropped the member;
   - REBALANCE_IN_PROGRESS (counted: the coordinator rescheduled the member's timer) → a foreign rebalance:
     `remove` → compare-and-remove at once, so the rebalance completes now instead of keeping the absent member,
     giving it partitions and expiring it later (a second rebalance); `hold` → keep heartbeating until the hold
     ends (the app's expected return, at most the deadline, and at most one session timeout after the rebalance
     was first met: an eager group waits in its join phase meanwhile, every member revoked) so the app can join
     the same rebalance, then remove;
   - ILLEGAL_GENERATION (not counted: the coordinator does not reschedule the member's session) → "stale-generation":
     heartbeats stop, under either policy. The generation the app last reported is older than the group's (it died
     between a join and its next report, or a join completed without it): the bridge's heartbeats no longer count,
     but the member is still there and the app may rejoin within its session timeout — a static rejoin in a Stable
     group with an unchanged protocol costs no rebalance (GroupMetadataManager
     `updateStaticMemberThenRebalanceOrCompleteJoin`), where removing it would cost two (the removal, then the
     app's return as a new member). Not back in time, it expires at its session timeout: one rebalance, as stock;
   - RETRY_BACKOFF / REDISCOVER_COORDINATOR (no answer after the client's retries) → keep heartbeating until the
     deadline: no answer says nothing about the group, a new coordinator restarts every member's session timer
     when it loads the group, and heartbeats that do not arrive cost nothing. If it never comes back, the bridge
     ends with "deadline" and the last error;
   - REPORT (authorization, unknown errors) → "error": only a human can fix it; the member expires as without vigil.
4. The Remove (at most one per bridge, never before a foreign rebalance was seen) is
   compare-and-remove with the bridged pair; its answer ends the bridge: NONE → "removed", ALREADY_GONE →
   "member-gone", NOTHING_TO_DO (FENCED_INSTANCE_ID) → "rejoined", anything else → "error" (heartbeats have
   stopped, so the member expires at its session timeout). A Remove in flight decides the outcome: the deadline,
   views and crash loops wait for its answer.
5. At the deadline (`max_bridge_seconds` after the start) with no Remove due → "deadline": heartbeats stop and the
   member expires at its session timeout, giving the app that last stretch to come back.
6. A KIP-848 static member (`protocol="consumer"`, Kafka 4.0+) is kept with `KeepAlive`s: ConsumerGroupHeartbeats
   at its current epoch (read from the coordinator at the start, then from each answer) that change nothing else and
   own no partitions, so the coordinator resets the member's session and never bumps the group epoch for it; a
   rebalance meanwhile simply reconciles it (no Remove, no hold). Its app's join would be refused while the kept
   member holds the instance id (UNRELEASED_INSTANCE_ID, fatal in the Java client and librdkafka), so when the app
   is back (`AppBack`: its new process connected to the sidecar and waits) the bridge releases the id (epoch -2,
   `Release`) and ends "rejoined"; the app's join then replaces the member, assignment and epoch unchanged.
   FENCED_MEMBER_EPOCH ends it "stale-generation". An end that leaves the member holding the id with the app maybe
   on its way back owes a release (`parting_release`).
"""

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final, Literal, TypeGuard, get_args

from pydantic import TypeAdapter

from vigil_core import codec
from vigil_core.kafka.model import GroupView
from vigil_core.kafka.outcomes import Outcome, Reaction
from vigil_core.liveness import ForeignRebalance

# --- vocabulary (the `vigil_core.events` strings; metric labels too) ----------------------------------------------

Proof = Literal["helper-connection-closed", "container-terminated", "pod-deleted"]
"""How the app is known to have ended (`BridgeStartedPayload.proof`)."""
PROOFS: Final[tuple[Proof, ...]] = get_args(Proof)

EndOutcome = Literal["rejoined", "member-gone", "removed", "deadline", "crash-loop", "error", "stale-generation"]
"""How a bridge ended (`BridgeEndedPayload.outcome`); only "rejoined" is the success bridging exists for."""
END_OUTCOMES: Final[tuple[EndOutcome, ...]] = get_args(EndOutcome)

RefusalCause = Literal["no-proof", "no-member", "dynamic-member", "no-generation", "crash-loop", "other-instance"]
"""Why a bridge was not started."""
REFUSAL_CAUSES: Final[tuple[RefusalCause, ...]] = get_args(RefusalCause)


GroupProtocol = Literal["classic", "consumer"]
"""The member's group protocol: a classic Heartbeat keeps a classic member, a KIP-848 keep-alive a consumer one."""
Request = Literal["heartbeat", "remove", "release"]
RemoveCause = Literal["rebalance", "hold-ended", "generation-moved"]
"""Why a Remove is due. "generation-moved" is no longer decided (a moved generation stops the heartbeats instead);
it stays readable so a state persisted by an older version resumes as that version decided."""

_REPLACED: Final = frozenset({"FENCED_INSTANCE_ID", "UNRELEASED_INSTANCE_ID"})
"""STOP answers to a Heartbeat that mean a newer member holds the instance id: the app is back. The outcome table
gives them the same reaction as UNKNOWN_MEMBER_ID (stop); the bridge reports them differently."""
_COUNTED: Final = "REBALANCE_IN_PROGRESS"
"""The REFRESH_AND_RETRY answer to a Heartbeat that still counted (the coordinator rescheduled the member's timer)."""
_STALE: Final = frozenset({"ILLEGAL_GENERATION", "FENCED_MEMBER_EPOCH"})
"""STOP answers that mean the generation (KIP-848: the member's epoch) moved on without the member: it is still
there, its heartbeats just no longer count (ends "stale-generation", not "member-gone")."""
_RELEASED_AT_END: Final = frozenset({"deadline", "error", "stale-generation", "stopped"})
"""How a KIP-848 bridge may end with its member still holding the instance id and the app maybe on its way back:
the id is released then (`parting_release`), or the app's join would be refused until the member expires."""
FORMAT_VERSION: Final = 1


# --- configuration and identity -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class BridgeConfig:
    """One bridge's settings, fixed at its start (they travel with the persisted state); times in seconds."""

    heartbeat_interval: float
    """The app's `heartbeat.interval.ms`: the pace the coordinator is used to from this member."""
    max_bridge_seconds: float
    """`maxBridgeSeconds`: the bridge gives up this long after it started."""
    on_foreign_rebalance: ForeignRebalance = ForeignRebalance.REMOVE
    """`onForeignRebalance`: what to do when someone else starts a rebalance meanwhile (its string is taken too: a
    decoded state's)."""
    expected_return_seconds: float | None = None
    """How long after it ended the app is expected back in the group (e.g. its usual restart time); a hold ends
    then at the latest. None: unknown, a hold may last until the deadline."""
    crash_window_seconds: float = 600.0
    """Ends of the app this far apart count together toward a crash loop (the kubelet forgives a crash-looping
    container's back-off after ten minutes of running, so the default is that)."""
    crash_loop_restarts: int = 2
    """This many ends of the app within the window make a crash loop: the end that reaches it is not bridged, and
    stops a running bridge. 2: the app that dies again soon after a restart loses its member."""
    session_timeout: float | None = None
    """The member's session timeout: a hold ends at most this long after the bridge first met the foreign rebalance.
    While held, an eager group waits in its join phase with every member's partitions revoked; without vigil the
    dead member would have expired within a session timeout, letting the join complete. None: not bounded by it."""

    def __post_init__(self) -> None:
        for name in ("heartbeat_interval", "max_bridge_seconds"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise ValueError(f"bridge {name} must be a positive number of seconds, not {value!r}")
        for name in ("expected_return_seconds", "session_timeout"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise ValueError(f"bridge {name} must be positive or None, not {value!r}")
        if not (math.isfinite(self.crash_window_seconds) and self.crash_window_seconds >= 0):
            raise ValueError(f"bridge crash_window_seconds must be 0 or more, not {self.crash_window_seconds!r}")
        if self.crash_loop_restarts < 2:
            raise ValueError("bridge crash_loop_restarts must be at least 2 (1 would refuse every bridge)")
        try:
            object.__setattr__(self, "on_foreign_rebalance", ForeignRebalance(self.on_foreign_rebalance))
        except ValueError:
            raise ValueError(
                f"bridge on_foreign_rebalance must be remove or hold, not {self.on_foreign_rebalance!r}"
            ) from None


@dataclass(frozen=True)
class Member:
    """The member as the app last reported it through the helper: the only source of its generation."""

    member_id: str
    generation: int
    """-1 when the app could not tell."""
    instance_id: str | None


@dataclass(frozen=True)
class Refused:
    """No bridge, and why in one sentence."""

    cause: RefusalCause
    message: str


# --- observations -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tick:
    """Time passed (a `Wait` ended)."""


@dataclass(frozen=True)
class HeartbeatAnswered:
    """The classified answer to the `SendHeartbeat` or `KeepAlive` in flight (`GroupClient.heartbeat`,
    `GroupClient.keep_alive`)."""

    outcome: Outcome
    epoch: int | None = None
    """A KIP-848 member's epoch as the answer gives it (the coordinator may have moved it on: the next keep-alive
    carries it)."""


@dataclass(frozen=True)
class RemoveAnswered:
    """The classified answer to the `Remove` in flight (`GroupClient.remove_member`)."""

    outcome: Outcome


@dataclass(frozen=True)
class ReleaseAnswered:
    """The classified answer to the `Release` in flight (`GroupClient.release_static_member`)."""

    outcome: Outcome


@dataclass(frozen=True)
class AppBack:
    """A new process of the app connected to the sidecar and waits to join (a KIP-848 app must not join before its
    member's instance id is released: the coordinator would refuse it, fatally)."""


@dataclass(frozen=True)
class Described:
    """A view of the group taken anyway (the bridge never asks for one): it may show the app back, or the member
    gone, before the next heartbeat's answer does."""

    view: GroupView


@dataclass(frozen=True)
class AppEnded:
    """The app ended again while bridged: a new end (its next helper connection closed, restartCount went up again),
    never the end that started the bridge seen through another signal (that would count one end twice)."""


@dataclass(frozen=True)
class Resumed:
    """The process carrying out the actions restarted (the operator, from a persisted state): the answer to a request
    that was in flight will never come, so the request is forgotten (a Remove is sent again: the same act)."""


Observation = Tick | HeartbeatAnswered | RemoveAnswered | ReleaseAnswered | AppBack | Described | AppEnded | Resumed


# --- actions ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SendHeartbeat:
    """A classic Heartbeat (v3+) on the member's behalf; answer with `HeartbeatAnswered`."""

    group_id: str
    member_id: str
    generation: int
    instance_id: str


@dataclass(frozen=True)
class KeepAlive:
    """A KIP-848 ConsumerGroupHeartbeat on the member's behalf at its current epoch, changing nothing else; answer
    with `HeartbeatAnswered` (and the epoch the answer gives)."""

    group_id: str
    member_id: str
    epoch: int
    instance_id: str


@dataclass(frozen=True)
class Release:
    """Release a dead KIP-848 static member's instance id on its behalf (ConsumerGroupHeartbeat with epoch -2, what
    its client sends when it closes): its replacement then takes the member and its assignment over at once,
    instead of failing with UNRELEASED_INSTANCE_ID (fatal in the Java client and librdkafka) until the member's
    session timeout fences it. Compare-and-release: only while `member_id` holds `instance_id`."""

    group_id: str
    member_id: str
    instance_id: str


@dataclass(frozen=True)
class Remove:
    """Compare-and-remove: LeaveGroup with exactly this pair; answer with `RemoveAnswered`."""

    group_id: str
    member_id: str
    instance_id: str
    reason: str
    """The KIP-800 reason, starting "vigil: "."""


@dataclass(frozen=True)
class Wait:
    """Nothing to do before `until` unless an observation arrives; then send a `Tick`."""

    until: float


@dataclass(frozen=True)
class Ended:
    """The bridge is over (once); the fields of `BridgeEndedPayload` and the metrics."""

    outcome: EndOutcome
    reason: str
    """One sentence for a human."""
    seconds_bridged: float
    heartbeats_sent: int
    kafka_error: str | None = None
    """The Kafka answer that ended it (or the last failed one, at the deadline), by name."""


Action = SendHeartbeat | KeepAlive | Remove | Release | Wait | Ended


# --- state --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BridgeState:
    """One bridge. Build with `start`; change with `step` (through the `with_*` transitions); persist with
    `to_json` / `from_json`."""

    config: BridgeConfig
    group_id: str
    member_id: str
    generation: int
    """The classic generation; a KIP-848 member's epoch (moved on by the keep-alives' answers)."""
    instance_id: str
    proof: Proof
    started_at: float
    deadline: float
    next_heartbeat_at: float
    """One interval after the last heartbeat was sent (at the start: the start)."""
    ends: tuple[float, ...]
    """When the app ended within the crash window, oldest first; the start's end included."""
    heartbeats_sent: int = 0
    in_flight: Request | None = None
    remove_at: float | None = None
    """When the absent member is to be compare-and-removed: at once, or at the end of a hold."""
    remove_cause: RemoveCause | None = None
    last_error: str | None = None
    """The latest failed heartbeat answer's name, cleared by a successful one."""
    ended: EndOutcome | None = None
    protocol: GroupProtocol = "classic"
    release_due: bool = False
    """A KIP-848 app is back and waits to join: its member's instance id is released before anything else."""

    # derived

    @property
    def holding_until(self) -> float | None:
        """When a hold (policy `hold`, a foreign rebalance seen) ends: the member is then removed."""
        return self.remove_at if self.remove_cause == "hold-ended" else None

    def seconds_bridged(self, now: float) -> float:
        return max(0.0, now - self.started_at)

    # transitions

    def with_sent(self, request: Request, now: float) -> "BridgeState":
        if request != "heartbeat":
            return replace(self, in_flight=request)
        return replace(
            self,
            in_flight="heartbeat",
            heartbeats_sent=self.heartbeats_sent + 1,
            next_heartbeat_at=_at_least(now, self.config.heartbeat_interval),
        )

    def without_request(self) -> "BridgeState":
        return replace(self, in_flight=None)

    def with_last_error(self, name: str | None) -> "BridgeState":
        return replace(self, last_error=name)

    def with_epoch(self, epoch: int | None) -> "BridgeState":
        return self if epoch is None or epoch < 1 else replace(self, generation=epoch)

    def with_remove_due(self, at: float, cause: RemoveCause) -> "BridgeState":
        """Due at `at`, unless already due earlier."""
        if self.remove_at is not None and self.remove_at <= at:
            return self
        return replace(self, remove_at=at, remove_cause=cause)

    def with_app_end(self, now: float) -> "BridgeState":
        return replace(self, ends=(*_within(self.ends, now, self.config.crash_window_seconds), now))

    def with_ended(self, outcome: EndOutcome) -> "BridgeState":
        return replace(self, ended=outcome, in_flight=None)

    # persistence

    def to_json(self) -> str:
        """Compact JSON, versioned; floats round-trip exactly, so a resumed bridge decides as this one would."""
        return codec.dumps({"v": FORMAT_VERSION, **_STATE.dump_python(self)})

    @classmethod
    def from_json(cls, text: str) -> "BridgeState":
        """The state `to_json` wrote; `BridgeDecodeError` (one line, naming the field) for anything else. Unknown
        fields are ignored (a newer writer's additions); a field with a default that an older writer did not know
        takes its default."""
        codec.decode(_VERSION, text, "not a bridge state", BridgeDecodeError)
        return codec.decode(_STATE, text, "not a bridge state", BridgeDecodeError)


class BridgeDecodeError(ValueError):
    """A persisted bridge state this code cannot read."""


# --- starting ------------------------------------------------------------------------------------------------------


def ended_member(process: str | None, reported: Mapping[str | None, Member], *, others_open: int) -> Member | None:
    """The member whose app process ended: the one that process last reported (`reported`: the last member per
    process token; None for beacons that named no process). An untagged report (an older helper, one process per
    pod) stands for the process only when no other process still holds a connection: with two processes in the
    pod it could be either's, and bridging the healthy one's member would end in removing it.

    `process`: the ended connection's token (None when it named none); `others_open`: processes still holding one.
    """
    if process is not None and process in reported:
        return reported[process]
    return reported.get(None) if others_open == 0 else None


def start(
    group_id: str,
    member: Member | None,
    *,
    proof: str | None,
    earlier_ends: Sequence[float],
    now: float,
    config: BridgeConfig,
    instance_id: str | None = None,
    protocol: GroupProtocol = "classic",
) -> "BridgeState | Refused":
    """A bridge for `member`, whose app ended at `now` as `proof` shows, or why not.

    `earlier_ends`: when the app ended before, not counting this end (any age: the window is applied here).
    `instance_id`: the `group.instance.id` the caller keeps alive (the sidecar's pod: `VIGIL_INSTANCE_ID`); a
    member under another one is someone else's, never bridged. None: not checked (the operator's rollout bridges
    the member it read for the pod). `protocol` "consumer": a KIP-848 member, kept with keep-alives at its epoch
    (`member.generation`: read from the coordinator, the app's report may be behind). The first `step` (a `Tick`)
    sends the first heartbeat.
    """
    ends = _ends(earlier_ends, now, config)
    refused = _refused("bridging", member, proof, ends=ends, config=config, instance_id=instance_id)
    if refused is not None:
        return refused
    assert member is not None  # checked by _refused
    assert member.instance_id is not None
    assert _is_proof(proof)
    if member.generation < 0 or (protocol == "consumer" and member.generation < 1):
        what = "its epoch is not known" if protocol == "consumer" else "the app did not report its generation"
        return Refused(
            "no-generation",
            f"Not bridging member {member.member_id!r}: {what}, so a heartbeat on its behalf cannot be sent.",
        )
    return BridgeState(
        config=config,
        group_id=group_id,
        member_id=member.member_id,
        generation=member.generation,
        instance_id=member.instance_id,
        proof=proof,
        started_at=now,
        deadline=_at_least(now, config.max_bridge_seconds),
        next_heartbeat_at=now,
        ends=ends,
        protocol=protocol,
    )


def release(
    group_id: str,
    member: Member | None,
    *,
    proof: str | None,
    earlier_ends: Sequence[float],
    now: float,
    config: BridgeConfig,
    instance_id: str | None,
) -> Release | Refused:
    """What the end of a KIP-848 static member's app (at `now`, as `proof` shows) calls for: the classic bridge has
    no heartbeat to send there, and the coordinator refuses the restarted app's join while the dead member holds
    the instance id. Refused on the bridge's grounds: no proof, a crash loop (its partitions should move on), no
    member reported, a dynamic member (nothing to release), another instance id than the caller's."""
    ends = _ends(earlier_ends, now, config)
    refused = _refused("releasing", member, proof, ends=ends, config=config, instance_id=instance_id)
    if refused is not None:
        return refused
    assert member is not None  # checked by _refused
    assert member.instance_id is not None
    return Release(group_id, member.member_id, member.instance_id)


def parting_release(state: BridgeState, outcome: str) -> Release | None:
    """The release a KIP-848 bridge owes when it ends as `outcome` (the engine's, or the sidecar's "stopped") with
    its member still holding the instance id: the app may yet come back within the member's session, and its join
    would be refused (fatally) while the kept member holds the id. None for a classic bridge (the app's own join
    replaces its member), and when the app is back, the member gone, or the app crash-looping (its partitions should
    move on at the session timeout, as without vigil)."""
    if state.protocol != "consumer" or outcome not in _RELEASED_AT_END:
        return None
    return Release(state.group_id, state.member_id, state.instance_id)


def _ends(earlier_ends: Sequence[float], now: float, config: BridgeConfig) -> tuple[float, ...]:
    """The app's ends within the crash window, this one (at `now`) included."""
    return (*_within(sorted(t for t in earlier_ends if t < now), now, config.crash_window_seconds), now)


def _refused(
    what: str,
    member: Member | None,
    proof: str | None,
    *,
    ends: tuple[float, ...],
    config: BridgeConfig,
    instance_id: str | None,
) -> Refused | None:
    """Why the proof of an end does not let vigil act for `member` (`what`: "bridging", "releasing"), or None."""
    if not _is_proof(proof):
        said = "no proof" if not proof else f"{proof!r} is not a proof"
        return Refused(
            "no-proof",
            f"Not {what}: {said} that the app ended; silence never is, so a stalled but live member expires as it"
            " would without vigil.",
        )
    if len(ends) >= config.crash_loop_restarts:
        return Refused("crash-loop", _crash_loop(len(ends), config, what))
    if member is None or not member.member_id:
        return Refused(
            "no-member",
            f"Not {what}: the app never reported its member through the helper, so there is no member (and no"
            " generation) to act for.",
        )
    if member.instance_id is None or not member.instance_id:
        return Refused(
            "dynamic-member",
            f"Not {what} member {member.member_id!r}: it has no group.instance.id, and a dynamic member that"
            " rejoins gets a new member id and a rebalance anyway.",
        )
    if instance_id is not None and member.instance_id != instance_id:
        return Refused(
            "other-instance",
            f"Not {what} member {member.member_id!r}: its instance id {member.instance_id!r} is not this pod's"
            f" {instance_id!r} (another consumer process in the pod); it is not this sidecar's to act for.",
        )
    return None


# --- running ------------------------------------------------------------------------------------------------------


def step(state: BridgeState, observation: Observation, now: float) -> tuple[BridgeState, list[Action]]:
    """Take in one observation made at `now` and say what to do next.

    The result ends with exactly one of: a request (its answer is the next observation), a `Wait`, or `Ended`.
    After `Ended`, nothing: every later observation (a late answer) is ignored.
    """
    if state.ended is not None:
        return state, []
    state, ended = _observe(state, observation, now)
    if ended is not None:
        return ended
    return _next(state, now)


_Result = tuple[BridgeState, list[Action]]


def _observe(  # noqa: PLR0911 - one case per observation type
    state: BridgeState, observation: Observation, now: float
) -> tuple[BridgeState, _Result | None]:
    match observation:
        case Tick():
            return state, None
        case HeartbeatAnswered(outcome=outcome, epoch=epoch):
            if state.in_flight != "heartbeat":
                return state, None  # an answer to nothing we are waiting for (after a `Resumed`)
            return _heartbeat_answered(state.without_request().with_epoch(epoch), outcome, now)
        case RemoveAnswered(outcome=outcome):
            if state.in_flight != "remove":
                return state, None
            return state, _remove_answered(state, outcome, now)
        case ReleaseAnswered(outcome=outcome):
            if state.in_flight != "release":
                return state, None
            return state, _release_answered(state, outcome, now)
        case AppBack():
            return (replace(state, release_due=True) if state.protocol == "consumer" else state), None
        case Described(view=view):
            return state, _described(state, view, now)
        case AppEnded():
            state = state.with_app_end(now)
            if len(state.ends) < state.config.crash_loop_restarts or state.in_flight in ("remove", "release"):
                return state, None
            return state, _end(state, "crash-loop", _crash_loop(len(state.ends), state.config), now)
        case Resumed():
            return state.without_request(), None
    raise TypeError(f"not a bridge observation: {observation!r}")  # pragma: no cover - exhaustive above


def _heartbeat_answered(  # noqa: PLR0911 - one case per reaction
    state: BridgeState, outcome: Outcome, now: float
) -> tuple[BridgeState, _Result | None]:
    cfg = state.config
    match outcome.reaction:
        case Reaction.DONE:
            return state.with_last_error(None), None
        case Reaction.REFRESH_AND_RETRY if outcome.name == _COUNTED:
            if cfg.on_foreign_rebalance is ForeignRebalance.REMOVE:
                return state.with_remove_due(now, "rebalance"), None
            hold_end = state.deadline
            if cfg.expected_return_seconds is not None:
                hold_end = min(hold_end, _at_least(state.started_at, cfg.expected_return_seconds))
            if cfg.session_timeout is not None:  # the group waits no longer than it would for a dead member
                hold_end = min(hold_end, _at_least(now, cfg.session_timeout))
            return state.with_remove_due(max(now, hold_end), "hold-ended"), None
        case Reaction.STOP if outcome.name in _STALE:
            which = "epoch" if state.protocol == "consumer" else "generation"
            reason = (
                f"The group's {which} moved on without member {state.member_id!r} (bridged at {which}"
                f" {state.generation}): bridged heartbeats no longer count, so they stop; the member expires at its"
                " session timeout unless the app is back within it (then without a rebalance)."
            )
            return state, _end(state, "stale-generation", reason, now, outcome.name)
        case Reaction.STOP | Reaction.NOTHING_TO_DO | Reaction.ALREADY_GONE:
            if outcome.name in _REPLACED or outcome.reaction is Reaction.NOTHING_TO_DO:
                reason = f"The app is back: instance id {state.instance_id!r} now belongs to a new member."
                return state, _end(state, "rejoined", reason, now, outcome.name)
            reason = f"The coordinator no longer has member {state.member_id!r} ({outcome.name}): nothing to keep."
            return state, _end(state, "member-gone", reason, now, outcome.name)
        case Reaction.RETRY_BACKOFF | Reaction.REDISCOVER_COORDINATOR:
            return state.with_last_error(outcome.name), None  # keep trying until the deadline
    reason = f"Kafka answered a heartbeat with {outcome.name}, which only a human can fix; the member expires."
    return state, _end(state, "error", reason, now, outcome.name)


def _remove_answered(state: BridgeState, outcome: Outcome, now: float) -> _Result:
    pair = f"member {state.member_id!r} (instance {state.instance_id!r})"
    match outcome.reaction:
        case Reaction.DONE:
            return _end(state, "removed", f"Removed the absent {pair} so the group can move on.", now, outcome.name)
        case Reaction.ALREADY_GONE:
            reason = f"The absent {pair} had already left the group when vigil removed it."
            return _end(state, "member-gone", reason, now, outcome.name)
        case Reaction.NOTHING_TO_DO:
            reason = f"The app is back: instance id {state.instance_id!r} belongs to a new member, nothing removed."
            return _end(state, "rejoined", reason, now, outcome.name)
    reason = (
        f"Removing the absent {pair} failed ({outcome.name}); heartbeats have stopped, so the coordinator expires it"
        " at its session timeout."
    )
    return _end(state, "error", reason, now, outcome.name)


def _release_answered(state: BridgeState, outcome: Outcome, now: float) -> _Result:
    """The app is back and its member's instance id was released for its join (or needed no release)."""
    match outcome.reaction:
        case Reaction.DONE | Reaction.NOTHING_TO_DO:
            reason = f"The app is back: instance id {state.instance_id!r} released for its join, which takes the"
            reason += " member over without a rebalance."
            return _end(state, "rejoined", reason, now, outcome.name)
        case Reaction.ALREADY_GONE:
            reason = f"The app is back, but the coordinator no longer has member {state.member_id!r} ({outcome.name})."
            return _end(state, "member-gone", reason, now, outcome.name)
    reason = (
        f"The app is back, but releasing instance id {state.instance_id!r} failed ({outcome.name}): its join is"
        " refused until the member expires at its session timeout."
    )
    return _end(state, "error", reason, now, outcome.name)


def _described(state: BridgeState, view: GroupView, now: float) -> _Result | None:
    if view.group_id != state.group_id or state.in_flight in ("remove", "release"):
        return None  # another group's view; or a Remove is in flight and its answer decides
    holder = next((m for m in view.members if m.instance_id == state.instance_id), None)
    if holder is not None and holder.member_id != state.member_id:
        reason = f"The app is back: instance id {state.instance_id!r} now belongs to member {holder.member_id!r}."
        return _end(state, "rejoined", reason, now)
    if holder is None and view.member(state.member_id) is None:
        reason = f"The group no longer has member {state.member_id!r}: it expired or was removed."
        return _end(state, "member-gone", reason, now)
    return None


def _next(state: BridgeState, now: float) -> _Result:
    final = _final_request(state, now)
    if state.in_flight in ("remove", "release") or (final is not None and state.in_flight is not None):
        return state, [Wait(_wake(state, now))]  # one request at a time: a final one follows this answer
    if final is not None:
        return final
    if now >= state.deadline:
        reason = f"No sign of the app within maxBridgeSeconds ({state.config.max_bridge_seconds:g}s); heartbeats"
        reason += " stop and the member expires at its session timeout."
        return _end(state, "deadline", reason, now, state.last_error)
    if state.in_flight is None and now >= state.next_heartbeat_at:
        state = state.with_sent("heartbeat", now)
        if state.protocol == "consumer":
            return state, [KeepAlive(state.group_id, state.member_id, state.generation, state.instance_id)]
        return state, [SendHeartbeat(state.group_id, state.member_id, state.generation, state.instance_id)]
    return state, [Wait(_wake(state, now))]


def _final_request(state: BridgeState, now: float) -> _Result | None:
    """The request that ends the bridge, if one is due: the release of a returning KIP-848 app's instance id, or a
    Remove."""
    if state.release_due:
        return state.with_sent("release", now), [Release(state.group_id, state.member_id, state.instance_id)]
    if state.remove_at is not None and now >= state.remove_at:
        reason = _remove_reason(state, now)
        return state.with_sent("remove", now), [Remove(state.group_id, state.member_id, state.instance_id, reason)]
    return None


def _wake(state: BridgeState, now: float) -> float:
    """The next moment something is due; a waiting request's answer comes sooner. Never `now` or earlier: past the
    deadline with a Remove in flight, wake an interval later (nothing to do but wait)."""
    due = [state.deadline]
    if state.in_flight is None:
        due.append(state.next_heartbeat_at)
    if state.remove_at is not None:
        due.append(state.remove_at)
    future = [t for t in due if t > now]
    return min(future) if future else now + state.config.heartbeat_interval


def _end(state: BridgeState, outcome: EndOutcome, reason: str, now: float, kafka_error: str | None = None) -> _Result:
    ended = Ended(outcome, reason, state.seconds_bridged(now), state.heartbeats_sent, kafka_error)
    return state.with_ended(outcome), [ended]


def _remove_reason(state: BridgeState, now: float) -> str:
    who = f"vigil: static member {state.instance_id} restarting for {state.seconds_bridged(now):.1f}s"
    match state.remove_cause:
        case "hold-ended":
            return f"{who}, not back by the end of the hold"
        case "generation-moved":
            return f"{who}, left behind by a new generation"
    return f"{who}, absent from a rebalance (onForeignRebalance: remove)"


def _crash_loop(count: int, config: BridgeConfig, what: str = "bridging") -> str:
    return (
        f"Not {what}: the app ended {count} times within {config.crash_window_seconds:g}s, a crash loop; its member"
        " expires and its partitions move on."
    )


def _is_proof(value: str | None) -> TypeGuard[Proof]:
    return value in PROOFS


def _within(times: Sequence[float], now: float, window: float) -> tuple[float, ...]:
    return tuple(t for t in times if now - t < window)


def _at_least(start: float, span: float) -> float:
    """The first `t` with `t - start >= span` in floating point (as `watchdog.timers.first_at`): a deadline or a
    heartbeat "one interval later" is then never a hair early when measured as a difference."""
    at = start + span
    while at - start < span:
        at = math.nextafter(at, math.inf)
    return at


# --- decoding ------------------------------------------------------------------------------------------------------

_VERSION: Final = TypeAdapter(codec.Versioned)
_STATE: Final = TypeAdapter(BridgeState)
"""The persisted state: the dataclasses' own fields, types and defaults (`BridgeConfig` checks itself)."""
