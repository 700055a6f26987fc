"""Frame tracking of both directions, with the byte stream cut at every possible place."""

from __future__ import annotations

import itertools
import random
import struct

import pytest

from moldau.protocol.errors import ProtocolError
from moldau.proxy.streams import InFlight, RequestScanner, ResponseStream


def request(api_key: int, version: int, correlation_id: int, body: bytes = b"") -> bytes:
    payload = struct.pack(">hhi", api_key, version, correlation_id) + b"\x00\x03abc" + body
    return struct.pack(">i", len(payload)) + payload


def response(correlation_id: int, body: bytes) -> bytes:
    return struct.pack(">ii", 4 + len(body), correlation_id) + body


def chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    edges = [0, *sorted(set(cuts)), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(edges) if b > a]


STREAM = (request(18, 3, 1) + request(3, 12, 2, b"x" * 40) + request(0, 9, 3, b"y" * 1000)
          + request(1, 12, 4) + request(10, 4, 5, b"z"))
HEADS = [(18, 3, 1), (3, 12, 2), (0, 9, 3), (1, 12, 4), (10, 4, 5)]


def test_request_heads_in_one_read() -> None:
    assert RequestScanner().feed(STREAM) == HEADS


@pytest.mark.parametrize("cut", range(1, 80))
def test_request_heads_with_one_cut_anywhere(cut: int) -> None:
    scanner = RequestScanner()
    heads = []
    for piece in chunks(STREAM, [cut]):
        heads += scanner.feed(piece)
    assert heads == HEADS


def test_request_heads_byte_by_byte_and_random_cuts() -> None:
    scanner = RequestScanner()
    heads = []
    for i in range(len(STREAM)):
        heads += scanner.feed(STREAM[i:i + 1])
    assert heads == HEADS
    rng = random.Random(7)
    for _ in range(200):
        scanner = RequestScanner()
        heads = []
        for piece in chunks(STREAM, rng.sample(range(1, len(STREAM)), 6)):
            heads += scanner.feed(memoryview(piece))
        assert heads == HEADS


def test_request_shorter_than_a_header_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError):
        RequestScanner().feed(struct.pack(">ihhi", 4, 3, 1, 1))


# Responses: frames 2 and 4 are rewritten (replaced by "R<cid>" frames), the rest pass.
RESPONSES = [response(1, b"a" * 30), response(2, b"meta" * 20), response(3, b"p" * 500),
             response(4, b"f" * 9), response(5, b"")]
RESPONSE_STREAM = b"".join(RESPONSES)


def replaced(correlation_id: int) -> bytes:
    return response(correlation_id, f"R{correlation_id}".encode())


def expected_output() -> bytes:
    out = b""
    for i, frame in enumerate(RESPONSES, start=1):
        out += replaced(i) if i in (2, 4) else frame
    return out


def new_stream(seen: list[int]) -> ResponseStream:
    def lookup(cid: int) -> tuple[int, int] | None:
        seen.append(cid)
        return (3, 12) if cid in (2, 4) else None

    def rewrite(api_key: int, version: int, frame: bytes) -> bytes | None:
        (cid,) = struct.unpack_from(">i", frame)
        assert (api_key, version) == (3, 12)
        assert frame == RESPONSES[cid - 1][4:]  # the whole frame, without its size prefix
        return replaced(cid)

    return ResponseStream(lookup, rewrite)


def run(stream: ResponseStream, pieces: list[bytes]) -> bytes:
    out = b""
    for piece in pieces:
        out += b"".join(bytes(p) for p in stream.feed(piece))
    return out


def test_responses_in_one_read() -> None:
    seen: list[int] = []
    stream = new_stream(seen)
    assert run(stream, [RESPONSE_STREAM]) == expected_output()
    assert seen == [1, 2, 3, 4, 5]
    assert stream.idle


@pytest.mark.parametrize("cut", range(1, 140, 3))
def test_responses_with_cuts(cut: int) -> None:
    seen: list[int] = []
    stream = new_stream(seen)
    assert run(stream, chunks(RESPONSE_STREAM, [cut, cut + 5, cut + 90])) == expected_output()
    assert seen == [1, 2, 3, 4, 5]


def test_responses_byte_by_byte_and_random_cuts() -> None:
    seen: list[int] = []
    stream = new_stream(seen)
    data = RESPONSE_STREAM
    assert run(stream, [data[i:i + 1] for i in range(len(data))]) == expected_output()
    rng = random.Random(11)
    for _ in range(300):
        seen = []
        stream = new_stream(seen)
        pieces = chunks(data, rng.sample(range(1, len(data)), rng.randint(1, 12)))
        assert run(stream, pieces) == expected_output()
        assert seen == [1, 2, 3, 4, 5]


def test_passed_frames_are_not_copied() -> None:
    stream = new_stream([])
    data = response(1, b"x" * 100) + response(3, b"y" * 100)
    pieces = stream.feed(data)
    assert len(pieces) == 1 and pieces[0] is data


def test_rewriter_returning_none_keeps_the_original_frame() -> None:
    stream = ResponseStream(lambda cid: (3, 12), lambda k, v, f: None)
    assert run(stream, chunks(RESPONSE_STREAM, [3, 50, 51])) == RESPONSE_STREAM


def test_frames_over_the_rewrite_limit_pass_through() -> None:
    calls: list[bytes] = []

    def rewrite(api_key: int, version: int, frame: bytes) -> bytes:
        calls.append(frame)
        return replaced(struct.unpack_from(">i", frame)[0])

    stream = ResponseStream(lambda cid: (3, 12), rewrite, max_rewrite_size=100)
    expected = b"".join(frame if len(frame) > 104 else replaced(i)
                        for i, frame in enumerate(RESPONSES, start=1))
    assert run(stream, chunks(RESPONSE_STREAM, [7, 200])) == expected
    assert len(calls) == 4  # every frame but the 504-byte one


def test_response_without_correlation_id_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError):
        new_stream([]).feed(struct.pack(">ii", 2, 0))


def test_in_flight_matches_in_order_and_skips_unanswered_produce() -> None:
    flight = InFlight(lambda api_key, version: api_key == 3)
    flight.add([(3, 12, 1), (0, 9, 2), (0, 9, 3), (1, 12, 4), (3, 4, 5)])
    assert flight.answer(1) == (3, 12)
    # Produce 2 and 3 were acks=0 (never answered): the Fetch answer skips them.
    assert flight.answer(4) is None
    assert flight.answer(5) == (3, 4)
    assert len(flight) == 0 and flight.unmatched == 0


def test_in_flight_same_correlation_id_reused() -> None:
    flight = InFlight(lambda api_key, version: api_key == 10)
    flight.add([(10, 3, 0), (18, 3, 0), (10, 4, 0)])  # kafkajs-style ids restarting at 0
    assert flight.answer(0) == (10, 3)
    assert flight.answer(0) is None
    assert flight.answer(0) == (10, 4)


def test_in_flight_unknown_answer_is_counted_not_matched() -> None:
    flight = InFlight(lambda api_key, version: True)
    flight.add([(3, 12, 1)])
    assert flight.answer(99) is None
    assert flight.unmatched == 1
    assert flight.answer(1) == (3, 12)


def test_inspected_frames_left_alone_are_not_copied() -> None:
    seen: list[int] = []
    stream = ResponseStream(lambda cid: seen.append(cid) or (1, 16), lambda k, v, f: None)
    pieces = stream.feed(RESPONSE_STREAM)
    assert seen == [1, 2, 3, 4, 5]
    assert len(pieces) == 1 and pieces[0] is RESPONSE_STREAM
