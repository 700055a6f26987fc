"""check_record_set refuses record sets whose records do not match their header (issue 11,
defect 1), keyless records for compacted topics (defect 11), and accepts what clients write.

Every broken shape has a valid header and CRC: before the per-record validation all of them
were appended.
"""

from __future__ import annotations

import random
import struct
import zlib
from typing import Any

import pytest
from crc32c import crc32c
from kafka.record.default_records import DefaultRecordBatch

from moldau.broker.group.offsets_log import records_batch
from moldau.broker.produce_validation import Rejection, check_record_set
from moldau.protocol.errors import ErrorCode
from moldau.protocol.records.batch import BatchHeader, read_header
from moldau.protocol.records.codec import build_batch, decode_batch
from moldau.protocol.records.compression import Codec, compress
from tests.integration.record_shapes import batch, broken_record_sets, good_records, record

NOW = 1_700_000_000_000
MAX_MESSAGE = 1 << 20
CODECS = [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD]


def check(records: bytes, **overrides: Any) -> Rejection | list[BatchHeader]:
    kwargs: dict[str, Any] = dict(
        max_message_bytes=MAX_MESSAGE, segment_bytes=1 << 30, now_ms=NOW,
        timestamp_before_max_ms=2**63 - 1, timestamp_after_max_ms=2**63 - 1,
        log_append_time=False)
    kwargs.update(overrides)
    return check_record_set(records, **kwargs)


def refused(records: bytes, code: ErrorCode, **overrides: Any) -> str:
    result = check(records, **overrides)
    assert isinstance(result, Rejection), f"accepted, expected {code.name}"
    assert result.code == code, result
    return result.message


def accepted(records: bytes, **overrides: Any) -> list[BatchHeader]:
    result = check(records, **overrides)
    assert not isinstance(result, Rejection), result
    return result


# --- defect 1: records that do not match their header -------------------------------------


@pytest.mark.parametrize("shape", list(broken_record_sets(NOW)))
def test_broken_records_are_invalid_record(shape: str) -> None:
    message = refused(broken_record_sets(NOW)[shape], ErrorCode.invalid_record)
    assert "record" in message


@pytest.mark.parametrize("shape", list(broken_record_sets(NOW)))
def test_broken_records_are_refused_in_any_batch_of_the_set(shape: str) -> None:
    good = batch(good_records(2), count=2, base_timestamp=NOW)
    message = refused(good + broken_record_sets(NOW)[shape], ErrorCode.invalid_record)
    assert "batch 2" in message


def test_count_2_31_minus_1_is_refused_without_scanning() -> None:
    message = refused(batch(good_records(3), count=2**31 - 1, base_timestamp=NOW),
                      ErrorCode.invalid_record)
    assert "2147483647 records" in message


def test_header_count_against_last_offset_delta_is_invalid_record() -> None:
    """Kafka's LogValidator.validateBatch: InvalidRecordException, not CorruptRecord."""
    three = good_records(3)
    for count, delta in ((3, 1), (3, 5), (0, -1), (-4, -5)):
        refused(batch(three, count=count, last_offset_delta=delta, base_timestamp=NOW),
                ErrorCode.invalid_record)


@pytest.mark.parametrize("codec", CODECS)
def test_broken_records_inside_a_compressed_batch(codec: Codec) -> None:
    """The records are checked after decompression: a valid frame of garbage is invalid."""
    for shape in ("count above the records present", "offset deltas out of order",
                  "trailing bytes after the last record", "key length -2"):
        inner = broken_record_sets(NOW)[shape]
        header = read_header(inner)
        records = inner[61:]
        refused(batch(records, count=header.record_count, codec=codec, base_timestamp=NOW),
                ErrorCode.invalid_record)


@pytest.mark.parametrize("codec", CODECS)
def test_invalid_compressed_payload_is_corrupt_message(codec: Codec) -> None:
    records = good_records(20, b"value" * 10)
    payload = compress(codec, records)
    bad = {
        "garbage": b"this is not compressed data at all" * 3,
        "truncated": payload[: len(payload) // 2],
        "bytes after the frame": payload + b"\x00trailing",
        "empty": b"",
    }
    for name, blob in bad.items():
        message = refused(batch(b"", count=20, codec=codec, compressed=blob,
                                base_timestamp=NOW), ErrorCode.corrupt_message)
        assert codec.name in message, (name, message)


def test_unknown_codec_is_corrupt_message() -> None:
    refused(batch(good_records(2), count=2, attributes=5, base_timestamp=NOW),
            ErrorCode.corrupt_message)


@pytest.mark.parametrize("codec", CODECS)
def test_decompression_bomb_is_message_too_large(codec: Codec) -> None:
    """A small batch that decompresses past 16 x max.message.bytes is refused before it is
    decompressed further (memory bound: tests/unit/protocol/test_decompress_bounded.py)."""
    limit = 16 * 64 * 1024  # max.message.bytes 64 KiB: 16 MiB floor applies
    zeros = bytes(20 << 20)  # zero bytes are also records of length 0: invalid if scanned
    payload = compress(codec, zeros)
    message = refused(batch(b"", count=1, codec=codec, compressed=payload,
                            base_timestamp=NOW), ErrorCode.message_too_large,
                      max_message_bytes=max(limit // 16, len(payload) + 100))
    assert "decompresses to more than" in message and "max.message.bytes" in message


def test_decompressed_limit_follows_max_message_bytes() -> None:
    """Above the 16 MiB floor the limit is 16 x max.message.bytes."""
    records = record(0, b"k", bytes(20 << 20))
    payload = compress(Codec.ZSTD, records)
    big = batch(b"", count=1, codec=Codec.ZSTD, compressed=payload, base_timestamp=NOW)
    refused(big, ErrorCode.message_too_large, max_message_bytes=1 << 20)
    accepted(big, max_message_bytes=2 << 20)


# --- defect 11: compacted topics need keys ---------------------------------------------------


@pytest.mark.parametrize("codec", [Codec.NONE, *CODECS])
def test_keyless_record_in_a_compacted_topic_is_invalid_record(codec: Codec) -> None:
    records = record(0, b"a") + record(1, None) + record(2, b"c")
    keyless = batch(records, count=3, codec=codec, base_timestamp=NOW)
    message = refused(keyless, ErrorCode.invalid_record, compacted=True)
    assert "record 1" in message and "cleanup.policy=compact" in message
    accepted(keyless, compacted=False)


def test_compacted_topic_accepts_keys_tombstones_and_empty_keys() -> None:
    records = record(0, b"a") + record(1, b"b", None) + record(2, b"", b"empty key")
    accepted(batch(records, count=3, base_timestamp=NOW), compacted=True)


def test_group_coordinator_batches_pass_the_compacted_check() -> None:
    """__consumer_offsets is compacted: the coordinator's own records always carry keys."""
    accepted(records_batch([(b"key-1", b"value"), (b"key-2", None)], NOW), compacted=True)


# --- what clients write passes ---------------------------------------------------------------


def client_batches() -> dict[str, bytes]:
    ts = NOW
    return {
        "one record": build_batch([(b"k", b"v", [], ts)]),
        "null key and value": build_batch([(None, None, [], ts)]),
        "headers": build_batch([(b"k", b"v", [("h1", b"x"), ("h2", None), ("", b"")], ts)] * 5),
        "timestamps out of order": build_batch(
            [(None, b"v", [], ts + d) for d in (0, -5000, 70_000, -3, 2**40)]),
        "9,000 tiny records (3-byte offset deltas)": build_batch(
            [(None, b"", [], ts)] * 9000),
        "20 KiB values (3-byte lengths)": build_batch(
            [(b"k" * 300, bytes(20_000), [("h", bytes(9000))], ts)] * 3),
        **{f"{c.name} 1,000 x 1 KiB": build_batch(
            [(None, bytes(random.Random(i).randbytes(1024)), [], ts + i) for i in range(1000)],
            codec=c) for c in CODECS},
        "idempotent": build_batch([(b"k", b"v", [], ts)] * 3, producer_id=7, producer_epoch=0,
                                  base_sequence=0),
    }


@pytest.mark.parametrize("name", list(client_batches()))
def test_client_batches_are_accepted(name: str) -> None:
    blob = client_batches()[name]
    [header] = accepted(blob, compacted=False)
    assert header.record_count == len(decode_batch(blob).records)


def test_record_timestamps_are_checked_not_only_the_header() -> None:
    """Kafka checks every record's timestamp: a header whose max timestamp is lower than its
    records' does not let a far-future record in."""
    records = record(0, ts_delta=0) + record(1, ts_delta=10 * 3600_000)
    lying = batch(records, count=2, base_timestamp=NOW, max_timestamp=NOW)
    refused(lying, ErrorCode.invalid_timestamp, timestamp_after_max_ms=3600_000)
    old = batch(record(0, ts_delta=-10 * 3600_000), count=1, base_timestamp=NOW)
    refused(old, ErrorCode.invalid_timestamp, timestamp_before_max_ms=3600_000)
    accepted(lying, timestamp_after_max_ms=3600_000, log_append_time=True)


# --- accepted means every client can read it ---------------------------------------------------


def _mutate(rng: random.Random, blob: bytes) -> bytes:
    data = bytearray(blob)
    for _ in range(rng.randrange(1, 4)):
        at = rng.randrange(61, len(data))
        match rng.randrange(4):
            case 0:
                data[at] = rng.randrange(256)
            case 1:
                data[at] ^= 1 << rng.randrange(8)
            case 2:
                del data[at : at + rng.randrange(1, 4)]
            case 3:
                data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 4)))
    struct.pack_into(">i", data, 8, len(data) - 12)
    struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    return bytes(data)


def test_mutated_batches_that_pass_are_readable_by_clients() -> None:
    """Thousands of byte-level mutations of valid batches (CRC fixed up): whatever the
    validator accepts, kafka-python's record reader and ours decode, with the declared count
    and offsets 0..count-1. Most mutations must be refused."""
    rng = random.Random(11)
    seeds = [build_batch([(b"key-%d" % i, b"value-%d" % i * (i % 4), [("h", b"x")] * (i % 3),
                           NOW + i) for i in range(n)]) for n in (1, 3, 17)]
    accepted_count = 0
    for _ in range(6000):
        blob = _mutate(rng, rng.choice(seeds))
        result = check(blob)
        if isinstance(result, Rejection):
            assert result.code in (ErrorCode.invalid_record, ErrorCode.corrupt_message), result
            continue
        accepted_count += 1
        [header] = result
        theirs = list(DefaultRecordBatch(blob))
        assert [r.offset for r in theirs] == list(range(header.record_count))
        ours = decode_batch(blob).records
        assert [(r.key, r.value) for r in ours] == [(r.key, r.value) for r in theirs]
    assert accepted_count < 3000, accepted_count


def test_gzip_member_with_bad_checksum_is_corrupt() -> None:
    body = good_records(4)
    gz = compress(Codec.GZIP, body)
    bad_crc = gz[:-8] + struct.pack("<I", zlib.crc32(body) ^ 1) + gz[-4:]
    refused(batch(b"", count=4, codec=Codec.GZIP, compressed=bad_crc, base_timestamp=NOW),
            ErrorCode.corrupt_message)
