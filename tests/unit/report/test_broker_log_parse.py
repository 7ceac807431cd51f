"""The broker-log parser: real Kafka 4.1.1 lines (from this repo's test-artifacts broker logs), Kafka 3.9 lines
as the Scala coordinator formats them (core/.../group/GroupCoordinator.scala of the 3.9 branch), the causes, and
hypothesis properties (never raises; synthesized lines round-trip)."""

import datetime as dt
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vigil_spark.parse import broker_log as bl

P1 = "[GroupCoordinator id=1 topic=__consumer_offsets partition=1] "
P2 = "[GroupCoordinator id=1 topic=__consumer_offsets partition=2] "
P3 = "[GroupCoordinator id=1 topic=__consumer_offsets partition=3] "
GMM = " (org.apache.kafka.coordinator.group.GroupMetadataManager)"
S39 = " (kafka.coordinator.group.GroupCoordinator)"
SMOKE_M0 = "g-smoke-4d8fbd3d2d-m0-dcea2de8-ba67-4260-9414-1b6013e4dd58"
SMOKE_M1 = "g-smoke-4d8fbd3d2d-m1-811453f5-50bd-41e8-8625-35a468ae5698"
DESCRIBE_M1 = "g-describe-2b62692b35-m1-1742884f-e0d5-48a4-b7fa-b38a6dad94a1"

# (line, expected fields) — 4.1.1 lines are verbatim from test-artifacts/*/kafka/logs/kafka-1/server.log
REAL_41: list[tuple[str, dict[str, Any]]] = [
    (
        f"[2026-11-21 08:12:32,955] INFO {P1}Preparing to rebalance group g-smoke-4d8fbd3d2d in state "
        f"PreparingRebalance with old generation 0 (reason: Adding new member {SMOKE_M1} with group instance id "
        f"null; client reason: not provided).{GMM}",
        {"event": "rebalance-prepared", "group": "g-smoke-4d8fbd3d2d", "generation": 0, "state": "PreparingRebalance",
         "reason": f"Adding new member {SMOKE_M1} with group instance id null; client reason: not provided",
         "log_partition": 1, "node_id": 1},
    ),
    (
        f"[2026-11-21 08:12:35,358] INFO {P1}Preparing to rebalance group g-smoke-4d8fbd3d2d in state "
        f"PreparingRebalance with old generation 2 (reason: explicit `LeaveGroup` request for ({SMOKE_M0}) "
        f"members.).{GMM}",
        {"event": "rebalance-prepared", "generation": 2,
         "reason": f"explicit `LeaveGroup` request for ({SMOKE_M0}) members."},
    ),
    (
        f"[2026-11-21 08:22:02,594] INFO {P1}Preparing to rebalance group g-describe-2b62692b35 in state "
        f"PreparingRebalance with old generation 2 (reason: removing member {DESCRIBE_M1} on heartbeat "
        f"expiration.).{GMM}",
        {"event": "rebalance-prepared", "group": "g-describe-2b62692b35",
         "reason": f"removing member {DESCRIBE_M1} on heartbeat expiration."},
    ),
    (
        f"[2026-11-21 08:12:32,960] INFO {P1}Stabilized group g-smoke-4d8fbd3d2d generation 1 with 1 members.{GMM}",
        {"event": "stabilized", "group": "g-smoke-4d8fbd3d2d", "generation": 1, "members": 1},
    ),
    (
        f"[2026-11-21 08:12:35,745] INFO {P1}Group g-smoke-4d8fbd3d2d with generation 3 is now empty.{GMM}",
        {"event": "empty", "group": "g-smoke-4d8fbd3d2d", "generation": 3, "members": 0},
    ),
    (
        f"[2026-11-21 08:12:32,969] INFO {P1}Assignment received from leader {SMOKE_M1} for group g-smoke-4d8fbd3d2d "
        f"for generation 1. The group has 1 members, 0 of which are static.{GMM}",
        {"event": "assignment-received", "member_id": SMOKE_M1, "generation": 1, "members": 1},
    ),
    (
        f"[2026-11-21 08:22:02,593] INFO {P1}Member {DESCRIBE_M1} in group g-describe-2b62692b35 has failed, "
        f"removing it from the group.{GMM}",
        {"event": "member-failed", "member_id": DESCRIBE_M1, "group": "g-describe-2b62692b35"},
    ),
    (
        f"[2026-11-21 08:12:35,357] INFO {P1}[Group g-smoke-4d8fbd3d2d] Member {SMOKE_M0} has left group through "
        f"explicit `LeaveGroup` request; client reason: not provided{GMM}",
        {"event": "member-left", "member_id": SMOKE_M0, "reason": "not provided", "group": "g-smoke-4d8fbd3d2d"},
    ),
    (
        f"[2026-11-21 08:38:52,807] INFO {P3}[Group g-evict-5f4b2777ed] Member "
        "g-evict-5f4b2777ed-m0-9681ba3c-0a84-483a-92a1-86ec69514b26 has left group through explicit `LeaveGroup` "
        f"request; client reason: vigil: test eviction of a stalled member{GMM}",
        {"event": "member-left", "reason": "vigil: test eviction of a stalled member"},
    ),
    (
        f"[2026-11-21 08:12:32,944] INFO {P1}Dynamic member with unknown member id joins group g-smoke-4d8fbd3d2d in "
        f"Empty state. Created a new member id {SMOKE_M1} and requesting the member to rejoin with this id.{GMM}",
        {"event": "member-joining", "member_id": SMOKE_M1, "state": "Empty"},
    ),
    (
        f"[2026-11-21 08:12:32,953] INFO {P1}Pending dynamic member with id {SMOKE_M1} joins group "
        f"g-smoke-4d8fbd3d2d in Empty state. Adding to the group now.{GMM}",
        {"event": "member-joined", "member_id": SMOKE_M1, "group": "g-smoke-4d8fbd3d2d"},
    ),
    (
        f"[2026-11-21 08:38:54,233] INFO {P2}Static member with groupInstanceId=pod-1 and unknown member id joins "
        "group g-static-7c54e33704 in Empty state. Created a new member id pod-1-9ec673d1-1108-4a65-9fde-e9723307e50f "
        f"for this member and added to the group.{GMM}",
        {"event": "static-member-joined", "instance_id": "pod-1",
         "member_id": "pod-1-9ec673d1-1108-4a65-9fde-e9723307e50f", "group": "g-static-7c54e33704"},
    ),
    (
        f"[2026-11-21 08:38:54,587] INFO {P2}Static member with groupInstanceId=pod-0 and unknown member id joins "
        "group g-static-7c54e33704 in Stable state. Replacing previously mapped member "
        f"pod-0-138aa0f4-71f2-4e3b-a3e5-a762e2ec5c83 with this groupInstanceId.{GMM}",
        {"event": "static-member-replaced", "instance_id": "pod-0", "state": "Stable",
         "member_id": "pod-0-138aa0f4-71f2-4e3b-a3e5-a762e2ec5c83"},
    ),
    (
        f"[2026-11-21 08:12:13,876] INFO [GroupCoordinator id=2 topic=__consumer_offsets partition=3] Loaded classic "
        f"group g-failover-bc9274a4d2 with 3 members.{GMM}",
        {"event": "group-loaded", "group": "g-failover-bc9274a4d2", "members": 3, "reason": "classic", "node_id": 2},
    ),
    (
        f"[2026-11-21 08:45:11,210] INFO {P1}[GroupId=g-smoke-4d8fbd3d2d] Unloading group metadata for generation "
        f"3.{GMM}",
        {"event": "group-unloaded", "group": "g-smoke-4d8fbd3d2d", "generation": 3},
    ),
    (
        f"[2026-11-21 08:53:09,515] INFO {P1}[GroupId=g-848-7eb3c1d1fe] Unloaded group metadata for group epoch "
        f"4.{GMM}",
        {"event": "group-unloaded", "group": "g-848-7eb3c1d1fe", "generation": 4},
    ),
    (
        f"[2026-11-21 08:38:50,847] INFO {P3}[GroupId g-848-ea64d113b9] Bumped group epoch to 1 with metadata hash "
        f"1351572260775807256.{GMM}",
        {"event": "epoch-bumped", "group": "g-848-ea64d113b9", "generation": 1},
    ),
    (
        f"[2026-11-21 08:53:08,851] INFO {P1}[GroupId g-848-7eb3c1d1fe] Bumped group epoch to 4 with metadata hash "
        f"0.{GMM}",
        {"event": "epoch-bumped", "generation": 4},
    ),
    (
        f"[2026-11-21 08:38:50,811] INFO {P3}[GroupId g-848-ea64d113b9] Member 1lWGuFhCTsWbv7zFX9gv0Q joins the "
        f"consumer group using the consumer protocol.{GMM}",
        {"event": "consumer-member-joined", "member_id": "1lWGuFhCTsWbv7zFX9gv0Q", "reason": "consumer"},
    ),
    (
        f"[2026-11-21 08:38:51,945] INFO {P3}[GroupId g-848-ea64d113b9] Member ZU9r4d6uQ5GyZFlPWGZ3hQ left the "
        f"consumer group.{GMM}",
        {"event": "consumer-member-left", "member_id": "ZU9r4d6uQ5GyZFlPWGZ3hQ", "reason": None},
    ),
    (
        f"[2026-11-21 08:40:51,800] INFO {P3}[GroupId g-rm848-a25b9acfe5] Dynamic member 46T/wn2rSpue2niRRUVvOg has "
        f"left group through explicit `LeaveGroup` request; client reason: vigil: kip-848 stall{GMM}",
        {"event": "consumer-member-left", "member_id": "46T/wn2rSpue2niRRUVvOg", "reason": "vigil: kip-848 stall"},
    ),
    (
        f"[2026-11-21 08:38:50,854] INFO {P3}[GroupId g-848-ea64d113b9] Computed a new target assignment for epoch 1 "
        f"with 'uniform' assignor in 5ms.{GMM}",
        {"event": "target-assignment-computed", "generation": 1, "reason": "uniform"},
    ),
]  # fmt: skip

# Kafka 3.9 (Scala coordinator): formats from the 3.9 branch's GroupCoordinator.scala / GroupMetadataManager.scala
T39 = "[2024-11-04 10:15:42,007] INFO [GroupCoordinator 2]: "
SOURCE_39: list[tuple[str, dict[str, Any]]] = [
    (
        f"{T39}Preparing to rebalance group orders in state PreparingRebalance with old generation 4 "
        "(__consumer_offsets-12) (reason: Adding new member orders-0-5c1d with group instance id None; client "
        f"reason: rebalance failed due to MemberIdRequiredException){S39}",
        {"event": "rebalance-prepared", "group": "orders", "generation": 4, "log_partition": 12, "node_id": 2,
         "reason": "Adding new member orders-0-5c1d with group instance id None; client reason: rebalance failed "
                   "due to MemberIdRequiredException"},
    ),
    (
        f"{T39}Preparing to rebalance group orders in state PreparingRebalance with old generation 5 "
        "(__consumer_offsets-12) (reason: Removing member orders-0-5c1d on LeaveGroup; client reason: the consumer "
        f"is being closed){S39}",
        {"event": "rebalance-prepared", "generation": 5,
         "reason": "Removing member orders-0-5c1d on LeaveGroup; client reason: the consumer is being closed"},
    ),
    (
        f"{T39}Stabilized group orders generation 5 (__consumer_offsets-12) with 3 members{S39}",
        {"event": "stabilized", "group": "orders", "generation": 5, "members": 3, "log_partition": 12},
    ),
    (
        f"{T39}Group orders with generation 6 is now empty (__consumer_offsets-12){S39}",
        {"event": "empty", "group": "orders", "generation": 6, "members": 0, "log_partition": 12},
    ),
    (
        f"{T39}Member MemberMetadata(memberId=pod-0-77aa, groupInstanceId=Some(pod-0), clientId=orders-0, "
        "clientHost=/10.0.0.7, sessionTimeoutMs=45000, rebalanceTimeoutMs=300000, supportedProtocols=List(range)) "
        f"has left group orders through explicit `LeaveGroup`; client reason: the consumer is being closed{S39}",
        {"event": "member-left", "member_id": "pod-0-77aa", "instance_id": "pod-0", "group": "orders",
         "reason": "the consumer is being closed"},
    ),
    (
        f"{T39}Member orders-1-9f3e in group orders has failed, removing it from the group{S39}",
        {"event": "member-failed", "member_id": "orders-1-9f3e", "group": "orders"},
    ),
    (
        f"{T39}Pending member orders-2-11 in group orders has been removed after session timeout expiration.{S39}",
        {"event": "pending-member-expired", "member_id": "orders-2-11"},
    ),
    (
        f"{T39}Pending member with memberId=orders-2-11 has left group orders through explicit `LeaveGroup` "
        f"request{S39}",
        {"event": "pending-member-left", "member_id": "orders-2-11", "group": "orders"},
    ),
    (
        f"{T39}Dynamic member with unknown member id joins group orders in Stable state. Created a new member id "
        f"orders-3-c0 and request the member to rejoin with this id.{S39}",
        {"event": "member-joining", "member_id": "orders-3-c0", "state": "Stable"},
    ),
    (
        f"{T39}Dynamic Member with unknown member id joins group orders in Empty state. Created a new member id "
        f"orders-3-c1 for this member and add to the group.{S39}",
        {"event": "member-joining", "member_id": "orders-3-c1"},
    ),
    (
        f"{T39}Static member with groupInstanceId=pod-0 and unknown member id joins group orders in Stable state. "
        f"Created a new member id pod-0-88 for this member and add to the group.{S39}",
        {"event": "static-member-joined", "member_id": "pod-0-88", "instance_id": "pod-0"},
    ),
    (
        f"{T39}Group orders removed dynamic members who haven't joined: Set(orders-4-aa){S39}",
        {"event": "dynamic-members-removed", "group": "orders", "reason": "Set(orders-4-aa)"},
    ),
    (
        f"{T39}Loading group metadata for orders with generation 7{S39}",
        {"event": "group-loaded", "group": "orders", "generation": 7},
    ),
    (
        f"{T39}Unloading group metadata for orders with generation 7{S39}",
        {"event": "group-unloaded", "group": "orders", "generation": 7},
    ),
    (
        "[2024-11-04 10:15:42,007] INFO [GroupMetadataManager brokerId=2] Group orders transitioned to Dead in "
        "generation 7 (kafka.coordinator.group.GroupMetadataManager)",
        {"event": "group-dead", "group": "orders", "generation": 7, "node_id": 2},
    ),
    # KIP-848 lines of the Java coordinator (3.9 when enabled, 4.0): GroupMetadataManager.java
    (
        f"[2024-11-04 10:15:42,007] INFO {P3}[GroupId g1] Member qZ4 fenced from the group because the member "
        f"session expired..{GMM}",
        {"event": "consumer-member-fenced", "member_id": "qZ4", "reason": "the member session expired"},
    ),
    (
        f"[2024-11-04 10:15:42,007] INFO {P3}[GroupId g1] Static Member qZ5 with instance id pod-2 temporarily left "
        f"the consumer group.{GMM}",
        {"event": "consumer-member-temporarily-left", "member_id": "qZ5", "instance_id": "pod-2"},
    ),
    (
        f"[2024-11-04 10:15:42,007] INFO {P3}[GroupId g1] Bumped group epoch to 12.{GMM}",
        {"event": "epoch-bumped", "group": "g1", "generation": 12},
    ),
    (
        f"[2024-11-04 10:15:42,007] INFO {P3}[GroupId g1] Static member qZ6 with instance id pod-3 joins the consumer "
        f"group using the classic protocol.{GMM}",
        {"event": "consumer-member-joined", "member_id": "qZ6", "instance_id": "pod-3", "reason": "classic"},
    ),
    # share and streams groups (4.4.0, real lines of test_kafka_formatters' broker)
    (
        f"[2026-11-27 18:25:46,107] INFO {P3}[GroupId g-fmtshare-028b163846] Member 4Q9MWg73TMKdtwHK/O1ciQ joins the "
        f"share group using the share protocol.{GMM}",
        {"event": "share-member-joined", "group": "g-fmtshare-028b163846", "member_id": "4Q9MWg73TMKdtwHK/O1ciQ"},
    ),
    (
        f"[2026-11-27 18:25:47,107] INFO {P3}[GroupId g-fmtshare-028b163846] Member 4Q9MWg73TMKdtwHK/O1ciQ left the "
        f"share group.{GMM}",
        {"event": "share-member-left", "group": "g-fmtshare-028b163846", "member_id": "4Q9MWg73TMKdtwHK/O1ciQ"},
    ),
    (
        f"[2026-11-27 18:25:48,107] INFO {P3}[GroupId g-fmtstreams-8f80c014f4][MemberId zOyKK1drTW2zqsDnJBjTBg] "
        f"Member joins the streams group.{GMM}",
        {"event": "streams-member-joined", "group": "g-fmtstreams-8f80c014f4", "member_id": "zOyKK1drTW2zqsDnJBjTBg"},
    ),
    (
        f"[2026-11-27 18:25:49,107] INFO {P3}[GroupId g-fmtstreams-8f80c014f4][MemberId zOyKK1drTW2zqsDnJBjTBg] "
        f"Bumped streams group epoch to 2 with metadata hash 4663757555955423538 and validated topic epoch 0.{GMM}",
        {"event": "streams-epoch-bumped", "group": "g-fmtstreams-8f80c014f4", "generation": 2},
    ),
    (
        f"[2026-11-27 18:25:50,107] INFO {P3}[GroupId g-fmtstreams-8f80c014f4][MemberId zOyKK1drTW2zqsDnJBjTBg] "
        f"Member zOyKK1drTW2zqsDnJBjTBg left the streams group.{GMM}",
        {"event": "streams-member-left", "group": "g-fmtstreams-8f80c014f4", "member_id": "zOyKK1drTW2zqsDnJBjTBg",
         "instance_id": None},
    ),
    # ... and from the 4.4 source (GroupMetadataManager.java): static streams members, a fenced one
    (
        f"[2026-11-27 18:25:51,107] INFO {P3}[GroupId app][MemberId m2] Static member m2 with instance id pod-1 "
        f"temporarily left the streams group.{GMM}",
        {"event": "streams-member-temporarily-left", "group": "app", "member_id": "m2", "instance_id": "pod-1"},
    ),
    (
        f"[2026-11-27 18:25:52,107] INFO {P3}[GroupId app][MemberId m3] Static member with instance id pod-1 "
        f"re-joins the streams group using the streams protocol. Created a new member m3 to replace the existing "
        f"member m2.{GMM}",
        {"event": "streams-member-replaced", "group": "app", "member_id": "m3", "instance_id": "pod-1"},
    ),
    (
        f"[2026-11-27 18:25:53,107] INFO {P3}[GroupId app] Streams member m3 fenced from the group because the "
        f"member session expired..{GMM}",
        {"event": "streams-member-fenced", "group": "app", "member_id": "m3", "reason": "the member session expired"},
    ),
]  # fmt: skip


@pytest.mark.parametrize(("line", "expected"), REAL_41 + SOURCE_39)
def test_known_lines_parse_to_their_fields(line: str, expected: dict[str, Any]) -> None:
    parsed = bl.parse_line(line)
    assert isinstance(parsed, bl.ParsedLine), parsed
    for field, value in expected.items():
        assert getattr(parsed, field) == value, field
    assert parsed.event in bl.EVENTS


def test_every_event_of_the_vocabulary_has_a_sample() -> None:
    samples = {bl.parse_line(line).event for line, _ in REAL_41 + SOURCE_39}  # type: ignore[union-attr]
    missing = set(bl.EVENTS) - samples - {"static-rejoin-no-rebalance", "consumer-member-replaced", "group-dead"}
    assert not missing  # the three left out are covered by their own tests below


def test_timestamps_default_to_utc_and_honour_the_configured_zone() -> None:
    line = REAL_41[3][0]
    utc = bl.parse_line(line)
    berlin = bl.parse_line(line, bl.LogFormat(timezone="Europe/Berlin"))
    assert isinstance(utc, bl.ParsedLine)
    assert isinstance(berlin, bl.ParsedLine)
    assert utc.ts == dt.datetime(2026, 11, 21, 8, 12, 32, 960000, tzinfo=dt.UTC)
    assert utc.ts - berlin.ts == dt.timedelta(hours=1)  # CET = UTC+1 in November
    zoned = bl.parse_line(line.replace("08:12:32,960]", "08:12:32.960+02:00]"), bl.LogFormat(timezone="Asia/Tokyo"))
    assert isinstance(zoned, bl.ParsedLine)
    assert zoned.ts == utc.ts - dt.timedelta(hours=2)  # a zone in the line wins over the configured one


def test_a_configured_line_pattern_reads_other_layouts() -> None:
    fmt = bl.LogFormat(line_pattern=r"^(?P<ts>\S+) (?P<level>\w+) +\[[^\]]*\] (?P<message>.*)$")
    line = f"2026-11-21T08:12:32.960Z INFO  [group-coordinator-event-processor-1] {P1}Stabilized group g1 generation 9 with 2 members."  # noqa: E501
    parsed = bl.parse_line(line, fmt)
    assert isinstance(parsed, bl.ParsedLine)
    assert (parsed.event, parsed.group, parsed.generation, parsed.members) == ("stabilized", "g1", 9, 2)
    assert parsed.ts == dt.datetime(2026, 11, 21, 8, 12, 32, 960000, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("fmt", "field"),
    [
        (bl.LogFormat(line_pattern="(unclosed"), "line_pattern"),
        (bl.LogFormat(line_pattern=r"^(?P<ts>\S+) (?P<message>.*)$"), "line_pattern"),
        (bl.LogFormat(timezone="Mars/Olympus"), "timezone"),
    ],
)
def test_a_bad_format_is_refused_naming_the_field(fmt: bl.LogFormat, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        bl.check_format(fmt)


def test_relevant_lines_nobody_understands_are_unparsed_not_dropped() -> None:
    garbled = f"[2026-11-21 08:12:32,960] INFO {P1}Stabilised the group g1 at generation 9 somehow.{GMM}"
    assert isinstance(bl.parse_line(garbled), bl.Unparsed)
    wrong_layout = f"2026-11-21 08:12:32 INFO {P1}Stabilized group g1 generation 9 with 2 members."
    unparsed = bl.parse_line(wrong_layout)
    assert isinstance(unparsed, bl.Unparsed)
    assert "line_pattern" in unparsed.why
    noise = "[2026-11-21 08:12:32,960] INFO [Broker id=1] Leader __consumer_offsets-0 starts (state.change.logger)"
    assert bl.parse_line(noise) is None
    other = f"[2026-11-21 08:12:32,960] INFO [GroupCoordinator id=1] Startup complete.{GMM}"
    assert bl.parse_line(other) is None


def test_a_static_rejoin_without_rebalance_takes_the_group_of_the_replacement_before_it() -> None:
    replaced = REAL_41[12][0]
    no_rebalance = (
        f"[2026-11-21 08:38:54,587] INFO {P2}Static member which joins during Stable stage and doesn't affect the "
        f"selected protocol will not trigger a rebalance.{GMM}"
    )
    other_partition = no_rebalance.replace("partition=2]", "partition=3]")
    parsed = list(bl.parse_lines([replaced, other_partition, no_rebalance]))
    assert [p.event for p in parsed if isinstance(p, bl.ParsedLine)] == [
        "static-member-replaced",
        "static-rejoin-no-rebalance",
        "static-rejoin-no-rebalance",
    ]
    assert [p.group for p in parsed if isinstance(p, bl.ParsedLine)] == [
        "g-static-7c54e33704",
        None,  # partition 3 saw no replacement: the group stays unknown
        "g-static-7c54e33704",
    ]
    scala = f"{T39}Static member which joins during Stable stage and doesn't affect selectProtocol will not trigger rebalance.{S39}"  # noqa: E501
    assert bl.parse_line(scala).event == "static-rejoin-no-rebalance"  # type: ignore[union-attr]


def test_kip848_static_replacement_and_dead_groups() -> None:
    replaced = bl.parse_line(
        f"[2026-11-21 08:38:54,587] INFO {P2}[GroupId g1] Static member with instance id pod-0 re-joins the consumer "
        f"group using the consumer protocol. Created a new member Ab1 to replace the existing member Zz9.{GMM}"
    )
    assert isinstance(replaced, bl.ParsedLine)
    assert (replaced.event, replaced.member_id, replaced.instance_id) == ("consumer-member-replaced", "Ab1", "pod-0")
    dead = bl.parse_line(f"[2026-11-21 08:38:54,587] INFO {P2}Group g1 is dead, skipping rebalance stage.{GMM}")
    assert isinstance(dead, bl.ParsedLine)
    assert (dead.event, dead.group) == ("group-dead", "g1")


# --- causes -----------------------------------------------------------------------------------------------------

CAUSES = [
    ("Adding new member m-1 with group instance id null; client reason: not provided", "joined", "member-added"),
    ("Adding new member pod-0-1 with group instance id Some(pod-0); client reason: x", "joined", "member-added"),
    ("Updating metadata for member m-1 during Stable; client reason: not provided", "metadata-change",
     "member-updated"),
    ("Leader m-1 re-joining group during Stable; client reason: not provided", "metadata-change", "leader-rejoined"),
    ("Updating metadata for static member pod-0-2 with instance id pod-0; client reason: not provided",
     "static-replacement", "static-member-updated"),
    ("Group's selectedProtocol will change because static member pod-0-2 with instance id pod-0 joined with change "
     "of protocol; client reason: not provided", "static-replacement", "protocol-change"),
    ("removing member m-1 on heartbeat expiration.", "heartbeat-expiry", "heartbeat-expiry"),
    ("removing member m-1 on heartbeat expiration", "heartbeat-expiry", "heartbeat-expiry"),
    ("Removing [m-1, m-2] on pending sync request expiration", "heartbeat-expiry", "pending-sync-expiry"),
    ("explicit `LeaveGroup` request for (m-1) members.", "left", "leave-group"),
    ("Removing member m-1 on LeaveGroup; client reason: the consumer is being closed", "left", "leave-group"),
    ("Removing member m-1 on LeaveGroup; client reason: consumer poll timeout has expired.", "poll-timeout",
     "leave-group"),
    ("Removing member m-1 on LeaveGroup; client reason: vigil: no poll for 42.1s (stall timeout 30s)",
     "evicted-by-vigil", "leave-group"),
    ("Freshly-loaded group g1 (size 9) is over capacity 8. Rebalancing in order to give a chance for consumers to "
     "commit offsets", "unknown", "over-capacity"),
    ("Something a future broker says", "unknown", "unrecognized"),
]  # fmt: skip


#: The member ids each reason of `CAUSES` names as its trigger.
TRIGGERS = {
    "Adding new member m-1 with group instance id null; client reason: not provided": ("m-1",),
    "Adding new member pod-0-1 with group instance id Some(pod-0); client reason: x": ("pod-0-1",),
    "Updating metadata for member m-1 during Stable; client reason: not provided": ("m-1",),
    "Leader m-1 re-joining group during Stable; client reason: not provided": ("m-1",),
    "Updating metadata for static member pod-0-2 with instance id pod-0; client reason: not provided": ("pod-0-2",),
    "Group's selectedProtocol will change because static member pod-0-2 with instance id pod-0 joined with change "
    "of protocol; client reason: not provided": ("pod-0-2",),
    "removing member m-1 on heartbeat expiration.": ("m-1",),
    "removing member m-1 on heartbeat expiration": ("m-1",),
    "Removing [m-1, m-2] on pending sync request expiration": ("m-1", "m-2"),
    "explicit `LeaveGroup` request for (m-1) members.": ("m-1",),
    "Removing member m-1 on LeaveGroup; client reason: the consumer is being closed": ("m-1",),
    "Removing member m-1 on LeaveGroup; client reason: consumer poll timeout has expired.": ("m-1",),
    "Removing member m-1 on LeaveGroup; client reason: vigil: no poll for 42.1s (stall timeout 30s)": ("m-1",),
}


@pytest.mark.parametrize(("reason", "cause", "detail"), CAUSES)
def test_rebalance_reasons_name_their_trigger_members(reason: str, cause: str, detail: str) -> None:
    assert bl.trigger_members(reason) == TRIGGERS.get(reason, ()), (cause, detail)


def test_a_leave_of_several_members_names_them_all() -> None:
    assert bl.trigger_members("explicit `LeaveGroup` request for (a-1, b-2, c-3) members.") == ("a-1", "b-2", "c-3")
    assert bl.trigger_members(None) == ()


@pytest.mark.parametrize(("reason", "cause", "detail"), CAUSES)
def test_rebalance_reasons_map_to_causes(reason: str, cause: str, detail: str) -> None:
    assert bl.reason_cause(reason) == (cause, detail)
    assert cause in bl.CAUSES


@pytest.mark.parametrize(
    ("event", "reason", "cause"),
    [
        ("consumer-member-joined", "consumer", "joined"),
        ("consumer-member-replaced", None, "static-replacement"),
        ("consumer-member-left", None, "left"),
        ("consumer-member-left", "vigil: kip-848 stall", "evicted-by-vigil"),
        ("consumer-member-fenced", "the member session expired", "heartbeat-expiry"),
        ("consumer-member-fenced", "it failed to transition from epoch 4 within 300000ms", "poll-timeout"),
        ("consumer-member-fenced", "the classic member failed to join within the rebalance timeout", "poll-timeout"),
        ("consumer-member-fenced", "of something new", "unknown"),
    ],
)
def test_kip848_member_events_map_to_causes(event: str, reason: str | None, cause: str) -> None:
    assert bl.event_cause(event, reason) == cause


# --- properties -------------------------------------------------------------------------------------------------

NAMES = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,40}", fullmatch=True)
GENERATIONS = st.integers(min_value=0, max_value=2**31 - 1)
TIMES = st.datetimes(
    min_value=dt.datetime(2000, 1, 1), max_value=dt.datetime(2099, 12, 31), timezones=st.just(dt.UTC)
).map(lambda t: t.replace(microsecond=t.microsecond // 1000 * 1000))


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_arbitrary_text_never_raises(text: str) -> None:
    assert bl.parse_line(text) is None or isinstance(bl.parse_line(text), bl.ParsedLine | bl.Unparsed)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([P1, "[GroupCoordinator 3]: ", "[GroupId g] ", ""]), st.text())
def test_arbitrary_coordinator_messages_never_raise(prefix: str, message: str) -> None:
    result = bl.parse_line(f"[2026-11-21 08:12:32,960] INFO {prefix}{message}{GMM}")
    assert result is None or isinstance(result, bl.ParsedLine | bl.Unparsed)
    if isinstance(result, bl.ParsedLine):
        assert result.event in bl.EVENTS


def _stamp(ts: dt.datetime) -> str:
    return ts.strftime("%Y-%m-%d %H:%M:%S,") + f"{ts.microsecond // 1000:03d}"


@settings(max_examples=200, deadline=None)
@given(TIMES, NAMES, GENERATIONS, st.integers(min_value=0, max_value=10_000), st.integers(0, 49), st.booleans())
def test_synthesized_stabilized_lines_round_trip(  # noqa: PLR0917 - one argument per strategy
    ts: dt.datetime, group: str, generation: int, members: int, partition: int, scala: bool
) -> None:
    if scala:
        line = (
            f"[{_stamp(ts)}] INFO [GroupCoordinator 7]: Stabilized group {group} generation {generation} "
            f"(__consumer_offsets-{partition}) with {members} members{S39}"
        )
    else:
        line = (
            f"[{_stamp(ts)}] INFO [GroupCoordinator id=7 topic=__consumer_offsets partition={partition}] Stabilized "
            f"group {group} generation {generation} with {members} members.{GMM}"
        )
    parsed = bl.parse_line(line)
    assert isinstance(parsed, bl.ParsedLine)
    assert (parsed.ts, parsed.event, parsed.group, parsed.generation, parsed.members) == (
        ts,
        "stabilized",
        group,
        generation,
        members,
    )
    assert (parsed.node_id, parsed.log_partition) == (7, partition)


@settings(max_examples=200, deadline=None)
@given(TIMES, NAMES, NAMES, GENERATIONS, st.text(alphabet=st.characters(blacklist_categories=["Cc", "Cs"])))
def test_synthesized_leave_lines_round_trip_with_their_client_reason(
    ts: dt.datetime, group: str, member: str, generation: int, reason: str
) -> None:
    left = f"[{_stamp(ts)}] INFO {P1}[Group {group}] Member {member} has left group through explicit `LeaveGroup` request; client reason: {reason}{GMM}"  # noqa: E501
    prepared = (
        f"[{_stamp(ts)}] INFO {P1}Preparing to rebalance group {group} in state PreparingRebalance with old "
        f"generation {generation} (reason: explicit `LeaveGroup` request for ({member}) members.).{GMM}"
    )
    leave, prep = bl.parse_line(left), bl.parse_line(prepared)
    assert isinstance(leave, bl.ParsedLine)
    assert isinstance(prep, bl.ParsedLine)
    assert (leave.event, leave.group, leave.member_id) == ("member-left", group, member)
    assert (leave.reason or "").strip() == reason.strip()  # surrounding whitespace is the log format's, not the reason
    assert (prep.event, prep.group, prep.generation) == ("rebalance-prepared", group, generation)
    assert bl.reason_cause(prep.reason)[0] == "left"


@settings(max_examples=200, deadline=None)
@given(TIMES, NAMES, st.integers(min_value=1, max_value=2**31 - 1), st.one_of(st.none(), st.integers()))
def test_synthesized_epoch_bumps_round_trip(ts: dt.datetime, group: str, epoch: int, metadata_hash: int | None) -> None:
    tail = f" with metadata hash {metadata_hash}" if metadata_hash is not None else ""
    parsed = bl.parse_line(f"[{_stamp(ts)}] INFO {P3}[GroupId {group}] Bumped group epoch to {epoch}{tail}.{GMM}")
    assert isinstance(parsed, bl.ParsedLine)
    assert (parsed.ts, parsed.event, parsed.group, parsed.generation) == (ts, "epoch-bumped", group, epoch)
