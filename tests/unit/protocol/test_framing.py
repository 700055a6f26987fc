"""Frame decoding and request header parsing."""

from __future__ import annotations

import struct

import pytest

from moldau.protocol.errors import FrameTooLarge, InvalidRequest, ProtocolError
from moldau.protocol.framing import FrameDecoder
from moldau.protocol.messages import decode_request_header, encode_request


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def test_frames_split_across_reads_and_coalesced() -> None:
    payloads = [b"a" * 10, b"", b"b" * 300_000, b"c" * 5]
    stream = b"".join(frame(p) for p in payloads)
    for chunk in (1, 7, 4096, len(stream)):
        decoder = FrameDecoder(1 << 20, buffer_size=1024)
        got = []
        for i in range(0, len(stream), chunk):
            got.extend(decoder.feed(stream[i : i + chunk]))
        assert [bytes(g) for g in got] == payloads


def test_frame_over_limit_is_rejected() -> None:
    decoder = FrameDecoder(100)
    with pytest.raises(FrameTooLarge, match=r"socket\.request\.max\.bytes"):
        decoder.feed(struct.pack(">i", 101))


def test_negative_size_is_rejected() -> None:
    with pytest.raises(ProtocolError):
        FrameDecoder(100).feed(struct.pack(">i", -5))


def test_request_header_round_trip() -> None:
    from kio.schema.metadata.v12.request import MetadataRequest

    raw = encode_request(3, 12, 77, "client-1", MetadataRequest(
        topics=None, allow_auto_topic_creation=True, include_topic_authorized_operations=False))
    header, offset = decode_request_header(raw[4:])
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        3, 12, 77, "client-1")
    assert offset == 10 + len("client-1") + 1  # flexible header: empty tagged fields


@pytest.mark.parametrize(
    "raw", [b"", b"\x00\x03\x00\x0c", b"\x00\x03\x00\x0c\x00\x00\x00\x01\x00\x09ab"]
)
def test_truncated_headers_raise_invalid_request(raw: bytes) -> None:
    with pytest.raises(InvalidRequest):
        decode_request_header(raw)
