"""Pure record → row functions for the Python side of the ingest (no Spark: unit-tested on bytes).

Only the rare records come here: `__consumer_offsets` records that are not offset commits (GroupMetadata, KIP-848,
share and streams groups' records, unknown or damaged ones: a few per rebalance) and vigil's events. Each function
returns a plain dict that Spark turns into a struct (`vigil_spark.ingest.offsets.OTHER_RECORD`, `.events.EVENT_ROW`).
Times are returned as epoch milliseconds / microseconds and turned into timestamps in SQL, so no time zone is guessed.

A row carries `problem` when something could not be decoded; `kind` (or `ok`) says whether it still belongs in
its table. A record is never dropped without a problem saying why.
"""

import base64
import dataclasses
import json
from datetime import UTC, datetime
from typing import Any, Final

from vigil_core import events
from vigil_core.consumer_offsets import records

GROUP_METADATA: Final = "group_metadata"
CONSUMER_GROUP: Final = "consumer_group"

#: The record types of `consumer_group_records`: KIP-848 groups' (3-8, 16), share groups' (10-15) and streams
#: groups' (17, 19-23). The model reads the KIP-848 ones; the others are kept for SQL and counted, not modelled.
CONSUMER_GROUP_TYPES: Final = (
    3, 4, 5, 6, 7, 8, 16, *records.SHARE_GROUP_RECORDS, *records.STREAMS_GROUP_RECORDS
)  # fmt: skip
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


def _json_default(value: object) -> object:
    if isinstance(value, bytes | bytearray | memoryview):
        # Kafka prints a topic id (Uuid) as unpadded base64url; other bytes read the same way
        return base64.urlsafe_b64encode(bytes(value)).rstrip(b"=").decode("ascii")
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def to_json(value: object) -> str:
    """A decoded record (a frozen dataclass) as compact JSON with sorted keys."""
    data = dataclasses.asdict(value) if dataclasses.is_dataclass(value) and not isinstance(value, type) else value
    return json.dumps(data, default=_json_default, sort_keys=True, separators=(",", ":"))


def _member(member: records.MemberMetadata, consumer: bool, problems: list[str]) -> dict[str, Any]:
    topics: list[str] | None = None
    assigned: list[dict[str, Any]] | None = None
    if consumer:
        sub = member.consumer_subscription()
        if isinstance(sub, records.Corrupt):
            problems.append(f"member {member.member_id}: subscription: {sub.reason}")
        else:
            topics = list(sub.topics)
        assignment = member.consumer_assignment()
        if isinstance(assignment, records.Corrupt):
            problems.append(f"member {member.member_id}: assignment: {assignment.reason}")
        elif assignment is not None:
            assigned = [
                {"topic": tp.topic, "partition": p} for tp in assignment.assigned_partitions for p in tp.partitions
            ]
    return {
        "member_id": member.member_id,
        "instance_id": member.group_instance_id,
        "client_id": member.client_id,
        "client_host": member.client_host,
        "session_timeout_ms": member.session_timeout,
        "rebalance_timeout_ms": member.rebalance_timeout,
        "subscribed_topics": topics,
        "assigned": assigned,
    }


def _group_metadata(value: records.GroupMetadataValue | records.Tombstone, problems: list[str]) -> dict[str, Any]:
    if isinstance(value, records.Tombstone):
        return {"tombstone": True, "protocol_type": None, "generation": None, "protocol": None, "leader": None,
                "state_ts_ms": None, "members": None}  # fmt: skip
    consumer = value.protocol_type == "consumer"
    return {
        "tombstone": False,
        "protocol_type": value.protocol_type,
        "generation": value.generation,
        "protocol": value.protocol,
        "leader": value.leader,
        "state_ts_ms": value.current_state_timestamp if value.current_state_timestamp != -1 else None,
        "members": [_member(m, consumer, problems) for m in value.members],
    }


def _epoch(value: object) -> int | None:
    if isinstance(value, records.ConsumerGroupMetadataValue | records.ShareGroupMetadataValue
                  | records.StreamsGroupMetadataValue):  # fmt: skip
        return value.epoch
    if isinstance(value, records.ConsumerGroupTargetAssignmentMetadataValue
                  | records.ShareGroupTargetAssignmentMetadataValue
                  | records.StreamsGroupTargetAssignmentMetadataValue):  # fmt: skip
        return value.assignment_epoch
    if isinstance(value, records.ConsumerGroupCurrentMemberAssignmentValue
                  | records.ShareGroupCurrentMemberAssignmentValue
                  | records.StreamsGroupCurrentMemberAssignmentValue):  # fmt: skip
        return value.member_epoch
    return None


def _consumer_group(key: records.Key, value: records.Value | records.Tombstone) -> dict[str, Any]:
    tombstone = isinstance(value, records.Tombstone)
    return {
        "record_type": key.record_type,
        "tombstone": tombstone,
        "member_id": getattr(key, "member_id", None),
        "epoch": _epoch(value),
        "record_json": None if tombstone else to_json(value),
    }


def _key_type(key: bytes | None) -> int | None:
    return int.from_bytes(key[:2], "big", signed=True) if key is not None and len(key) >= 2 else None


def other_record(key: bytes | bytearray | None, value: bytes | bytearray | None) -> dict[str, Any]:
    """A `__consumer_offsets` record that is not an offset commit, as a row.

    `kind` is "group_metadata" or "consumer_group" when the record belongs in that table (then `group` and the
    kind's struct are set), else null; `problem` is set when anything could not be decoded (an unknown record
    type or version, damaged bytes) — also for a kept record whose members' subscription is damaged.
    """
    # Spark hands binary columns to Python UDFs as bytearray: decode (and slice) immutable bytes
    key = bytes(key) if key is not None else None
    value = bytes(value) if value is not None else None
    row: dict[str, Any] = {"kind": None, "group": None, "record_type": _key_type(key), "problem": None,
                           GROUP_METADATA: None, CONSUMER_GROUP: None}  # fmt: skip
    k, v = records.decode_record(key, value)
    problems: list[str] = []
    if isinstance(k, records.Corrupt):
        problems.append(k.reason)
    elif isinstance(k, records.Unknown):
        problems.append(f"record type {k.record_type}: {k.reason}")
    elif isinstance(v, records.Corrupt):
        problems.append(v.reason)
    elif isinstance(v, records.Unknown):
        problems.append(f"record type {v.record_type}: {v.reason}")
    elif isinstance(k, records.GroupMetadataKey) and isinstance(v, records.GroupMetadataValue | records.Tombstone):
        row |= {"kind": GROUP_METADATA, "group": k.group, GROUP_METADATA: _group_metadata(v, problems)}
    elif k.record_type in CONSUMER_GROUP_TYPES:
        row |= {"kind": CONSUMER_GROUP, "group": k.group, CONSUMER_GROUP: _consumer_group(k, v)}
    else:  # an offset commit routed here (the SQL path takes those): say so rather than drop it
        problems.append(f"record type {k.record_type}: not expected on the Python path")
    row["problem"] = "; ".join(problems) if problems else None
    return row


def event_row(value: bytes | bytearray | None) -> dict[str, Any]:
    """One record of the events topic as a `vigil_events` row; `ok` false and `problem` set when it is not one."""
    row: dict[str, Any] = {"ok": False, "problem": None, "ts_us": None, "group": None, "type": None,
                           "schema_version": None, "member_id": None, "instance_id": None, "pod": None,
                           "payload_json": None}  # fmt: skip
    if value is None:
        row["problem"] = "not a vigil event: null value"
        return row
    value = bytes(value)
    try:
        event = events.parse_event(value)
    except ValueError as exc:  # EventDecodeError, and anything else a validator might raise on odd input
        row["problem"] = str(exc) if isinstance(exc, events.EventDecodeError) else f"not a vigil event: {exc}"
        return row
    raw = json.loads(value)  # parse_event accepted it, so it is a JSON object with a payload
    member = getattr(event.payload, "member", None)
    delta = event.time - _EPOCH
    row |= {
        "ok": True,
        "ts_us": (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds,
        "group": event.group,
        "type": event.type,
        "schema_version": event.schema_version,
        "member_id": member.member_id if member is not None else None,
        "instance_id": member.instance_id if member is not None else None,
        "pod": event.pod,
        "payload_json": json.dumps(raw.get("payload"), sort_keys=True, separators=(",", ":")),
    }
    return row
