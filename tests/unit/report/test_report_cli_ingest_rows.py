"""The ingest's Python side (no Spark): rare `__consumer_offsets` records and vigil's events become table rows,
and whatever cannot be decoded becomes a problem naming why — never an exception, never a silent drop."""

import json
from pathlib import Path
from typing import Any

import pytest

from vigil_spark.ingest import rows

FIXTURES = Path(__file__).parents[1] / "fixtures"
REAL = {r["what"]: r for r in json.loads((FIXTURES / "consumer_offsets" / "real_records.json").read_text())["records"]}


def real(what: str) -> tuple[bytes, bytes | None]:
    record = REAL[what]
    return bytes.fromhex(record["key"]), bytes.fromhex(record["value"]) if record["value"] is not None else None


def test_a_real_group_metadata_record_becomes_a_row() -> None:
    row = rows.other_record(*real("classic-GroupMetadataValue-v3-o1"))
    assert (row["kind"], row["group"], row["record_type"], row["problem"]) == (
        "group_metadata",
        "g-oc-888d4de5f5",
        2,
        None,
    )
    gm = row["group_metadata"]
    leader = "g-oc-888d4de5f5-m0-d1dacd06-33c3-437b-9b61-e036343e1efd"
    assert (gm["tombstone"], gm["protocol_type"], gm["generation"], gm["protocol"], gm["leader"]) == (
        False, "consumer", 1, "range", leader,
    )  # fmt: skip
    assert gm["state_ts_ms"] == int("01a1fd4fa2d6", 16)
    assert gm["members"] == [
        {
            "member_id": leader,
            "instance_id": None,
            "client_id": "g-oc-888d4de5f5-m0",
            "client_host": "/127.0.0.1",
            "session_timeout_ms": 6000,
            "rebalance_timeout_ms": 300000,
            "subscribed_topics": ["oc-426626a8de"],
            "assigned": [{"topic": "oc-426626a8de", "partition": p} for p in range(4)],
        }
    ]


def test_the_empty_generation_has_no_members_and_no_protocol() -> None:
    gm = rows.other_record(*real("classic-GroupMetadataValue-v3-o0"))["group_metadata"]
    assert (gm["generation"], gm["protocol"], gm["leader"], gm["members"]) == (0, None, None, [])


@pytest.mark.parametrize(
    ("what", "record_type", "epoch_field"),
    [
        ("kip848-ConsumerGroupMetadataValue-v0-o13", 3, "epoch"),
        ("kip848-ConsumerGroupTargetAssignmentMetadataValue-v0-o15", 6, "assignment_epoch"),
        ("kip848-ConsumerGroupCurrentMemberAssignmentValue-v0-o16", 8, "member_epoch"),
        ("kip848-ConsumerGroupMemberMetadataValue-v0-o12", 5, None),
        ("kip848-ConsumerGroupTargetAssignmentMemberValue-v0-o14", 7, None),
    ],
)
def test_kip848_records_keep_their_epoch_and_json(what: str, record_type: int, epoch_field: str | None) -> None:
    row = rows.other_record(*real(what))
    assert (row["kind"], row["problem"]) == ("consumer_group", None)
    cg = row["consumer_group"]
    assert (cg["record_type"], cg["tombstone"]) == (record_type, False)
    decoded: dict[str, Any] = json.loads(cg["record_json"])
    assert decoded["version"] == 0
    assert cg["epoch"] == (decoded[epoch_field] if epoch_field else None)
    if epoch_field:
        assert cg["epoch"] > 0
    assert (cg["member_id"] is not None) == (record_type in (5, 7, 8))


@pytest.mark.parametrize(
    ("key", "value", "member_id", "epoch"),
    [
        # StreamsGroupMetadata of group "g": epoch 7, a metadata hash, no tags
        ("0011000167", "0000" + "00000007" + "0000000000000063" + "00", None, 7),
        # StreamsGroupCurrentMemberAssignment of ("g", "m"): epoch -2 (a static member's temporary leave), STABLE
        ("00160001670001" + "6d", "0000" + "fffffffe" + "00000004" + "01" + "01" * 6 + "00", "m", -2),
        # ShareGroupMemberMetadata of ("g", "m"): no epoch of its own
        ("000a0001670001" + "6d", "0000" + "00" + "0263" + "0268" + "01" + "00", "m", None),
    ],
)
def test_share_and_streams_records_go_to_the_same_table_with_their_epoch(
    key: str, value: str, member_id: str | None, epoch: int | None
) -> None:
    """Kept with their type for SQL (the model covers KIP-848 and classic groups); not problems."""
    row = rows.other_record(bytes.fromhex(key), bytes.fromhex(value))
    assert (row["kind"], row["group"], row["problem"]) == ("consumer_group", "g", None)
    cg = row["consumer_group"]
    assert (cg["record_type"], cg["member_id"], cg["epoch"]) == (int(key[:4], 16), member_id, epoch)
    assert json.loads(cg["record_json"])["version"] == 0


def test_topic_ids_are_written_as_kafka_prints_them() -> None:
    cg = rows.other_record(*real("kip848-ConsumerGroupTargetAssignmentMemberValue-v0-o23"))["consumer_group"]
    topic_id = json.loads(cg["record_json"])["topic_partitions"][0]["topic_id"]
    assert len(topic_id) == 22  # 16 bytes, base64url without padding (Kafka's Uuid.toString)
    assert "=" not in topic_id


def test_a_kip848_tombstone_keeps_its_member() -> None:
    row = rows.other_record(*real("kip848-Tombstone-v--o28"))
    cg = row["consumer_group"]
    assert (row["kind"], cg["record_type"], cg["tombstone"], cg["epoch"], cg["record_json"]) == (
        "consumer_group", 8, True, None, None,
    )  # fmt: skip
    assert cg["member_id"]


def test_spark_bytearrays_decode_like_bytes() -> None:
    """Spark passes binary columns to Python UDFs as bytearray."""
    key, value = real("kip848-ConsumerGroupTargetAssignmentMemberValue-v0-o23")
    assert value is not None
    assert rows.other_record(bytearray(key), bytearray(value)) == rows.other_record(key, value)
    data = (FIXTURES / "events" / "v1" / "stall-detected.json").read_bytes()
    assert rows.event_row(bytearray(data)) == rows.event_row(data)


def test_a_group_metadata_tombstone() -> None:
    key, _ = real("classic-GroupMetadataValue-v3-o1")
    row = rows.other_record(key, None)
    assert row["kind"] == "group_metadata"
    assert row["group_metadata"]["tombstone"] is True
    assert row["group_metadata"]["members"] is None


@pytest.mark.parametrize(
    ("key", "value", "problem"),
    [
        (None, b"\x00\x00", "key: null"),
        (b"\x00", b"\x00\x00", "key: key.type: needs 2 bytes at offset 0, 1 left"),
        (
            b"\x00\x09\x00\x01g",
            b"\x00\x00",
            "record type 9: ShareGroupPartitionMetadata, an early-access (Kafka 4.0) share",
        ),
        (b"\x00\x11\x00\x01g", b"\x00\x00", "StreamsGroupMetadataValue v0: epoch: needs 4 bytes"),
        (b"\x00\x18\x00\x01g", b"\x00\x00", "record type 24: unknown record type"),
        (bytes.fromhex("0002000167"), b"\x00\x09", "record type 2: GroupMetadataValue version 9 not known (0-4)"),
        (bytes.fromhex("0002000167"), b"\x00\x03\x00", "GroupMetadataValue v3: protocol_type"),
    ],
)
def test_undecodable_records_become_problems(key: bytes | None, value: bytes, problem: str) -> None:
    row = rows.other_record(key, value)
    assert row["kind"] is None
    assert row["problem"].startswith(problem)


def test_a_damaged_subscription_keeps_the_record_and_reports_it() -> None:
    key, value = real("classic-GroupMetadataValue-v3-o1")
    assert value is not None
    sub_len = bytes.fromhex("00000023")
    damaged = value.replace(sub_len + bytes.fromhex("0003"), sub_len + bytes.fromhex("ffff"), 1)
    assert damaged != value
    row = rows.other_record(key, damaged)
    assert row["kind"] == "group_metadata"
    assert row["group_metadata"]["members"][0]["subscribed_topics"] is None
    assert "subscription" in row["problem"]


def test_offset_commits_are_not_expected_here() -> None:
    row = rows.other_record(*real("classic-OffsetCommitValue-v4-o2"))
    assert (row["kind"], row["problem"]) == (None, "record type 1: not expected on the Python path")


def test_a_stored_event_becomes_a_row() -> None:
    data = (FIXTURES / "events" / "v1" / "stall-detected.json").read_bytes()
    row = rows.event_row(data)
    assert row["ok"] is True
    assert row["problem"] is None
    assert (row["group"], row["type"], row["schema_version"], row["pod"]) == ("orders", "stall-detected", 1, "orders-0")
    assert (row["member_id"], row["instance_id"]) == ("orders-0-5f0c2a9e-3b1d-4c7a-9e2f-1a2b3c4d5e6f", "shop-orders-0")
    assert row["ts_us"] == 1748779200_250000  # 2025-06-01T12:00:00.25Z
    assert json.loads(row["payload_json"]) == json.loads(data)["payload"]


def test_an_event_without_a_member_has_null_member_columns() -> None:
    row = rows.event_row((FIXTURES / "events" / "v1" / "systemic-stall.json").read_bytes())
    assert row["ok"] is True
    assert (row["member_id"], row["instance_id"]) == (None, None)


def test_newer_writers_payload_fields_are_kept() -> None:
    raw = json.loads((FIXTURES / "events" / "v1" / "stall-detected.json").read_text())
    raw["payload"]["added_later"] = {"x": 1}
    row = rows.event_row(json.dumps(raw).encode())
    assert json.loads(row["payload_json"])["added_later"] == {"x": 1}


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (b"not json", "not a vigil event: record: Invalid JSON"),
        (b'{"schema_version": 1, "type": "no-such-type"}', "not a vigil event: "),
        (b'{"schema_version": 0, "type": "stall-detected"}', "not a vigil event: "),
        (None, "not a vigil event: null value"),
    ],
)
def test_bad_event_records_become_problems(value: bytes | None, problem: str) -> None:
    row = rows.event_row(value)
    assert row["ok"] is False
    assert row["problem"].startswith(problem)
    assert row["group"] is None
