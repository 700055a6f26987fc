"""Micro-benchmark of the storage hot paths: Log.append and Log.read.

Prints batches/s, MB/s and µs per batch, and writes bench/results/storage_append-<time>.json.
Appends go to the page cache (no fsync, Kafka's default); reads are served from the page cache.

    .venv/bin/python bench/storage_append.py [--batches 100000] [--records 1] [--value 100]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time

from moldau.protocol.records.batch import validate_batches
from moldau.protocol.records.codec import build_batch
from moldau.storage import LogConfig, load_log


def make(n: int, records: int, value: int, idempotent: bool) -> list[bytes]:
    out = []
    payload = os.urandom(value)
    for i in range(n):
        recs = [(b"key-%d" % i, payload, [], 1_700_000_000_000 + i) for _ in range(records)]
        if idempotent:
            out.append(build_batch(recs, producer_id=77, producer_epoch=0,
                                   base_sequence=(i * records) & 0x7FFFFFFF))
        else:
            out.append(build_batch(recs))
    return out


def bench_append(path: str, batches: list[bytes], validate: bool) -> dict:
    log = load_log(path, LogConfig.from_dict({"segment.bytes": 256 << 20}))
    bufs = [bytearray(b) for b in batches]
    headers = [validate_batches(b) for b in bufs]
    total = sum(len(b) for b in bufs)
    t0 = time.perf_counter()
    if validate:
        for buf in bufs:
            log.append(buf, validate_batches(buf), 1)
    else:
        for buf, hs in zip(bufs, headers, strict=True):
            log.append(buf, hs, 1)
    dt = time.perf_counter() - t0
    log.close()
    n = len(bufs)
    return {"batches_per_s": n / dt, "mb_per_s": total / dt / 1e6, "us_per_batch": dt / n * 1e6}


def bench_read(path: str, n: int, batch_size: int) -> dict:
    log = load_log(path, LogConfig.from_dict({"segment.bytes": 256 << 20}), clean_shutdown=True)
    leo = log.log_end_offset
    step = max(1, leo // n)
    offsets = list(range(0, leo, step))[:n]
    t0 = time.perf_counter()
    got = 0
    for off in offsets:  # one batch per read, as a caught-up consumer at the tail does
        got += len(log.read(off, 1).records)
    dt_one = time.perf_counter() - t0
    t0 = time.perf_counter()
    off = 0
    bulk = 0
    reads = 0
    while off < leo:
        r = log.read(off, 1 << 20)
        bulk += len(r.records)
        reads += 1
        # next offset from the last complete batch: base offset + last offset delta + 1
        view = memoryview(r.records)
        pos = 0
        last = 0
        while pos < len(view):
            last = pos
            pos += int.from_bytes(view[pos + 8:pos + 12], "big") + 12
        off = int.from_bytes(view[last:last + 8], "big") + \
            int.from_bytes(view[last + 23:last + 27], "big") + 1
    dt_bulk = time.perf_counter() - t0
    log.close()
    return {
        "single_batch_reads_per_s": len(offsets) / dt_one,
        "single_batch_us": dt_one / len(offsets) * 1e6,
        "bulk_1mib_mb_per_s": bulk / dt_bulk / 1e6,
        "bulk_reads": reads,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, default=100_000)
    ap.add_argument("--records", type=int, default=1)
    ap.add_argument("--value", type=int, default=100)
    args = ap.parse_args()
    results: dict = {
        "bench": "storage_append",
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "params": vars(args),
    }
    plain = make(args.batches, args.records, args.value, idempotent=False)
    idem = make(args.batches, args.records, args.value, idempotent=True)
    results["batch_bytes"] = len(plain[0])
    with tempfile.TemporaryDirectory(prefix="moldau-bench-") as tmp:
        results["append"] = bench_append(f"{tmp}/a-0", plain, validate=False)
        results["append_with_validation"] = bench_append(f"{tmp}/b-0", plain, validate=True)
        results["append_idempotent"] = bench_append(f"{tmp}/c-0", idem, validate=False)
        results["read"] = bench_read(f"{tmp}/a-0", min(args.batches, 50_000), len(plain[0]))
    for key in ("append", "append_with_validation", "append_idempotent"):
        r = results[key]
        print(f"{key:24s} {r['batches_per_s']:>10,.0f} batches/s {r['mb_per_s']:>8.1f} MB/s "
              f"{r['us_per_batch']:>6.2f} µs/batch")
    r = results["read"]
    print(f"{'read 1 batch':24s} {r['single_batch_reads_per_s']:>10,.0f} reads/s "
          f"{r['single_batch_us']:>6.2f} µs/read")
    print(f"{'read 1 MiB':24s} {r['bulk_1mib_mb_per_s']:>10,.0f} MB/s")
    out_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
    os.makedirs(out_dir, exist_ok=True)
    out = os.path.join(out_dir, f"storage_append-{time.strftime('%Y%m%d-%H%M%S')}.json")
    with open(out, "w") as f:
        json.dump(results, f, indent=2)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
