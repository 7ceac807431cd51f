"""The (request, Kafka error) → reaction table: every cell pinned here, plus properties over all int16 codes."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vigil_core.kafka.outcomes import OUTCOMES, TRANSPORT_ERROR, Api, Outcome, Reaction, classify, code_of

FIND, DESCRIBE, LEAVE, HEARTBEAT = Api.FIND_COORDINATOR, Api.DESCRIBE_GROUP, Api.LEAVE_GROUP, Api.HEARTBEAT
OFFSETS, LIST, CONFIGS, JOIN = Api.OFFSET_FETCH, Api.LIST_OFFSETS, Api.DESCRIBE_CONFIGS, Api.JOIN_GROUP
DONE, GONE, NOTHING = Reaction.DONE, Reaction.ALREADY_GONE, Reaction.NOTHING_TO_DO
REDISCOVER, BACKOFF, STOP = Reaction.REDISCOVER_COORDINATOR, Reaction.RETRY_BACKOFF, Reaction.STOP
REFRESH, REPORT = Reaction.REFRESH_AND_RETRY, Reaction.REPORT
RELEASE = Api.CONSUMER_GROUP_HEARTBEAT

# Every cell of the table: (request, Kafka's name, code as in Errors.java, reaction).
TABLE = [
    # every request: success, no answer, generic broker failures
    *[(api, "NONE", 0, DONE) for api in Api],
    *[(api, "TRANSPORT_ERROR", -2, BACKOFF) for api in Api],
    *[(api, "REQUEST_TIMED_OUT", 7, BACKOFF) for api in Api],
    *[(api, "NETWORK_EXCEPTION", 13, BACKOFF) for api in Api],
    *[(api, "UNKNOWN_SERVER_ERROR", -1, REPORT) for api in Api],
    *[(api, "UNSUPPORTED_VERSION", 35, REPORT) for api in Api],
    # FindCoordinator
    (FIND, "COORDINATOR_NOT_AVAILABLE", 15, BACKOFF),
    (FIND, "COORDINATOR_LOAD_IN_PROGRESS", 14, BACKOFF),
    (FIND, "GROUP_AUTHORIZATION_FAILED", 30, REPORT),
    # DescribeGroups / ConsumerGroupDescribe
    (DESCRIBE, "NOT_COORDINATOR", 16, REDISCOVER),
    (DESCRIBE, "COORDINATOR_NOT_AVAILABLE", 15, REDISCOVER),
    (DESCRIBE, "COORDINATOR_LOAD_IN_PROGRESS", 14, BACKOFF),
    (DESCRIBE, "GROUP_AUTHORIZATION_FAILED", 30, REPORT),
    (DESCRIBE, "INVALID_GROUP_ID", 24, REPORT),
    (DESCRIBE, "GROUP_ID_NOT_FOUND", 69, REPORT),
    (DESCRIBE, "TOPIC_AUTHORIZATION_FAILED", 29, REPORT),
    # LeaveGroup (compare-and-remove)
    (LEAVE, "NOT_COORDINATOR", 16, REDISCOVER),
    (LEAVE, "COORDINATOR_NOT_AVAILABLE", 15, REDISCOVER),
    (LEAVE, "COORDINATOR_LOAD_IN_PROGRESS", 14, BACKOFF),
    (LEAVE, "GROUP_AUTHORIZATION_FAILED", 30, REPORT),
    (LEAVE, "INVALID_GROUP_ID", 24, REPORT),
    (LEAVE, "UNKNOWN_MEMBER_ID", 25, GONE),
    (LEAVE, "APP_POLLED", -4, NOTHING),  # vigil's: not sent, the app polled again
    (LEAVE, "GROUP_ID_NOT_FOUND", 69, GONE),
    (LEAVE, "FENCED_INSTANCE_ID", 82, NOTHING),
    (LEAVE, "FENCED_MEMBER_EPOCH", 110, GONE),
    (LEAVE, "UNRELEASED_INSTANCE_ID", 111, NOTHING),
    # Heartbeat on a member's behalf (bridging)
    (HEARTBEAT, "NOT_COORDINATOR", 16, REDISCOVER),
    (HEARTBEAT, "COORDINATOR_NOT_AVAILABLE", 15, REDISCOVER),
    (HEARTBEAT, "COORDINATOR_LOAD_IN_PROGRESS", 14, BACKOFF),
    (HEARTBEAT, "GROUP_AUTHORIZATION_FAILED", 30, REPORT),
    (HEARTBEAT, "INVALID_GROUP_ID", 24, REPORT),
    (HEARTBEAT, "REBALANCE_IN_PROGRESS", 27, REFRESH),
    (HEARTBEAT, "ILLEGAL_GENERATION", 22, STOP),
    (HEARTBEAT, "UNKNOWN_MEMBER_ID", 25, STOP),
    (HEARTBEAT, "GROUP_ID_NOT_FOUND", 69, STOP),
    (HEARTBEAT, "FENCED_INSTANCE_ID", 82, STOP),
    (HEARTBEAT, "FENCED_MEMBER_EPOCH", 110, STOP),
    (HEARTBEAT, "UNRELEASED_INSTANCE_ID", 111, STOP),
    # OffsetFetch
    (OFFSETS, "NOT_COORDINATOR", 16, REDISCOVER),
    (OFFSETS, "COORDINATOR_NOT_AVAILABLE", 15, REDISCOVER),
    (OFFSETS, "COORDINATOR_LOAD_IN_PROGRESS", 14, BACKOFF),
    (OFFSETS, "GROUP_AUTHORIZATION_FAILED", 30, REPORT),
    (OFFSETS, "INVALID_GROUP_ID", 24, REPORT),
    (OFFSETS, "UNSTABLE_OFFSET_COMMIT", 88, BACKOFF),
    (OFFSETS, "GROUP_ID_NOT_FOUND", 69, REPORT),
    (OFFSETS, "TOPIC_AUTHORIZATION_FAILED", 29, REPORT),
    # ListOffsets
    (LIST, "NOT_LEADER_OR_FOLLOWER", 6, BACKOFF),
    (LIST, "LEADER_NOT_AVAILABLE", 5, BACKOFF),
    (LIST, "UNKNOWN_TOPIC_OR_PARTITION", 3, BACKOFF),
    (LIST, "OFFSET_NOT_AVAILABLE", 78, BACKOFF),
    (LIST, "TOPIC_AUTHORIZATION_FAILED", 29, REPORT),
    # DescribeConfigs
    (CONFIGS, "CLUSTER_AUTHORIZATION_FAILED", 31, REPORT),
    (CONFIGS, "GROUP_AUTHORIZATION_FAILED", 30, REPORT),
    (CONFIGS, "INVALID_REQUEST", 42, REPORT),
    (Api.ALTER_CONFIGS, "GROUP_AUTHORIZATION_FAILED", 30, REPORT),
    (Api.ALTER_CONFIGS, "INVALID_CONFIG", 40, REPORT),
    # JoinGroup of a pending member (a deliberate rebalance held open for the removed member)
    (JOIN, "NOT_COORDINATOR", 16, REDISCOVER),
    (JOIN, "COORDINATOR_NOT_AVAILABLE", 15, REDISCOVER),
    (JOIN, "COORDINATOR_LOAD_IN_PROGRESS", 14, BACKOFF),
    (JOIN, "GROUP_AUTHORIZATION_FAILED", 30, REPORT),
    (JOIN, "INVALID_GROUP_ID", 24, REPORT),
    (JOIN, "MEMBER_ID_REQUIRED", 79, DONE),
    (JOIN, "INCONSISTENT_GROUP_PROTOCOL", 23, REPORT),
    (JOIN, "INVALID_SESSION_TIMEOUT", 26, REPORT),
    # ConsumerGroupHeartbeat, epoch -2: a dead KIP-848 static member's instance id released on its behalf
    (RELEASE, "NOT_COORDINATOR", 16, REDISCOVER),
    (RELEASE, "COORDINATOR_NOT_AVAILABLE", 15, REDISCOVER),
    (RELEASE, "COORDINATOR_LOAD_IN_PROGRESS", 14, BACKOFF),
    (RELEASE, "GROUP_AUTHORIZATION_FAILED", 30, REPORT),
    (RELEASE, "INVALID_GROUP_ID", 24, REPORT),
    (RELEASE, "UNKNOWN_MEMBER_ID", 25, GONE),
    (RELEASE, "GROUP_ID_NOT_FOUND", 69, GONE),
    (RELEASE, "FENCED_INSTANCE_ID", 82, NOTHING),
    (RELEASE, "INVALID_REQUEST", 42, REPORT),
]

# Kafka's RetriableException subclasses among the codes above (plus vigil's TRANSPORT_ERROR).
RETRIABLE = {-2, 3, 5, 6, 7, 13, 14, 15, 16, 78, 88}


@pytest.mark.parametrize(("api", "name", "code", "reaction"), TABLE, ids=str)
def test_every_cell(api: Api, name: str, code: int, reaction: Reaction) -> None:
    outcome = classify(api, code)
    assert (outcome.api, outcome.name, outcome.code, outcome.reaction) == (api, name, code, reaction)
    assert outcome.retriable == (code in RETRIABLE)
    assert code_of(name) == code


def test_the_table_has_exactly_the_cells_pinned_here() -> None:
    pinned = [(api, code) for api, _, code, _ in TABLE]
    assert len(pinned) == len(set(pinned)), "a cell is pinned twice"
    assert set(OUTCOMES) == set(pinned)


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
    # research §9: stopping lets the coordinator hand the absent member partitions, then expire it: two rebalances
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
