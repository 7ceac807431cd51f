"""The event schema: every stored record of every version still parses; round trips; additive evolution."""

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from vigil_core import events as ev

FIXTURES = Path(__file__).parents[1] / "fixtures" / "events"
STORED = sorted(FIXTURES.glob("v*/*.json"))
TYPES = {model.model_fields["type"].default for model in ev.EVENT_MODELS}


def _version(path: Path) -> int:
    return int(path.parent.name.removeprefix("v"))


@pytest.mark.parametrize("path", STORED, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_stored_record_of_every_version_still_parses(path: Path) -> None:
    event = ev.parse_event(path.read_bytes())
    assert event.type == path.stem
    assert event.schema_version == _version(path)
    assert event.time.tzinfo is UTC
    assert ev.parse_event(ev.encode_event(event)) == event


def test_every_event_type_has_a_stored_record_and_the_current_version_has_its_directory() -> None:
    assert STORED, f"no fixtures under {FIXTURES}"
    assert {path.stem for path in STORED} == TYPES
    assert (FIXTURES / f"v{ev.SCHEMA_VERSION}").is_dir()
    assert max(_version(path) for path in STORED) == ev.SCHEMA_VERSION


def _stored(event_type: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / "v1" / f"{event_type}.json").read_text())
    return data


def test_unknown_fields_anywhere_are_ignored() -> None:
    data = _stored("group-snapshot")
    data["added_in_v9"] = {"anything": [1, 2]}
    data["payload"]["new_count"] = 3
    data["payload"]["members"][0]["member"]["rack"] = "eu-1a"
    data["payload"]["members"][0]["assignment"][0]["topic_id"] = "AAAAAAAAAAAAAAAAAAAAAA"
    event = ev.parse_event(json.dumps(data).encode())
    assert isinstance(event, ev.GroupSnapshot)
    assert event == ev.parse_event((FIXTURES / "v1" / "group-snapshot.json").read_bytes())


def test_a_newer_version_number_parses() -> None:
    data = _stored("stall-detected") | {"schema_version": 7}
    assert ev.parse_event(json.dumps(data).encode()).schema_version == 7


def test_fields_with_defaults_may_be_missing() -> None:
    data = _stored("stall-detected")
    for name in ("schema_version", "namespace", "pod"):
        del data[name]
    for name in ("generation", "assigned_partitions"):
        del data["payload"][name]
    del data["payload"]["member"]["instance_id"]
    event = ev.parse_event(json.dumps(data).encode())
    assert (event.schema_version, event.pod) == (ev.SCHEMA_VERSION, None)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(type="lag-forecast"), "not a vigil event: record: Input tag 'lag-forecast'"),
        (lambda d: d.update(time="2025-06-01T12:00:00"), "not a vigil event: stall-detected.time: Input should have"),
        (lambda d: d.pop("group"), "not a vigil event: stall-detected.group: Field required"),
        (
            lambda d: d["payload"].update(stalled_for_ms=-1),
            "not a vigil event: stall-detected.payload.stalled_for_ms: Input should be",
        ),
    ],
    ids=["unknown type", "naive time", "missing group", "negative duration"],
)
def test_bad_records_fail_in_one_line_naming_the_field(mutate: Any, message: str) -> None:
    data = _stored("stall-detected")
    mutate(data)
    with pytest.raises(ev.EventDecodeError) as info:
        ev.parse_event(json.dumps(data).encode())
    assert str(info.value).startswith(message)
    assert "\n" not in str(info.value)


def test_not_json_at_all() -> None:
    with pytest.raises(ev.EventDecodeError, match=r"^not a vigil event: record: Invalid JSON"):
        ev.parse_event(b"\x00\x01")


NAIVE = datetime(2025, 6, 1, 12, 0)  # naive on purpose
MEMBER = ev.MemberRef(member_id="m-1", instance_id="ns-p-0")


def test_naive_times_are_rejected_when_building_too() -> None:
    with pytest.raises(ValidationError, match="timezone"):
        ev.SystemicStall(
            time=NAIVE,
            cluster="c",
            group="g",
            source="sidecar",
            payload=ev.SystemicStallPayload(stalled_members=1, members=2, threshold_percent=50),
        )
    with pytest.raises(ValidationError, match="timezone"):
        ev.BridgeStartedPayload(member=MEMBER, generation=1, proof="pod-deleted", deadline=NAIVE)


def test_times_are_stored_in_utc() -> None:
    berlin = timezone(timedelta(hours=2))
    event = ev.BridgeStarted(
        time=datetime(2025, 6, 1, 14, 0, tzinfo=berlin),
        cluster="c",
        group="g",
        source="operator",
        payload=ev.BridgeStartedPayload(
            member=MEMBER, generation=3, proof="pod-deleted", deadline=datetime(2025, 6, 1, 14, 2, tzinfo=berlin)
        ),
    )
    assert event.time == datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
    assert event.time.tzinfo is UTC
    assert event.payload.deadline.tzinfo is UTC
    encoded = json.loads(ev.encode_event(event))
    assert encoded["time"] == "2025-06-01T12:00:00Z"
    assert encoded["payload"]["deadline"] == "2025-06-01T12:02:00Z"


def test_key_is_the_group_id_and_the_topic_has_a_default() -> None:
    event = ev.parse_event((FIXTURES / "v1" / "member-removed.json").read_bytes())
    assert ev.event_key(event) == b"web"
    assert ev.EVENTS_TOPIC_DEFAULT == "vigil.events"


def test_events_are_immutable() -> None:
    event = ev.parse_event((FIXTURES / "v1" / "eviction-done.json").read_bytes())
    with pytest.raises(ValidationError):
        event.group = "other"  # type: ignore[misc]


# --- round trip over generated events -----------------------------------------------------------------------------

offsets = st.timedeltas(min_value=timedelta(hours=-23), max_value=timedelta(hours=23)).map(timezone)
aware = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=offsets)
text = st.text(max_size=20)
word = st.sampled_from(["beacon", "progress", "leave-group", "restart", "budget", "rejoined", "Stable", "new-value"])
count = st.integers(0, 2**31 - 1)
maybe_int = st.none() | st.integers(-(2**31), 2**31 - 1)
members = st.builds(ev.MemberRef, member_id=text, instance_id=st.none() | text, client_id=st.none() | text)
partitions = st.builds(ev.TopicPartition, topic=text, partition=count)

payloads: dict[type[Any], st.SearchStrategy[Any]] = {
    ev.StallDetected: st.builds(
        ev.StallPayload,
        member=members,
        signal=word,
        stalled_for_ms=count,
        stall_timeout_ms=st.integers(1, 2**31),
        generation=maybe_int,
        assigned_partitions=st.none() | count,
    ),
    ev.StallEnded: st.builds(ev.StallEndedPayload, member=members, stalled_for_ms=count),
    ev.EvictionRequested: st.builds(ev.EvictionPayload, member=members, action=word, reason=text),
    ev.EvictionDone: st.builds(
        ev.EvictionDonePayload, member=members, action=word, kafka_error=word, already_gone=st.booleans()
    ),
    ev.EvictionRefused: st.builds(
        ev.EvictionRefusedPayload, member=st.none() | members, action=word, cause=word, message=text
    ),
    ev.PoisonSuspected: st.builds(
        ev.PoisonSuspectedPayload,
        member=members,
        partitions=st.lists(
            st.builds(ev.SuspectPartition, topic=text, partition=count, committed_offset=st.none() | count), max_size=3
        ).map(tuple),
        message=text,
    ),
    ev.SystemicStall: st.builds(
        ev.SystemicStallPayload,
        stalled_members=count,
        members=count,
        threshold_percent=st.floats(0, 100, allow_nan=False),
    ),
    ev.BridgeStarted: st.builds(
        ev.BridgeStartedPayload,
        member=members,
        generation=st.integers(-(2**31), 2**31 - 1),
        proof=word,
        deadline=aware,
    ),
    ev.BridgeEnded: st.builds(
        ev.BridgeEndedPayload,
        member=members,
        outcome=word,
        heartbeats_sent=count,
        bridged_ms=count,
        kafka_error=st.none() | word,
    ),
    ev.RolloutStep: st.builds(
        ev.RolloutStepPayload,
        workload=text,
        target_revision=text,
        step=count,
        steps=count,
        phase=word,
        generation_before=maybe_int,
        generation_after=maybe_int,
        message=text,
    ),
    ev.MemberRemoved: st.builds(ev.MemberRemovedPayload, member=members, cause=word, by_instance_id_only=st.booleans()),
    ev.GroupSnapshot: st.builds(
        ev.GroupSnapshotPayload,
        state=word,
        protocol=st.sampled_from(["classic", "consumer"]),
        generation=maybe_int,
        coordinator=maybe_int,
        members=st.lists(
            st.builds(
                ev.SnapshotMember,
                member=members,
                host=text,
                pod=st.none() | text,
                assignment=st.lists(partitions, max_size=3).map(tuple),
            ),
            max_size=3,
        ).map(tuple),
        total_lag=st.none() | count,
    ),
}


def test_every_event_type_is_generated_below() -> None:
    assert set(payloads) == set(ev.EVENT_MODELS)


events = st.one_of(
    *(
        st.builds(
            model,
            schema_version=st.integers(1, 10),
            event_id=st.uuids(),
            time=aware,
            cluster=text,
            group=text,
            source=st.sampled_from(["sidecar", "operator", "report"]),
            namespace=st.none() | text,
            pod=st.none() | text,
            payload=payload,
        )
        for model, payload in payloads.items()
    )
)


@given(event=events)
def test_round_trip(event: ev.Event) -> None:
    data = ev.encode_event(event)
    assert ev.parse_event(data) == event
    assert ev.event_key(event) == event.group.encode()
    assert b"\n" not in data
