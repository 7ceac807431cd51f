"""GroupClient's retry and rediscovery loops, with the transport injected: a fake of the wire and admin calls that
answers from a script (allowed here: the loops are pure policy over answers; the Kafka integration tests run them
against real brokers). What is pinned: which answers are retried, after which waits, when the coordinator is looked
up again, when the loop gives up, and that an eviction's liveness check is asked before every attempt."""

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from vigil_core.kafka import retry, wire
from vigil_core.kafka.group_client import GroupClient, GroupClientError
from vigil_core.kafka.model import GroupType
from vigil_core.kafka.outcomes import APP_POLLED, TRANSPORT_ERROR, Reaction, code_of
from vigil_core.kafka.security import KafkaConnection

GROUP = "g"
NONE, NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE = 0, code_of("NOT_COORDINATOR"), code_of("COORDINATOR_NOT_AVAILABLE")
LOADING, REBALANCING = code_of("COORDINATOR_LOAD_IN_PROGRESS"), code_of("REBALANCE_IN_PROGRESS")
DENIED, UNKNOWN_MEMBER = code_of("GROUP_AUTHORIZATION_FAILED"), code_of("UNKNOWN_MEMBER_ID")
LOCAL_TRANSPORT = -195
"""librdkafka's local `_TRANSPORT` error (broker connection failed or lost): not a Kafka code."""


@dataclass
class FakeWire:
    """`wire.GroupWire`'s calls the loops make: answers popped from scripts, every call recorded."""

    coordinators: list[tuple[int, int]] = field(default_factory=list)
    """FindCoordinator answers: (error code, node id)."""
    answers: list[int] = field(default_factory=list)
    """Error codes of the requests sent to a coordinator (Heartbeat, LeaveGroup)."""
    calls: list[tuple[str, int | None]] = field(default_factory=list)
    version: tuple[int, ...] = (4, 0)

    def find_coordinator(self, group_id: str) -> wire.Coordinator:
        code, node = self.coordinators.pop(0)
        self.calls.append(("find", None))
        return wire.Coordinator(code, node)

    def heartbeat(self, node: int, group_id: str, generation: int, member_id: str, instance_id: str | None) -> int:
        self.calls.append(("heartbeat", node))
        return self.answers.pop(0)

    def leave_group(self, node: int, group_id: str, members: list[wire.LeaveIdentity]) -> wire.LeaveResult:
        self.calls.append(("leave", node))
        code = self.answers.pop(0)
        return wire.LeaveResult(code, tuple((m.member_id, m.instance_id, NONE) for m in members) if code == 0 else ())

    def broker_version(self) -> tuple[int, ...]:
        return self.version

    def close(self) -> None:
        pass


class Answered:
    """A confluent-kafka future: its result, or the KafkaException it raises."""

    def __init__(self, answer: object) -> None:
        self._answer = answer

    def result(self, timeout: float) -> object:
        if isinstance(self._answer, KafkaException):
            raise self._answer
        return self._answer


@dataclass
class FakeAdmin:
    """The AdminClient call `cluster_id()` makes: each DescribeCluster answers the next scripted result."""

    script: list[object] = field(default_factory=list)
    sent: int = 0

    def describe_cluster(self, request_timeout: float) -> Answered:
        self.sent += 1
        return Answered(self.script.pop(0))

    def describe_consumer_groups(self, group_ids: list[str], request_timeout: float) -> dict[str, Answered]:
        self.sent += 1
        return {group_ids[0]: Answered(self.script.pop(0))}


def failed(code: int) -> KafkaException:
    return KafkaException(KafkaError(code))


@dataclass
class Harness:
    client: GroupClient
    wire: FakeWire
    admin: FakeAdmin
    slept: list[float]


def harness(*, seed: int = 7, max_attempts: int = 6, **scripts: Any) -> Harness:
    fake_wire, admin = FakeWire(**scripts), FakeAdmin()
    slept: list[float] = []
    client = GroupClient(
        KafkaConnection(bootstrap_servers="unused:9092"),
        max_attempts=max_attempts,
        sleep=slept.append,
        jitter=random.Random(seed),
        transport=(admin, fake_wire),  # type: ignore[arg-type]
    )
    return Harness(client, fake_wire, admin, slept)


def expected_waits(seed: int, failures: int) -> list[float]:
    rng = random.Random(seed)
    return [retry.jittered(attempt, rng.random()) for attempt in range(failures)]


def heartbeat(client: GroupClient) -> Reaction:
    return client.heartbeat(GROUP, 3, "m-1", "i-1").reaction


# -- FindCoordinator -------------------------------------------------------------------------------------------


def test_the_coordinator_lookup_is_retried_with_jittered_backoff_then_cached() -> None:
    h = harness(coordinators=[(COORDINATOR_NOT_AVAILABLE, -1), (TRANSPORT_ERROR, -1), (NONE, 2)])
    assert h.client.coordinator(GROUP) == 2
    assert h.client.coordinator(GROUP) == 2  # cached: no fourth lookup
    assert [c for c, _ in h.wire.calls] == ["find"] * 3
    assert h.slept == expected_waits(7, 2)
    assert all(retry.backoff(a) / 2 <= wait <= retry.backoff(a) for a, wait in enumerate(h.slept))


def test_the_coordinator_located_through_the_admin_client_is_retried_then_cached_and_sends_nothing_on_the_wire() -> (
    None
):
    h = harness()
    described = SimpleNamespace(coordinator=SimpleNamespace(id=2))
    h.admin.script = [failed(COORDINATOR_NOT_AVAILABLE), described]
    assert h.client.locate(GROUP) == 2
    assert h.client.coordinator(GROUP) == 2  # cached for the requests sent to the coordinator
    assert h.admin.sent == 2
    assert h.wire.calls == []  # the sidecar's lookup needs no kafka-python
    assert h.slept == expected_waits(7, 1)


def test_a_located_coordinator_denied_is_raised_at_once_as_a_find_coordinator_failure() -> None:
    h = harness()
    h.admin.script = [failed(DENIED)]
    with pytest.raises(GroupClientError) as raised:
        h.client.locate(GROUP)
    assert (raised.value.outcome.api.value, raised.value.outcome.name) == (
        "FindCoordinator",
        "GROUP_AUTHORIZATION_FAILED",
    )
    assert h.slept == []


def test_a_coordinator_lookup_denied_is_raised_at_once() -> None:
    h = harness(coordinators=[(DENIED, -1)])
    with pytest.raises(GroupClientError) as raised:
        h.client.coordinator(GROUP)
    assert raised.value.outcome.name == "GROUP_AUTHORIZATION_FAILED"
    assert h.slept == []


def test_a_coordinator_lookup_gives_up_after_max_attempts_without_a_last_wait_beyond_them() -> None:
    h = harness(max_attempts=3, coordinators=[(LOADING, -1)] * 3)
    with pytest.raises(GroupClientError) as raised:
        h.client.coordinator(GROUP)
    assert raised.value.outcome.name == "COORDINATOR_LOAD_IN_PROGRESS"
    assert len(h.wire.calls) == 3
    assert h.slept == expected_waits(7, 3)  # as it was: the lookup loop waits after its last attempt too


# -- requests to the coordinator -------------------------------------------------------------------------------


@pytest.mark.parametrize("moved", [NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, TRANSPORT_ERROR])
def test_a_coordinator_that_moved_or_does_not_answer_is_looked_up_again(moved: int) -> None:
    h = harness(coordinators=[(NONE, 1), (NONE, 2)], answers=[moved, NONE])
    assert heartbeat(h.client) is Reaction.DONE
    assert h.wire.calls == [("find", None), ("heartbeat", 1), ("find", None), ("heartbeat", 2)]
    assert h.slept == expected_waits(7, 1)
    assert h.client.coordinator(GROUP) == 2  # the new one is cached


def test_a_loading_coordinator_is_asked_again_without_a_new_lookup() -> None:
    h = harness(coordinators=[(NONE, 1)], answers=[LOADING, LOADING, NONE])
    assert heartbeat(h.client) is Reaction.DONE
    assert h.wire.calls == [("find", None), *[("heartbeat", 1)] * 3]
    assert h.slept == expected_waits(7, 2)


@pytest.mark.parametrize(
    ("code", "reaction"),
    [(REBALANCING, Reaction.REFRESH_AND_RETRY), (UNKNOWN_MEMBER, Reaction.STOP), (DENIED, Reaction.REPORT)],
)
def test_an_answer_that_is_not_retried_is_returned_after_one_attempt(code: int, reaction: Reaction) -> None:
    h = harness(coordinators=[(NONE, 1)], answers=[code])
    assert heartbeat(h.client) is reaction
    assert h.wire.calls == [("find", None), ("heartbeat", 1)]
    assert h.slept == []


def test_the_last_attempt_returns_its_outcome_without_waiting_after_it() -> None:
    h = harness(max_attempts=4, coordinators=[(NONE, n) for n in range(1, 5)], answers=[NOT_COORDINATOR] * 4)
    outcome = h.client.heartbeat(GROUP, 3, "m-1", "i-1")
    assert (outcome.name, outcome.reaction) == ("NOT_COORDINATOR", Reaction.REDISCOVER_COORDINATOR)
    assert [node for call, node in h.wire.calls if call == "heartbeat"] == [1, 2, 3, 4]
    assert h.slept == expected_waits(7, 3)


def test_an_eviction_asks_its_liveness_check_before_every_attempt_and_sends_nothing_once_it_says_no() -> None:
    h = harness(coordinators=[(NONE, 1), (NONE, 2)], answers=[TRANSPORT_ERROR])
    asked: list[bool] = []
    answers = iter([True, False])

    def proceed() -> bool:
        asked.append(next(answers))
        return asked[-1]

    outcome = h.client.remove_member(GROUP, "m-1", None, "no poll", proceed=proceed)
    assert (outcome.code, outcome.reaction) == (APP_POLLED, Reaction.NOTHING_TO_DO)
    assert asked == [True, False]
    assert [call for call, _ in h.wire.calls] == ["find", "leave", "find"]  # the retry was never sent


def test_an_eviction_that_lands_on_the_retry_is_done() -> None:
    h = harness(coordinators=[(NONE, 1), (NONE, 2)], answers=[NOT_COORDINATOR, NONE])
    outcome = h.client.remove_member(GROUP, "m-1", "i-1", "no poll", proceed=lambda: True)
    assert outcome.reaction is Reaction.DONE
    assert [node for call, node in h.wire.calls if call == "leave"] == [1, 2]


@pytest.mark.parametrize("group_type", [GroupType.SHARE, GroupType.STREAMS])
def test_no_removal_is_sent_for_a_member_of_a_share_or_streams_group(group_type: GroupType) -> None:
    h = harness(coordinators=[(NONE, 1)], answers=[NONE])
    outcome = h.client.remove_member(GROUP, "m-1", None, "no poll", group_type=group_type, proceed=lambda: True)
    assert outcome.reaction is not Reaction.DONE
    assert f"no Kafka API removes a member of a {group_type.value} group" in outcome.message
    assert h.wire.calls == []


# -- AdminClient requests --------------------------------------------------------------------------------------


def cluster_id(h: Harness, *script: object) -> Callable[[], str]:
    h.admin.script = list(script)
    return h.client.cluster_id


def test_an_admin_request_is_retried_on_a_retriable_error_then_answers() -> None:
    h = harness()
    answer = SimpleNamespace(cluster_id="c-1")
    assert cluster_id(h, failed(COORDINATOR_NOT_AVAILABLE), failed(LOCAL_TRANSPORT), answer)() == "c-1"
    assert h.admin.sent == 3
    assert h.slept == expected_waits(7, 2)


def test_an_admin_request_denied_raises_at_once() -> None:
    h = harness()
    with pytest.raises(GroupClientError) as raised:
        cluster_id(h, failed(code_of("CLUSTER_AUTHORIZATION_FAILED")))()
    assert raised.value.outcome.reaction is Reaction.REPORT
    assert (h.admin.sent, h.slept) == (1, [])


def test_an_admin_request_gives_up_after_max_attempts() -> None:
    h = harness(max_attempts=3)
    with pytest.raises(GroupClientError) as raised:
        cluster_id(h, *[failed(LOCAL_TRANSPORT)] * 3)()
    assert raised.value.outcome.code == TRANSPORT_ERROR  # librdkafka's local errors are transport failures
    assert (h.admin.sent, h.slept) == (3, expected_waits(7, 2))


def test_two_clients_seeded_differently_wait_differently_for_the_same_failures() -> None:
    waits = []
    for seed in (1, 2):
        h = harness(seed=seed, coordinators=[(NONE, 1), *[(NONE, 2)] * 3], answers=[NOT_COORDINATOR] * 3 + [NONE])
        assert heartbeat(h.client) is Reaction.DONE
        waits.append(h.slept)
    assert len(waits[0]) == len(waits[1]) == 3
    assert waits[0] != waits[1]
