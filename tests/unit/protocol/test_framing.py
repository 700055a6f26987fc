"""Frame decoding and request header parsing."""

from __future__ import annotations

import struct

import pytest

from moldau.protocol.errors import ForeignProtocol, FrameTooLarge, InvalidRequest, ProtocolError
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


# --- memory follows the bytes that arrive (issue 11 defect 3) ---------------------------------


class Ledger:
    """A FrameMemory that records what the decoder asks for and refuses beyond ``limit``."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit
        self.partial = 0
        self.ready = 0
        self.completed: list[tuple[int, int]] = []

    def reserve(self, nbytes: int) -> bool:
        if self.limit is not None and self.partial + self.ready + nbytes > self.limit:
            return False
        self.partial += nbytes
        return True

    def complete(self, nbytes: int, reserved: int) -> None:
        self.partial -= reserved
        self.ready += nbytes
        self.completed.append((nbytes, reserved))


def _rss_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def test_an_announced_size_allocates_nothing_until_bytes_arrive() -> None:
    # Before the fix each decoder allocated (and zeroed) the whole announced frame at once.
    before = _rss_bytes()
    decoders = []
    for _ in range(10):
        decoder = FrameDecoder(100 * 1024 * 1024, buffer_size=16 * 1024)
        decoder.feed(struct.pack(">i", 100 * 1024 * 1024) + b"\x00\x12\x00\x03")
        decoders.append(decoder)
    grown = _rss_bytes() - before
    assert grown < 16 * 1024 * 1024, f"10 announced 100 MiB frames took {grown} bytes"


def test_reservations_grow_with_what_arrived() -> None:
    ledger = Ledger()
    decoder = FrameDecoder(64 * 1024 * 1024, buffer_size=16 * 1024, memory=ledger)
    size = 5 * 1024 * 1024
    payload = bytes(range(256)) * (size // 256)
    stream = frame(payload)
    sent = 0
    got = []
    for chunk in (4, 100, 70_000, 300_000, 1_000_000, len(stream)):
        got += decoder.feed(stream[sent : sent + chunk])
        sent = min(len(stream), sent + chunk)
        if not got:
            # Never more than the first step, or twice what has arrived.
            assert ledger.partial <= max(64 * 1024, 2 * sent), (sent, ledger.partial)
    assert [bytes(g) for g in got] == [payload]
    assert ledger.completed == [(size, size)] and ledger.partial == 0


def test_small_frames_are_accounted_when_complete() -> None:
    ledger = Ledger()
    decoder = FrameDecoder(1 << 20, buffer_size=1024, memory=ledger)
    got = decoder.feed(frame(b"a" * 10) + frame(b"b" * 900) + frame(b"c" * 2000))
    assert [len(g) for g in got] == [10, 900, 2000]
    assert ledger.completed == [(10, 0), (900, 0), (2000, 2000)]


def test_refused_memory_pauses_the_decoder_until_retry() -> None:
    for size in (3000, 1_000_000):  # a frame's own heap buffer, and a memory map
        ledger = Ledger(limit=0)
        decoder = FrameDecoder(1 << 20, buffer_size=1024, memory=ledger)
        payload = bytes(i % 251 for i in range(size))
        stream = frame(payload)
        n = 2048 if size < 100_000 else 150_000
        space = decoder.get_buffer()
        space[:100] = stream[:100]
        assert decoder.buffer_updated(100) == []
        assert decoder.waiting, "the first reservation must be refused"
        with pytest.raises(RuntimeError):
            decoder.get_buffer()
        assert not decoder.retry()
        ledger.limit = None
        assert decoder.retry() and not decoder.waiting
        got = decoder.feed(stream[100:n])
        ledger.limit = ledger.partial  # refuse the next step
        if size > 100_000:
            space = decoder.get_buffer()
            space[:] = stream[n : n + len(space)]
            n += len(space)
            assert decoder.buffer_updated(len(space)) == []
            assert decoder.waiting
            ledger.limit = None
            assert decoder.retry()
        got += decoder.feed(stream[n:])
        assert [bytes(g) for g in got] == [payload]


@pytest.mark.parametrize(("head", "kind"), [
    (b"HTTP/1.1 400 Bad Request\r\n\r\n", "http-response"),
    (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "http-request"),
    (bytes.fromhex("15030300020250"), "tls"),          # a TLS alert
    (bytes.fromhex("160301020001"), "tls"),            # a TLS ClientHello
    (b"SSH-2.0-OpenSSH_9.2\r\n", "ssh"),
])
def test_other_protocols_are_named(head: bytes, kind: str) -> None:
    with pytest.raises(ForeignProtocol) as info:
        FrameDecoder(512 * 1024 * 1024).feed(head)
    assert info.value.kind == kind


def test_only_the_first_bytes_are_sniffed() -> None:
    decoder = FrameDecoder(1 << 20)
    assert decoder.feed(frame(b"ok")) == [b"ok"]
    with pytest.raises(FrameTooLarge):
        decoder.feed(bytes.fromhex("16030100") + b"x")
