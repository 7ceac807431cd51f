"""librdkafka's consumer group metadata bytes: parsed exactly, or not at all (fail closed)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vigil_core.kafka import cgmd

# seen from a real confluent-kafka 2.16 consumer against the local broker (static member pod-0, generation 1)
REAL_STATIC = b"CGMDv2:\x01\x00\x00\x00g1\x00pod-0-6e59f69e-1f2e-4f26-a3dc-437b60d5904c\x00\x00pod-0\x00"


def test_parses_a_real_static_member_record() -> None:
    meta = cgmd.parse(REAL_STATIC)
    assert meta == cgmd.GroupMetadata(1, "g1", "pod-0-6e59f69e-1f2e-4f26-a3dc-437b60d5904c", "pod-0")


def test_dynamic_member_has_no_instance_id() -> None:
    data = b"CGMDv2:\x07\x00\x00\x00grp\x00m-1\x00\x01"
    assert cgmd.parse(data) == cgmd.GroupMetadata(7, "grp", "m-1", None)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"CGMDv1:\x01\x00\x00\x00g\x00m\x00\x01",  # other version
        REAL_STATIC[:-1],  # instance id not terminated
        REAL_STATIC + b"x",  # trailing bytes
        b"CGMDv2:\x01\x00\x00\x00g\x00m\x00\x02",  # is_null neither 0 nor 1
        b"CGMDv2:\x01\x00\x00\x00g\x00m\x00\x01extra",
        b"CGMDv2:\x01\x00\x00",  # truncated generation
        b"CGMDv2:\x01\x00\x00\x00g\x00m",  # member id not terminated
        b"CGMDv2:\x01\x00\x00\x00\xff\xfe\x00m\x00\x01",  # not UTF-8
        b"CGMDv2:" + b"\x00" * 5000,  # absurdly long
    ],
)
def test_anything_malformed_is_rejected(data: bytes) -> None:
    assert cgmd.parse(data) is None


text = st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\0"), max_size=40)


@given(
    generation=st.integers(-(2**31), 2**31 - 1),
    group=text,
    member=text,
    instance=st.none() | text,
)
def test_round_trip(generation: int, group: str, member: str, instance: str | None) -> None:
    meta = cgmd.GroupMetadata(generation, group, member, instance)
    assert cgmd.parse(cgmd.encode(meta)) == meta


@given(st.binary(max_size=200))
def test_never_raises_on_arbitrary_bytes(data: bytes) -> None:
    result = cgmd.parse(data)
    assert result is None or cgmd.encode(result) == data
