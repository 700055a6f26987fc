"""Micro-benchmark of record validation on the produce path (issue 11, defect 1).

Times, per batch, what the broker does with a produce's record set before appending it:

- ``headers``: the batch-header checks alone (size, magic, CRC-32C, count against last offset
  delta: ``validate_batches``), which is all the broker did before records were validated;
- ``full``: ``check_record_set`` as the broker calls it now (headers, then every record,
  decompressing a compressed batch once, bounded);
- ``decompress``: for compressed batches, the bounded decompression alone.

Batches are built as a producer would: 1,000 records of 1 KiB of JSON-like text (compresses
~3-4x, like log lines), uncompressed and with each codec, plus 10,000 x 100 B (W1's record
size) and one 1 KiB record (W4's). Figures are CPU µs per batch, the best of several rounds
(least disturbed by other processes), and ns per record:

    .venv/bin/python -m bench.record_validation [--seconds 1]

Writes bench/results/record_validation-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import struct
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import zstandard
from crc32c import crc32c

from moldau.broker.produce_validation import Rejection, check_record_set
from moldau.protocol.records.batch import HEADER_SIZE, read_header, validate_batches
from moldau.protocol.records.codec import build_batch
from moldau.protocol.records.compression import Codec, decompress_bounded
from moldau.protocol.records.validation import max_decompressed_bytes

MAX_MESSAGE = 1048588  # Kafka's default max.message.bytes
WORDS = ("order", "user", "shipped", "cart", "payment", "refund", "warehouse", "berlin",
         "prague", "status", "ok", "pending", "item", "sku", "price", "currency", "eur")


def text_value(rng: random.Random, size: int) -> bytes:
    """A JSON-like record of ``size`` bytes (repeated keys, varied values)."""
    parts = [b'{"id":%d,"ts":%d,"event":"%s"' % (rng.randrange(10**9), rng.randrange(10**12),
                                                 rng.choice(WORDS).encode())]
    while sum(map(len, parts)) < size:
        parts.append(b',"%s":"%s-%d"' % (rng.choice(WORDS).encode(), rng.choice(WORDS).encode(),
                                        rng.randrange(10**6)))
    return b"".join(parts)[: size - 1] + b"}"


def zstd_streamed(batch: bytes) -> bytes:
    """``batch`` (uncompressed) with its records in a zstd frame without a content size, as
    librdkafka and the Java client write them (build_batch's frames carry the size)."""
    compressor = zstandard.ZstdCompressor(level=3).compressobj()
    payload = compressor.compress(batch[HEADER_SIZE:]) + compressor.flush()
    after_crc = bytearray(batch[21:HEADER_SIZE]) + payload
    struct.pack_into(">h", after_crc, 0, int(Codec.ZSTD))
    head = bytearray(batch[:17])
    struct.pack_into(">i", head, 8, 9 + len(after_crc))
    return bytes(head) + struct.pack(">I", crc32c(bytes(after_crc))) + bytes(after_crc)


def cases() -> dict[str, bytes]:
    rng = random.Random(11)
    now = int(time.time() * 1000)
    kib = [(None, text_value(rng, 1024), [], now + i // 100) for i in range(1000)]
    out = {f"1,000 x 1 KiB, {c.name.lower()}": build_batch(kib, codec=c) for c in Codec}
    out["1,000 x 1 KiB, zstd streamed"] = zstd_streamed(out["1,000 x 1 KiB, none"])
    small = [(None, text_value(rng, 100), [], now + i // 1000) for i in range(10_000)]
    out["10,000 x 100 B, none"] = build_batch(small)
    out["10,000 x 100 B, lz4"] = build_batch(small, codec=Codec.LZ4)
    out["1 x 1 KiB, none"] = build_batch([(b"key", text_value(rng, 1024), [], now)])
    return out


def best_us(fn: Callable[[], object], seconds: float, rounds: int = 7) -> tuple[float, float]:
    """CPU µs per call: the best round and the median round."""
    per_round = []
    for _ in range(rounds):
        n = 0
        t0 = time.process_time()
        w0 = time.perf_counter()
        while time.perf_counter() - w0 < seconds / rounds or n == 0:
            fn()
            n += 1
        per_round.append((time.process_time() - t0) / n * 1e6)
    per_round.sort()
    return per_round[0], per_round[len(per_round) // 2]


def run(seconds: float) -> dict[str, Any]:
    now = int(time.time() * 1000)

    def full(blob: memoryview) -> None:
        result = check_record_set(
            blob, max_message_bytes=2 << 20, segment_bytes=1 << 30, now_ms=now,
            timestamp_before_max_ms=2**63 - 1, timestamp_after_max_ms=2**63 - 1,
            log_append_time=False)
        assert not isinstance(result, Rejection), result

    limit = max_decompressed_bytes(MAX_MESSAGE)
    out: dict[str, Any] = {}
    for name, batch in cases().items():
        # A produce's record set is a slice of the request frame, as the broker sees it.
        blob = memoryview(b"\x00" * 100 + batch)[100:]
        header = read_header(blob)
        row: dict[str, Any] = {"records": header.record_count, "batch_bytes": len(batch)}
        row["headers_us"], _ = best_us(lambda b=blob: validate_batches(b, 2 << 20),
                                       seconds)
        row["full_us"], row["full_median_us"] = best_us(lambda b=blob: full(b), seconds)
        if header.compression:
            payload = blob[HEADER_SIZE:]
            row["decompress_us"], _ = best_us(
                lambda p=payload, c=header.compression: decompress_bounded(c, p, limit), seconds)
            row["uncompressed_bytes"] = len(decompress_bounded(header.compression, payload,
                                                               limit))
        row["records_ns_per_record"] = round(
            (row["full_us"] - row["headers_us"]) * 1000 / header.record_count)
        row["full_mb_per_s"] = round(len(batch) / row["full_us"], 1)
        for key in ("headers_us", "full_us", "full_median_us", "decompress_us"):
            if key in row:
                row[key] = round(row[key], 1)
        out[name] = row
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=1.0, help="per measurement")
    args = parser.parse_args()
    result = run(args.seconds)
    print(f"{'case':<26} {'bytes':>9} {'headers µs':>11} {'full µs':>9} {'decomp µs':>10} "
          f"{'ns/record':>10} {'MB/s':>7}")
    for name, r in result.items():
        print(f"{name:<26} {r['batch_bytes']:>9,} {r['headers_us']:>11,.1f} "
              f"{r['full_us']:>9,.1f} {r.get('decompress_us', 0):>10,.1f} "
              f"{r['records_ns_per_record']:>10,} {r['full_mb_per_s']:>7,.0f}")
    out = Path(__file__).resolve().parent / "results"
    out.mkdir(exist_ok=True)
    path = out / f"record_validation-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps({"machine": platform.uname()._asdict(),
                                "python": platform.python_version(), "cases": result},
                               indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
