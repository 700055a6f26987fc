"""Bad input against a running ``moldau serve`` process: every malformed frame, bad batch or
impossible request gets Kafka's error code or a clean disconnect.

After every test the broker must still be alive, a fresh connection must produce (acks=all)
and read back, and nothing may show up in the broker's log as a crash (a traceback means a
handler raised: the connection was closed as "internal error" instead of getting an answer).
The last tests restart the broker (clean, then kill -9) and read back every record acknowledged
during the module, so a bad request that damaged a log fails the module.

The storage layer's own recovery and the frame decoder/batch validator fuzzing live in
tests/faults (test_storage_recovery.py, test_fuzz_protocol.py); this module drives the real
process over TCP.
"""

from __future__ import annotations

import logging
import random
import socket
import struct
import time
import zlib
from collections.abc import Iterator

import pytest
from broker_wire import (
    FETCH_VERSION,
    Ledger,
    Wire,
    assert_serves,
    create_topic,
    fetch_all,
    fetch_body,
    fetch_raw,
    framed,
    list_offset,
    make_batch,
    metadata,
    produce,
    produce_body,
    serving,
    unexpected_tracebacks,
)
from crc32c import crc32c
from kio.serial import entity_reader

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.entities import build
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages import (
    decode_response,
    encode_body,
    is_flexible,
    request_schema,
)
from moldau.testing.runner import BrokerProcess

# librdkafka logs go to logging (pytest shows them for failed tests only).
RDKAFKA = logging.getLogger("rdkafka")
MAX_REQUEST = 512 * 1024
BROKER_MAX_MESSAGE = 64 * 1024
TOPIC = "bad-input"
SMALL_TOPIC = "bad-input-small"  # max.message.bytes=4096
HEALTH = "health"


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    settings = {"socket.request.max.bytes": MAX_REQUEST, "message.max.bytes": BROKER_MAX_MESSAGE}
    topics = {TOPIC: {}, SMALL_TOPIC: {"max.message.bytes": "4096"}, HEALTH: {}}
    with serving(settings, topics) as node:
        yield node


@pytest.fixture(scope="module")
def ledger() -> Ledger:
    return Ledger()


@pytest.fixture(autouse=True)
def still_serving(broker: BrokerProcess, ledger: Ledger) -> Iterator[None]:
    """After each test: the process is alive, another connection works, no handler crashed."""
    log_start = len(broker.log_text())
    yield
    assert broker.proc is not None and broker.proc.poll() is None, "the broker died"
    assert_serves(broker.port(), HEALTH, ledger)
    crashes = unexpected_tracebacks(broker.log_text()[log_start:])
    assert not crashes, "a handler raised:\n" + crashes[0]


def log_end(port: int, topic: str = TOPIC) -> int:
    with Wire(port) as wire:
        return list_offset(wire, topic, 0, -1)


def produce_ok(port: int, ledger: Ledger, values: list[bytes], topic: str = TOPIC) -> int:
    with Wire(port) as wire:
        entry = produce(wire, topic, 0, make_batch(values))
    assert entry["error_code"] == ErrorCode.none, entry
    ledger.add(topic, 0, entry["base_offset"], values)
    return int(entry["base_offset"])


def header(api: int, version: int, correlation_id: int, client_id: bytes | None = b"t") -> bytes:
    """A request header (v1, or v2 with an empty tagged-field section when flexible)."""
    out = struct.pack(">hhi", api, version, correlation_id)
    out += struct.pack(">h", -1) if client_id is None else struct.pack(">h", len(client_id))
    out += client_id or b""
    if is_flexible(api, version):
        out += b"\x00"
    return out


# --- frames --------------------------------------------------------------------------------


@pytest.mark.parametrize("garbage", [
    b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n",      # an HTTP client on the Kafka port
    bytes.fromhex("1603010200010001fc0303") + bytes(64),  # a TLS ClientHello
    b"\xff" * 64,                                         # negative size
    b"\x80\x00\x00\x00",                                  # most negative size
    b"\x7f\xff\xff\xff" + b"x" * 100,                     # 2 GiB frame
])
def test_garbage_is_disconnected(broker: BrokerProcess, garbage: bytes) -> None:
    with Wire(broker.port()) as wire:
        wire.send(garbage)
        assert wire.closed_by_broker()


def test_frame_over_socket_request_max_bytes_is_disconnected(broker: BrokerProcess) -> None:
    with Wire(broker.port()) as wire:
        # Only the size prefix: the broker must refuse before reading (or buffering) the body.
        wire.send(struct.pack(">i", MAX_REQUEST + 1))
        assert wire.closed_by_broker()
    # A frame of exactly the limit is read and answered (its batch is too large for the topic).
    with Wire(broker.port()) as wire:
        size = MAX_REQUEST - 200
        while True:
            cid, data = wire.frame(ApiKey.PRODUCE, 9, produce_body(
                TOPIC, 0, make_batch([bytes(size)])), correlation_id=99)
            if len(data) - 4 == MAX_REQUEST:
                break
            size += MAX_REQUEST - (len(data) - 4)
        wire.send(data)
        entry = wire.response(ApiKey.PRODUCE, 9, cid)["responses"][0]["partition_responses"][0]
        assert entry["error_code"] == ErrorCode.message_too_large, entry


@pytest.mark.parametrize("payload", [
    b"",                                          # empty frame
    b"\x00\x03",                                  # api key only
    b"\x00\x03\x00\x0c\x00\x00",                  # truncated correlation id
    b"\x00\x03\x00\x0c\x00\x00\x00\x01\x00",     # truncated client id length
    b"\x00\x03\x00\x0c\x00\x00\x00\x01\x00\x20ab",  # client id runs past the frame
    b"\x00\x03\x00\x0c\x00\x00\x00\x01\xff\xff",  # flexible header without tagged fields
    b"\x00\x03\x00\x0c\x00\x00\x00\x01\xff\xff\x05\x01",  # tagged fields run past the frame
])
def test_truncated_request_header_is_disconnected(broker: BrokerProcess, payload: bytes) -> None:
    with Wire(broker.port()) as wire:
        wire.send(framed(payload))
        assert wire.closed_by_broker()


def test_truncated_body_is_disconnected(broker: BrokerProcess) -> None:
    with Wire(broker.port()) as wire:
        _cid, good = wire.frame(ApiKey.PRODUCE, 9, produce_body(TOPIC, 0, make_batch([b"v"])))
        payload = good[4:]
        for cut in (len(payload) - 1, len(payload) - 40, 15):
            with Wire(broker.port()) as short:
                short.send(framed(payload[:cut]))
                assert short.closed_by_broker(), f"cut at {cut}"


def test_incomplete_frame_then_client_eof(broker: BrokerProcess) -> None:
    """A frame whose bytes never all arrive: the broker waits, then closes on EOF."""
    end = log_end(broker.port())
    with Wire(broker.port()) as wire:
        _cid, good = wire.frame(ApiKey.PRODUCE, 9, produce_body(TOPIC, 0, make_batch([b"v"])))
        wire.send(good[:-10])
        assert not wire.closed_by_broker(timeout=0.5), "closed before the frame was complete"
        wire.sock.shutdown(socket.SHUT_WR)
        assert wire.closed_by_broker()
    assert log_end(broker.port()) == end


@pytest.mark.parametrize("api_key", [4, 5, 7, 57, 1000, 32767, -1])
def test_unknown_api_key_is_disconnected(broker: BrokerProcess, api_key: int) -> None:
    with Wire(broker.port()) as wire:
        wire.send(framed(struct.pack(">hhi", api_key, 0, 7) + b"\x00\x01t" + bytes(16)))
        assert wire.closed_by_broker()


@pytest.mark.parametrize(("api", "version"), [
    (ApiKey.PRODUCE, 2), (ApiKey.PRODUCE, 11), (ApiKey.FETCH, 3), (ApiKey.FETCH, 17),
    (ApiKey.METADATA, 14), (ApiKey.LIST_OFFSETS, 0), (ApiKey.CREATE_TOPICS, 1),
    (ApiKey.METADATA, -1), (ApiKey.METADATA, 32767),
])
def test_unsupported_version_is_disconnected(broker: BrokerProcess, api: ApiKey,
                                             version: int) -> None:
    with Wire(broker.port()) as wire:
        wire.send(framed(header(api, version, 9) + bytes(32)))
        assert wire.closed_by_broker()


@pytest.mark.parametrize("version", [5, 127, 32767])
def test_unsupported_api_versions_gets_kip511_answer(broker: BrokerProcess,
                                                     version: int) -> None:
    with Wire(broker.port()) as wire:
        # A future ApiVersions request: flexible header, a body we cannot know.
        wire.send(framed(header(ApiKey.API_VERSIONS, version, 4242) + b"\x06moldau\x041.0\x00"))
        correlation, answer = decode_response(ApiKey.API_VERSIONS, 0, wire.read_frame())
        assert correlation == 4242
        assert answer.error_code == ErrorCode.unsupported_version
        served = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
        assert served[ApiKey.API_VERSIONS] == (0, 4)
        assert served[ApiKey.PRODUCE][0] <= 9 <= served[ApiKey.PRODUCE][1]
        # The connection stays usable: the client retries at a version we serve.
        reply = wire.call(ApiKey.API_VERSIONS, 3, {"client_software_name": "t",
                                                    "client_software_version": "1"})
        assert reply["error_code"] == ErrorCode.none


def test_client_id_with_invalid_utf8(broker: BrokerProcess) -> None:
    """Kafka decodes client ids leniently; Moldau disconnects. Either way: an answer with the
    right correlation id, or a clean close, and nothing else (no hang)."""
    with Wire(broker.port()) as wire:
        wire.send(framed(header(ApiKey.API_VERSIONS, 0, 77, client_id=b"\xff\xfe\xc3(")))
        frame = wire.read_frame_or_close("ApiVersions with a client id that is not UTF-8")
        if frame is not None:
            correlation, answer = decode_response(ApiKey.API_VERSIONS, 0, frame)
            assert correlation == 77 and answer.error_code == ErrorCode.none


def test_null_client_id_is_served(broker: BrokerProcess) -> None:
    with Wire(broker.port(), client_id=None) as wire:
        assert wire.call(ApiKey.API_VERSIONS, 0, {})["error_code"] == ErrorCode.none


def test_random_bodies_for_every_api_and_version(broker: BrokerProcess) -> None:
    """Random bodies for every (API, version) the broker advertises: each gets a well-formed
    answer with the right correlation id, or a disconnect; the process never dies."""
    with Wire(broker.port()) as wire:
        served = wire.call(ApiKey.API_VERSIONS, 3, {"client_software_name": "t",
                                                     "client_software_version": "1"})
    rng = random.Random(20240611)
    answered = disconnected = 0
    recent: list[str] = []  # a dying process may still take a request or two
    for entry in served["api_keys"]:
        api = entry["api_key"]
        for version in range(entry["min_version"], entry["max_version"] + 1):
            for size in (0, 1, 3, 9, 40, 300):
                body = rng.randbytes(size)
                try:
                    wire = Wire(broker.port(), timeout=10)
                except OSError as exc:
                    pytest.fail(f"broker stopped accepting after one of {recent}: {exc}")
                recent = [*recent[-2:], f"api {api} v{version} body {body.hex()}"]
                with wire:
                    # A clean close counts as a disconnect; a time-out (a broker that hangs)
                    # fails the test.
                    sent = wire.send_or_close(framed(header(api, version, 5150) + body))
                    frame = wire.read_frame_or_close(recent[-1]) if sent else None
                    if frame is None:
                        disconnected += 1
                        continue
                    correlation, _answer = decode_response(api, version, frame)
                    assert correlation == 5150, recent[-1]
                    answered += 1
    # A round trip, not a pause: the broker handled everything sent before it.
    assert_serves(broker.port(), HEALTH)
    assert broker.proc is not None and broker.proc.poll() is None, f"died after one of {recent}"
    assert disconnected > answered > 0


@pytest.mark.parametrize(("api", "version", "body"), [
    (ApiKey.METADATA, 12, "ffffffff0f"),
    (ApiKey.FIND_COORDINATOR, 4, "00ffffffff0f"),
    (ApiKey.PRODUCE, 9, "00ffff000003e8ffffffff0f"),
    # Nested: one topic "t" whose partition_data claims 2**32-2 elements.
    (ApiKey.PRODUCE, 9, "00ffff000003e8020274ffffffff0f"),
    # Fetch v12: one topic "t" whose partitions claim 2**32-2 elements.
    (ApiKey.FETCH, 12, "ffffffff000001f400000001001000000000000000ffffffff020274ffffffff0f"),
])
def test_huge_compact_array_count_does_not_kill_the_broker(
        broker: BrokerProcess, api: ApiKey, version: int, body: str) -> None:
    """A flexible request whose compact array claims 2**32-2 elements (5 bytes of varint) is
    refused like any other malformed body. kio 0.6.5 would reserve the array up front and the
    failed 32 GiB allocation would abort the process: moldau.protocol.request_validator (and
    the Produce decoder) bound every count by the bytes left before kio reads the body."""
    with Wire(broker.port()) as wire:
        wire.send(framed(header(api, version, 1) + bytes.fromhex(body)))
        assert wire.closed_by_broker()
    assert_serves(broker.port(), HEALTH)  # a round trip, not a pause
    assert broker.proc is not None and broker.proc.poll() is None, "the broker died"


def null_array_body(api: int, version: int, field: str) -> bytes:
    """The body of a default ``api``/``version`` request whose compact array ``field`` (empty
    by default, length byte 0x01) is encoded as null (0x00)."""
    schema = request_schema(api, version)
    assert schema is not None
    body = encode_body(build(schema, {}))
    reader = entity_reader(schema)
    for i, byte in enumerate(body):
        if byte != 1:
            continue
        patched = body[:i] + b"\x00" + body[i + 1:]
        try:
            value, _size = reader(patched, 0)
        except Exception:
            continue
        if getattr(value, field) is None:
            return patched
    raise AssertionError(f"no null encoding of {field} found")


@pytest.mark.parametrize(("api", "version", "field"), [
    (ApiKey.PRODUCE, 9, "topic_data"), (ApiKey.FETCH, 12, "topics"),
    (ApiKey.LIST_OFFSETS, 7, "topics"), (ApiKey.CREATE_TOPICS, 5, "topics"),
    (ApiKey.FIND_COORDINATOR, 4, "coordinator_keys"),
])
def test_null_array_in_a_flexible_request_is_refused_cleanly(
        broker: BrokerProcess, api: ApiKey, version: int, field: str) -> None:
    """Kafka's parser refuses a null where the schema has a non-nullable array (the request
    is malformed: disconnect). It must not reach a handler (the autouse fixture fails the test
    on any traceback in the broker's log)."""
    with Wire(broker.port()) as wire:
        wire.send(framed(header(api, version, 3) + null_array_body(api, version, field)))
        assert wire.closed_by_broker()


# --- produce -------------------------------------------------------------------------------


def test_bad_crc_is_corrupt_message(broker: BrokerProcess, ledger: Ledger) -> None:
    end = log_end(broker.port())
    batch = bytearray(make_batch([b"one", b"two"]))
    batch[-1] ^= 0x01
    with Wire(broker.port()) as wire:
        entry = produce(wire, TOPIC, 0, bytes(batch))
        assert entry["error_code"] == ErrorCode.corrupt_message, entry
        assert entry["error_message"]
        # The connection stays open and the next, valid batch is appended.
        good = produce(wire, TOPIC, 0, make_batch([b"after-bad-crc"]))
    assert good["error_code"] == ErrorCode.none and good["base_offset"] == end
    ledger.add(TOPIC, 0, end, [b"after-bad-crc"])


def legacy_message(magic: int, key: bytes | None, value: bytes, offset: int = 0) -> bytes:
    """One message of a magic 0 or 1 message set (pre-0.11 format, CRC-32)."""
    body = struct.pack(">bb", magic, 0)
    if magic == 1:
        body += struct.pack(">q", int(time.time() * 1000))
    for part in (key, value):
        body += struct.pack(">i", -1) if part is None else struct.pack(">i", len(part)) + part
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(message)) + message


@pytest.mark.parametrize("magic", [0, 1])
def test_old_message_formats_are_unsupported(broker: BrokerProcess, magic: int) -> None:
    end = log_end(broker.port())
    message_set = legacy_message(magic, b"k", b"v" * 20) + legacy_message(magic, None, b"w", 1)
    with Wire(broker.port()) as wire:
        entry = produce(wire, TOPIC, 0, message_set)
    assert entry["error_code"] == ErrorCode.unsupported_for_message_format, entry
    assert log_end(broker.port()) == end


@pytest.mark.parametrize("magic", [3, 0x7F, 0xFF])
def test_unknown_magic_is_refused(broker: BrokerProcess, magic: int) -> None:
    batch = bytearray(make_batch([b"x"]))
    batch[16] = magic
    with Wire(broker.port()) as wire:
        entry = produce(wire, TOPIC, 0, bytes(batch))
    assert entry["error_code"] in (ErrorCode.unsupported_for_message_format,
                                   ErrorCode.corrupt_message), entry


def test_batch_over_broker_message_max_bytes(broker: BrokerProcess, ledger: Ledger) -> None:
    end = log_end(broker.port())
    rng = random.Random(1)
    big = make_batch([rng.randbytes(BROKER_MAX_MESSAGE)])
    with Wire(broker.port()) as wire:
        entry = produce(wire, TOPIC, 0, big)
        assert entry["error_code"] == ErrorCode.message_too_large, entry
        # Just under the limit is accepted.
        values = [rng.randbytes(BROKER_MAX_MESSAGE - 200)]
        entry = produce(wire, TOPIC, 0, make_batch(values))
        assert entry["error_code"] == ErrorCode.none, entry
    assert entry["base_offset"] == end
    ledger.add(TOPIC, 0, end, values)


def test_batch_over_topic_max_message_bytes(broker: BrokerProcess, ledger: Ledger) -> None:
    with Wire(broker.port()) as wire:
        entry = produce(wire, SMALL_TOPIC, 0, make_batch([b"x" * 5000]))
        assert entry["error_code"] == ErrorCode.message_too_large, entry
        ok = produce(wire, SMALL_TOPIC, 0, make_batch([b"y" * 3000]))
        assert ok["error_code"] == ErrorCode.none, ok
    ledger.add(SMALL_TOPIC, 0, ok["base_offset"], [b"y" * 3000])


@pytest.mark.parametrize("name", ["bad/name", "spaces are bad", "..", "x" * 250, "ümlaut"])
def test_invalid_topic_name(broker: BrokerProcess, name: str) -> None:
    with Wire(broker.port()) as wire:
        [topic] = metadata(wire, [name], allow_create=True)["topics"]
        assert topic["error_code"] == ErrorCode.invalid_topic_exception, topic
        # Such a topic cannot exist, so Produce answers as Kafka does for any topic it does
        # not have (KafkaApis checks the metadata cache before anything else).
        entry = produce(wire, name, 0, make_batch([b"v"]))
        assert entry["error_code"] == ErrorCode.unknown_topic_or_partition, entry
        assert name not in {t["name"] for t in metadata(wire, None)["topics"]}


def test_cluster_metadata_topic_cannot_be_created_or_written(broker: BrokerProcess) -> None:
    """A client topic named __cluster_metadata would share the metadata log's directory:
    writing to it used to put client records into the metadata log (next start failed)."""
    name = "__cluster_metadata"
    with Wire(broker.port()) as wire:
        [topic] = metadata(wire, [name], allow_create=True)["topics"]
        assert topic["error_code"] != ErrorCode.none, topic
        response = wire.call(ApiKey.CREATE_TOPICS, 5, {
            "topics": [{"name": name, "num_partitions": 1, "replication_factor": 1,
                        "assignments": [], "configs": []}],
            "timeout": 5000, "validate_only": False})
        assert response["topics"][0]["error_code"] == ErrorCode.invalid_request, response
        entry = produce(wire, name, 0, make_batch([b"not a metadata record"]))
        assert entry["error_code"] == ErrorCode.unknown_topic_or_partition, entry


def test_internal_topic_is_not_writable(broker: BrokerProcess) -> None:
    with Wire(broker.port()) as wire:
        # FindCoordinator makes the group coordinator create __consumer_offsets.
        wire.call(ApiKey.FIND_COORDINATOR, 2, {"key": "g", "key_type": 0})
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            [topic] = metadata(wire, ["__consumer_offsets"], allow_create=False)["topics"]
            if topic["error_code"] == ErrorCode.none:
                break
            time.sleep(0.1)
        assert topic["is_internal"] and topic["error_code"] == ErrorCode.none, topic
        for partition in range(len(topic["partitions"])):
            entry = produce(wire, "__consumer_offsets", partition, make_batch([b"garbage"]))
            assert entry["error_code"] == ErrorCode.invalid_topic_exception, entry


@pytest.mark.parametrize("acks", [2, -2, 5, 32767])
def test_invalid_acks(broker: BrokerProcess, acks: int) -> None:
    end = log_end(broker.port())
    with Wire(broker.port()) as wire:
        entry = produce(wire, TOPIC, 0, make_batch([b"v"]), acks=acks)
    assert entry["error_code"] == ErrorCode.invalid_required_acks, entry
    assert log_end(broker.port()) == end


def with_crc(batch: bytearray) -> bytes:
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    return bytes(batch)


def inconsistent_batches() -> dict[str, bytes]:
    good = make_batch([b"a", b"b", b"c"])
    count_high = bytearray(good)
    struct.pack_into(">i", count_high, 57, 5)
    count_zero = bytearray(good)
    struct.pack_into(">i", count_zero, 23, -1)
    struct.pack_into(">i", count_zero, 57, 0)
    delta_low = bytearray(good)
    struct.pack_into(">i", delta_low, 23, 0)
    length_long = bytearray(good)
    struct.pack_into(">i", length_long, 8, len(good) + 100)
    length_short = bytearray(good)
    struct.pack_into(">i", length_short, 8, 20)
    return {
        "record count above last offset delta": with_crc(count_high),
        "no records": with_crc(count_zero),
        "last offset delta below record count": with_crc(delta_low),
        "batch length past the end": bytes(length_long),
        "batch length below the header": bytes(length_short),
        "truncated batch": good[:-7],
        "truncated header": good[:40],
        "good batch then garbage": good + b"\x00" * 30,
        "good batch then a truncated one": good + good[:70],
    }


# A count that disagrees with the last offset delta is Kafka's InvalidRecordException
# (LogValidator.validateBatch); framing and size errors are CorruptRecordException.
INVALID_RECORD_CASES = {"record count above last offset delta", "no records",
                        "last offset delta below record count"}


@pytest.mark.parametrize("case", list(inconsistent_batches()))
def test_inconsistent_batch_in_a_valid_frame_is_corrupt(broker: BrokerProcess,
                                                        case: str) -> None:
    end = log_end(broker.port())
    with Wire(broker.port()) as wire:
        entry = produce(wire, TOPIC, 0, inconsistent_batches()[case])
    expected = (ErrorCode.invalid_record if case in INVALID_RECORD_CASES
                else ErrorCode.corrupt_message)
    assert entry["error_code"] == expected, entry
    assert log_end(broker.port()) == end


def init_producer_id(wire: Wire) -> tuple[int, int]:
    reply = wire.call(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": None,
                                                    "transaction_timeout": 60000,
                                                    "producer_id": -1, "producer_epoch": -1})
    assert reply["error_code"] == ErrorCode.none, reply
    return reply["producer_id"], reply["producer_epoch"]


def test_idempotent_sequences(broker: BrokerProcess, ledger: Ledger) -> None:
    with Wire(broker.port()) as wire:
        pid, epoch = init_producer_id(wire)

        def send(values: list[bytes], seq: int) -> dict:
            return produce(wire, TOPIC, 0, make_batch(values, producer_id=pid,
                                                      producer_epoch=epoch,
                                                      base_sequence=seq))

        first = [b"s0", b"s1", b"s2"]
        a = send(first, 0)
        assert a["error_code"] == ErrorCode.none, a
        ledger.add(TOPIC, 0, a["base_offset"], first)
        end = log_end(broker.port())
        # A retry of the same batch is answered with the original offset, not appended again.
        retry = send(first, 0)
        assert retry["error_code"] == ErrorCode.none, retry
        assert retry["base_offset"] == a["base_offset"]
        assert log_end(broker.port()) == end
        # A gap (next expected sequence is 3).
        gap = send([b"s5"], 5)
        assert gap["error_code"] == ErrorCode.out_of_order_sequence_number, gap
        assert log_end(broker.port()) == end
        nxt = send([b"s3", b"s4"], 3)
        assert nxt["error_code"] == ErrorCode.none and nxt["base_offset"] == end, nxt
        ledger.add(TOPIC, 0, end, [b"s3", b"s4"])
        # KIP-360 epoch bump: the new epoch starts at sequence 0; once the partition has seen
        # it, the old epoch is fenced.
        bumped = wire.call(ApiKey.INIT_PRODUCER_ID, 4, {
            "transactional_id": None, "transaction_timeout": 60000,
            "producer_id": pid, "producer_epoch": epoch})
        assert bumped["producer_id"] == pid and bumped["producer_epoch"] == epoch + 1, bumped
        old_epoch, epoch = epoch, epoch + 1
        fresh = send([b"s5"], 0)
        assert fresh["error_code"] == ErrorCode.none, fresh
        ledger.add(TOPIC, 0, fresh["base_offset"], [b"s5"])
        stale = produce(wire, TOPIC, 0, make_batch([b"stale"], producer_id=pid,
                                                   producer_epoch=old_epoch, base_sequence=5))
        assert stale["error_code"] == ErrorCode.invalid_producer_epoch, stale
    got = {o: v for o, _k, v in fetch_all(broker.port(), TOPIC, start=a["base_offset"]).records}
    assert [got[a["base_offset"] + i] for i in range(6)] == [b"s0", b"s1", b"s2", b"s3", b"s4",
                                                             b"s5"]


def test_acks0_failure_closes_the_connection(broker: BrokerProcess, ledger: Ledger) -> None:
    with Wire(broker.port()) as wire:
        # A good acks=0 produce gets no answer; the next request's answer comes first.
        _cid, data = wire.frame(ApiKey.PRODUCE, 9, produce_body(
            TOPIC, 0, make_batch([b"fire-and-forget"]), acks=0))
        wire.send(data)
        reply = wire.call(ApiKey.API_VERSIONS, 0, {})
        assert reply["error_code"] == ErrorCode.none
        # A failed one closes the connection (the client has no other way to learn of it).
        bad = bytearray(make_batch([b"x"]))
        bad[-1] ^= 0xFF
        _cid, data = wire.frame(ApiKey.PRODUCE, 9, produce_body(TOPIC, 0, bytes(bad), acks=0))
        wire.send(data)
        assert wire.closed_by_broker()
    records = fetch_all(broker.port(), TOPIC).records
    offsets = [o for o, _k, v in records if v == b"fire-and-forget"]
    assert len(offsets) == 1
    ledger.add(TOPIC, 0, offsets[0], [b"fire-and-forget"])


def test_pipelined_requests_with_a_bad_one_in_the_middle(broker: BrokerProcess,
                                                         ledger: Ledger) -> None:
    """Requests sent back to back: those before a malformed frame are answered in order,
    then the connection closes; nothing after it is processed."""
    end = log_end(broker.port())
    with Wire(broker.port()) as wire:
        frames, cids = [], []
        for i in range(3):
            cid, data = wire.frame(ApiKey.PRODUCE, 9,
                                   produce_body(TOPIC, 0, make_batch([b"pipe%d" % i])))
            frames.append(data)
            cids.append(cid)
        frames.append(framed(b"\x00\x00\x00"))  # truncated header
        _cid, after = wire.frame(ApiKey.PRODUCE, 9,
                                 produce_body(TOPIC, 0, make_batch([b"never"])))
        frames.append(after)
        wire.send(b"".join(frames))
        for i, cid in enumerate(cids):
            entry = wire.response(ApiKey.PRODUCE, 9, cid)["responses"][0]
            part = entry["partition_responses"][0]
            assert part["error_code"] == ErrorCode.none and part["base_offset"] == end + i
            ledger.add(TOPIC, 0, end + i, [b"pipe%d" % i])
        assert wire.closed_by_broker()
    assert log_end(broker.port()) == end + 3


def test_unknown_partition_and_null_records(broker: BrokerProcess) -> None:
    with Wire(broker.port()) as wire:
        entry = produce(wire, TOPIC, 7, make_batch([b"v"]))
        assert entry["error_code"] == ErrorCode.unknown_topic_or_partition, entry
        entry = produce(wire, TOPIC, -1, make_batch([b"v"]))
        assert entry["error_code"] == ErrorCode.unknown_topic_or_partition, entry
        entry = produce(wire, TOPIC, 0, None)
        assert entry["error_code"] != ErrorCode.none, entry
        # The other partition-addressed APIs agree with Produce.
        fetched = fetch_raw(wire, TOPIC, 7, 0)
        assert fetched["error_code"] == ErrorCode.unknown_topic_or_partition, fetched
        listed = wire.call(ApiKey.LIST_OFFSETS, 7, {
            "replica_id": -1, "isolation_level": 0, "topics": [{"name": TOPIC, "partitions": [
                {"partition_index": 7, "current_leader_epoch": -1, "timestamp": -1}]}]})
        error = listed["topics"][0]["partitions"][0]["error_code"]
        assert error == ErrorCode.unknown_topic_or_partition, listed
        deleted = wire.call(ApiKey.DELETE_RECORDS, 2, {"topics": [{"name": TOPIC, "partitions": [
            {"partition_index": 7, "offset": 0}]}], "timeout": 5000})
        error = deleted["topics"][0]["partitions"][0]["error_code"]
        assert error == ErrorCode.unknown_topic_or_partition, deleted


def test_unknown_topic_without_auto_creation() -> None:
    with BrokerProcess(settings={"auto.create.topics.enable": "false"}) as node:
        with Wire(node.port()) as wire:
            for version in (1, 4, 9, 12):
                [topic] = metadata(wire, ["nope"], allow_create=True,
                                   version=version)["topics"]
                assert topic["error_code"] == ErrorCode.unknown_topic_or_partition, topic
            entry = produce(wire, "nope", 0, make_batch([b"v"]))
            assert entry["error_code"] == ErrorCode.unknown_topic_or_partition, entry
            assert [t["name"] for t in metadata(wire, None)["topics"]
                    if not t["is_internal"]] == []
        assert_serves_after_create(node)


def assert_serves_after_create(node: BrokerProcess) -> None:
    with Wire(node.port()) as wire:
        create_topic(wire, "made")
    assert_serves(node.port(), "made")


# --- a fuzzer against the live process -----------------------------------------------------


def _mutations(rng: random.Random, seeds: list[bytes]) -> bytes:
    """A random frame: pure noise, a valid request with flipped/inserted/deleted bytes, or a
    valid header with a random body. Size prefixes are kept consistent most of the time."""
    kind = rng.random()
    if kind < 0.15:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))
    seed = bytearray(rng.choice(seeds)[4:])
    if kind < 0.35:
        head = seed[:rng.randrange(4, 16)]
        return framed(bytes(head) + rng.randbytes(rng.randrange(0, 200)))
    for _ in range(rng.randrange(1, 6)):
        op = rng.random()
        pos = rng.randrange(len(seed)) if seed else 0
        if op < 0.6 and seed:
            seed[pos] ^= 1 << rng.randrange(8)
        elif op < 0.8:
            seed[pos:pos] = rng.randbytes(rng.randrange(1, 8))
        elif seed:
            del seed[pos:pos + rng.randrange(1, 8)]
    if rng.random() < 0.1:
        return struct.pack(">i", rng.randrange(-5, len(seed) + 50)) + bytes(seed)
    return framed(bytes(seed))


def _seed_frames(wire: Wire) -> list[bytes]:
    """Valid requests of harmless APIs (no deletes, no config changes) to mutate."""
    batch = make_batch([b"fuzz-a", b"fuzz-b"])
    seeds = [
        wire.frame(ApiKey.PRODUCE, 9, produce_body("fuzz", 0, batch))[1],
        wire.frame(ApiKey.PRODUCE, 3, produce_body("fuzz", 0, batch, acks=1))[1],
        wire.frame(ApiKey.API_VERSIONS, 3, {"client_software_name": "f",
                                            "client_software_version": "1"})[1],
        wire.frame(ApiKey.API_VERSIONS, 0, {})[1],
        wire.frame(ApiKey.METADATA, 12, {"topics": [{"name": "fuzz", "topic_id": None}],
                                         "allow_auto_topic_creation": False,
                                         "include_topic_authorized_operations": False})[1],
        wire.frame(ApiKey.METADATA, 4, {"topics": [{"name": "fuzz"}],
                                        "allow_auto_topic_creation": False})[1],
        wire.frame(ApiKey.LIST_OFFSETS, 7, {
            "replica_id": -1, "isolation_level": 0,
            "topics": [{"name": "fuzz", "partitions": [
                {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -2}]}]})[1],
        wire.frame(ApiKey.FETCH, FETCH_VERSION,
                   fetch_body("fuzz", 0, 0, max_bytes=1 << 20, max_wait_ms=10))[1],
        wire.frame(ApiKey.DESCRIBE_CONFIGS, 4, {
            "resources": [{"resource_type": 2, "resource_name": "fuzz",
                           "configuration_keys": None}],
            "include_synonyms": True, "include_documentation": True})[1],
        wire.frame(ApiKey.FIND_COORDINATOR, 2, {"key": "fuzz-group", "key_type": 0})[1],
        wire.frame(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": None,
                                                "transaction_timeout": 1000,
                                                "producer_id": -1, "producer_epoch": -1})[1],
        wire.frame(ApiKey.DESCRIBE_CLUSTER, 1, {"include_cluster_authorized_operations": False,
                                                "endpoint_type": 1})[1],
        # What a follower sends: a Fetch with a replica id (it once crashed the handler, and
        # only the random mutations of the consumer Fetch above ever reached it).
        wire.frame(ApiKey.FETCH, FETCH_VERSION,
                   fetch_body("fuzz", 0, 0, max_bytes=1 << 20, max_wait_ms=10,
                              replica_id=1))[1],
        wire.frame(ApiKey.LIST_OFFSETS, 7, {
            "replica_id": 1, "isolation_level": 0,
            "topics": [{"name": "fuzz", "partitions": [
                {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]})[1],
    ]
    return seeds


def test_fuzz_the_live_broker(broker: BrokerProcess, ledger: Ledger) -> None:
    """Every seed request intact, then thousands of mutated frames over hundreds of
    connections in a few seconds; no handler raises, the broker stays up and a real client
    (confluent-kafka) works afterwards."""
    import confluent_kafka

    log_start = len(broker.log_text())
    with Wire(broker.port()) as wire:
        create_topic(wire, "fuzz")
        seeds = _seed_frames(wire)
    # The seeds themselves first, each on its own connection: valid requests every run,
    # whatever the random mutations below happen to reach. Each is answered (or, for a request
    # the broker refuses, the connection closes), never left hanging.
    for frame in seeds:
        api, version = struct.unpack_from(">hh", frame, 4)
        with Wire(broker.port(), timeout=10) as wire:
            wire.send(frame)
            wire.read_frame_or_close(f"seed request api {api} v{version}")
        crashes = unexpected_tracebacks(broker.log_text()[log_start:])
        assert not crashes, f"seed request api {api} v{version} made a handler raise:\n" + (
            crashes[0])
    seed = int(time.time())
    rng = random.Random(seed)
    deadline = time.monotonic() + 6
    sent = connections = 0
    while time.monotonic() < deadline:
        try:
            sock = socket.create_connection(("127.0.0.1", broker.port()), timeout=5)
        except OSError as exc:
            pytest.fail(f"broker stopped accepting connections (seed {seed}): {exc}")
        connections += 1
        try:
            sock.settimeout(0.2)
            for _ in range(rng.randrange(1, 12)):
                sock.sendall(_mutations(rng, seeds))
                sent += 1
            try:
                while sock.recv(65536):
                    pass
            except (TimeoutError, OSError):
                pass
        except OSError:
            pass  # the broker closed the connection mid-send: fine
        finally:
            sock.close()
    assert broker.proc is not None and broker.proc.poll() is None, f"died (seed {seed})"
    assert sent > 200 and connections > 50, (sent, connections)
    # A handler that raised closed its connection as "internal error": for the fuzzer a
    # disconnect like any other, so the log says it (with the seed that reproduces it).
    assert_serves(broker.port(), HEALTH, ledger)  # every request before it was handled
    crashes = unexpected_tracebacks(broker.log_text()[log_start:])
    assert not crashes, f"a handler raised (random.Random({seed})):\n{crashes[0]}"

    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap,
                                         "logger": RDKAFKA, "acks": "all",
                                         "enable.idempotence": True})
    acked: list[tuple[int, bytes]] = []

    def on_delivery(err: object, msg: confluent_kafka.Message) -> None:
        assert err is None, err
        acked.append((msg.offset(), msg.value()))

    values = [b"after-fuzz-%d" % i for i in range(200)]
    for value in values:
        producer.produce(TOPIC, value, partition=0, on_delivery=on_delivery)
    assert producer.flush(30) == 0
    assert sorted(v for _o, v in acked) == sorted(values)
    for offset, value in acked:
        ledger.add(TOPIC, 0, offset, [value])
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "logger": RDKAFKA,
                                         "group.id": f"after-fuzz-{seed}",
                                         "auto.offset.reset": "earliest",
                                         "check.crcs": True})
    try:
        first = min(o for o, _v in acked)
        consumer.assign([confluent_kafka.TopicPartition(TOPIC, 0, first)])
        seen: dict[int, bytes] = {}
        deadline = time.monotonic() + 30
        while len([o for o in seen if o in dict(acked)]) < len(acked):
            assert time.monotonic() < deadline, "consumer did not read back what was acked"
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            seen[msg.offset()] = msg.value()
        assert all(seen[o] == v for o, v in acked)
    finally:
        consumer.close()


# --- nothing was damaged -------------------------------------------------------------------


def test_zz_every_acknowledged_record_survives_restarts(broker: BrokerProcess,
                                                        ledger: Ledger) -> None:
    """Runs last: clean restart, then kill -9 and restart; all acknowledged records are
    served with their values (and CRCs verified while reading)."""
    assert ledger.verify(broker.port()) > 0
    broker.stop()
    broker.start()
    before = ledger.verify(broker.port())
    broker.kill()
    broker.start()
    assert ledger.verify(broker.port()) == before
