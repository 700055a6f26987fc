"""The live fuzzer's oracle decompresses what it judges within its own bound: a zstd frame
without a content size, or a snappy block declaring a huge length, once made the driver (the
pytest process of `make test`) grow to 22 GiB and be OOM-killed."""

import io
import tracemalloc

import pytest
import zstandard

from tests.faults.fuzz import batches as B


def test_zstd_frame_without_content_size_is_bounded() -> None:
    buf = io.BytesIO()
    with zstandard.ZstdCompressor(write_content_size=False).stream_writer(buf, closefd=False) as w:
        for _ in range(64):
            w.write(bytes(1 << 20))
    assert zstandard.frame_content_size(buf.getvalue()) == -1
    tracemalloc.start()
    try:
        with pytest.raises(OverflowError):
            B._decompress(B.Codec.ZSTD, buf.getvalue(), 16 << 20)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # The 64 MiB it would decompress to is never held: only the bound and a little more.
    assert peak < 40 << 20, f"peak {peak >> 20} MiB"


def test_snappy_block_declaring_4_gib_is_refused_before_allocation() -> None:
    with pytest.raises(OverflowError):
        B._decompress(B.Codec.SNAPPY, b"\xff\xff\xff\xff\x0f" + bytes(10), 16 << 20)


def test_small_payloads_still_decompress() -> None:
    raw = zstandard.ZstdCompressor(write_content_size=False).compress(b"abc" * 10)
    assert B._decompress(B.Codec.ZSTD, raw, 16 << 20) == b"abc" * 10
