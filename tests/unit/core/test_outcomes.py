"""The (request, Kafka error) → reaction table: every cell pinned here, plus properties over all int16 codes.

The cells name Kafka's errors by kafka-python's classes (`kafka.errors`), not by a copy of their codes: every code
vigil classifies must have the code and name kafka-python gives it, and the same retriable flag, or the
disagreement is listed in `RENAMED` with why.
"""

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka import errors as kafka_errors

from vigil_core.kafka.outcomes import (
    APP_POLLED,
    OUTCOMES,
    TRANSPORT_ERROR,
    Api,
    Outcome,
    Reaction,
    classify,
    code_of,
)

FIND, DESCRIBE, LEAVE, HEARTBEAT = Api.FIND_COORDINATOR, Api.DESCRIBE_GROUP, Api.LEAVE_GROUP, Api.HEARTBEAT
OFFSETS, LIST, CONFIGS, JOIN = Api.OFFSET_FETCH, Api.LIST_OFFSETS, Api.DESCRIBE_CONFIGS, Api.JOIN_GROUP
DONE, GONE, NOTHING = Reaction.DONE, Reaction.ALREADY_GONE, Reaction.NOTHING_TO_DO
REDISCOVER, BACKOFF, STOP = Reaction.REDISCOVER_COORDINATOR, Reaction.RETRY_BACKOFF, Reaction.STOP
REFRESH, REPORT = Reaction.REFRESH_AND_RETRY, Reaction.REPORT
RELEASE, SHARE_LAG = Api.CONSUMER_GROUP_HEARTBEAT, Api.SHARE_OFFSETS

E = kafka_errors
KafkaError = type[kafka_errors.BrokerResponseError]

RENAMED = {
    -1: ("UNKNOWN_SERVER_ERROR", "UNKNOWN", "Errors.java names -1 UNKNOWN_SERVER_ERROR; kafka-python calls it UNKNOWN"),
    0: ("NONE", "NO_ERROR", "Errors.java names 0 NONE; kafka-python calls it NO_ERROR"),
    6: (
        "NOT_LEADER_OR_FOLLOWER",
        "NOT_LEADER_FOR_PARTITION",
        "Kafka 2.7 renamed NOT_LEADER_FOR_PARTITION (KIP-392: followers serve fetches too); kafka-python kept"
        " the old name",
    ),
}
"""Codes whose name in vigil (Kafka's own, from Errors.java) differs from kafka-python's: code → (vigil's name,
kafka-python's name, why). The retriable flags agree for every code."""


class Pseudo:
    """vigil's own pseudo codes (no Kafka error class): a stand-in with what the table needs of one."""

    def __init__(self, name: str, errno: int, retriable: bool) -> None:
        self.message, self.errno, self.retriable = name, errno, retriable

    def __repr__(self) -> str:
        return self.message


NO_ANSWER = Pseudo("TRANSPORT_ERROR", TRANSPORT_ERROR, retriable=True)
"""No answer (connection failed or lost, timed out in the client): kafka-python raises instead of returning a code."""
NOT_SENT = Pseudo("APP_POLLED", APP_POLLED, retriable=False)
"""An eviction not sent: the app polled again after the stall was decided."""
PSEUDO = {p.errno: p for p in (NO_ANSWER, NOT_SENT)}


def vigil_name(error: "KafkaError | Pseudo") -> str:
    """The name vigil gives the error kafka-python names `error.message`."""
    return RENAMED[error.errno][0] if error.errno in RENAMED else error.message


# Every cell of the table: (request, Kafka's error as kafka-python's class, reaction).
TABLE = [
    # every request: success, no answer, generic broker failures
    *[(api, E.NoError, DONE) for api in Api],
    *[(api, NO_ANSWER, BACKOFF) for api in Api],
    *[(api, E.RequestTimedOutError, BACKOFF) for api in Api],
    *[(api, E.NetworkExceptionError, BACKOFF) for api in Api],
    *[(api, E.UnknownError, REPORT) for api in Api],
    *[(api, E.UnsupportedVersionError, REPORT) for api in Api],
    # FindCoordinator
    (FIND, E.CoordinatorNotAvailableError, BACKOFF),
    (FIND, E.CoordinatorLoadInProgressError, BACKOFF),
    (FIND, E.GroupAuthorizationFailedError, REPORT),
    # DescribeGroups / ConsumerGroupDescribe
    (DESCRIBE, E.NotCoordinatorError, REDISCOVER),
    (DESCRIBE, E.CoordinatorNotAvailableError, REDISCOVER),
    (DESCRIBE, E.CoordinatorLoadInProgressError, BACKOFF),
    (DESCRIBE, E.GroupAuthorizationFailedError, REPORT),
    (DESCRIBE, E.InvalidGroupIdError, REPORT),
    (DESCRIBE, E.GroupIdNotFoundError, REPORT),
    (DESCRIBE, E.TopicAuthorizationFailedError, REPORT),
    # LeaveGroup (compare-and-remove)
    (LEAVE, E.NotCoordinatorError, REDISCOVER),
    (LEAVE, E.CoordinatorNotAvailableError, REDISCOVER),
    (LEAVE, E.CoordinatorLoadInProgressError, BACKOFF),
    (LEAVE, E.GroupAuthorizationFailedError, REPORT),
    (LEAVE, E.InvalidGroupIdError, REPORT),
    (LEAVE, E.UnknownMemberIdError, GONE),
    (LEAVE, NOT_SENT, NOTHING),  # vigil's: not sent, the app polled again
    (LEAVE, E.GroupIdNotFoundError, GONE),
    (LEAVE, E.FencedInstanceIdError, NOTHING),
    (LEAVE, E.FencedMemberEpochError, GONE),
    (LEAVE, E.UnreleasedInstanceIdError, NOTHING),
    # Heartbeat on a member's behalf (bridging)
    (HEARTBEAT, E.NotCoordinatorError, REDISCOVER),
    (HEARTBEAT, E.CoordinatorNotAvailableError, REDISCOVER),
    (HEARTBEAT, E.CoordinatorLoadInProgressError, BACKOFF),
    (HEARTBEAT, E.GroupAuthorizationFailedError, REPORT),
    (HEARTBEAT, E.InvalidGroupIdError, REPORT),
    (HEARTBEAT, E.RebalanceInProgressError, REFRESH),
    (HEARTBEAT, E.IllegalGenerationError, STOP),
    (HEARTBEAT, E.UnknownMemberIdError, STOP),
    (HEARTBEAT, E.GroupIdNotFoundError, STOP),
    (HEARTBEAT, E.FencedInstanceIdError, STOP),
    (HEARTBEAT, E.FencedMemberEpochError, STOP),
    (HEARTBEAT, E.UnreleasedInstanceIdError, STOP),
    # OffsetFetch
    (OFFSETS, E.NotCoordinatorError, REDISCOVER),
    (OFFSETS, E.CoordinatorNotAvailableError, REDISCOVER),
    (OFFSETS, E.CoordinatorLoadInProgressError, BACKOFF),
    (OFFSETS, E.GroupAuthorizationFailedError, REPORT),
    (OFFSETS, E.InvalidGroupIdError, REPORT),
    (OFFSETS, E.UnstableOffsetCommitError, BACKOFF),
    (OFFSETS, E.GroupIdNotFoundError, REPORT),
    (OFFSETS, E.TopicAuthorizationFailedError, REPORT),
    # DescribeShareGroupOffsets (a share group's lag)
    (SHARE_LAG, E.NotCoordinatorError, REDISCOVER),
    (SHARE_LAG, E.CoordinatorNotAvailableError, REDISCOVER),
    (SHARE_LAG, E.CoordinatorLoadInProgressError, BACKOFF),
    (SHARE_LAG, E.GroupAuthorizationFailedError, REPORT),
    (SHARE_LAG, E.InvalidGroupIdError, REPORT),
    # ListOffsets
    (LIST, E.NotLeaderForPartitionError, BACKOFF),
    (LIST, E.LeaderNotAvailableError, BACKOFF),
    (LIST, E.UnknownTopicOrPartitionError, BACKOFF),
    (LIST, E.OffsetNotAvailableError, BACKOFF),
    (LIST, E.TopicAuthorizationFailedError, REPORT),
    # DescribeConfigs
    (CONFIGS, E.ClusterAuthorizationFailedError, REPORT),
    (CONFIGS, E.GroupAuthorizationFailedError, REPORT),
    (CONFIGS, E.InvalidRequestError, REPORT),
    (Api.ALTER_CONFIGS, E.GroupAuthorizationFailedError, REPORT),
    (Api.ALTER_CONFIGS, E.InvalidConfigurationError, REPORT),
    # JoinGroup of a pending member (a deliberate rebalance held open for the removed member)
    (JOIN, E.NotCoordinatorError, REDISCOVER),
    (JOIN, E.CoordinatorNotAvailableError, REDISCOVER),
    (JOIN, E.CoordinatorLoadInProgressError, BACKOFF),
    (JOIN, E.GroupAuthorizationFailedError, REPORT),
    (JOIN, E.InvalidGroupIdError, REPORT),
    (JOIN, E.MemberIdRequiredError, DONE),
    (JOIN, E.InconsistentGroupProtocolError, REPORT),
    (JOIN, E.InvalidSessionTimeoutError, REPORT),
    # ConsumerGroupHeartbeat on a KIP-848 static member's behalf: keep-alives, and epoch -2 (its instance id released)
    (RELEASE, E.NotCoordinatorError, REDISCOVER),
    (RELEASE, E.CoordinatorNotAvailableError, REDISCOVER),
    (RELEASE, E.CoordinatorLoadInProgressError, BACKOFF),
    (RELEASE, E.GroupAuthorizationFailedError, REPORT),
    (RELEASE, E.InvalidGroupIdError, REPORT),
    (RELEASE, E.UnknownMemberIdError, GONE),
    (RELEASE, E.GroupIdNotFoundError, GONE),
    (RELEASE, E.FencedInstanceIdError, NOTHING),
    (RELEASE, E.InvalidRequestError, REPORT),
    (RELEASE, E.FencedMemberEpochError, STOP),
]

KNOWN = {
    code: classify(LIST, code)
    for code in range(-(2**15), 2**15)
    if not classify(LIST, code).name.startswith("UNKNOWN_ERROR_")
}
"""Every code vigil classifies (its catalog: named, with Kafka's retriable flag), found through `classify`."""


def cell_id(value: object) -> str:
    return getattr(value, "__name__", str(value))


@pytest.mark.parametrize(("api", "error", "reaction"), TABLE, ids=cell_id)
def test_every_cell(api: Api, error: "KafkaError | Pseudo", reaction: Reaction) -> None:
    outcome = classify(api, error.errno)
    assert (outcome.api, outcome.name, outcome.code, outcome.reaction) == (
        api,
        vigil_name(error),
        error.errno,
        reaction,
    )
    assert outcome.retriable == error.retriable
    assert code_of(outcome.name) == error.errno


def test_the_table_has_exactly_the_cells_pinned_here() -> None:
    pinned = [(api, error.errno) for api, error, _ in TABLE]
    assert len(pinned) == len(set(pinned)), "a cell is pinned twice"
    assert set(OUTCOMES) == set(pinned)


@pytest.mark.parametrize("code", sorted(KNOWN))
def test_every_code_vigil_classifies_has_kafka_pythons_code_name_and_retriable_flag(code: int) -> None:
    """Only vigil's pseudo codes may be missing from kafka-python's catalog (`kafka.errors.kafka_errors`)."""
    outcome = KNOWN[code]
    if code in PSEUDO:
        assert code not in kafka_errors.kafka_errors, f"{code} is a Kafka code now"
        assert (outcome.name, outcome.retriable) == (PSEUDO[code].message, PSEUDO[code].retriable)
        return
    assert code in kafka_errors.kafka_errors, f"kafka-python has no error {code} ({outcome.name})"
    error = kafka_errors.for_code(code)
    assert outcome.name == vigil_name(error), f"kafka-python calls {code} {error.message}: list it in RENAMED"
    assert outcome.retriable == error.retriable, f"{outcome.name}: Kafka's retriable flag is {error.retriable}"


def test_every_renaming_is_of_a_code_vigil_classifies_and_still_a_disagreement() -> None:
    for code, (ours, theirs, _why) in RENAMED.items():
        assert KNOWN[code].name == ours
        assert kafka_errors.for_code(code).message == theirs != ours


def test_transport_error_is_a_pseudo_code_no_kafka_or_librdkafka_code_uses() -> None:
    assert TRANSPORT_ERROR == -2


@pytest.mark.parametrize(
    ("api", "code", "name", "reaction"),
    [
        # known to Kafka, not expected for this request: Kafka's retriable flag decides
        (Api.LIST_OFFSETS, 16, "NOT_COORDINATOR", BACKOFF),
        (Api.DESCRIBE_CONFIGS, 88, "UNSTABLE_OFFSET_COMMIT", BACKOFF),
        (Api.HEARTBEAT, 79, "MEMBER_ID_REQUIRED", REPORT),
        (Api.LEAVE_GROUP, 27, "REBALANCE_IN_PROGRESS", REPORT),
        (Api.FIND_COORDINATOR, 25, "UNKNOWN_MEMBER_ID", REPORT),
        # unknown to this vigil
        (Api.HEARTBEAT, 129, "UNKNOWN_ERROR_129", REPORT),
        (Api.LEAVE_GROUP, -3, "UNKNOWN_ERROR_-3", REPORT),
        (Api.DESCRIBE_GROUP, 32767, "UNKNOWN_ERROR_32767", REPORT),
    ],
)
def test_codes_outside_the_table(api: Api, code: int, name: str, reaction: Reaction) -> None:
    outcome = classify(api, code)
    assert (outcome.name, outcome.reaction) == (name, reaction)
    assert api.value in outcome.message


def test_an_outcome_prints_as_one_log_line() -> None:
    line = str(classify(Api.LEAVE_GROUP, 82))
    assert line.startswith("LeaveGroup FENCED_INSTANCE_ID (82): ")
    assert "newer member" in line


def test_rebalance_while_bridging_never_stops_the_bridge() -> None:
    # stopping lets the coordinator hand the absent member partitions, then expire it: two rebalances
    assert classify(Api.HEARTBEAT, code_of("REBALANCE_IN_PROGRESS")).reaction is not Reaction.STOP


int16 = st.integers(-(2**15), 2**15 - 1)


@given(api=st.sampled_from(Api), code=int16)
def test_classify_never_raises_and_always_says_one_line(api: Api, code: int) -> None:
    outcome = classify(api, code)
    assert (outcome.api, outcome.code) == (api, code)
    assert outcome.message.strip() == outcome.message
    assert outcome.message
    assert "\n" not in outcome.message
    assert outcome.message.endswith(".")
    if outcome.reaction in (Reaction.DONE, Reaction.ALREADY_GONE):
        assert code in (0, 25, 69, 110)


@given(code=st.integers(-(2**40), 2**40))
def test_classify_never_raises_for_any_int(code: int) -> None:
    for api in Api:
        classify(api, code)


@pytest.mark.parametrize("api", list(Api))
def test_none_is_done_and_no_answer_is_retried_for_every_request(api: Api) -> None:
    assert classify(api, 0).reaction is Reaction.DONE
    assert classify(api, TRANSPORT_ERROR).reaction is Reaction.RETRY_BACKOFF
    assert classify(api, TRANSPORT_ERROR).retriable


@pytest.mark.parametrize("outcome", list(OUTCOMES.values()), ids=str)
def test_every_message_is_one_sentence_without_placeholders(outcome: Outcome) -> None:
    text = str(outcome)
    assert "{" not in text
    assert "\n" not in text
    assert len(text) < 200
