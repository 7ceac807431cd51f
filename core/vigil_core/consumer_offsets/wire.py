"""A minimal reader for Kafka's message encoding (the generated `*Data.read` format).

Big-endian fixed-width integers; classic strings/bytes/arrays with int16/int32 length prefixes (−1 = null);
flexible versions use unsigned-varint lengths of N+1 (0 = null) and end every struct with a tagged-field
section. Every read names the field it is for, so a truncated or corrupt record is reported as
`DecodeError("<field>: ...")` — the caller turns that into a counted `Corrupt` value instead of crashing.
"""

import struct
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
UUID = struct.Struct(">16s")

_MAX_VARINT_BYTES = 5  # Kafka's readUnsignedVarint refuses longer encodings of an int32


class DecodeError(Exception):
    """The bytes do not hold what the schema says; the message names the field that failed."""


class Reader:
    """Cursor over one record's bytes; each method reads one schema type and advances."""

    __slots__ = ("buf", "end", "pos")

    def __init__(self, buf: bytes, pos: int = 0) -> None:
        self.buf = buf
        self.pos = pos
        self.end = len(buf)

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def _fixed(self, st: struct.Struct, name: str) -> int:
        pos = self.pos
        if pos + st.size > self.end:
            raise DecodeError(f"{name}: needs {st.size} bytes at offset {pos}, {self.end - pos} left")
        self.pos = pos + st.size
        value: int = st.unpack_from(self.buf, pos)[0]
        return value

    def int8(self, name: str) -> int:
        return self._fixed(INT8, name)

    def int16(self, name: str) -> int:
        return self._fixed(INT16, name)

    def int32(self, name: str) -> int:
        return self._fixed(INT32, name)

    def int64(self, name: str) -> int:
        return self._fixed(INT64, name)

    def uint16(self, name: str) -> int:
        return self._fixed(INT16, name) & 0xFFFF

    def uuid(self, name: str) -> bytes:
        """A 16-byte Kafka `Uuid`, kept raw (Kafka prints it as unpadded URL-safe base64)."""
        return self.raw(16, name)

    def raw(self, size: int, name: str) -> bytes:
        pos = self.pos
        if size < 0 or pos + size > self.end:
            raise DecodeError(f"{name}: needs {size} bytes at offset {pos}, {self.end - pos} left")
        self.pos = pos + size
        return self.buf[pos : pos + size]

    def uvarint(self, name: str) -> int:
        """Unsigned LEB128 as Kafka writes it (at most 5 bytes for an int32)."""
        buf, pos, end = self.buf, self.pos, self.end
        value = shift = 0
        for i in range(_MAX_VARINT_BYTES):
            if pos + i >= end:
                raise DecodeError(f"{name}: varint truncated at offset {pos + i}")
            b = buf[pos + i]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                self.pos = pos + i + 1
                return value
            shift += 7
        raise DecodeError(f"{name}: varint longer than {_MAX_VARINT_BYTES} bytes at offset {pos}")

    # -- strings and bytes ----------------------------------------------------------------------------
    def _text(self, size: int, name: str) -> str:
        # Java's new String(bytes, UTF_8) replaces malformed input, so do we (and so does Spark's decode)
        return self.raw(size, name).decode("utf-8", "replace")

    def string(self, name: str) -> str:
        size = self.int16(name)
        if size < 0:
            raise DecodeError(f"{name}: non-nullable string is null")
        return self._text(size, name)

    def nullable_string(self, name: str) -> str | None:
        size = self.int16(name)
        return None if size < 0 else self._text(size, name)

    def compact_string(self, name: str) -> str:
        size = self.uvarint(name) - 1
        if size < 0:
            raise DecodeError(f"{name}: non-nullable string is null")
        return self._text(size, name)

    def compact_nullable_string(self, name: str) -> str | None:
        size = self.uvarint(name) - 1
        return None if size < 0 else self._text(size, name)

    def bytes_(self, name: str) -> bytes:
        size = self.int32(name)
        if size < 0:
            raise DecodeError(f"{name}: non-nullable bytes are null")
        return self.raw(size, name)

    def nullable_bytes(self, name: str) -> bytes | None:
        size = self.int32(name)
        return None if size < 0 else self.raw(size, name)

    def compact_bytes(self, name: str) -> bytes:
        size = self.uvarint(name) - 1
        if size < 0:
            raise DecodeError(f"{name}: non-nullable bytes are null")
        return self.raw(size, name)

    def compact_nullable_bytes(self, name: str) -> bytes | None:
        size = self.uvarint(name) - 1
        return None if size < 0 else self.raw(size, name)

    # -- arrays ---------------------------------------------------------------------------------------
    def _count(self, count: int, min_item: int, name: str) -> int:
        if count < 0:
            raise DecodeError(f"{name}: non-nullable array is null")
        if count * min_item > self.end - self.pos:  # garbage lengths fail here, not after a huge loop
            raise DecodeError(f"{name}: {count} items cannot fit in {self.end - self.pos} bytes")
        return count

    def array(self, item: Callable[["Reader"], T], name: str, min_item: int = 1) -> tuple[T, ...]:
        count = self._count(self.int32(name), min_item, name)
        return tuple(item(self) for _ in range(count))

    def compact_array(self, item: Callable[["Reader"], T], name: str, min_item: int = 1) -> tuple[T, ...]:
        count = self._count(self.uvarint(name) - 1, min_item, name)
        return tuple(item(self) for _ in range(count))

    def compact_nullable_array(
        self, item: Callable[["Reader"], T], name: str, min_item: int = 1
    ) -> tuple[T, ...] | None:
        count = self.uvarint(name) - 1
        return None if count < 0 else tuple(item(self) for _ in range(self._count(count, min_item, name)))

    def int32_array(self, name: str) -> tuple[int, ...]:
        return self._int32s(self._count(self.int32(name), 4, name))

    def compact_int32_array(self, name: str) -> tuple[int, ...]:
        return self._int32s(self._count(self.uvarint(name) - 1, 4, name))

    def compact_nullable_int32_array(self, name: str) -> tuple[int, ...] | None:
        count = self.uvarint(name) - 1
        return None if count < 0 else self._int32s(self._count(count, 4, name))

    def compact_int16_array(self, name: str) -> tuple[int, ...]:
        count = self._count(self.uvarint(name) - 1, 2, name)
        pos = self.pos
        self.pos = pos + 2 * count
        return struct.unpack_from(f">{count}h", self.buf, pos)

    def _int32s(self, count: int) -> tuple[int, ...]:
        pos = self.pos
        self.pos = pos + 4 * count
        return struct.unpack_from(f">{count}i", self.buf, pos)

    # -- tagged fields (flexible versions) ------------------------------------------------------------
    def tagged_fields(self, name: str) -> dict[int, bytes]:
        """The tagged-field section: {tag: raw payload}. Callers decode the tags they know, skip the rest."""
        count = self.uvarint(f"{name}.tagged_fields")
        if count == 0:
            return {}
        tags: dict[int, bytes] = {}
        for _ in range(count):
            tag = self.uvarint(f"{name}.tag")
            size = self.uvarint(f"{name}.tag[{tag}].size")
            tags[tag] = self.raw(size, f"{name}.tag[{tag}]")
        return tags

    def expect_end(self, name: str) -> None:
        if self.pos != self.end:
            raise DecodeError(f"{name}: {self.end - self.pos} unexpected trailing bytes")
