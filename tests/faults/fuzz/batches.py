"""Record batches for the live fuzzer: a mutator that keeps the CRC valid, and an oracle.

:class:`BatchMutator` makes RecordBatch v2 blobs whose CRC-32C is *correct* after the
mutation (it is recomputed), so they pass the broker's header and CRC checks and test what
lies behind them: record counts that lie (off by one, 0, -1, 2**31-1), last offset deltas that
disagree, records that do not parse (lengths and varints that lie, over-long varints,
truncated or trailing bytes), header counts and key lengths that are negative or huge, offset
and timestamp deltas out of order, compressed payloads that are not valid for their codec or
were compressed with another, decompression bombs, keyless records (for compacted topics),
producer id/epoch/sequence and timestamp edge values, transactional and control bits, codec
ids 5-7, several batches in one blob. Bases are batches built here from random records and
the batches real clients sent (taken from the corpus's Produce requests).

:func:`check_batches` is the oracle: what Kafka's ``LogValidator`` and a client's record
reader accept. A blob it calls invalid must not be acknowledged by the broker: clients choke on
it afterwards (librdkafka stops on the partition, kafka-python raises CorruptRecordError).
"""

from __future__ import annotations

import functools
import random
import struct
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import cramjam
import lz4.frame
import zstandard
from crc32c import crc32c

from moldau.protocol.records import batch as B
from moldau.protocol.records.codec import build_batch, encode_record
from moldau.protocol.records.compression import Codec, compress
from moldau.protocol.varint import uvarint_bytes

_AFTER_CRC = struct.Struct(">hiqqqhii")
_I32 = struct.Struct(">i")
I32_MAX = 2**31 - 1
I64_MAX = 2**63 - 1
# The decompressed size the oracle reads before it calls a payload a bomb it cannot judge.
ORACLE_MAX_DECOMPRESSED = 16 << 20


# --- the oracle ----------------------------------------------------------------------------


@dataclass(slots=True)
class Checked:
    """What :func:`check_batches` found: ``problem`` is None for a valid blob; ``records`` are
    (offset delta, key, value) per batch, for the ledger."""

    problem: str | None
    batches: list[tuple[B.BatchHeader, list[tuple[int, bytes | None, bytes | None]]]]
    decompressed: int = 0
    bomb: bool = False  # decompresses past the oracle's limit: not judged, not in the ledger
    odd_key: bool = False  # a header key that is not UTF-8: valid for Kafka, not for every client


class _Bad(Exception):
    pass


class _OddKey(Exception):
    pass


def _varint(data: bytes, pos: int, max_bytes: int) -> tuple[int, int]:
    """A zig-zag varint as Kafka's ByteUtils reads it: at most ``max_bytes`` bytes."""
    value = shift = 0
    for i in range(max_bytes):
        if pos >= len(data):
            raise _Bad("varint runs past the end of the records")
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return (value >> 1) ^ -(value & 1), pos
        if i == max_bytes - 1:
            break
    raise _Bad(f"varint longer than {max_bytes} bytes")


def _decompress(codec: int, raw: bytes, limit: int) -> bytes:
    if codec == Codec.GZIP:
        d = zlib.decompressobj(wbits=47)
        out = d.decompress(raw, limit + 1)
        if len(out) > limit:
            raise OverflowError
        if not d.eof:
            raise _Bad("gzip stream is truncated")
        return out
    if codec == Codec.SNAPPY:
        out = bytes(_snappy(raw))
    elif codec == Codec.LZ4:
        d4 = lz4.frame.LZ4FrameDecompressor()
        out = d4.decompress(raw, max_length=limit + 1)
        if len(out) <= limit and not d4.eof:
            raise _Bad("lz4 frame is truncated")
    elif codec == Codec.ZSTD:
        declared = zstandard.frame_content_size(raw)
        if declared > limit:
            raise OverflowError
        # A frame may omit its content size (declared -1): read at most limit + 1 bytes, as
        # the broker does, or a mutated frame of zeros can decompress to tens of GiB in the
        # driver (seen: the short run OOM-killed at 22 GiB RSS).
        dz = zstandard.ZstdDecompressor().decompressobj()
        reader = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=False)
        out = reader.read(limit + 1)
        if len(out) > limit:
            raise OverflowError
        out = dz.decompress(raw)
        if not dz.eof or dz.unused_data:
            raise _Bad("zstd frame is truncated or followed by other bytes")
    else:
        raise _Bad(f"unknown compression codec {codec}")
    if len(out) > limit:
        raise OverflowError
    return out


def _snappy_block(raw: bytes) -> bytes:
    # A raw snappy block starts with its uncompressed length (uvarint); cramjam allocates
    # what it declares, so a mutated length could ask for up to 4 GiB per block.
    declared, shift = 0, 0
    for i, b in enumerate(raw[:5]):
        declared |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            break
        if i == 4:
            raise _Bad("snappy length varint is too long")
    if declared > ORACLE_MAX_DECOMPRESSED:
        raise OverflowError
    return bytes(cramjam.snappy.decompress_raw(raw))


def _snappy(raw: bytes) -> bytes:
    magic = b"\x82SNAPPY\x00"
    if not raw.startswith(magic):
        return _snappy_block(raw)
    pos, out = 16, []
    while pos < len(raw):
        if pos + 4 > len(raw):
            raise _Bad("xerial snappy block header truncated")
        (n,) = _I32.unpack_from(raw, pos)
        if n < 0 or pos + 4 + n > len(raw):
            raise _Bad("xerial snappy block runs past the payload")
        out.append(_snappy_block(raw[pos + 4 : pos + 4 + n]))
        pos += 4 + n
    return b"".join(out)


def _records(data: bytes, count: int) -> list[tuple[int, bytes | None, bytes | None]]:
    out = []
    pos = 0
    for _ in range(count):
        length, pos = _varint(data, pos, 5)
        if length <= 0:
            raise _Bad(f"record length {length}")
        end = pos + length
        if end > len(data):
            raise _Bad("record runs past the end of the batch")
        pos += 1  # attributes (unused)
        _ts, pos = _varint(data, pos, 10)
        delta, pos = _varint(data, pos, 5)
        klen, pos = _varint(data, pos, 5)
        if klen < -1:
            raise _Bad(f"key length {klen}")
        key = None if klen < 0 else data[pos : pos + klen]
        pos += max(klen, 0)
        vlen, pos = _varint(data, pos, 5)
        if vlen < -1:
            raise _Bad(f"value length {vlen}")
        value = None if vlen < 0 else data[pos : pos + vlen]
        pos += max(vlen, 0)
        hcount, pos = _varint(data, pos, 5)
        if hcount < 0:
            raise _Bad(f"header count {hcount}")
        for _h in range(hcount):
            hk, pos = _varint(data, pos, 5)
            if hk < 0:
                raise _Bad(f"header key length {hk}")
            try:
                data[pos : pos + hk].decode("utf-8")
            except UnicodeDecodeError:
                # Kafka stores it (Java decodes it with replacement characters), but
                # kafka-python cannot read it back: not judged, not sent as a valid batch.
                raise _OddKey from None
            pos += hk
            hv, pos = _varint(data, pos, 5)
            if hv < -1:
                raise _Bad(f"header value length {hv}")
            pos += max(hv, 0)
            if pos > end:
                raise _Bad("record header runs past its record")
        if pos != end:
            raise _Bad(f"record fields take {pos - end + length} bytes, its length says {length}")
        out.append((delta, key, value))
    if pos != len(data):
        raise _Bad(f"{len(data) - pos} bytes after the last of {count} records")
    return out


def check_batches(blob: bytes | memoryview | None, *, compacted: bool = False,
                  max_decompressed: int = ORACLE_MAX_DECOMPRESSED) -> Checked:
    """Whether a Produce records blob is one a Kafka broker stores: every batch magic 2, CRC
    right, count = last offset delta + 1 >= 1, every record parses and the records fill the
    batch exactly, the payload decompresses with its codec, keys present on a compacted topic.
    A payload that decompresses to more than ``max_decompressed`` (16 MiB) is invalid: real
    clients cannot read it back."""
    if blob is None:
        return Checked("null records", [])
    data = bytes(blob)
    found: list[tuple[B.BatchHeader, list[tuple[int, bytes | None, bytes | None]]]] = []
    total = 0
    try:
        headers = B.validate_batches(data)
    except B.InvalidBatch as exc:
        return Checked(f"header: {exc}", [])
    pos = 0
    for header in headers:
        raw = data[pos + B.HEADER_SIZE : pos + header.size]
        pos += header.size
        try:
            payload = (_decompress(header.compression, raw, max_decompressed)
                       if header.compression else raw)
            total += len(payload)
            records = _records(payload, header.record_count)
        except OverflowError:
            # librdkafka cannot read such a batch back ("Invalid compressed data"): a broker
            # must bound decompression (issue 11, defect 1).
            return Checked(f"decompresses to more than {max_decompressed} bytes", found, total,
                           bomb=True)
        except _OddKey:
            return Checked(None, found, total, odd_key=True)
        except _Bad as exc:
            return Checked(f"records: {exc}", found, total)
        except Exception as exc:
            return Checked(f"codec {header.compression}: {type(exc).__name__}: {exc}",
                           found, total)
        if compacted and any(key is None for _d, key, _v in records):
            return Checked("keyless record on a compacted topic", found, total)
        if header.is_control and not all(
                key is not None and len(key) == 4 and key[:2] == b"\0\0" and key[2:] in
                (b"\0\0", b"\0\1") for _d, key, _v in records):
            # Readers parse control records (COMMIT/ABORT markers) and fail on others.
            return Checked("control batch whose records are not transaction markers", found,
                           total)
        problem = _kafka_python_reads(data[pos - header.size : pos])
        if problem is not None:
            return Checked(f"kafka-python cannot read it: {problem}", found, total)
        found.append((header, records))
    return Checked(None, found, total)


def _kafka_python_reads(batch: bytes) -> str | None:
    """A second opinion from a real client's record reader (kafka-python's)."""
    from kafka.record.memory_records import MemoryRecords

    try:
        records = MemoryRecords(bytearray(batch))
        while records.has_next():
            for _record in records.next_batch():
                pass
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"[:100]
    return None


# --- the mutator ---------------------------------------------------------------------------


def _recrc(batch: bytearray) -> bytearray:
    """Recompute a batch's CRC over its declared length (as a broker checks it)."""
    (length,) = _I32.unpack_from(batch, 8)
    end = min(len(batch), length + B.LOG_OVERHEAD)
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[B.CRC_START:end])))
    return batch


def _split(batch: bytes) -> tuple[B.BatchHeader, bytes]:
    header = B.read_header(batch, 0)
    return header, batch[B.HEADER_SIZE : header.size]


def _assemble(header: B.BatchHeader, payload: bytes, **fields: int) -> bytearray:
    h = header._replace(**fields) if fields else header
    h = h._replace(record_count=_wrap(h.record_count, 32),
                   last_offset_delta=_wrap(h.last_offset_delta, 32),
                   base_sequence=_wrap(h.base_sequence, 32))
    after = _AFTER_CRC.pack(h.attributes, h.last_offset_delta, h.base_timestamp, h.max_timestamp,
                            h.producer_id, h.producer_epoch, h.base_sequence,
                            h.record_count) + payload
    length = fields.get("batch_length", 4 + 1 + 4 + len(after))
    out = bytearray(struct.pack(">qiib", h.base_offset, length, h.partition_leader_epoch,
                                h.magic) + b"\0\0\0\0" + after)
    return _recrc(out)


def _wrap(value: int, bits: int) -> int:
    """``value`` as a signed integer of ``bits`` bits (two's complement wrap-around)."""
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def _edge32(rng: random.Random) -> int:
    return rng.choice([-(2**31), -2, -1, 0, 1, 2, 127, 128, 32767, I32_MAX - 1, I32_MAX,
                       rng.randrange(-(2**31), 2**31)])


def _edge64(rng: random.Random) -> int:
    return rng.choice([-(2**63), -2, -1, 0, 1, I64_MAX, I64_MAX - 1,
                       int(time.time() * 1000), rng.randrange(-(2**63), 2**63)])


def _edge16(rng: random.Random) -> int:
    return rng.choice([-(2**15), -2, -1, 0, 1, 2**15 - 1, rng.randrange(-(2**15), 2**15)])


class BatchMutator:
    """Random RecordBatch v2 blobs with valid CRCs; ``invalid`` says how often to break them."""

    def __init__(self, rng: random.Random, real_batches: Sequence[bytes] = ()) -> None:
        self.rng = rng
        self.real = [b for b in real_batches if len(b) >= B.HEADER_SIZE]

    # bases ---------------------------------------------------------------------------------
    def records(self, *, keyless: bool | None = None) -> list[tuple[bytes | None, bytes | None,
                                                                     list, int]]:
        rng = self.rng
        n = rng.choice([1, 1, 2, 3, 5, 10, 30, rng.randrange(1, 200)])
        now = int(time.time() * 1000)
        out = []
        for i in range(n):
            if keyless is None:
                key = None if rng.random() < 0.15 else b"key-%d" % rng.randrange(50)
            else:
                key = None if keyless else b"key-%d" % rng.randrange(50)
            size = rng.choice([0, 1, 10, 100, 1000, rng.randrange(4096)])
            value = None if rng.random() < 0.05 else rng.randbytes(size)
            headers = [(f"h{j}", None if rng.random() < 0.2 else b"v")
                       for j in range(rng.choice([0, 0, 1, 3]))]
            out.append((key, value, headers, now + i))
        return out

    def valid(self, *, codec: int | None = None, keyless: bool | None = None) -> bytes:
        """A valid batch: built from random records or one a real client sent."""
        rng = self.rng
        if self.real and rng.random() < 0.3:
            return rng.choice(self.real)
        if codec is None:
            codec = rng.choice([0, 0, 1, 2, 3, 4])
        pid = rng.choice([-1, -1, rng.randrange(0, 1000)])
        return build_batch(self.records(keyless=keyless), codec=codec, producer_id=pid,
                           producer_epoch=-1 if pid < 0 else rng.randrange(0, 5),
                           base_sequence=-1 if pid < 0 else rng.randrange(0, 100))

    # mutations -----------------------------------------------------------------------------
    def blob(self, *, invalid: float = 0.7, keyless: bool | None = None,
             compacted: bool = False, crc_break_invalid: bool = False) -> bytes:
        """A records blob: usually one batch, mutated with probability ``invalid``. With
        ``crc_break_invalid``, a blob the oracle calls invalid gets a wrong CRC (so only the
        CRC check is tested with it: the run excludes defect 1)."""
        rng = self.rng
        batch = self.valid(keyless=keyless)
        if rng.random() < invalid:
            for _ in range(rng.choice([1, 1, 1, 2, 3])):
                batch = bytes(self.mutate(batch))
        if rng.random() < 0.05:  # several batches in one blob (Kafka takes one per v2 request)
            batch += self.valid(keyless=keyless)
        checked = check_batches(batch, compacted=compacted)
        if checked.odd_key or (crc_break_invalid and checked.problem is not None):
            return break_crc(batch)
        return batch

    def mutate(self, batch: bytes) -> bytearray:
        rng = self.rng
        op = rng.choice(_OPS)
        return op(self, batch)

    def _count(self, batch: bytes) -> bytearray:
        header, payload = _split(batch)
        count = rng_choice(self.rng, [header.record_count + 1, header.record_count - 1, 0, -1,
                                      I32_MAX, I32_MAX - 1, _edge32(self.rng)])
        if self.rng.random() < 0.5:  # a consistent lie: the delta agrees with the count
            return _assemble(header, payload, record_count=count,
                             last_offset_delta=max(count - 1, -(2**31)))
        return _assemble(header, payload, record_count=count)

    def _delta(self, batch: bytes) -> bytearray:
        header, payload = _split(batch)
        return _assemble(header, payload, last_offset_delta=_edge32(self.rng))

    def _header_fields(self, batch: bytes) -> bytearray:
        header, payload = _split(batch)
        rng = self.rng
        field = rng.choice(["producer_id", "producer_epoch", "base_sequence", "base_timestamp",
                            "max_timestamp", "partition_leader_epoch", "base_offset",
                            "attributes"])
        if field in ("producer_id", "base_timestamp", "max_timestamp", "base_offset"):
            value = _edge64(rng)
        elif field == "producer_epoch":
            value = _edge16(rng)
        elif field == "attributes":
            # codec 5-7, LogAppendTime, transactional, control, delete horizon, high bits
            value = header.attributes ^ rng.choice([0x05, 0x06, 0x07, 0x08, 0x10, 0x20, 0x40,
                                                    0x80, 0x4000, 0x30])
            value = struct.unpack(">h", struct.pack(">H", value & 0xFFFF))[0]
        else:
            value = _edge32(rng)
        return _assemble(header, payload, **{field: value})

    def _records_raw(self, batch: bytes) -> tuple[B.BatchHeader, bytes] | None:
        """(header, decompressed records) when the batch decodes; else None."""
        header, payload = _split(batch)
        if header.compression:
            try:
                payload = _decompress(header.compression, payload, 16 << 20)
            except Exception:
                return None
        return header, payload

    def _recompressed(self, header: B.BatchHeader, records: bytes, **fields: int) -> bytearray:
        codec = header.compression
        payload = compress(Codec(codec), records) if codec in (1, 2, 3, 4) else records
        return _assemble(header, payload, **fields)

    def _record_bytes(self, batch: bytes) -> bytearray:
        """Damage the records inside (then recompress with the batch's codec)."""
        got = self._records_raw(batch)
        if got is None or not got[1]:
            return self._count(batch)
        header, data = got
        rng = self.rng
        data = bytearray(data)
        kind = rng.randrange(7)
        if kind == 0:  # truncate
            del data[rng.randrange(len(data)):]
        elif kind == 1:  # trailing bytes
            data += rng.randbytes(rng.randrange(1, 20))
        elif kind == 2:  # an over-long varint at the start (record length)
            data[0:1] = b"\xff" * rng.choice([5, 6, 10, 11]) + b"\x01"
        elif kind == 3:  # the first record's length lies
            data[0:1] = uvarint_bytes(rng.choice([0, 1, 2, 4_000_000_000 & 0xFFFFFFFF,
                                                  (2 * len(data)) & 0xFFFFFFFF]))
        elif kind == 4:  # flip bytes inside the records
            for _ in range(rng.randrange(1, 4)):
                i = rng.randrange(len(data))
                data[i] ^= 1 << rng.randrange(8)
        elif kind == 5:  # a record with a negative or huge key/header count
            out = bytearray()
            body = bytearray(b"\x00\x00\x00")  # attributes, ts delta 0, offset delta 0
            body += _zz(rng.choice([-2, -100, 2**31 - 1, 5000]))  # key length
            body += _zz(1) + b"v"
            body += _zz(rng.choice([-1, -5, 2**31 - 1, 1000]))  # header count
            out += _zz(len(body)) + body
            data = out + data
        else:  # records with offset / timestamp deltas out of order
            recs = [_raw_record(rng.choice([i, 0, -1, 5 - i, 2**31 - 1]),
                                rng.choice([0, -1, -(2**40), 2**40, i]), b"k%d" % i, b"v")
                    for i in range(rng.randrange(1, 6))]
            data = bytearray(b"".join(recs))
            return self._recompressed(header, bytes(data), record_count=len(recs),
                                      last_offset_delta=len(recs) - 1)
        return self._recompressed(header, bytes(data))

    def _codec(self, batch: bytes) -> bytearray:
        """A payload that is not valid for its declared codec, or a bomb."""
        got = self._records_raw(batch)
        header, data = got if got is not None else _split(batch)
        rng = self.rng
        kind = rng.randrange(5)
        if kind == 0:  # random bytes declared compressed
            payload = rng.randbytes(rng.randrange(0, 300))
            codec = rng.choice([1, 2, 3, 4])
        elif kind == 1:  # compressed with one codec, declared as another
            real, codec = rng.sample([1, 2, 3, 4], 2)
            payload = compress(Codec(real), bytes(data))
        elif kind == 2:  # truncated compressed stream
            codec = rng.choice([1, 2, 3, 4])
            full = compress(Codec(codec), bytes(data))
            payload = full[: rng.randrange(max(1, len(full)))]
        elif kind == 3:  # uncompressed records declared compressed
            payload, codec = bytes(data), rng.choice([1, 2, 3, 4])
        else:  # a decompression bomb: one record whose value is many zeros
            codec = rng.choice([1, 3, 4])
            payload = _bomb(codec, rng.choice([8 << 20, 64 << 20, 128 << 20]))
            attributes = (header.attributes & ~B.COMPRESSION_MASK) | codec
            return _assemble(header, payload, attributes=attributes, record_count=1,
                             last_offset_delta=0)
        attributes = (header.attributes & ~B.COMPRESSION_MASK) | codec
        return _assemble(header, payload, attributes=attributes)

    def _keyless(self, batch: bytes) -> bytearray:
        header, _payload = _split(batch)
        records = self.records(keyless=True)
        fresh = build_batch(records, codec=header.compression if header.compression < 5 else 0,
                            producer_id=header.producer_id, producer_epoch=header.producer_epoch,
                            base_sequence=header.base_sequence)
        return bytearray(fresh)

    def _length(self, batch: bytes) -> bytearray:
        """batchLength that disagrees with the bytes (CRC over the declared region)."""
        header, payload = _split(batch)
        delta = self.rng.choice([-1, 1, -10, 10, -(len(payload) + 1)])
        return _assemble(header, payload, batch_length=header.batch_length + delta)

    def _magic(self, batch: bytes) -> bytearray:
        out = bytearray(batch)
        out[B.MAGIC_OFFSET] = self.rng.choice([0, 1, 3, 0xFF])
        return _recrc(out)


@functools.cache
def _bomb(codec: int, size: int) -> bytes:
    out = bytearray()
    encode_record(out, 0, 0, b"bomb", bytes(size))
    return compress(Codec(codec), bytes(out))


def rng_choice(rng: random.Random, items: list[int]) -> int:
    return items[rng.randrange(len(items))]


def _raw_record(offset_delta: int, ts_delta: int, key: bytes | None, value: bytes | None
                ) -> bytes:
    """One encoded record with any (even negative) deltas, length-prefixed."""
    body = bytearray(b"\x00") + _zz(ts_delta) + _zz(offset_delta)
    for part in (key, value):
        body += _zz(-1) if part is None else _zz(len(part)) + part
    body += b"\x00"
    return _zz(len(body)) + bytes(body)


def _zz(value: int) -> bytes:
    return uvarint_bytes(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


_OPS = [BatchMutator._count, BatchMutator._count, BatchMutator._delta,
        BatchMutator._header_fields, BatchMutator._header_fields, BatchMutator._record_bytes,
        BatchMutator._record_bytes, BatchMutator._record_bytes, BatchMutator._codec,
        BatchMutator._codec, BatchMutator._keyless, BatchMutator._length, BatchMutator._magic]


def break_crc(blob: bytes) -> bytes:
    """``blob`` with its first batch's CRC wrong (a batch every broker must refuse)."""
    out = bytearray(blob)
    if len(out) > 20:
        out[17] ^= 0xFF
    return bytes(out)
