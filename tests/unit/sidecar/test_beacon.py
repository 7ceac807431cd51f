"""The beacon protocol: what the app sends per poll, and one clear line for anything else."""

import contextlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vigil_sidecar.signals.beacon import MAX_BEACON_BYTES, BeaconError, encode_beacon, parse_beacon
from vigil_sidecar.watchdog.state import Beacon


def test_a_full_beacon() -> None:
    data = b'{"member_id":"orders-0-5f0c","generation":7,"instance_id":"orders-0","assigned":2,"time":1763.5}'
    assert parse_beacon(data) == Beacon("orders-0-5f0c", 7, "orders-0", 2, 1763.5)


def test_unknown_fields_are_ignored_and_defaults_apply() -> None:
    beacon = parse_beacon(b'{"member_id":"m","time":1,"rack":"eu-1","future":{"x":1}}')
    assert beacon == Beacon("m", -1, None, 0, 1.0)


def test_the_sending_process_is_named_by_its_token() -> None:
    beacon = parse_beacon(b'{"member_id":"m","time":1,"instance_id":"p0-a","process":"9f1c2e"}')
    assert beacon == Beacon("m", -1, "p0-a", 0, 1.0, process="9f1c2e")


def test_an_empty_instance_id_is_no_instance_id() -> None:
    assert parse_beacon(b'{"member_id":"m","time":1,"instance_id":""}').instance_id is None


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"not json", "beacon: not JSON"),
        (b"\xff\xfe", "beacon: not JSON"),
        (b'{"time": 1}', "beacon MEMBER_ID: required, not set"),
        (b'{"member_id": "", "time": 1}', "beacon MEMBER_ID: String should have at least 1 character"),
        (b'{"member_id": "m"}', "beacon TIME: required, not set"),
        (
            b'{"member_id": "m", "time": 1, "assigned": -1}',
            "beacon ASSIGNED: Input should be greater than or equal to 0",
        ),
        (b'{"member_id": "m", "time": 1, "generation": "seven"}', "beacon GENERATION: Input should be a valid integer"),
        (b"[1, 2]", "beacon: expected a JSON object, got list"),
        (b'{"member_id": "m", "time": 1, "process": ""}', "beacon PROCESS: String should have at least 1 character"),
        (b'{"member_id": "m", "time": 1, "process": 7}', "beacon PROCESS: Input should be a valid string"),
        (b" " * (MAX_BEACON_BYTES + 1), f"beacon: {MAX_BEACON_BYTES + 1} bytes, at most {MAX_BEACON_BYTES}"),
    ],
)
def test_malformed_beacons_are_one_line(data: bytes, message: str) -> None:
    with pytest.raises(BeaconError) as info:
        parse_beacon(data)
    assert str(info.value).startswith(message)
    assert "\n" not in str(info.value)


@given(
    member=st.text(min_size=1, max_size=100),
    generation=st.integers(-1, 2**31 - 1),
    instance=st.none() | st.text(min_size=1, max_size=50),
    assigned=st.integers(0, 10_000),
    time=st.floats(0, 4e9),
    process=st.none() | st.text(min_size=1, max_size=64),
)
def test_round_trip(  # noqa: PLR0917 - one argument per field of the protocol
    member: str, generation: int, instance: str | None, assigned: int, time: float, process: str | None
) -> None:
    data = encode_beacon(member, generation, instance, assigned, time, process=process)
    assert parse_beacon(data) == Beacon(member, generation, instance, assigned, time, process)
    assert json.loads(data)["member_id"] == member


@given(st.binary(max_size=300))
def test_never_raises_anything_but_beacon_error(data: bytes) -> None:
    with contextlib.suppress(BeaconError):
        parse_beacon(data)
