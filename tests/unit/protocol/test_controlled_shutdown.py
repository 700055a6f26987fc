"""The hand-written ControlledShutdown (key 7) codec: Kafka's layouts of v1-v3 (v3 flexible,
with header tagged fields), byte for byte, both directions, and refusal of malformed bodies."""

from __future__ import annotations

import pytest

from moldau.protocol import controlled_shutdown as codec
from moldau.protocol.errors import InvalidRequest
from moldau.protocol.messages import (
    decode_request_header,
    is_flexible,
    response_header_bytes,
)

REQUEST = codec.ControlledShutdownRequest(broker_id=2, broker_epoch=0x1_0000_0005)


def test_v3_request_is_kafkas_layout_byte_for_byte() -> None:
    frame = codec.encode_request(3, 9, "broker-2-to-controller", REQUEST)
    client = b"broker-2-to-controller"
    payload = (b"\x00\x07\x00\x03\x00\x00\x00\x09" + len(client).to_bytes(2, "big") + client
               + b"\x00"                             # header tagged fields (header v2)
               + b"\x00\x00\x00\x02"                 # broker_id
               + b"\x00\x00\x00\x01\x00\x00\x00\x05"  # broker_epoch
               + b"\x00")                            # body tagged fields
    assert frame == len(payload).to_bytes(4, "big") + payload


@pytest.mark.parametrize("version", [1, 2, 3])
def test_requests_read_back_through_the_brokers_header_reader(version: int) -> None:
    frame = codec.encode_request(version, 7, "c", REQUEST)[4:]
    header, offset = decode_request_header(frame)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        7, version, 7, "c")
    decoded = codec.decode_request_body(version, frame, offset, header_tags=False)
    assert decoded.broker_id == 2
    assert decoded.broker_epoch == (REQUEST.broker_epoch if version >= 2 else -1)


def test_only_v3_is_flexible() -> None:
    assert [is_flexible(7, v) for v in (1, 2, 3)] == [False, False, True]


@pytest.mark.parametrize("version", [1, 2, 3])
def test_responses_round_trip_with_the_brokers_response_header(version: int) -> None:
    answer = codec.ControlledShutdownResponse(0, (("orders", 3), ("ü", 0)))
    frame = response_header_bytes(7, version, 41) + codec.encode_response_body(version, answer)
    assert codec.decode_response(version, frame) == (41, answer)


def test_v1_response_is_kafkas_layout() -> None:
    body = codec.encode_response_body(1, codec.ControlledShutdownResponse(0, (("t", 1),)))
    assert body == b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\x00\x00\x00\x01"


@pytest.mark.parametrize(("version", "body"), [
    (1, b"\x00\x00"),                     # broker id cut short
    (2, b"\x00\x00\x00\x01\x00\x00"),      # epoch cut short
    (1, b"\x00\x00\x00\x01\x00"),          # trailing byte
    (3, b"\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x01"),  # no tagged fields
])
def test_malformed_bodies_are_invalid_requests(version: int, body: bytes) -> None:
    with pytest.raises(InvalidRequest):
        codec.decode_request_body(version, body, 0, header_tags=False)


def test_a_response_cut_short_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="ControlledShutdown v1"):
        codec.decode_response(1, b"\x00\x00\x00\x01\x00\x00\x00\x00\x00\x05")
