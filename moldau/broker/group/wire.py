"""A tiny reader/writer for the key and value schemas of ``__consumer_offsets``.

Those schemas (OffsetCommitKey, GroupMetadataValue, ...) are Kafka's coordinator records, not
protocol messages, so kio has no classes for them. They use the ordinary Kafka wire types:
classic (int16-length strings, int32-length arrays) up to some version, compact (unsigned
varint length + 1) with tagged fields from their first flexible version.
"""

from __future__ import annotations

import struct
import uuid

from ...protocol.varint import uvarint_bytes

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


# The longest string a classic (non-flexible) field holds: an int16 length. Every key of
# ``__consumer_offsets`` is classic, so a group id, topic name or member id longer than this
# (in UTF-8) cannot be stored, as in Kafka, whose generated writers refuse it too.
MAX_CLASSIC_STRING = 32767


class RecordFormatError(ValueError):
    """A key or value in ``__consumer_offsets`` that does not decode."""


class StringTooLong(ValueError):
    """A string too long for the classic field it must be written to."""


def fits_classic(value: str) -> bool:
    """Whether ``value`` fits a classic string field (see :data:`MAX_CLASSIC_STRING`)."""
    return len(value.encode("utf-8")) <= MAX_CLASSIC_STRING


class Writer:
    """Appends Kafka wire types to a buffer; ``flexible`` selects compact encodings."""

    def __init__(self, flexible: bool = False) -> None:
        self.flexible = flexible
        self.buf = bytearray()

    def i8(self, value: int) -> Writer:
        self.buf += _I8.pack(value)
        return self

    def i16(self, value: int) -> Writer:
        self.buf += _I16.pack(value)
        return self

    def i32(self, value: int) -> Writer:
        self.buf += _I32.pack(value)
        return self

    def i64(self, value: int) -> Writer:
        self.buf += _I64.pack(value)
        return self

    def uvarint(self, value: int) -> Writer:
        self.buf += uvarint_bytes(value)
        return self

    def uuid(self, value: uuid.UUID) -> Writer:
        self.buf += value.bytes
        return self

    def _length(self, length: int | None, classic: struct.Struct) -> None:
        if self.flexible:
            self.uvarint(0 if length is None else length + 1)
        else:
            self.buf += classic.pack(-1 if length is None else length)

    def string(self, value: str | None) -> Writer:
        if value is None:
            self._length(None, _I16)
            return self
        raw = value.encode("utf-8")
        if not self.flexible and len(raw) > MAX_CLASSIC_STRING:
            raise StringTooLong(f"a string of {len(raw)} bytes ({value[:40]!r}...) does not "
                                f"fit a classic field (at most {MAX_CLASSIC_STRING} bytes)")
        self._length(len(raw), _I16)
        self.buf += raw
        return self

    def bytes(self, value: bytes | None) -> Writer:
        self._length(None if value is None else len(value), _I32)
        if value is not None:
            self.buf += value
        return self

    def array_len(self, count: int | None) -> Writer:
        self._length(count, _I32)
        return self

    def tags(self) -> Writer:
        """An empty tagged-field section (flexible versions only)."""
        if self.flexible:
            self.uvarint(0)
        return self

    def getvalue(self) -> bytes:
        return bytes(self.buf)


class Reader:
    """Reads Kafka wire types from a buffer; raises :class:`RecordFormatError` when short."""

    def __init__(self, data: bytes | memoryview, flexible: bool = False) -> None:
        self.data = bytes(data)
        self.pos = 0
        self.flexible = flexible

    def _take(self, size: int) -> bytes:
        end = self.pos + size
        if size < 0 or end > len(self.data):
            raise RecordFormatError(
                f"record of {len(self.data)} bytes ends before offset {end}"
            )
        chunk = self.data[self.pos:end]
        self.pos = end
        return chunk

    def _unpack(self, fmt: struct.Struct) -> int:
        return int(fmt.unpack(self._take(fmt.size))[0])

    def i8(self) -> int:
        return self._unpack(_I8)

    def i16(self) -> int:
        return self._unpack(_I16)

    def i32(self) -> int:
        return self._unpack(_I32)

    def i64(self) -> int:
        return self._unpack(_I64)

    def uvarint(self) -> int:
        result = 0
        shift = 0
        while True:
            byte = self._take(1)[0]
            result |= (byte & 0x7F) << shift
            if byte < 0x80:
                return result
            shift += 7
            if shift > 35:
                raise RecordFormatError("unsigned varint is too long")

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=self._take(16))

    def _length(self, classic: struct.Struct) -> int | None:
        n = self.uvarint() - 1 if self.flexible else self._unpack(classic)
        return None if n < 0 else n

    def nullable_string(self) -> str | None:
        length = self._length(_I16)
        if length is None:
            return None
        try:
            return self._take(length).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RecordFormatError(f"string is not UTF-8: {exc}") from exc

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise RecordFormatError("null where a string is required")
        return value

    def nullable_bytes(self) -> bytes | None:
        length = self._length(_I32)
        return None if length is None else self._take(length)

    def bytes(self) -> bytes:
        return self.nullable_bytes() or b""

    def array_len(self) -> int:
        length = self._length(_I32)
        return 0 if length is None else length

    def skip_tags(self) -> None:
        if not self.flexible:
            return
        for _ in range(self.uvarint()):
            self.uvarint()
            self._take(self.uvarint())
