"""Kafka compression codecs (the low three bits of a batch's attributes).

Libraries: python's zlib (gzip), cramjam (snappy), lz4 (LZ4 frame format, as Kafka uses since
magic 1 was fixed), zstandard. Snappy comes in two shapes: raw blocks (librdkafka can send
them) and the xerial framing the Java client writes; we read both and write xerial so every
client can read what we produce.

:func:`decompress` trusts its input (clients reading what a broker served, compaction of a
validated log). :func:`decompress_bounded` is for data from the network (the broker validating
a produce): it never produces more than a limit, whatever sizes the data claims, and refuses
truncated frames and bytes after the frame.
"""

from __future__ import annotations

import enum
import struct
import zlib

import cramjam
import lz4.frame
import zstandard

__all__ = ["Codec", "DecompressedSizeExceeded", "compress", "decompress", "decompress_bounded"]


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
# Output step of the bounded decompressors that allocate their step up front.
_STEP = 4 << 20


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


class DecompressedSizeExceeded(ValueError):
    """The data would decompress to more than the allowed number of bytes."""


def decompress_bounded(codec: Codec | int, data: bytes | memoryview, limit: int) -> bytes:
    """Decompress one batch's records section into at most ``limit`` bytes.

    Each codec's own streaming API stops at ``limit + 1`` output bytes, so a small input that
    expands without end (a decompression bomb) costs at most ``limit`` bytes of memory and the
    time to produce them; sizes the data declares (zstd content size, snappy lengths) are
    checked before anything is allocated. Raises :class:`DecompressedSizeExceeded` past
    ``limit``, ValueError for data that is not one complete, valid frame of ``codec`` (bytes
    after the frame included: consumers disagree on what they mean).
    """
    try:
        match codec:
            case Codec.GZIP:
                return _gzip_bounded(data, limit)
            case Codec.SNAPPY:
                return _snappy_bounded(data, limit)
            case Codec.LZ4:
                return _lz4_bounded(data, limit)
            case Codec.ZSTD:
                return _zstd_bounded(data, limit)
            case Codec.NONE:
                if len(data) > limit:
                    raise DecompressedSizeExceeded(f"{len(data)} bytes exceed {limit}")
                return bytes(data)
    except ValueError:
        raise
    except Exception as exc:  # each library raises its own error types for bad input
        raise ValueError(f"invalid {Codec(codec).name} data: {exc}") from exc
    raise ValueError(f"unknown compression codec {codec}")


def _too_large(name: str, limit: int) -> DecompressedSizeExceeded:
    return DecompressedSizeExceeded(f"{name} data decompresses to more than {limit} bytes")


def _check_end(name: str, finished: bool, unused: bytes) -> None:
    if not finished:
        raise ValueError(f"{name} data is truncated (the frame does not end)")
    if unused:
        raise ValueError(f"{len(unused)} bytes follow the end of the {name} frame")


def _gzip_bounded(data: bytes | memoryview, limit: int) -> bytes:
    # wbits 47: a gzip or zlib header, as :func:`decompress` accepts.
    inflater = zlib.decompressobj(47)
    out = inflater.decompress(data, limit + 1)
    if len(out) > limit:
        raise _too_large("GZIP", limit)
    _check_end("GZIP", inflater.eof, inflater.unused_data)
    return out


def _lz4_bounded(data: bytes | memoryview, limit: int) -> bytes:
    # In steps: the decompressor allocates its max_length up front, and a buffer much larger
    # than the output costs page faults on every call (+0.3 ms per MiB batch at 64 MiB).
    decoder = lz4.frame.LZ4FrameDecompressor()
    parts = [decoder.decompress(data, max_length=min(limit + 1, _STEP))]
    produced = len(parts[0])
    while not decoder.eof and not decoder.needs_input and produced <= limit:
        parts.append(decoder.decompress(b"", max_length=min(limit + 1 - produced, _STEP)))
        produced += len(parts[-1])
    if produced > limit:
        raise _too_large("LZ4", limit)
    _check_end("LZ4", decoder.eof, decoder.unused_data or b"")
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _zstd_bounded(data: bytes | memoryview, limit: int) -> bytes:
    params = zstandard.get_frame_parameters(data)
    decoder = zstandard.ZstdDecompressor()
    if params.content_size != zstandard.CONTENTSIZE_UNKNOWN:
        # zstandard allocates a declared content size as it is: check it first.
        if params.content_size > limit:
            raise _too_large("ZSTD", limit)
        return decoder.decompress(data, allow_extra_data=False)
    # No content size (librdkafka and zstd-jni stream their frames). decompress() with
    # max_output_size allocates all of it (+0.4 ms per MiB batch in page faults), and the
    # stream reader, which bounds the output in steps, says nothing of a truncated frame or
    # of bytes after it: so the frame's block headers are walked first for its exact end.
    _zstd_frame_end(data, params.has_checksum)
    reader = decoder.stream_reader(data)
    parts = []
    produced = 0
    while produced <= limit:
        chunk = reader.read(min(limit + 1 - produced, _STEP))
        if not chunk:
            break
        parts.append(chunk)
        produced += len(chunk)
    if produced > limit:
        raise _too_large("ZSTD", limit)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _zstd_frame_end(data: bytes | memoryview, has_checksum: bool) -> None:
    """Check that one zstd frame (RFC 8878, section 3.1.1) ends exactly at the end of
    ``data``: its header, then blocks of a 3-byte header (last-block bit, type: raw, RLE,
    compressed; size) and their content, then the optional 4-byte checksum."""
    pos = zstandard.frame_header_size(data)
    end = len(data)
    while True:
        if end - pos < 3:
            raise ValueError("ZSTD data is truncated (the frame does not end)")
        header = data[pos] | data[pos + 1] << 8 | data[pos + 2] << 16
        kind = (header >> 1) & 3
        if kind == 3:
            raise ValueError("ZSTD data has a block of the reserved type 3")
        pos += 3 + (1 if kind == 1 else header >> 3)
        if header & 1:
            break
    pos += 4 if has_checksum else 0
    if pos > end:
        raise ValueError("ZSTD data is truncated (the frame does not end)")
    if pos < end:
        raise ValueError(f"{end - pos} bytes follow the end of the ZSTD frame")


def _snappy_bounded(data: bytes | memoryview, limit: int) -> bytes:
    # Every raw block starts with the length it decompresses to: all are read (and their
    # sum checked against the limit) before anything is allocated, then each block is
    # decompressed into its place in one buffer.
    view = memoryview(data)
    if bytes(view[: len(_XERIAL_MAGIC)]) != _XERIAL_MAGIC:
        blocks = [(view, _snappy_length(view, limit))]
    else:
        blocks = []
        total = 0
        pos = len(_XERIAL_HEADER)
        if len(view) < pos:
            raise ValueError("SNAPPY data is truncated (xerial header)")
        while pos < len(view):
            if len(view) - pos < 4:
                raise ValueError("SNAPPY data is truncated (xerial block length)")
            (length,) = _INT32.unpack_from(view, pos)
            pos += 4
            if length < 0 or length > len(view) - pos:
                raise ValueError(f"SNAPPY xerial block of {length} bytes runs past the end")
            block = view[pos : pos + length]
            size = _snappy_length(block, limit - total)
            blocks.append((block, size))
            total += size
            pos += length
    out = bytearray(sum(size for _block, size in blocks))
    target = memoryview(out)
    at = 0
    for block, size in blocks:
        written = cramjam.snappy.decompress_raw_into(block, target[at : at + size])
        if written != size:
            raise ValueError(f"SNAPPY block declares {size} bytes but holds {written}")
        at += size
    return bytes(out)


def _snappy_length(block: memoryview, room: int) -> int:
    size = cramjam.snappy.decompress_raw_len(block)
    if size > room:
        raise DecompressedSizeExceeded(f"SNAPPY data decompresses to more than the limit "
                                       f"({size} bytes in one block, {room} left)")
    return int(size)
