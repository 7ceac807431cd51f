"""The watchdog's decision: (state, observation, now) → (state, actions), in `HeartbeatThread.run`'s order.

The Java heartbeat thread, on every wake-up: coordinator unknown → look it up (waiting `retry.backoff.ms` after a
failed lookup); session expired → forget the coordinator; poll timer expired → leave the group; not yet time →
wait. Taken out of the process, with the member seen from outside:

1. a request is under way → wait for its answer;
2. coordinator unknown → `LookupCoordinator` (after a backoff when the last lookup failed);
3. no poll ever reported → wait (an app that never polled is the startup probe's business, not a stall);
4. the member is not yet proven this pod's, or the group was not Stable at the last look, or the stall timer has
   expired and the last view is older than that → `Describe` (paced by the check timer, backed off on failures);
5. the stall timer has expired → act, once the guardrails hold (below);
6. else → `Wait` until the next deadline (at most one check interval).

Guardrails, all here in the pure core:
- never before the threshold: the stall timer's deadline is at least the last reported poll + the stall timeout;
- only on a view taken after the deadline (and after the cooldown's end, below) and at most one check interval
  old, of a Stable group, in which `vigil_core.identity.find_member` proves the member is this pod's and it is the
  member the app last reported (a member replaced since, e.g. a static member's restart, is not the stalled app);
- NoMatch → no action, one `Alert` (until a member is proven again);
- at most one action per member within the cooldown: a stall inside it is looked at once and said (one `Alert`),
  then looked at again at the cooldown's end and acted on if it still holds;
- an idle member (the app reported no partitions) is never evicted: that frees nothing and costs a rebalance;
- rebalances: a group waiting on its members (`GroupView.rebalancing`: a classic join or sync phase, a KIP-848
  group reconciling or assigning) is waiting on every member that has not polled: an eager join completes only
  when all members rejoin (or the rebalance timeout, the members' max.poll.interval.ms, expires), a KIP-848 group
  reconciles only when the members holding revoked partitions let them go, and both need the app's poll. Healthy
  members keep polling (and beaconing) through a rebalance, so a member with no poll for the stall timeout while
  the group rebalances is the clearest stall there is, and it blocks everyone: it is acted on (compare-and-remove,
  the budget still applies), measured from its last poll, idle or not (evicting it ends the wait, it starts no
  rebalance). Any other non-Stable view (Empty, Dead, unknown) suspends the watchdog. At the first Stable view
  after a non-Stable one, the stall timeout counts afresh from then (a member that polled during the rebalance
  may have been held up in a rebalance callback; a Stable group is no longer waiting on it), but a member silent
  for the stall timeout since its last poll is still looked at each check interval: a rebalance begun since waits
  on it, and is acted on as above;
- one action per silence: after an eviction (or restart, or alert) nothing more is done until the app polls again;
- the LeaveGroup's answer: DONE, ALREADY_GONE, NOTHING_TO_DO end the episode (no retry); RETRY_BACKOFF,
  REDISCOVER_COORDINATOR, REFRESH_AND_RETRY re-describe after a backoff and retry the same pair if it is still
  there and still stalled (a retry of the same eviction, not a second one); REPORT → one `Alert`, the episode ends,
  requests back off, the watchdog keeps running.
"""

from collections.abc import Sequence

from vigil_core import identity
from vigil_core.kafka import model
from vigil_core.kafka.model import GroupView, MemberView
from vigil_core.kafka.outcomes import Outcome, Reaction
from vigil_core.liveness import StallAction
from vigil_sidecar.watchdog import timers
from vigil_sidecar.watchdog.state import (
    Action,
    ActionResult,
    Alert,
    AlertKind,
    Beacon,
    CoordinatorResult,
    Describe,
    DescribeResult,
    Episode,
    Evict,
    LookupCoordinator,
    Observation,
    Request,
    Restart,
    Tick,
    Wait,
    WatchdogConfig,
    WatchdogState,
)

_ENDS_EPISODE = frozenset({Reaction.DONE, Reaction.ALREADY_GONE, Reaction.NOTHING_TO_DO, Reaction.STOP})
_IDENTITY_ALERT = "identity"
_REPORT_ALERT = "report:"
_COOLDOWN_ALERT = "cooldown:"


def decide(state: WatchdogState, observation: Observation, now: float) -> tuple[WatchdogState, list[Action]]:
    """Take in one observation made at `now` (monotonic seconds) and say what to do next.

    The actions come in order; the last one is a `Wait`, unless a request was asked for, whose answer is the next
    observation.
    """
    state, actions = _observe(state, observation, now)
    state, more = _next(state, now)
    return state, [*actions, *more]


def watches(config: WatchdogConfig, instance_id: str | None) -> bool:
    """Whether a beacon (or a member) reported under `instance_id` is the member this sidecar watches. With the
    pod's instance id set, one under another instance id comes from another consumer process in the pod: it must
    neither reset the stall timer (it would hide this member's stall) nor name the member to prove or bridge. None
    is taken (an app that could not tell; the identity check still requires the pod's instance id)."""
    return config.instance_id is None or instance_id in (None, config.instance_id)


def eviction_due(evict: Evict, last_poll: float | None) -> bool:
    """May an attempt of `evict` go out now, given the app's latest poll as the edge saw it (None: none yet)? Only
    while the silence it was decided on lasts: a LeaveGroup carries no generation or epoch, and a KIP-848 member
    keeps its member id across fencing, so an attempt sent after the app polled again (a retry through a coordinator
    move, or after a budget permit's wait) would remove a member that is no longer stalled."""
    return last_poll is None or last_poll <= evict.silent_since


def stall_reason(poll_age: float, stall_timeout: float) -> str:
    """The reason sent with the LeaveGroup (KIP-800) and shown in events, e.g. `vigil: no poll for 42.1s (stall
    timeout 30s)`."""
    return f"vigil: no poll for {poll_age:.1f}s (stall timeout {stall_timeout:g}s)"


# --- taking in an observation -----------------------------------------------------------------------------------


def _observe(  # noqa: PLR0911 - one case per observation type
    state: WatchdogState, observation: Observation, now: float
) -> tuple[WatchdogState, list[Action]]:
    match observation:
        case Tick():
            return state, []
        case Beacon():
            if not watches(state.config, observation.instance_id):
                return state, []
            return state.with_beacon(observation, now), []
        case CoordinatorResult(result=Outcome() as outcome):
            state = _answered(state, Request.LOOKUP).with_lookup_failed(now)
            return _report(state, outcome)
        case CoordinatorResult(result=int() as node_id):
            state = _answered(state, Request.LOOKUP).with_coordinator(node_id, now)
            return state.without_alerts(_REPORT_ALERT + "FindCoordinator:"), []
        case DescribeResult(result=Outcome() as outcome):
            return _describe_failed(_answered(state, Request.DESCRIBE), outcome, now)
        case DescribeResult(result=GroupView() as view):
            state = _answered(state, Request.DESCRIBE).with_view(view, now)
            state = state.without_alerts(_REPORT_ALERT + "DescribeGroup:")
            return _identify(state, view), []
        case ActionResult(outcome=outcome):
            return _evicted(_answered(state, Request.EVICT), outcome, now)
    raise TypeError(f"not a watchdog observation: {observation!r}")  # pragma: no cover - exhaustive above


def _answered(state: WatchdogState, request: Request) -> WatchdogState:
    return state.without_request() if state.in_flight is request else state


def _describe_failed(state: WatchdogState, outcome: Outcome, now: float) -> tuple[WatchdogState, list[Action]]:
    state = state.with_check_failed(now)
    if outcome.reaction is Reaction.REDISCOVER_COORDINATOR or (
        state.session is not None and state.session.expired(now)
    ):
        state = state.without_coordinator()
    return _report(state, outcome)


def _report(state: WatchdogState, outcome: Outcome) -> tuple[WatchdogState, list[Action]]:
    """REPORT → one alert per (request, error) until that request succeeds again."""
    if outcome.reaction is not Reaction.REPORT:
        return state, []
    key = f"{_REPORT_ALERT}{outcome.api.value}:{outcome.name}"
    if key in state.alerted:
        return state, []
    return state.with_alerted(key), [Alert(AlertKind.REPORT, str(outcome))]


def _identify(state: WatchdogState, view: GroupView) -> WatchdogState:
    beacon = state.beacon
    if beacon is None:
        return state.with_identity(None, "The app has not reported a poll yet.")
    pod = identity.PodIdentity(
        pod_name=state.config.pod_name,
        instance_id=state.config.instance_id or beacon.instance_id,
        reported_member_id=beacon.member_id,
    )
    observed = [identity.ObservedMember(m.member_id, m.instance_id, m.client_id, m.host) for m in view.members]
    match = identity.find_member(observed, pod)
    was_proven = state.member is not None and state.member.member_id == beacon.member_id
    if isinstance(match, identity.Match) and match.member.member_id == beacon.member_id:
        member = _pick(view.members, match.member)
        return state.with_identity(member, None).without_alerts(_IDENTITY_ALERT)
    if was_proven or state.gone:
        # proven before, absent now: it left, expired or was evicted; the silence is over for vigil
        return state.with_identity(None, None, gone=True)
    if isinstance(match, identity.Match):
        problem = (
            f"Member {match.member.member_id!r} is pod {state.config.pod_name!r}'s by {match.basis.value}, but the app"
            f" last reported member {beacon.member_id!r}: the stalled app is no longer that member."
        )
    else:
        problem = match.reason
    return state.with_identity(None, problem)


def _pick(members: Sequence[MemberView], observed: identity.ObservedMember) -> MemberView:
    return next(m for m in members if (m.member_id, m.instance_id) == (observed.member_id, observed.instance_id))


def _evicted(state: WatchdogState, outcome: Outcome, now: float) -> tuple[WatchdogState, list[Action]]:
    if state.episode is None:  # an answer to nothing we asked (a restart of the loop): nothing to decide on
        return state, []
    if outcome.reaction in _ENDS_EPISODE:
        if outcome.reaction is Reaction.DONE:
            state = state.with_evicted(now, state.episode.member_id)  # watch that it stays out
        state = state.with_handled().with_identity(None, None, gone=True)
        return state.without_alerts(_REPORT_ALERT + "LeaveGroup:"), []
    if outcome.reaction is Reaction.REPORT:
        return _report(state.with_handled().with_check_failed(now), outcome)
    # transient: look again (and find the coordinator again if it moved), then retry the same pair
    state = state.with_check_failed(now).with_view_stale()
    if outcome.reaction is Reaction.REDISCOVER_COORDINATOR:
        state = state.without_coordinator()
    return state, []


# --- what next ---------------------------------------------------------------------------------------------------


def _next(state: WatchdogState, now: float) -> tuple[WatchdogState, list[Action]]:  # noqa: PLR0911 - the run loop's ladder
    cfg = state.config
    if state.in_flight is not None:
        if now - state.in_flight_since < cfg.session_timeout:
            return state, [Wait(now + cfg.check_interval)]
        state = state.without_request()  # no answer for a whole session: the edge lost it; ask again
    if state.coordinator is None:
        if not state.lookup.may_retry(now):
            return state, [Wait(state.lookup.next_at)]
        return state.with_request(Request.LOOKUP, now), [LookupCoordinator()]
    poll = state.poll
    if poll is None:
        return state, [Wait(now + cfg.check_interval)]
    if state.evicted_at is not None:
        if now < _watch_end(state):
            return _watch_eviction(state, now)
        state = state.without_eviction_watch()  # stayed out for a whole cooldown: the eviction held

    # a rebalance waits on a member that does not poll: its stall is measured from its last poll, not from the
    # restart of the count a past rebalance made (see the module's rules)
    rebalancing = state.view is not None and state.view.rebalancing
    deadline = timers.first_at(poll.last_poll, cfg.stall_timeout) if rebalancing else poll.deadline
    stalled = now >= deadline and not state.stall_handled
    retrying = (
        state.episode is not None and state.member is not None and state.episode.member_id == state.member.member_id
    )
    cooldown_end = None if retrying else _cooldown_end(state)  # a retry is the same act
    in_cooldown = cooldown_end is not None and now < cooldown_end
    # a view proves what it shows from when it was taken: one taken after the stall deadline shows the stall, one
    # taken after the moment acting became allowed (deadline, cooldown's end) may be acted on; both at most one
    # check interval old
    recent = now - state.view_at <= cfg.check_interval
    shows_stall = recent and state.view_at >= deadline
    actionable = shows_stall and not in_cooldown and (cooldown_end is None or state.view_at >= cooldown_end)
    cooldown_said = state.member is not None and f"{_COOLDOWN_ALERT}{state.member.member_id}" in state.alerted
    # in a cooldown: look once (to say so), then again at its end; else look until the view is actionable
    needs_look = (not shows_stall and not cooldown_said) if in_cooldown else not actionable
    unproven = state.member is None and not state.gone
    if (unproven or state.suspended) and state.check.due(now):
        return _describe(state, now)
    if stalled and needs_look and state.check.may_retry(now):
        return _describe(state, now)
    # the count a past rebalance restarted is not up yet, but the silence itself is: keep looking each interval, as
    # a rebalance begun since waits on this member, and is acted on from its last poll
    silence_due = timers.first_at(poll.last_poll, cfg.stall_timeout)
    if not rebalancing and not state.stall_handled and silence_due <= now < deadline and state.check.due(now):
        return _describe(state, now)

    alerts: list[Action] = []
    if stalled and (actionable or (in_cooldown and shows_stall)) and (rebalancing or not state.suspended):
        state, alerts, requested = _act(state, now, cooldown_end, rebalancing=rebalancing)
        if requested:  # an eviction: its answer is the next observation
            return state, alerts
    return state, [*alerts, Wait(_wake(state, now, cooldown_end, deadline))]


def _watch_eviction(state: WatchdogState, now: float) -> tuple[WatchdogState, list[Action]]:
    """After an eviction of a silent app: describe each check interval; if the pod's member is back and stays back
    for a whole stall timeout without a poll, the eviction was undone → escalate (restart once, then only alert).
    Back alone is not enough: an app that polls again rejoins inside that poll, seen before the poll returns."""
    cfg = state.config
    back = _rejoined(state)
    if back is None and state.back_since is not None:
        state = state.with_back_since(None)
    elif back is not None and state.back_since is None:
        state = state.with_back_since(state.view_at)
    since = state.back_since
    if back is not None and since is not None and state.view_at >= timers.first_at(since, cfg.stall_timeout):
        reason = (
            f"vigil: eviction undone: member {back.member_id} rejoined without polling"
            f" (back in the group {state.view_at - since:.0f}s, no poll)"
        )
        if state.escalation == 0 and cfg.action is StallAction.LEAVE_GROUP:
            return state.with_escalated(now), [
                Restart(back.member_id, back.instance_id, reason),
                Wait(now + cfg.check_interval),
            ]
        message = f"{reason}; after a restart too: vigil stops evicting pod {cfg.pod_name!r} and only alerts"
        return state.with_escalated(now), [Alert(AlertKind.STALL, message), Wait(now + cfg.check_interval)]
    if state.in_flight is None and state.check.due(now):
        return _describe(state, now)
    return state, [Wait(min(_watch_end(state), now + cfg.check_interval))]


def _watch_end(state: WatchdogState) -> float:
    """The eviction watch lasts a cooldown; for a member seen back, at least until a look taken a stall timeout after
    that has had its check interval to answer."""
    assert state.evicted_at is not None
    end = timers.first_at(state.evicted_at, state.config.cooldown)
    if state.back_since is None:
        return end
    return max(end, timers.first_at(state.back_since, state.config.stall_timeout) + state.config.check_interval)


def _rejoined(state: WatchdogState) -> MemberView | None:
    """This pod's member in a view taken after the eviction (exactly one, else None): under the evicted member id (a
    KIP-848 member keeps it across fencing, KIP-1082, whatever its client.id), the pod's instance id, or client.id =
    the pod name (a classic member back under a new id). Its current assignment may be empty: a KIP-848 member back
    without a poll has its partitions in its target assignment, waiting for the app to accept them — blocked all
    the same."""
    view, cfg = state.view, state.config
    if view is None or state.evicted_at is None or state.view_at <= state.evicted_at:
        return None
    ours = [
        m
        for m in view.members
        if m.member_id == state.evicted_member
        or (cfg.instance_id is not None and m.instance_id == cfg.instance_id)
        or m.client_id == cfg.pod_name
    ]
    return ours[0] if len(ours) == 1 else None


def _describe(state: WatchdogState, now: float) -> tuple[WatchdogState, list[Action]]:
    return state.with_request(Request.DESCRIBE, now), [Describe()]


def _cooldown_end(state: WatchdogState) -> float | None:
    member_id = state.member.member_id if state.member is not None else None
    last = None if member_id is None else state.last_action_on(member_id)
    return None if last is None else timers.first_at(last, state.config.cooldown)


def _act(  # noqa: PLR0911 - one return per guardrail
    state: WatchdogState, now: float, cooldown_end: float | None, *, rebalancing: bool
) -> tuple[WatchdogState, list[Action], bool]:
    """The stall timer expired and the view is fresh and Stable, or rebalancing: act if the guardrails hold.

    Returns the new state, the actions, and whether a request (an eviction) now awaits its answer."""
    cfg, poll, beacon, member = state.config, state.poll, state.beacon, state.member
    assert poll is not None  # _next checked it
    assert beacon is not None  # set with the poll timer
    if member is None:
        if state.gone:  # left, expired or evicted: nothing left to act on
            return state.with_handled(), [], False
        if _IDENTITY_ALERT in state.alerted:
            return state, [], False
        message = f"Stalled, but no member is acted on: {state.identity_problem}"
        return state.with_alerted(_IDENTITY_ALERT), [Alert(AlertKind.IDENTITY, message)], False
    if state.episode is not None and state.episode.member_id != member.member_id:
        state = state.with_episode(None)  # the member retried against is gone; a new one is judged afresh
    retrying = state.episode is not None
    if cooldown_end is not None and now < cooldown_end:
        key = f"{_COOLDOWN_ALERT}{member.member_id}"
        if key in state.alerted:
            return state, [], False
        message = (
            f"Member {member.member_id!r} is stalled again within the cooldown ({cfg.cooldown:g}s) of the last"
            f" action on it; next possible action in {cooldown_end - now:.1f}s."
        )
        return state.with_alerted(key), [Alert(AlertKind.COOLDOWN, message)], False
    if beacon.assigned_partitions == 0 and not member.assignment and not rebalancing:
        # idle (by the app's last report and the broker's fresh view: a KIP-848 member reconciles its partitions in
        # the background after its last poll): evicting it frees nothing and costs everyone a rebalance. Not so
        # while the group rebalances: it waits on this member too, and its removal ends the wait
        return state.with_handled(), [], False

    reason = stall_reason(poll.poll_age(now), cfg.stall_timeout)
    if rebalancing:
        assert state.view is not None
        reason += f" while the group waits for it ({state.view.state.value})"
    if not retrying:
        state = state.with_acted(member.member_id, now)
    state = state.without_alerts(_COOLDOWN_ALERT)
    action, reason = _chosen(state, reason)
    match action:
        case StallAction.LEAVE_GROUP:
            attempts = 1 if state.episode is None else state.episode.attempts + 1
            episode = Episode(member.member_id, member.instance_id, reason, attempts)
            state = state.with_episode(episode).with_request(Request.EVICT, now)
            return state, [Evict(member.member_id, member.instance_id, reason, silent_since=poll.last_poll)], True
        case StallAction.RESTART:
            return state.with_handled(), [Restart(member.member_id, member.instance_id, reason)], False
        case StallAction.ALERT:
            message = f"Member {member.member_id!r} of pod {cfg.pod_name!r} is stalled: {reason}"
            return state.with_handled(), [Alert(AlertKind.STALL, message)], False


def _chosen(state: WatchdogState, reason: str) -> tuple[StallAction, str]:
    """The configured action, but an alert once evictions keep being undone, and a restart where no Kafka API
    removes a member (share and streams groups)."""
    if state.escalation >= 2:
        return StallAction.ALERT, reason
    view = state.view
    if state.config.action is StallAction.LEAVE_GROUP and view is not None and not model.removable(view.type):
        unremovable = f"a restart, as no Kafka API removes a member of a {view.type.value} group"
        return StallAction.RESTART, f"{reason}; {unremovable}"
    return state.config.action, reason


def _wake(state: WatchdogState, now: float, cooldown_end: float | None, deadline: float) -> float:
    """The next moment anything can change without an observation: a deadline, a backoff's end, or one interval."""
    cfg = state.config
    candidates = [now + cfg.check_interval]
    if not state.stall_handled and deadline > now:
        candidates.append(deadline)
    for at in (state.check.next_at, cooldown_end):
        if at is not None and at > now:
            candidates.append(at)
    return min(candidates)
