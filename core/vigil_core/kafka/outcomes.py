"""What a Kafka answer means for vigil: one table from (request, error code) to an outcome and its reaction.

aiokafka and the Java client decide what an error means inside each response handler; here the policy is data,
so it is read, reviewed and tested in one place, and the I/O code only does what the reaction says. The same
error means different things for different requests (UNKNOWN_MEMBER_ID is success for a LeaveGroup, the end of
the line for a Heartbeat sent on a member's behalf), so the key is the pair.

`Outcome.retriable` is Kafka's own classification (the exception extends `RetriableException`);
`Outcome.reaction` is vigil's policy and may differ. Codes are from apache/kafka `Errors.java`.

Why, for the cells that are not obvious:

- any request, TRANSPORT_ERROR / REQUEST_TIMED_OUT / NETWORK_EXCEPTION → RETRY_BACKOFF: no answer says nothing
  about the group. A dead coordinator shows up here first, so the caller forgets its cached coordinator after
  repeated transport errors to it (Java: `markCoordinatorUnknown` on disconnect).
- any request, UNKNOWN_SERVER_ERROR → REPORT: Kafka does not call it retriable; a broker bug worth one line.
- FindCoordinator, COORDINATOR_NOT_AVAILABLE → RETRY_BACKOFF: the lookup itself failed (offsets topic not ready,
  its leader moving); "look the coordinator up again" is this very request.
- LeaveGroup, UNKNOWN_MEMBER_ID / GROUP_ID_NOT_FOUND → ALREADY_GONE: the observed pair is not in the group any
  more (a retried eviction that already landed, an expiry, an emptied group); the goal, freed partitions, is met.
  Caveat: a 3.9 broker answers UNKNOWN_MEMBER_ID for KIP-848 members it cannot remove, so callers check the
  broker version before evicting from a consumer-protocol group.
- LeaveGroup, FENCED_INSTANCE_ID → NOTHING_TO_DO: the instance id maps to a newer member id (the pod restarted);
  compare-and-remove refused to remove it, which is its purpose. Retrying would be wrong.
- LeaveGroup, REQUEST_TIMED_OUT → RETRY_BACKOFF: the request carries the observed (member id, instance id) pair,
  and LeaveGroup carries no generation or epoch. A classic member that rejoined has a new member id (the retry
  answers UNKNOWN_MEMBER_ID or FENCED_INSTANCE_ID), but a KIP-848 member keeps its member id across fencing
  (KIP-1082: the client makes it once), so a retry after a landed attempt removes it again; and a member that
  polls again in the meantime is the same member either way. So a caller acting on a stall re-checks the member's
  liveness before every attempt (`GroupClient.remove_member(proceed=...)`): not sent → APP_POLLED.
- LeaveGroup, APP_POLLED → NOTHING_TO_DO: vigil's own code for an eviction not sent because the app polled again
  after the stall was decided; the stall is over, nothing to retry.
- LeaveGroup, FENCED_MEMBER_EPOCH → ALREADY_GONE and UNRELEASED_INSTANCE_ID → NOTHING_TO_DO: not produced by the
  4.x LeaveGroup path; kept so a future broker's answer is not retried (a fenced KIP-848 member has lost its
  partitions; an unreleased instance id belongs to someone else).
- Heartbeat, REBALANCE_IN_PROGRESS → REFRESH_AND_RETRY: the heartbeat counted (the coordinator rescheduled the
  member's timer). Stopping a bridge here makes things worse (the absent member is kept, given
  partitions, then expired at pending sync: a second rebalance), so re-describe and apply `onForeignRebalance`.
- Heartbeat, ILLEGAL_GENERATION → STOP: the member is there but the generation moved on without it (ours, the
  app's last report, is stale) and the heartbeat did not count (the coordinator validates the generation before it
  reschedules the member's session: GroupMetadataManager `validateClassicGroupHeartbeat`). Removing the member would
  cost two rebalances where stock Kafka costs none if the app is back within its session; so bridging stops and
  the session decides.
- Heartbeat, UNKNOWN_MEMBER_ID / GROUP_ID_NOT_FOUND → STOP: nobody is left to keep alive.
- Heartbeat, FENCED_INSTANCE_ID → STOP: usually the restarted app rejoined and the bridge's job is done.
- Heartbeat, FENCED_MEMBER_EPOCH / UNRELEASED_INSTANCE_ID → STOP: a classic Heartbeat gets UNKNOWN_MEMBER_ID or
  ILLEGAL_GENERATION from 4.x instead; kept so the member is never kept alive against the coordinator's word.
- ConsumerGroupHeartbeat (epoch -2, a dead KIP-848 static member released on its behalf): UNKNOWN_MEMBER_ID /
  GROUP_ID_NOT_FOUND → ALREADY_GONE (nobody to release); FENCED_INSTANCE_ID → NOTHING_TO_DO (the instance id moved to
  a newer member: the replacement is in; the release is compare-and-release, it changed nothing).
- OffsetFetch, UNSTABLE_OFFSET_COMMIT → RETRY_BACKOFF: a transaction holds pending offsets; they settle.
- DescribeGroup / OffsetFetch, GROUP_ID_NOT_FOUND → REPORT: no member yet, deleted, or the other protocol type
  (DescribeGroups on a KIP-848 group): nothing to watch, never a reason to act.
- DescribeConfigs, CLUSTER/GROUP_AUTHORIZATION_FAILED → REPORT: the timing rules use Kafka's defaults and say so
  (`vigil_core.rules.BrokerLimits.from_defaults`).
- a known code on a request it is not listed for → RETRY_BACKOFF if Kafka calls it retriable, else REPORT: a newer
  broker may answer something new; Kafka's own flag is the best guess, and REPORT never acts.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Final


class Api(StrEnum):
    """The requests vigil sends (values are Kafka's API names, as log lines show them)."""

    FIND_COORDINATOR = "FindCoordinator"
    DESCRIBE_GROUP = "DescribeGroup"
    """DescribeGroups (classic) or ConsumerGroupDescribe (KIP-848): the same meaning for vigil."""
    LEAVE_GROUP = "LeaveGroup"
    """Both the top-level and the per-member error codes of LeaveGroup v3+."""
    HEARTBEAT = "Heartbeat"
    """A classic Heartbeat sent on behalf of a (static) member: bridging."""
    OFFSET_FETCH = "OffsetFetch"
    LIST_OFFSETS = "ListOffsets"
    DESCRIBE_CONFIGS = "DescribeConfigs"
    ALTER_CONFIGS = "IncrementalAlterConfigs"
    """A KIP-848 group's own session timeout, raised for a coordinated restart and restored after it."""
    DESCRIBE_CLUSTER = "DescribeCluster"
    """The cluster id (the operator tells clusters apart by it)."""
    JOIN_GROUP = "JoinGroup"
    """A pending member that keeps a deliberate rebalance's join phase open until the removed member is back."""
    CONSUMER_GROUP_HEARTBEAT = "ConsumerGroupHeartbeat"
    """KIP-848 on a static member's behalf while its app is away: keep-alives at its epoch, and epoch -2 (its instance
    id released for the restarted app's join)."""
    LIST_GROUPS = "ListGroups"
    """A census round asks every broker which groups it coordinates (`vigil_core.kafka.census`)."""
    METADATA = "Metadata"
    """A census round's partition leaders (where ListOffsets goes)."""
    SHARE_OFFSETS = "DescribeShareGroupOffsets"
    """A share group's delivery lag per share-partition (KIP-1226): its offsets are not in OffsetFetch."""


class Reaction(StrEnum):
    """What the caller does next."""

    DONE = "done"
    """Success."""
    ALREADY_GONE = "already_gone"
    """The member to remove is not there: treat as success."""
    NOTHING_TO_DO = "nothing_to_do"
    """Someone newer holds the identity: do not retry, do not escalate."""
    REDISCOVER_COORDINATOR = "rediscover_coordinator"
    """Look the group coordinator up again (FindCoordinator), then retry."""
    RETRY_BACKOFF = "retry_backoff"
    """Transient: send the same request again after a backoff."""
    STOP = "stop"
    """The member we act for is no longer ours to keep alive: end bridging."""
    REFRESH_AND_RETRY = "refresh_and_retry"
    """The group moved on: re-describe it (and re-read the generation), then decide again."""
    REPORT = "report"
    """Cannot succeed until a human changes something: one clear line, back off, keep running, never act on it."""


TRANSPORT_ERROR: Final = -2
"""Pseudo code for "no answer": connection refused or lost, request timed out in the client.

Kafka's only negative code is -1 and librdkafka's local errors are -200..-100, so -2 collides with neither.
The I/O layer maps its library's transport failures to it."""

APP_POLLED: Final = -4
"""Pseudo code for an eviction vigil did not send: the member's app polled again after the stall was decided (its
caller's liveness check, asked before every attempt, said no). -3 is the sidecar's budget refusal."""


@dataclass(frozen=True)
class Outcome:
    """One classified answer: what Kafka said and what vigil does about it."""

    api: Api
    code: int
    name: str
    """Kafka's name, e.g. "UNKNOWN_MEMBER_ID" (or "TRANSPORT_ERROR", "UNKNOWN_ERROR_<code>")."""
    reaction: Reaction
    retriable: bool
    """Kafka's own classification (RetriableException); the reaction is vigil's policy."""
    message: str
    """One sentence for a human, naming what it means for vigil."""

    def __str__(self) -> str:
        return f"{self.api} {self.name} ({self.code}): {self.message}"


# Kafka's catalog, code -> (name, retriable): facts, not policy.
_KAFKA_ERRORS: Final[Mapping[int, tuple[str, bool]]] = {
    TRANSPORT_ERROR: ("TRANSPORT_ERROR", True),
    APP_POLLED: ("APP_POLLED", False),
    -1: ("UNKNOWN_SERVER_ERROR", False),
    0: ("NONE", False),
    3: ("UNKNOWN_TOPIC_OR_PARTITION", True),
    5: ("LEADER_NOT_AVAILABLE", True),
    6: ("NOT_LEADER_OR_FOLLOWER", True),
    7: ("REQUEST_TIMED_OUT", True),
    13: ("NETWORK_EXCEPTION", True),
    14: ("COORDINATOR_LOAD_IN_PROGRESS", True),
    15: ("COORDINATOR_NOT_AVAILABLE", True),
    16: ("NOT_COORDINATOR", True),
    22: ("ILLEGAL_GENERATION", False),
    23: ("INCONSISTENT_GROUP_PROTOCOL", False),
    24: ("INVALID_GROUP_ID", False),
    25: ("UNKNOWN_MEMBER_ID", False),
    26: ("INVALID_SESSION_TIMEOUT", False),
    27: ("REBALANCE_IN_PROGRESS", False),
    29: ("TOPIC_AUTHORIZATION_FAILED", False),
    30: ("GROUP_AUTHORIZATION_FAILED", False),
    31: ("CLUSTER_AUTHORIZATION_FAILED", False),
    35: ("UNSUPPORTED_VERSION", False),
    40: ("INVALID_CONFIG", False),
    42: ("INVALID_REQUEST", False),
    69: ("GROUP_ID_NOT_FOUND", False),
    78: ("OFFSET_NOT_AVAILABLE", True),
    79: ("MEMBER_ID_REQUIRED", False),
    82: ("FENCED_INSTANCE_ID", False),
    88: ("UNSTABLE_OFFSET_COMMIT", True),
    110: ("FENCED_MEMBER_EPOCH", False),
    111: ("UNRELEASED_INSTANCE_ID", False),
}

_CODES: Final[Mapping[str, int]] = {name: code for code, (name, _) in _KAFKA_ERRORS.items()}

_ALL: Final = tuple(Api)
_COORDINATED: Final = (
    Api.DESCRIBE_GROUP,
    Api.LEAVE_GROUP,
    Api.HEARTBEAT,
    Api.OFFSET_FETCH,
    Api.JOIN_GROUP,
    Api.CONSUMER_GROUP_HEARTBEAT,
    Api.SHARE_OFFSETS,
)
"""Requests the group coordinator answers."""
_GROUP: Final = (Api.FIND_COORDINATOR, *_COORDINATED)
"""Requests that name a group (and are authorized against it)."""
_FIND: Final = (Api.FIND_COORDINATOR,)
_DESCRIBE: Final = (Api.DESCRIBE_GROUP,)
_LEAVE: Final = (Api.LEAVE_GROUP,)
_HEARTBEAT: Final = (Api.HEARTBEAT,)
_OFFSETS: Final = (Api.OFFSET_FETCH,)
_LIST: Final = (Api.LIST_OFFSETS,)
_CONFIGS: Final = (Api.DESCRIBE_CONFIGS,)
_ALTER: Final = (Api.ALTER_CONFIGS,)
_JOIN: Final = (Api.JOIN_GROUP,)
_RELEASE: Final = (Api.CONSUMER_GROUP_HEARTBEAT,)

_R = Reaction
_BACKOFF = "retrying after a backoff"
_NO_ACTION = "vigil keeps running and takes no action on it"

# vigil's policy, the table: (requests, code name, reaction, message); "{api}" becomes the request's name.
_ROWS: Final[tuple[tuple[tuple[Api, ...], str, Reaction, str], ...]] = (
    # every request
    (_ALL, "NONE", _R.DONE, "{api} succeeded."),
    (_ALL, "TRANSPORT_ERROR", _R.RETRY_BACKOFF, f"{{api}} got no answer (connection failed or lost): {_BACKOFF}."),
    (_ALL, "REQUEST_TIMED_OUT", _R.RETRY_BACKOFF, f"{{api}} timed out on the broker: {_BACKOFF}."),
    (_ALL, "NETWORK_EXCEPTION", _R.RETRY_BACKOFF, f"The broker disconnected before answering {{api}}: {_BACKOFF}."),
    (_ALL, "UNKNOWN_SERVER_ERROR", _R.REPORT, f"The broker failed {{api}} unexpectedly (see its log); {_NO_ACTION}."),
    (_ALL, "UNSUPPORTED_VERSION", _R.REPORT, f"The broker lacks the {{api}} version vigil needs; {_NO_ACTION}."),
    # finding the coordinator
    (_FIND, "COORDINATOR_NOT_AVAILABLE", _R.RETRY_BACKOFF, f"No coordinator for the group yet: {_BACKOFF}."),
    (_FIND, "COORDINATOR_LOAD_IN_PROGRESS", _R.RETRY_BACKOFF, f"The group's coordinator is loading: {_BACKOFF}."),
    # requests the coordinator answers
    (_COORDINATED, "NOT_COORDINATOR", _R.REDISCOVER_COORDINATOR, "The coordinator moved: finding it again for {api}."),
    (
        _COORDINATED,
        "COORDINATOR_NOT_AVAILABLE",
        _R.REDISCOVER_COORDINATOR,
        "The coordinator is not available: finding it again for {api}.",
    ),
    (
        _COORDINATED,
        "COORDINATOR_LOAD_IN_PROGRESS",
        _R.RETRY_BACKOFF,
        f"The coordinator is loading the group after a move: {_BACKOFF}.",
    ),
    (_GROUP, "GROUP_AUTHORIZATION_FAILED", _R.REPORT, f"{{api}} denied by the group's ACLs; {_NO_ACTION}."),
    (_COORDINATED, "INVALID_GROUP_ID", _R.REPORT, "The group id is empty or invalid: fix the configured group id."),
    # describe
    (
        _DESCRIBE,
        "GROUP_ID_NOT_FOUND",
        _R.REPORT,
        "The group does not exist (no member yet, deleted, or the other protocol type): nothing to watch.",
    ),
    (_DESCRIBE, "TOPIC_AUTHORIZATION_FAILED", _R.REPORT, f"Describe denied by a topic's ACLs; {_NO_ACTION}."),
    # leave, always compare-and-remove
    (_LEAVE, "UNKNOWN_MEMBER_ID", _R.ALREADY_GONE, "The member already left or expired: the eviction's goal is met."),
    (
        _LEAVE,
        "APP_POLLED",
        _R.NOTHING_TO_DO,
        "Not sent: the app polled again after the stall was decided, so there is no stall left to act on.",
    ),
    (_LEAVE, "GROUP_ID_NOT_FOUND", _R.ALREADY_GONE, "The group is gone, and the member with it: the goal is met."),
    (
        _LEAVE,
        "FENCED_INSTANCE_ID",
        _R.NOTHING_TO_DO,
        "The instance id belongs to a newer member (the pod restarted): the stale view was not acted on.",
    ),
    (_LEAVE, "FENCED_MEMBER_EPOCH", _R.ALREADY_GONE, "The member was already fenced: the eviction's goal is met."),
    (
        _LEAVE,
        "UNRELEASED_INSTANCE_ID",
        _R.NOTHING_TO_DO,
        "The instance id is held by another member: the observed member is not there to remove.",
    ),
    # heartbeat on a member's behalf (bridging)
    (
        _HEARTBEAT,
        "REBALANCE_IN_PROGRESS",
        _R.REFRESH_AND_RETRY,
        "A rebalance started while bridging (the heartbeat still counted): re-describing to remove or hold.",
    ),
    (
        _HEARTBEAT,
        "ILLEGAL_GENERATION",
        _R.STOP,
        "The generation moved on without the bridged member: its heartbeats no longer count, bridging stops.",
    ),
    (_HEARTBEAT, "UNKNOWN_MEMBER_ID", _R.STOP, "The member expired or was removed: bridging ends."),
    (_HEARTBEAT, "GROUP_ID_NOT_FOUND", _R.STOP, "The group is gone: bridging ends."),
    (
        _HEARTBEAT,
        "FENCED_INSTANCE_ID",
        _R.STOP,
        "The instance id belongs to a newer member, usually the restarted app: bridging ends.",
    ),
    (_HEARTBEAT, "FENCED_MEMBER_EPOCH", _R.STOP, "The coordinator fenced the member: bridging ends."),
    (_HEARTBEAT, "UNRELEASED_INSTANCE_ID", _R.STOP, "The instance id is held by another member: bridging ends."),
    # a pending member holding a deliberate rebalance open
    (
        _JOIN,
        "MEMBER_ID_REQUIRED",
        _R.DONE,
        "The coordinator registered the pending member: no join phase completes until it joins or leaves.",
    ),
    (
        _JOIN,
        "INCONSISTENT_GROUP_PROTOCOL",
        _R.REPORT,
        "The group's protocol changed under vigil: the rebalance goes ahead without holding the join open.",
    ),
    (
        _JOIN,
        "INVALID_SESSION_TIMEOUT",
        _R.REPORT,
        "The broker refused the pending member's session timeout: the rebalance goes ahead without it.",
    ),
    # a KIP-848 static member kept alive or its instance id released (epoch -2) on its behalf
    (_RELEASE, "UNKNOWN_MEMBER_ID", _R.ALREADY_GONE, "No member holds the instance id any more: nothing to release."),
    (_RELEASE, "GROUP_ID_NOT_FOUND", _R.ALREADY_GONE, "The group is gone: nothing to release."),
    (
        _RELEASE,
        "FENCED_INSTANCE_ID",
        _R.NOTHING_TO_DO,
        "The instance id belongs to a newer member (the replacement is in): the dead one was already replaced.",
    ),
    (_RELEASE, "INVALID_REQUEST", _R.REPORT, f"The broker refused the release as malformed; {_NO_ACTION}."),
    (
        _RELEASE,
        "FENCED_MEMBER_EPOCH",
        _R.STOP,
        "The member's epoch moved on without the kept-alive member: its keep-alives no longer count, bridging stops.",
    ),
    # committed offsets
    (_OFFSETS, "UNSTABLE_OFFSET_COMMIT", _R.RETRY_BACKOFF, f"A transaction holds pending offsets: {_BACKOFF}."),
    (_OFFSETS, "GROUP_ID_NOT_FOUND", _R.REPORT, "The group has no committed offsets: no lag to judge, no action."),
    (_OFFSETS, "TOPIC_AUTHORIZATION_FAILED", _R.REPORT, f"Offsets denied by a topic's ACLs; {_NO_ACTION}."),
    # end offsets and LSO
    (_LIST, "NOT_LEADER_OR_FOLLOWER", _R.RETRY_BACKOFF, f"A partition's leader moved: {_BACKOFF}."),
    (_LIST, "LEADER_NOT_AVAILABLE", _R.RETRY_BACKOFF, f"A partition is electing a leader: {_BACKOFF}."),
    (_LIST, "UNKNOWN_TOPIC_OR_PARTITION", _R.RETRY_BACKOFF, f"The broker does not know a partition (yet): {_BACKOFF}."),
    (
        _LIST,
        "OFFSET_NOT_AVAILABLE",
        _R.RETRY_BACKOFF,
        f"A new leader has not caught up its high watermark: {_BACKOFF}.",
    ),
    (_LIST, "TOPIC_AUTHORIZATION_FAILED", _R.REPORT, f"End offsets denied by a topic's ACLs; {_NO_ACTION}."),
    # a KIP-848 group's session timeout, raised for a coordinated restart
    (
        _ALTER,
        "GROUP_AUTHORIZATION_FAILED",
        _R.REPORT,
        "Changing the group's session timeout is denied (ALTER_CONFIGS on the group): the restart pauses.",
    ),
    (
        _ALTER,
        "INVALID_CONFIG",
        _R.REPORT,
        "The broker refused the session timeout (outside group.consumer.min/max.session.timeout.ms): the restart"
        " pauses.",
    ),
    # broker and group configs
    (
        _CONFIGS,
        "CLUSTER_AUTHORIZATION_FAILED",
        _R.REPORT,
        "Describing broker configs is denied: the timing rules use Kafka's defaults instead.",
    ),
    (
        _CONFIGS,
        "GROUP_AUTHORIZATION_FAILED",
        _R.REPORT,
        "Describing the group's configs is denied: the timing rules use the broker's values instead.",
    ),
    (
        _CONFIGS,
        "INVALID_REQUEST",
        _R.REPORT,
        "The broker cannot describe this config resource (group configs need Kafka 4.0+): defaults are used.",
    ),
)


def _build(rows: tuple[tuple[tuple[Api, ...], str, Reaction, str], ...]) -> Mapping[tuple[Api, int], Outcome]:
    table: dict[tuple[Api, int], Outcome] = {}
    for apis, name, reaction, message in rows:
        code = _CODES[name]
        for api in apis:
            if (api, code) in table:
                raise AssertionError(f"the outcome table lists ({api}, {name}) twice")
            retriable = _KAFKA_ERRORS[code][1]
            table[api, code] = Outcome(api, code, name, reaction, retriable, message.format(api=api.value))
    return table


OUTCOMES: Final[Mapping[tuple[Api, int], Outcome]] = _build(_ROWS)
"""The table: every (request, code) with a considered reaction."""


def classify(api: Api, code: int) -> Outcome:
    """The outcome of `code` in an answer to `api`; never raises: what it does not know it reports, never acts on."""
    outcome = OUTCOMES.get((api, code))
    if outcome is not None:
        return outcome
    known = _KAFKA_ERRORS.get(code)
    if known is None:
        name = f"UNKNOWN_ERROR_{code}"
        message = f"{api.value} got error code {code}, unknown to this vigil (a newer broker?); {_NO_ACTION}."
        return Outcome(api, code, name, Reaction.REPORT, False, message)
    name, retriable = known
    if retriable:
        return Outcome(api, code, name, Reaction.RETRY_BACKOFF, True, f"{api.value} got {name}: {_BACKOFF}.")
    message = f"{api.value} got {name}, which vigil does not expect there; {_NO_ACTION}."
    return Outcome(api, code, name, Reaction.REPORT, False, message)


def code_of(name: str) -> int:
    """Kafka's numeric code for a name this module knows, e.g. "FENCED_INSTANCE_ID" -> 82; KeyError otherwise."""
    return _CODES[name]
