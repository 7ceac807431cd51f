"""Kafka broker log lines about consumer groups, parsed into events (pure: stdlib only, never raises).

Input: lines of a broker's `server.log` as log4j writes them — by default `[yyyy-MM-dd HH:mm:ss,SSS] LEVEL
message (logger)` — from Kafka 3.9 (the Scala `GroupCoordinator`, prefix `[GroupCoordinator <id>]: `) and 4.x
(the Java `GroupMetadataManager`, prefix `[GroupCoordinator id=<id> topic=__consumer_offsets partition=<p>] `).
The layout is configurable (`LogFormat.line_pattern`, a regex with named groups `ts`, `level`, `message` and
optionally `logger`), and so is the zone of zone-less timestamps (`LogFormat.timezone`, default UTC:
production brokers often log without a zone).

Every line gives one of three answers (`parse_line`):
- a `ParsedLine` with an `event` from `EVENTS` (the closed vocabulary below) when a template matched;
- `Unparsed` when the line is *relevant* (a group-coordinator line that talks about rebalances, generations,
  members or epochs) but no template matched — counted by the source, never fatal;
- `None` for everything else (most of a broker's log).

Templates were collected from real 4.1.1 broker logs (test-artifacts of this repo) and read from Kafka's
source (3.9 `core/.../group/GroupCoordinator.scala`, `GroupMetadataManager.scala`; 4.x
`group-coordinator/.../GroupMetadataManager.java`). Which rebalance *cause* a line stands for is decided here
too (`cause_of`, `REASON_RULES`, ...), as data, so the Spark model classifies with exactly the same patterns
(they are written to mean the same in Python's `re` and Java's regex).
"""

import dataclasses
import datetime as dt
import functools
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

# --- the closed vocabulary ------------------------------------------------------------------------------------

EVENTS: Final[Mapping[str, str]] = {
    # classic protocol (3.9 and 4.x)
    "rebalance-prepared": "Preparing to rebalance: `generation` is the OLD generation, `reason` the broker's "
    "reason text (with the client's KIP-800 reason after `; client reason: `).",
    "stabilized": "The join phase completed: `generation` is the new generation, `members` its size.",
    "empty": "The join phase completed with no member: new `generation`, `members` = 0.",
    "assignment-received": "The leader's SyncGroup: `member_id` is the leader, `generation`, `members`.",
    "member-failed": "A member's session expired (heartbeat expiry): `member_id`.",
    "pending-member-expired": "A member that never completed its join was removed after its session timeout.",
    "member-left": "A member left by LeaveGroup: `member_id`, `instance_id` (3.9 only), `reason` = client reason.",
    "pending-member-left": "A pending (not yet joined) member left by LeaveGroup: `member_id`, `reason`.",
    "dynamic-members-removed": "Dynamic members that did not rejoin in time were dropped: `reason` = their ids.",
    "member-joining": "A dynamic member without id got one and must rejoin with it: `member_id`.",
    "member-joined": "A pending dynamic member joined with its id: `member_id`.",
    "static-member-joined": "A new static member joined: `member_id`, `instance_id`.",
    "static-member-replaced": "A static member rejoined with a new member id: `member_id` is the OLD id, "
    "`instance_id`.",
    "static-rejoin-no-rebalance": "The replaced static member rejoined in Stable without a rebalance (the line "
    "names no group: `group` is taken from the preceding `static-member-replaced` of the same partition).",
    "group-loaded": "The coordinator loaded the group: `members` (4.x), `generation` (3.9), `reason` = group type.",
    "group-unloaded": "The coordinator unloaded the group: `generation` (classic) or group epoch (KIP-848).",
    "group-dead": "The group became Dead (3.9: expired; both: skipping a rebalance of a dead group).",
    # KIP-848 consumer protocol (4.x; 3.9 when enabled)
    "epoch-bumped": "A KIP-848 rebalance: `generation` is the new group epoch.",
    "consumer-member-joined": "A member joined a KIP-848 group: `member_id`, `instance_id` if static, "
    "`reason` = the protocol it uses (consumer or classic).",
    "consumer-member-replaced": "A static member re-joined a KIP-848 group with a new id: `member_id` (new), "
    "`instance_id`.",
    "consumer-member-left": "A member left a KIP-848 group: `member_id`, `instance_id`, `reason` = client "
    "reason when it was removed by an explicit LeaveGroup request, else null.",
    "consumer-member-temporarily-left": "A static member left with epoch -2 (keeps its assignment).",
    "consumer-member-fenced": "The coordinator fenced a KIP-848 member: `reason` says why (session expired, "
    "rebalance timeout, ...).",
    "target-assignment-computed": "A new KIP-848 target assignment: `generation` = epoch, `reason` = assignor "
    "(share and streams groups log the same line).",
    # share groups (KIP-932): their other lines read like a KIP-848 group's; streams groups (KIP-1071), 4.x
    "share-member-joined": "A member joined a share group: `member_id`.",
    "share-member-left": "A member left a share group: `member_id`.",
    "streams-member-joined": "A member joined a streams group: `member_id`, `instance_id` if static (4.4).",
    "streams-member-replaced": "A static member re-joined a streams group with a new id (4.4): `member_id` (new), "
    "`instance_id`.",
    "streams-member-left": "A member left a streams group: `member_id`, `instance_id` if static.",
    "streams-member-temporarily-left": "A static streams member left with epoch -2 (4.4; keeps its tasks).",
    "streams-epoch-bumped": "A streams group's rebalance: `generation` is the new group epoch.",
    "streams-member-fenced": "The coordinator fenced a streams member: `reason` says why.",
}

#: The events that name a share group (its other lines read like a KIP-848 group's).
SHARE_EVENTS: Final = tuple(e for e in EVENTS if e.startswith("share-"))

#: The causes the model reports for a rebalance (closed vocabulary).
CAUSES: Final = (
    "joined",
    "left",
    "heartbeat-expiry",
    "poll-timeout",
    "static-replacement",
    "evicted-by-vigil",
    "metadata-change",
    "unknown",
)

#: (detail, cause, regex) for the reason text of a `rebalance-prepared` line; first match wins.
REASON_RULES: Final[tuple[tuple[str, str, str], ...]] = (
    ("member-added", "joined", r"^Adding new member "),
    ("member-joining", "joined", r"^Member .+ (is )?joining group during "),
    ("static-member-updated", "static-replacement", r"^Updating metadata for static member "),
    ("protocol-change", "static-replacement", r"^Group's selectedProtocol will change because static member "),
    ("member-updated", "metadata-change", r"^Updating metadata for member "),
    ("leader-rejoined", "metadata-change", r"^Leader .+ re-joining group during "),
    ("heartbeat-expiry", "heartbeat-expiry", r"^removing member .+ on heartbeat expiration"),
    ("pending-sync-expiry", "heartbeat-expiry", r" on pending sync request expiration$"),
    ("leave-group", "left", r"^(explicit `LeaveGroup` request for |Removing member .+ on LeaveGroup)"),
    ("downgrade", "metadata-change", r"^Downgrade group "),
    ("over-capacity", "unknown", r"^Freshly-loaded group "),
    ("sync-error", "unknown", r"^Error .* when storing group assignment"),
)

#: (cause, regex) refining "left" from the client's KIP-800 reason; first match wins, else "left".
CLIENT_REASON_RULES: Final[tuple[tuple[str, str], ...]] = (
    ("evicted-by-vigil", r"^vigil:"),
    ("poll-timeout", r"(?i)poll timeout"),
)

#: Where a `rebalance-prepared` reason names the member(s) that triggered it; the first that matches wins, its
#: group is one id or a ", "-separated list (a LeaveGroup or pending-sync expiry of several).
TRIGGER_PATTERNS: Final[tuple[str, ...]] = (
    r"^Adding new member (\S+) with ",
    r"^Member (\S+) (?:is )?joining group ",
    r"^Updating metadata for (?:static )?member (\S+) ",
    r"^Leader (\S+) re-joining group ",
    r"because static member (\S+) with instance id ",
    r"^removing member (\S+) on heartbeat expiration",
    r"^Removing \[([^\]]+)\] on pending sync request expiration",
    r"^explicit `LeaveGroup` request for \(([^)]+)\) members",
    r"^Removing member (\S+) on LeaveGroup",
)

#: The text a client reason has when the client sent none.
NO_CLIENT_REASON: Final = "not provided"

#: (cause, regex) for the reason of a `consumer-member-fenced` line; first match wins, else "unknown".
FENCE_RULES: Final[tuple[tuple[str, str], ...]] = (
    ("heartbeat-expiry", r"session expired"),
    ("poll-timeout", r"(rebalance timeout|failed to transition|failed to join|failed to sync)"),
)

#: The cause a KIP-848, streams or share member event stands for when it precedes an epoch bump ("left" is refined
#: by reason).
EVENT_CAUSES: Final[Mapping[str, str]] = {
    "consumer-member-joined": "joined",
    "consumer-member-replaced": "static-replacement",
    "consumer-member-left": "left",
    "consumer-member-temporarily-left": "left",
    "consumer-member-fenced": "unknown",
    "streams-member-joined": "joined",
    "streams-member-replaced": "static-replacement",
    "streams-member-left": "left",
    "streams-member-temporarily-left": "left",
    "streams-member-fenced": "unknown",
    "share-member-joined": "joined",
    "share-member-left": "left",
}

#: The member events whose reason says why the coordinator fenced the member (`FENCE_RULES`).
FENCED_EVENTS: Final = ("consumer-member-fenced", "streams-member-fenced")

#: The regex pulling the client's reason out of a broker reason text.
CLIENT_REASON_PATTERN: Final = r"; client reason: (.*)$"

# --- configuration --------------------------------------------------------------------------------------------

DEFAULT_LINE_PATTERN: Final = (
    r"^\[(?P<ts>\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d{1,9})?(?:Z|[+-]\d{2}:?\d{2})?)\] "
    r"(?P<level>[A-Z]+) (?P<message>.*?)(?: \((?P<logger>[\w.$]+)\))?\s*$"
)


@dataclasses.dataclass(frozen=True, slots=True)
class LogFormat:
    """How the broker writes its log lines."""

    line_pattern: str = DEFAULT_LINE_PATTERN
    """A regex with named groups `ts`, `level`, `message` (and optionally `logger`)."""
    timezone: str = "UTC"
    """The zone of timestamps that carry none (an IANA name, e.g. "Europe/Berlin")."""


@dataclasses.dataclass(frozen=True, slots=True)
class ParsedLine:
    """One coordinator line as an event."""

    ts: dt.datetime
    """When it was logged, in UTC."""
    level: str
    event: str
    """One of `EVENTS`."""
    group: str | None
    generation: int | None = None
    members: int | None = None
    member_id: str | None = None
    instance_id: str | None = None
    reason: str | None = None
    state: str | None = None
    """The group state the line names, if any."""
    node_id: int | None = None
    """The coordinator's node id from the line's prefix."""
    log_partition: int | None = None
    """The `__consumer_offsets` partition the coordinator shard serves, when the line says."""


@dataclasses.dataclass(frozen=True, slots=True)
class Unparsed:
    """A relevant line no template matched (counted, not fatal)."""

    line: str
    why: str


# --- templates ------------------------------------------------------------------------------------------------

_G = r"(?P<group>.+?)"
_GEN = r"(?P<generation>-?\d+)"
_LP39 = r"(?: \(__consumer_offsets-(?P<lp>\d+)\))?"

_TEMPLATES: Final[tuple[tuple[str, str], ...]] = (
    (
        "rebalance-prepared",
        rf"^Preparing to rebalance group {_G} in state (?P<state>\w+) with old generation {_GEN}{_LP39} "
        r"\(reason: (?P<reason>.*)\)\.?$",
    ),
    ("stabilized", rf"^Stabilized group {_G} generation {_GEN}{_LP39} with (?P<members>\d+) members\.?$"),
    ("empty", rf"^Group {_G} with generation {_GEN} is now empty{_LP39}\.?$"),
    (
        "assignment-received",
        rf"^Assignment received from leader (?P<member_id>.+?) for group {_G} for generation {_GEN}\. "
        r"The group has (?P<members>\d+) members, \d+ of which are static\.$",
    ),
    ("member-failed", rf"^Member (?P<member_id>.+?) in group {_G} has failed, removing it from the group\.?$"),
    (
        "pending-member-expired",
        rf"^Pending member (?P<member_id>.+?) in group {_G} has been removed after session timeout expiration\.?$",
    ),
    (
        "member-left",
        rf"^\[Group {_G}\] Member (?P<member_id>.+?) has left group through explicit `LeaveGroup` request; "
        r"client reason: (?P<reason>.*)$",
    ),
    (
        "member-left",
        r"^Member MemberMetadata\(memberId=(?P<member_id>.+?), groupInstanceId=(?P<instance_id>.+?), "
        rf"clientId=.*\) has left group {_G} through explicit `LeaveGroup`; client reason: (?P<reason>.*)$",
    ),
    (
        "pending-member-left",
        rf"^\[Group {_G}\] Pending member (?P<member_id>.+?) has left group through explicit `LeaveGroup` "
        r"request; client reason: (?P<reason>.*)$",
    ),
    (
        "pending-member-left",
        rf"^Pending member with memberId=(?P<member_id>.+?) has left group {_G} through explicit `LeaveGroup` "
        r"request$",
    ),
    ("dynamic-members-removed", rf"^Group {_G} removed dynamic members who haven't joined: (?P<reason>.*)$"),
    (
        "member-joining",
        rf"^Dynamic [Mm]ember with unknown member id joins group {_G} in (?:state )?(?P<state>\w+)(?: state)?\. "
        r"Created a new member id (?P<member_id>.+?) (?:and request(?:ing)? the member to rejoin with this id"
        r"|for this member and add(?:ed)? to the group|and added the member to the group)\.$",
    ),
    (
        "member-joined",
        rf"^Pending dynamic member with id (?P<member_id>.+?) joins group {_G} in (?P<state>\w+) state\. "
        r"Adding to the group now\.$",
    ),
    (
        "static-member-joined",
        rf"^Static member with groupInstanceId=(?P<instance_id>.+?) and unknown member id joins group {_G} in "
        r"(?P<state>\w+) state\. Created a new member id (?P<member_id>.+?) for this member and add(?:ed)? to "
        r"the group\.$",
    ),
    (
        "static-member-replaced",
        rf"^Static member with groupInstanceId=(?P<instance_id>.+?) and unknown member id joins group {_G} in "
        r"(?P<state>\w+) state\. Replacing previously mapped member (?P<member_id>.+?) with this "
        r"groupInstanceId\.$",
    ),
    (
        "static-rejoin-no-rebalance",
        r"^Static member which joins during Stable stage and doesn't affect (?:the selected protocol|"
        r"selectProtocol) will not trigger (?:a )?rebalance\.$",
    ),
    ("group-loaded", rf"^Loaded (?P<reason>\w+) group {_G} with (?P<members>\d+) members\.$"),
    ("group-loaded", rf"^Loading group metadata for {_G} with generation {_GEN}$"),
    ("group-unloaded", rf"^\[GroupId={_G}\] Unloading group metadata for generation {_GEN}\.$"),
    ("group-unloaded", rf"^\[GroupId={_G}\] Unloaded group metadata for group epoch {_GEN}\.$"),
    ("group-unloaded", rf"^Unloading group metadata for {_G} with generation {_GEN}$"),
    ("group-dead", rf"^Group {_G} transitioned to Dead in generation {_GEN}$"),
    ("group-dead", rf"^Group {_G} is dead, skipping rebalance stage\.?$"),
    # KIP-848
    ("epoch-bumped", rf"^\[GroupId {_G}\] Bumped group epoch to {_GEN}(?: with metadata hash -?\d+)?\.$"),
    (
        "consumer-member-joined",
        rf"^\[GroupId {_G}\] Member (?P<member_id>.+?) joins the consumer group using the (?P<reason>\w+) "
        r"protocol\.$",
    ),
    (
        "consumer-member-joined",
        rf"^\[GroupId {_G}\] Static [Mm]ember (?P<member_id>.+?) with instance id (?P<instance_id>.+?) joins the "
        r"consumer group using the (?P<reason>\w+) protocol\.$",
    ),
    (
        "consumer-member-replaced",
        rf"^\[GroupId {_G}\] Static [Mm]ember with instance id (?P<instance_id>.+?) re-joins the consumer group "
        r"using the \w+ protocol\. Created a new member (?P<member_id>.+?) to replace the existing member .+\.$",
    ),
    (
        "consumer-member-temporarily-left",
        rf"^\[GroupId {_G}\] Static [Mm]ember (?P<member_id>.+?) with instance id (?P<instance_id>.+?) "
        r"temporarily left the consumer group\.$",
    ),
    (
        "consumer-member-left",
        rf"^\[GroupId {_G}\] Static [Mm]ember (?P<member_id>.+?) with instance id (?P<instance_id>.+?) left the "
        r"consumer group\.$",
    ),
    ("consumer-member-left", rf"^\[GroupId {_G}\] Member (?P<member_id>.+?) left the consumer group\.$"),
    (
        "consumer-member-left",
        rf"^\[Group(?:Id)? {_G}\] Dynamic [Mm]ember (?P<member_id>.+?) has left group through explicit "
        r"`LeaveGroup` request; client reason: (?P<reason>.*)$",
    ),
    (
        "consumer-member-left",
        rf"^\[Group(?:Id)? {_G}\] Static [Mm]ember (?P<member_id>.+?) with instance id (?P<instance_id>.+?) has "
        r"left group through explicit `LeaveGroup` request; client reason: (?P<reason>.*)$",
    ),
    (
        "consumer-member-fenced",
        rf"^\[GroupId {_G}\] Member (?P<member_id>.+?) fenced from the group because (?P<reason>.*?)\.*$",
    ),
    (
        "share-member-joined",
        rf"^\[GroupId {_G}\] Member (?P<member_id>.+?) joins the share group using the share "
        r"protocol\.$",
    ),
    ("share-member-left", rf"^\[GroupId {_G}\] Member (?P<member_id>.+?) left the share group\.$"),
    (
        "streams-member-joined",
        rf"^\[GroupId {_G}\]\[MemberId (?P<member_id>[^\]]+)\] Member joins the streams group\.$",
    ),
    (
        "streams-member-joined",
        rf"^\[GroupId {_G}\]\[MemberId [^\]]+\] Static member (?P<member_id>.+?) with instance id "
        r"(?P<instance_id>.+?) joins the streams group\.$",
    ),
    (
        "streams-member-replaced",
        rf"^\[GroupId {_G}\]\[MemberId [^\]]+\] Static member with instance id (?P<instance_id>.+?) re-joins the "
        r"streams group using the streams protocol\. Created a new member (?P<member_id>.+?) to replace the existing "
        r"member .+\.$",
    ),
    (
        "streams-member-temporarily-left",
        rf"^\[GroupId {_G}\]\[MemberId [^\]]+\] Static member (?P<member_id>.+?) with instance id "
        r"(?P<instance_id>.+?) temporarily left the streams group\.$",
    ),
    (
        "streams-member-left",
        rf"^\[GroupId {_G}\]\[MemberId [^\]]+\] (?:Static member|Member) (?P<member_id>.+?)"
        r"(?: with instance id (?P<instance_id>.+?))? left the streams group\.$",
    ),
    (
        "streams-epoch-bumped",
        rf"^\[GroupId {_G}\]\[MemberId [^\]]+\] Bumped streams group epoch to {_GEN} with metadata hash -?\d+ "
        r"and validated topic epoch -?\d+\.$",
    ),
    (
        "streams-member-fenced",
        rf"^\[GroupId {_G}\] Streams member (?P<member_id>.+?) fenced from the group because (?P<reason>.*?)\.*$",
    ),
    (
        "target-assignment-computed",
        rf"^\[GroupId {_G}\] Computed a new target assignment for epoch {_GEN} with '(?P<reason>[^']*)' "
        r"assignor in \d+ms(?:: .*)?\.$",
    ),
)

_COMPILED: Final = tuple((event, re.compile(pattern)) for event, pattern in _TEMPLATES)

# 4.x: "[GroupCoordinator id=1 topic=__consumer_offsets partition=3] ", "[GroupCoordinator id=1] ";
# 3.9: "[GroupCoordinator 1]: ", "[GroupMetadataManager brokerId=1] ".
_PREFIX: Final = re.compile(
    r"^\[(?:GroupCoordinator (?:id=(?P<node4>\d+)(?: topic=\S+ partition=(?P<partition>\d+))?\] |"
    r"(?P<node3>\d+)\]: )|GroupMetadataManager brokerId=(?P<nodem>\d+)\] )"
)
_RELEVANT: Final = re.compile(
    r"rebalanc|Stabilized group|generation -?\d|LeaveGroup|heartbeat expiration|group epoch|consumer group|"
    r"is now empty|joins group|has failed|session timeout",
    re.IGNORECASE,
)
_COORDINATOR_LOGGER: Final = re.compile(r"coordinator\.group|GroupCoordinator|GroupMetadataManager")


@functools.lru_cache(maxsize=16)
def _compile(fmt: LogFormat) -> tuple[re.Pattern[str], dt.tzinfo]:
    check_format(fmt)
    return re.compile(fmt.line_pattern), ZoneInfo(fmt.timezone)


def check_format(fmt: LogFormat) -> None:
    """Raise ValueError naming the field when the format cannot work (bad regex, missing groups, unknown zone)."""
    try:
        pattern = re.compile(fmt.line_pattern)
    except re.error as exc:
        raise ValueError(f"line_pattern: not a regex: {exc}") from exc
    missing = {"ts", "level", "message"} - set(pattern.groupindex)
    if missing:
        raise ValueError(f"line_pattern: named groups {sorted(missing)} are missing")
    try:
        ZoneInfo(fmt.timezone)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"timezone: unknown zone {fmt.timezone!r}") from exc


def parse_ts(text: str, zone: dt.tzinfo) -> dt.datetime | None:
    """An ISO-like log4j timestamp (`,` or `.` before the fraction) in UTC; zone-less ones are in `zone`."""
    try:
        value = dt.datetime.fromisoformat(text.strip().replace(",", "."))
    except ValueError:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=zone)
    return value.astimezone(dt.UTC)


def _instance(value: str | None) -> str | None:
    """Instance ids as the brokers print them: 4.x `null`, 3.9 Scala `None` / `Some(id)`."""
    if value is None or value in ("null", "None", ""):
        return None
    if value.startswith("Some(") and value.endswith(")"):
        return value[5:-1]
    return value


def _int(value: str | None) -> int | None:
    return int(value) if value is not None else None


def parse_line(line: str, fmt: LogFormat = LogFormat()) -> ParsedLine | Unparsed | None:
    """One log line: an event, `Unparsed` if relevant but not understood, `None` if not about groups."""
    pattern, zone = _compile(fmt)
    text = line.rstrip("\r\n")
    head = pattern.match(text)
    if head is None:
        relevant = _PREFIX.search(text) or ("GroupCoordinator" in text and _RELEVANT.search(text))
        return Unparsed(text, "the line does not match line_pattern") if relevant else None
    message = head.group("message") or ""
    prefix = _PREFIX.match(message)
    if prefix is None and not _COORDINATOR_LOGGER.search(head.groupdict().get("logger") or ""):
        return None
    body = message[prefix.end() :] if prefix else message
    ts = parse_ts(head.group("ts"), zone)
    parsed = _match(body) if ts is not None else None
    if parsed is None:
        if not _RELEVANT.search(body):
            return None
        why = "no template matches this coordinator line" if ts else f"timestamp {head.group('ts')!r} not understood"
        return Unparsed(text, why)
    event, found = parsed
    node = partition = None
    if prefix is not None:
        node = _int(prefix.group("node4") or prefix.group("node3") or prefix.group("nodem"))
        partition = _int(prefix.group("partition"))
    return ParsedLine(
        ts=ts,  # type: ignore[arg-type]  # not None: _match ran
        level=head.group("level"),
        event=event,
        group=found.get("group"),
        generation=_int(found.get("generation")),
        members=_int(found.get("members")) if event != "empty" else 0,
        member_id=found.get("member_id"),
        instance_id=_instance(found.get("instance_id")),
        reason=found.get("reason"),
        state=found.get("state"),
        node_id=node,
        log_partition=partition if partition is not None else _int(found.get("lp")),
    )


def _match(body: str) -> tuple[str, dict[str, str | None]] | None:
    for event, template in _COMPILED:
        match = template.match(body)
        if match is not None:
            return event, match.groupdict()
    return None


def parse_lines(lines: Iterable[str], fmt: LogFormat = LogFormat()) -> Iterator[ParsedLine | Unparsed]:
    """The events and unparsed relevant lines of one file, in order, with context filled in.

    `static-rejoin-no-rebalance` names no group: it gets the group of the latest `static-member-replaced` of
    the same `__consumer_offsets` partition (the coordinator logs both in one call).
    """
    replaced: dict[int | None, ParsedLine] = {}
    for line in lines:
        parsed = parse_line(line, fmt)
        if parsed is None:
            continue
        if isinstance(parsed, ParsedLine):
            if parsed.event == "static-member-replaced":
                replaced[parsed.log_partition] = parsed
            elif parsed.event == "static-rejoin-no-rebalance":
                before = replaced.pop(parsed.log_partition, None)
                if before is not None:
                    parsed = dataclasses.replace(
                        parsed, group=before.group, instance_id=before.instance_id, state=before.state
                    )
        yield parsed


# --- causes ---------------------------------------------------------------------------------------------------


def client_reason(reason: str | None) -> str | None:
    """The client's KIP-800 reason inside a broker reason text, if it has one."""
    if reason is None:
        return None
    match = re.search(CLIENT_REASON_PATTERN, reason)
    return match.group(1) if match else None


def trigger_members(reason: str | None) -> tuple[str, ...]:
    """The member ids a `rebalance-prepared` reason names as its trigger (`TRIGGER_PATTERNS`; none if none)."""
    for pattern in TRIGGER_PATTERNS:
        match = re.search(pattern, reason or "")
        if match:
            return tuple(match.group(1).split(", "))
    return ()


def left_cause(client: str | None) -> str:
    """ "left", refined by the client's reason (vigil's evictions, Java's poll timeout)."""
    if client is not None:
        for cause, pattern in CLIENT_REASON_RULES:
            if re.search(pattern, client):
                return cause
    return "left"


def reason_cause(reason: str | None) -> tuple[str, str]:
    """(cause, detail) of a `rebalance-prepared` reason text; ("unknown", "unrecognized") if none matches."""
    if reason is None:
        return "unknown", "no-reason"
    for detail, cause, pattern in REASON_RULES:
        if re.search(pattern, reason):
            if cause == "left":
                return left_cause(client_reason(reason)), detail
            return cause, detail
    return "unknown", "unrecognized"


def event_cause(event: str, reason: str | None) -> str:
    """The cause a KIP-848 or streams member event stands for (`EVENT_CAUSES`, refined by the reason)."""
    if event in FENCED_EVENTS:
        for cause, pattern in FENCE_RULES:
            if reason is not None and re.search(pattern, reason):
                return cause
        return "unknown"
    cause = EVENT_CAUSES.get(event, "unknown")
    return left_cause(reason) if cause == "left" else cause
