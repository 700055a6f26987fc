"""Summary lines and JSON of the perf tools (Kafka's formats)."""

from __future__ import annotations

import re

from moldau.perf.consume import HEADER, ConsumeResult, format_row
from moldau.perf.latency import LatencyHistogram
from moldau.perf.payloads import random_payloads, stamp, stamp_of
from moldau.perf.produce import ProduceResult
from moldau.perf.workers import split


def test_producer_summary_line_has_kafkas_fields() -> None:
    h = LatencyHistogram()
    h.record_many([1000] * 98 + [5000, 20_000])
    r = ProduceResult(records=100, errors=0, bytes=100 * 1024 * 1024 // 100, elapsed_s=0.5,
                      latency=h)
    line = r.summary_line()
    assert re.fullmatch(
        r"100 records sent, 200\.0 records/sec \(2\.00 MB/sec\), 1\.23 ms avg latency, "
        r"20\.00 ms max latency, 1\.00 ms 50th, 1\.00 ms 95th, 5\.00 ms 99th, "
        r"20\.00 ms 99\.9th\.", line), line
    js = r.to_json()
    assert js["records_per_s"] == 200.0 and abs(js["latency_ms"]["p99"] - 5.0) < 0.01


def test_consumer_row_matches_header() -> None:
    r = ConsumeResult(start_ms=0, end_ms=2000, records=1000, bytes=1024 * 1024,
                      elapsed_s=2.0, rebalance_ms=1000, fetch_s=1.0)
    row = r.row()
    assert list(row) == HEADER.split(", ")
    assert row["nMsg.sec"] == 500.0 and row["fetch.nMsg.sec"] == 1000.0
    assert row["MB.sec"] == 0.5 and row["rebalance.time.ms"] == 1000
    assert len(format_row(row).split(", ")) == len(row)


def test_payloads_distinct_and_stamped() -> None:
    pool = random_payloads(100, 500, seed=1)
    assert len(pool) == 500 and all(len(p) == 100 for p in pool)
    assert len(set(pool)) == 500
    assert random_payloads(100, 5, seed=1) == pool[:5]
    s = stamp(pool[0], 123456789)
    assert len(s) == 100 and stamp_of(s) == 123456789 and s[8:] == pool[0][8:]


def test_split() -> None:
    assert split(10, 3) == [4, 3, 3] and sum(split(7, 7)) == 7 and split(2, 4) == [1, 1, 0, 0]
