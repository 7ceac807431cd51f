"""ShareGroupDescribe, StreamsGroupDescribe and DescribeShareGroupOffsets answers, encoded by kafka-python from
vigil's schemas and read back as the census reads them: members, states, epochs, what a streams member's active tasks
read, and a share group's lag."""

import uuid
from typing import Any

from vigil_core.kafka import wire
from vigil_core.kafka.census_plan import Description, ShareOffsets
from vigil_core.kafka.model import MemberView, TopicPartitionRef

SHARE = wire.ShareGroupDescribeResponse
STREAMS = wire.StreamsGroupDescribeResponse


def round_trip(response: Any, version: int) -> Any:
    """`response` as the broker's bytes, then decoded: what the wire gets."""
    encoded = response.encode(version=version)
    return type(response).decode(encoded, version=version)


def tp(topic: str, partition: int) -> TopicPartitionRef:
    return TopicPartitionRef(topic, partition)


def test_a_share_group_is_read_with_its_members_and_their_partitions() -> None:
    group, member = SHARE.DescribedGroup, SHARE.DescribedGroup.Member
    owned = member.Assignment(
        topic_partitions=[
            member.Assignment.TopicPartitions(topic_id=uuid.uuid4(), topic_name="orders", partitions=[2, 0])
        ]
    )
    answer = SHARE(
        throttle_time_ms=0,
        groups=[
            group(
                error_code=0, error_message=None, group_id="s", group_state="Stable", group_epoch=4,
                assignment_epoch=4, assignor_name="simple",
                members=[member(member_id="m1", rack_id=None, member_epoch=4, client_id="c1", client_host="/10.0.0.1",
                                subscribed_topic_names=["orders"], assignment=owned)],
                authorized_operations=-2147483648,
            ),
            group(error_code=69, error_message="Group t is not a share group.", group_id="t", group_state="",
                  group_epoch=-1, assignment_epoch=-1, assignor_name="", members=[],
                  authorized_operations=-2147483648),
        ],
    )  # fmt: skip
    read = wire._share_groups(round_trip(answer, 1))  # noqa: SLF001 - the reader is the unit under test
    assert read["s"] == Description(
        code=0,
        state="Stable",
        assignor="simple",
        members=(MemberView("m1", None, "c1", "/10.0.0.1", (tp("orders", 0), tp("orders", 2))),),
        epoch=4,
        member_epochs={"m1": 4},
    )
    assert (read["t"].code, read["t"].message, read["t"].members) == (69, "Group t is not a share group.", ())


def test_a_streams_member_owns_the_partitions_its_active_tasks_read() -> None:
    group = STREAMS.DescribedGroup
    member, topology = group.Member, group.Topology
    info = topology.Subtopology.TopicInfo

    def tasks(*pairs: tuple[str, list[int]]) -> list[Any]:
        return [member.Assignment.TaskIds(subtopology_id=s, partitions=p) for s, p in pairs]

    def one(member_id: str, instance: str | None, active: list[Any], standby: list[Any]) -> Any:
        assignment = member.Assignment(active_tasks=active, standby_tasks=standby, warmup_tasks=[])
        return member(
            member_id=member_id, member_epoch=7, instance_id=instance, rack_id=None, client_id=f"c-{member_id}",
            client_host="/10.0.0.2", topology_epoch=1, process_id="p", user_endpoint=None, client_tags=[],
            task_offsets=[], task_end_offsets=[], assignment=assignment, target_assignment=assignment,
            is_classic=False,
        )  # fmt: skip

    subtopologies = [
        topology.Subtopology(subtopology_id="0", source_topics=["clicks"], repartition_sink_topics=["app-rep"],
                             state_changelog_topics=[], repartition_source_topics=[]),
        topology.Subtopology(subtopology_id="1", source_topics=[], repartition_sink_topics=[],
                             state_changelog_topics=[info(name="app-store-changelog", partitions=2,
                                                          replication_factor=1, topic_configs=[])],
                             repartition_source_topics=[info(name="app-rep", partitions=2, replication_factor=1,
                                                             topic_configs=[])]),
    ]  # fmt: skip
    answer = STREAMS(
        throttle_time_ms=0,
        groups=[
            group(
                error_code=0, error_message=None, group_id="app", group_state="Stable", group_epoch=7,
                assignment_epoch=7, topology=topology(epoch=1, subtopologies=subtopologies),
                members=[one("a", "app-0", tasks(("0", [1]), ("1", [0])), tasks(("1", [1]))),
                         one("b", None, tasks(("0", [0])), [])],
                authorized_operations=-2147483648,
            ),
            group(error_code=0, error_message=None, group_id="waiting", group_state="NotReady", group_epoch=1,
                  assignment_epoch=0, topology=None, members=[one("c", None, tasks(("0", [0])), [])],
                  authorized_operations=-2147483648),
        ],
    )  # fmt: skip
    read = wire._streams_groups(round_trip(answer, 0))  # noqa: SLF001 - the reader is the unit under test
    app = read["app"]
    assert (app.code, app.state, app.epoch, app.member_epochs) == (0, "Stable", 7, {"a": 7, "b": 7})
    assert app.members == (
        MemberView("a", "app-0", "c-a", "/10.0.0.2", (tp("app-rep", 0), tp("clicks", 1))),  # standby: no input
        MemberView("b", None, "c-b", "/10.0.0.2", (tp("clicks", 0),)),
    )
    # no topology yet (source topics missing): its members read nothing
    assert read["waiting"].state == "NotReady"
    assert [m.assignment for m in read["waiting"].members] == [()]


def test_a_share_group_s_lag_is_read_per_share_partition_leaving_out_what_the_broker_could_not_say() -> None:
    offsets = wire.DescribeShareGroupOffsetsResponse
    group, topic = offsets.ResponseGroup, offsets.ResponseGroup.ResponseTopic
    part = topic.ResponsePartition

    def partition(index: int, lag: int, error: int = 0) -> Any:
        return part(partition_index=index, start_offset=5, leader_epoch=0, lag=lag, error_code=error,
                    error_message=None)  # fmt: skip

    answer = offsets(
        throttle_time_ms=0,
        groups=[
            group(group_id="s", error_code=0, error_message=None, topics=[
                topic(topic_name="orders", topic_id=uuid.uuid4(),
                      partitions=[partition(0, 7), partition(1, 0), partition(2, -1), partition(3, 9, error=3)]),
            ]),
            group(group_id="u", error_code=69, error_message="Group u is not a share group.", topics=[]),
        ],
    )  # fmt: skip
    read = wire._share_offsets(round_trip(answer, 1))  # noqa: SLF001 - the reader is the unit under test
    assert read["s"] == ShareOffsets(0, {tp("orders", 0): 7, tp("orders", 1): 0})
    assert read["u"] == ShareOffsets(69, {}, "Group u is not a share group.")


def test_the_share_lag_request_asks_every_share_partition_of_each_group() -> None:
    request = wire.DescribeShareGroupOffsetsRequest
    asked = request(groups=[request.RequestGroup(group_id=g, topics=None) for g in ("a", "b")])
    back = type(asked).decode(asked.encode(version=1), version=1)
    assert [(g.group_id, g.topics) for g in back.groups] == [("a", None), ("b", None)]
