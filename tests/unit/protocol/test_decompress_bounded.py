"""decompress_bounded: the broker's decompression of produced batches never makes more than
its limit (a decompression bomb costs the limit, not what it expands to), reads back what
every codec writes, and refuses data that is not one complete frame."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable

import pytest
import zstandard

from moldau.protocol.records.compression import (
    Codec,
    DecompressedSizeExceeded,
    compress,
    decompress,
    decompress_bounded,
)

CODECS = [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD]
LIMIT = 1 << 20


def peak_bytes(fn: Callable[[], object]) -> int:
    """Peak traced memory while ``fn`` runs (exceptions included)."""
    tracemalloc.start()
    try:
        fn()
    except ValueError:
        pass
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


def zstd_without_content_size(data: bytes, **params: bool) -> bytes:
    """A zstd frame as librdkafka and zstd-jni write it: no content size."""
    compressor = zstandard.ZstdCompressor(**params).compressobj()
    return compressor.compress(data) + compressor.flush()


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip(codec: Codec) -> None:
    data = b"".join(b"record %d " % i for i in range(50_000))
    assert decompress_bounded(codec, compress(codec, data), len(data)) == data
    assert decompress_bounded(codec, memoryview(compress(codec, data)), len(data)) == data


def test_zstd_frame_without_content_size() -> None:
    data = bytes(range(256)) * 2000
    frame = zstd_without_content_size(data)
    assert decompress_bounded(Codec.ZSTD, frame, len(data)) == data
    with pytest.raises(DecompressedSizeExceeded):
        decompress_bounded(Codec.ZSTD, frame, len(data) - 1)
    with pytest.raises(ValueError) as info:
        decompress_bounded(Codec.ZSTD, frame[:-6], len(data))
    assert not isinstance(info.value, DecompressedSizeExceeded)


@pytest.mark.parametrize("checksum", [False, True])
def test_zstd_streamed_frames_end_exactly(checksum: bool) -> None:
    """Frames without a content size are read in steps, and their end is found from the
    block headers: raw, RLE and compressed blocks, several of them, with or without the
    checksum; anything cut or appended is refused, even where the output would be complete."""
    import random

    rng = random.Random(5)
    data = rng.randbytes(300_000) + bytes(400_000) + b"text " * 60_000  # raw, RLE, compressed
    frame = zstd_without_content_size(data, write_checksum=checksum)
    assert zstandard.get_frame_parameters(frame).content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert decompress_bounded(Codec.ZSTD, frame, len(data)) == data
    for cut in (1, 2, 3, 4, 5, 100, len(frame) // 2):
        with pytest.raises(ValueError, match="truncated"):
            decompress_bounded(Codec.ZSTD, frame[:-cut], len(data))
    for extra in (b"\x00", b"\x28\xb5\x2f\xfd", frame):
        with pytest.raises(ValueError, match="follow the end"):
            decompress_bounded(Codec.ZSTD, frame + extra, len(data))
    if checksum:
        flipped = frame[:-1] + bytes([frame[-1] ^ 0xFF])
        with pytest.raises(ValueError, match="checksum"):
            decompress_bounded(Codec.ZSTD, flipped, len(data))


def test_snappy_raw_block_as_librdkafka_may_send() -> None:
    import cramjam

    data = b"abc" * 10_000
    block = bytes(cramjam.snappy.compress_raw(data))
    assert decompress_bounded(Codec.SNAPPY, block, len(data)) == data
    with pytest.raises(DecompressedSizeExceeded):
        decompress_bounded(Codec.SNAPPY, block, len(data) - 1)


@pytest.mark.parametrize("codec", CODECS)
def test_one_byte_over_the_limit(codec: Codec) -> None:
    data = bytes(4096)
    with pytest.raises(DecompressedSizeExceeded):
        decompress_bounded(codec, compress(codec, data), 4095)
    assert len(decompress_bounded(codec, compress(codec, data), 4096)) == 4096


@pytest.mark.parametrize("codec", CODECS)
def test_not_one_complete_frame(codec: Codec) -> None:
    frame = compress(codec, b"payload " * 500)
    for bad in (b"", b"\x00" * 40, frame[:-5], frame[: len(frame) // 2], frame + b"tail"):
        with pytest.raises(ValueError) as info:
            decompress_bounded(codec, bad, 1 << 20)
        assert not isinstance(info.value, DecompressedSizeExceeded), bad[:20]


def test_snappy_lying_lengths() -> None:
    """Raw snappy starts with the length it claims: checked before any allocation."""
    claims_4_gib = b"\xff\xff\xff\xff\x0f" + b"\x00" * 10
    assert peak_bytes(lambda: decompress_bounded(Codec.SNAPPY, claims_4_gib, LIMIT)) < LIMIT
    with pytest.raises(DecompressedSizeExceeded):
        decompress_bounded(Codec.SNAPPY, claims_4_gib, LIMIT)
    xerial = compress(Codec.SNAPPY, b"x" * 100)
    for length in (b"\xff\xff\xff\xff", b"\x7f\xff\xff\xff"):  # -1, past the end
        with pytest.raises(ValueError):
            decompress_bounded(Codec.SNAPPY, xerial[:16] + length + xerial[20:], LIMIT)


@pytest.mark.parametrize("codec", [*CODECS, "zstd-streamed"])
def test_bomb_costs_the_limit_not_its_size(codec: Codec | str) -> None:
    """64 MiB of zeros (a few KB compressed) against a 1 MiB limit: refused, with a memory
    peak near the limit, while plain decompression of the same bytes peaks at 64 MiB+."""
    zeros = bytes(64 << 20)
    if codec == "zstd-streamed":
        codec, bomb = Codec.ZSTD, zstd_without_content_size(zeros)
    else:
        assert isinstance(codec, Codec)
        bomb = compress(codec, zeros)
    del zeros
    with pytest.raises(DecompressedSizeExceeded):
        decompress_bounded(codec, bomb, LIMIT)
    bounded = peak_bytes(lambda: decompress_bounded(codec, bomb, LIMIT))
    unbounded = peak_bytes(lambda: decompress(codec, bomb))
    assert bounded < 3 * LIMIT, bounded
    assert unbounded > 60 << 20, unbounded  # the measurement sees a decompression at all
