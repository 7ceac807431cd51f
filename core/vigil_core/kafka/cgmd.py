"""Parse librdkafka's serialized consumer group metadata (`Consumer.consumer_group_metadata()` bytes).

It is the only place a librdkafka app exposes its generation, which a Heartbeat on its behalf must carry.
The format is librdkafka's own (`rd_kafka_consumer_group_metadata_write`), not a public contract: parse it
strictly and fail closed (None) on anything unexpected, so a format change can never yield a wrong generation.

    b"CGMDv2:" | int32 generation (native endian) | group_id NUL | member_id NUL | int8 instance_is_null
    | [group_instance_id NUL]
"""

import struct
from dataclasses import dataclass

MAGIC = b"CGMDv2:"
_GENERATION = struct.Struct("=i")
_MAX_LEN = 4096


@dataclass(frozen=True)
class GroupMetadata:
    generation: int
    group_id: str
    member_id: str
    instance_id: str | None


def parse(data: bytes) -> GroupMetadata | None:
    """The metadata, or None if `data` is not exactly one well-formed CGMDv2 record."""
    if not data.startswith(MAGIC) or len(data) > _MAX_LEN:
        return None
    try:
        (generation,) = _GENERATION.unpack_from(data, len(MAGIC))
        rest = data[len(MAGIC) + _GENERATION.size :]
        group_id, rest = _cstring(rest)
        member_id, rest = _cstring(rest)
        is_null, rest = rest[0], rest[1:]
        if is_null == 1 and not rest:
            return GroupMetadata(generation, group_id, member_id, None)
        instance_id, rest = _cstring(rest)
        if is_null != 0 or rest:
            return None
    except (struct.error, IndexError, ValueError):  # UnicodeDecodeError is a ValueError
        return None
    return GroupMetadata(generation, group_id, member_id, instance_id)


def _cstring(data: bytes) -> tuple[str, bytes]:
    """A NUL-terminated UTF-8 string and what follows it; ValueError if there is none."""
    end = data.index(b"\0")
    return data[:end].decode(), data[end + 1 :]


def encode(meta: GroupMetadata) -> bytes:
    """The inverse of `parse` (for tests and for the beacon of non-librdkafka apps that report the same fields)."""
    out = MAGIC + _GENERATION.pack(meta.generation) + meta.group_id.encode() + b"\0" + meta.member_id.encode() + b"\0"
    if meta.instance_id is None:
        return out + b"\x01"
    return out + b"\x00" + meta.instance_id.encode() + b"\0"
