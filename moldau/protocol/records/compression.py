"""Kafka compression codecs (the low three bits of a batch's attributes).

Libraries: python's zlib (gzip), cramjam (snappy), lz4 (LZ4 frame format, as Kafka uses since
magic 1 was fixed), zstandard. Snappy comes in two shapes: raw blocks (librdkafka can send
them) and the xerial framing the Java client writes; we read both and write xerial so every
client can read what we produce.
"""

from __future__ import annotations

import enum
import struct
import zlib

import cramjam
import lz4.frame
import zstandard


class Codec(enum.IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def parse(cls, name: str) -> Codec:
        """A codec from Kafka's ``compression.type`` spelling (none, gzip, snappy, lz4, zstd)."""
        try:
            return cls[name.strip().upper()]
        except KeyError:
            raise ValueError(
                f"unknown compression type {name!r}; expected none, gzip, snappy, lz4 or zstd"
            ) from None


_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024
_INT32 = struct.Struct(">i")


def _snappy_compress(data: bytes) -> bytes:
    out = [_XERIAL_HEADER]
    view = memoryview(data)
    for start in range(0, len(data), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK]))
        out.append(_INT32.pack(len(block)))
        out.append(block)
    return b"".join(out)


def _snappy_decompress(data: bytes | memoryview) -> bytes:
    data = bytes(data)
    if not data.startswith(_XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(data))
    pos = len(_XERIAL_HEADER)
    out = []
    while pos < len(data):
        (length,) = _INT32.unpack_from(data, pos)
        pos += 4
        out.append(bytes(cramjam.snappy.decompress_raw(data[pos : pos + length])))
        pos += length
    return b"".join(out)


_zstd_compressor = zstandard.ZstdCompressor(level=3)


def compress(codec: Codec | int, data: bytes) -> bytes:
    """Compress the records section of a batch with ``codec``."""
    match codec:
        case Codec.NONE:
            return data
        case Codec.GZIP:
            compressor = zlib.compressobj(6, zlib.DEFLATED, 31)
            return compressor.compress(data) + compressor.flush()
        case Codec.SNAPPY:
            return _snappy_compress(data)
        case Codec.LZ4:
            return lz4.frame.compress(data, block_linked=False, store_size=False)
        case Codec.ZSTD:
            return _zstd_compressor.compress(data)
    raise ValueError(f"unknown compression codec {codec}")


def decompress(codec: Codec | int, data: bytes | memoryview) -> bytes:
    """Decompress the records section of a batch; raises ValueError on bad input."""
    try:
        match codec:
            case Codec.NONE:
                return bytes(data)
            case Codec.GZIP:
                return zlib.decompress(data, 47)
            case Codec.SNAPPY:
                return _snappy_decompress(data)
            case Codec.LZ4:
                return lz4.frame.decompress(data)
            case Codec.ZSTD:
                return zstandard.ZstdDecompressor().decompressobj().decompress(data)
    except ValueError:
        raise
    except Exception as exc:
        raise ValueError(f"cannot decompress {Codec(codec).name} batch: {exc}") from exc
    raise ValueError(f"unknown compression codec {codec}")
