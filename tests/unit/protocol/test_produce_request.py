"""The hand-written Produce request decoder equals kio (behind the validator) on every version,
keeps record sets as slices of the frame, and refuses what is malformed."""

from __future__ import annotations

import random
import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from moldau.protocol.entities import build, to_ms
from moldau.protocol.errors import InvalidRequest
from moldau.protocol.messages import RequestHeader, decode_request, encode_body, request_schema
from moldau.protocol.produce_request import (
    MAX_VERSION,
    MIN_VERSION,
    ProduceRequestData,
    decode_produce_body,
)

from .plan_bodies import uvarint

VERSIONS = range(MIN_VERSION, MAX_VERSION + 1)


def kio_body(version: int, data: dict[str, Any]) -> bytes:
    return encode_body(build(request_schema(0, version), data))


def kio_view(version: int, body: bytes, offset: int = 0) -> ProduceRequestData:
    """The generic path's decode (validator, then kio; InvalidRequest for anything wrong) in
    the decoder's shape."""
    value = decode_request(RequestHeader(0, version, 1, None), body, offset)
    return ProduceRequestData(
        value.transactional_id, value.acks, to_ms(value.timeout),
        [(t.name, [(p.index, p.records) for p in t.partition_data]) for t in value.topic_data])


def plain(request: ProduceRequestData) -> tuple[Any, ...]:
    """Comparable form: record sets as bytes."""
    return (request.transactional_id, request.acks, request.timeout_ms,
            [(name, [(index, None if records is None else bytes(records))
                     for index, records in partitions])
             for name, partitions in request.topics])


names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
records = st.one_of(st.none(), st.binary(max_size=40),
                    st.sampled_from([200, 20_000]).map(lambda n: bytes(range(256)) * (n // 256)))
requests = st.fixed_dictionaries({
    "transactional_id": st.one_of(st.none(), names),
    "acks": st.integers(-(1 << 15), (1 << 15) - 1),
    "timeout": st.integers(0, (1 << 31) - 1),
    "topic_data": st.lists(st.fixed_dictionaries({
        "name": names,
        "partition_data": st.lists(st.fixed_dictionaries({
            "index": st.integers(-(1 << 31), (1 << 31) - 1), "records": records}), max_size=4),
    }), max_size=4),
})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(VERSIONS), requests)
def test_equals_kio_for_random_requests(version: int, data: dict[str, Any]) -> None:
    body = kio_body(version, data)
    frame = b"head" + body + b"\x00"  # at an offset, with a trailing byte
    ours = decode_produce_body(version, frame, 4)
    assert plain(ours) == plain(kio_view(version, frame, 4))
    for _name, partitions in ours.topics:
        for _index, records in partitions:
            assert records is None or (isinstance(records, memoryview) and records.obj is frame)


def sample(version: int, partitions: int = 3) -> bytes:
    return kio_body(version, {
        "transactional_id": "tx", "acks": -1, "timeout": 1500,
        "topic_data": [{"name": "events", "partition_data": [
            {"index": i, "records": b"r" * (i * 150)} for i in range(partitions)]}]})


def refused(version: int, body: bytes) -> str:
    with pytest.raises(InvalidRequest) as info:
        decode_produce_body(version, body, 0)
    return str(info.value)


@pytest.mark.parametrize("version", VERSIONS)
def test_every_prefix_is_refused(version: int) -> None:
    body = sample(version)
    assert plain(decode_produce_body(version, body, 0)) == plain(kio_view(version, body))
    for cut in range(len(body)):
        refused(version, body[:cut])


def legacy_head() -> bytes:
    return struct.pack(">hhi", -1, 1, 1000)


def flexible_head() -> bytes:
    return b"\x00" + struct.pack(">hi", 1, 1000)


@pytest.mark.parametrize(("version", "body", "expected"), [
    # Counts no body could hold (the kio abort of the 5-byte varint).
    (9, flexible_head() + bytes.fromhex("ffffffff0f"), "topic_data: tried to allocate"),
    (9, flexible_head() + b"\x02\x02t" + bytes.fromhex("ffffffff0f"),
     "partition_data: tried to allocate"),
    (7, legacy_head() + struct.pack(">i", 0x7FFFFFFF), "topic_data: tried to allocate"),
    (7, legacy_head() + struct.pack(">ihbi", 1, 1, 0x74, 0x7FFFFFFF),
     "partition_data: tried to allocate"),
    # Nulls the schema forbids.
    (9, flexible_head() + b"\x00", "topic_data is null"),
    (9, flexible_head() + b"\x02\x00\x01\x00\x00", "name is null"),
    (9, flexible_head() + b"\x02\x02t\x00\x00\x00", "partition_data is null"),
    (7, legacy_head() + struct.pack(">i", -1), "topic_data is null"),
    (7, legacy_head() + struct.pack(">ihi", 1, -1, 0), "name is null"),
    (7, legacy_head() + struct.pack(">ihbi", 1, 1, 0x74, -1), "partition_data is null"),
    # Lengths past the end, negative lengths, long varints, bad UTF-8.
    (9, b"\x09abc", "transactional_id runs past the end"),
    (7, struct.pack(">h", 9) + b"abc", "transactional_id runs past the end"),
    (7, struct.pack(">h", -3) + b"abc", "negative length"),
    (9, flexible_head() + b"\x02\x02t\x02" + struct.pack(">i", 0) + b"\x80\x08xx",
     "records runs past the end"),
    (7, legacy_head() + struct.pack(">ihbiii", 1, 1, 0x74, 1, 0, -5), "negative length"),
    (9, flexible_head() + b"\xff\xff\xff\xff\xff\x01", "longer than 5 bytes"),
    (9, b"\x03\xff\xfe" + struct.pack(">hi", 1, 1000) + b"\x01\x00", "not UTF-8"),
    # Tagged fields past the end.
    (9, flexible_head() + b"\x01\x01\x05\x7fxx", "tagged field 5 runs past the end"),
    (9, flexible_head() + b"\x01\xff\xff\xff\xff\x0f", "tagged fields: tried to allocate"),
])
def test_malformed_bodies_are_refused(version: int, body: bytes, expected: str) -> None:
    message = refused(version, body)
    assert expected in message, message
    assert message.startswith(f"malformed ProduceRequest v{version}: ")
    # The generic path (validator, then kio) refuses them too.
    with pytest.raises(InvalidRequest):
        kio_view(version, body)


def test_versions_outside_the_decoder_are_refused() -> None:
    for version in (2, 13, -1):
        assert "no Produce decoder" in refused(version, sample(9))


def flexible_with_tags(tags: bytes) -> bytes:
    """A v9 body written by hand with the same tag section after every struct."""
    return (b"\x03tx" + struct.pack(">hi", -1, 1500) + b"\x02" + b"\x07events" + b"\x03"
            + struct.pack(">i", 0) + b"\x04abc" + tags
            + struct.pack(">i", 1) + b"\x00" + tags
            + tags + tags)


def test_unknown_tagged_fields_are_skipped() -> None:
    expected = ("tx", -1, 1500, [("events", [(0, b"abc"), (1, None)])])
    assert plain(decode_produce_body(9, flexible_with_tags(b"\x00"), 0)) == expected
    assert kio_view(9, flexible_with_tags(b"\x00")) == (
        "tx", -1, 1500, [("events", [(0, b"abc"), (1, None)])])
    tags = b"\x02\x05\x02hi\xc8\x01\x82\x01" + b"z" * 130  # tag 5 and tag 200 (130 bytes)
    assert plain(decode_produce_body(9, flexible_with_tags(tags), 0)) == expected


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(VERSIONS), st.randoms(use_true_random=False))
def test_mutated_bodies_agree_with_the_generic_path(version: int, rng: random.Random) -> None:
    """Whatever the generic path (validator + kio) accepts, the decoder accepts with the same
    result, and the other way round; the only difference allowed is an unknown tagged field,
    which kio refuses and Kafka (and the decoder) skips."""
    data = bytearray(sample(version, partitions=rng.randrange(0, 4)))
    for _ in range(rng.randrange(1, 4)):
        pos = rng.randrange(len(data) + 1)
        op = rng.random()
        if op < 0.5 and data:
            data[min(pos, len(data) - 1)] = rng.choice([0, 1, 0x7F, 0x80, 0xFF,
                                                        rng.randrange(256)])
        elif op < 0.75:
            data[pos:pos] = rng.choice([b"\xff\xff\xff\xff\x0f", uvarint(rng.randrange(300)),
                                        rng.randbytes(2)])
        else:
            del data[pos:pos + rng.randrange(1, 5)]
    body = bytes(data)
    try:
        ours: ProduceRequestData | None = decode_produce_body(version, body, 0)
    except InvalidRequest:
        ours = None
    try:
        theirs: ProduceRequestData | None = kio_view(version, body)
    except InvalidRequest as exc:
        if "Unknown tagged field" in str(exc):
            assert ours is not None, body.hex()
            return
        theirs = None
    if theirs is None:
        assert ours is None, body.hex()
    else:
        assert ours is not None and plain(ours) == plain(theirs), body.hex()


def test_dispatch_uses_the_decoder_and_keeps_large_frames_in_place() -> None:
    """Through the broker's frame parser: small frames (bytes) and frames over the receive
    buffer (a dedicated bytearray) both give record sets that are views of the frame."""
    from moldau.broker.dispatch import load_handlers, parse_frame
    from moldau.protocol.messages import encode_request

    load_handlers()
    data = {"transactional_id": None, "acks": 1, "timeout": 1000,
            "topic_data": [{"name": "t", "partition_data": [
                {"index": 0, "records": b"x" * 300_000}, {"index": 1, "records": b"y"}]}]}
    for version in (7, 9, 10):
        raw = encode_request(0, version, 5, "c", build(request_schema(0, version), data))[4:]
        for frame in (raw, bytearray(raw)):
            header, spec, request = parse_frame(frame)
            assert spec is not None and header.api_key == 0
            assert isinstance(request, ProduceRequestData)
            [(name, [(i0, big), (i1, small)])] = request.topics
            assert (name, i0, i1) == ("t", 0, 1)
            assert bytes(small) == b"y" and bytes(big) == b"x" * 300_000
            assert isinstance(big, memoryview) and big.obj is frame
            # The replica manager copies the slice into the bytearray the log patches.
            assert bytearray(big) == b"x" * 300_000
