"""Producer load generator (``moldau perf produce``), the counterpart of
kafka-producer-perf-test.

librdkafka (confluent-kafka) does the producing. One Python loop tops out well below what a
fast broker takes, so the load comes from ``processes`` worker processes, each with its own
producer and its own pool of distinct pre-built payloads; the target rate is split evenly
between them. Latency is measured per record: the delivery report's time minus the time
``produce()`` was called (librdkafka's ``Message.latency()``), recorded in a histogram.
Workers start together on a signal after connecting, so connection set-up is not timed.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .latency import LatencyHistogram
from .payloads import random_payloads
from .workers import gather_results, join_workers, split, wait_ready

# Slots per worker in the shared counter array.
_ACKED, _ERRORS, _LAT_SUM, _WIN_MAX, _SENT = range(5)
_SLOTS = 5


@dataclass
class ProduceOptions:
    """What to produce and how (see ``moldau perf produce --help``)."""

    topic: str
    num_records: int
    record_size: int
    config: dict[str, str]
    throughput: float = -1.0  # records/s over all workers; <= 0 means unthrottled
    processes: int = 1
    payloads: list[bytes] | None = None  # from --payload-file; else random, record_size
    distinct_payloads: int = 1000
    partition: int | None = None  # None: the client's partitioner
    start_timeout_s: float = 30.0


@dataclass
class ProduceResult:
    """Totals of a run (what the summary line and ``--json`` show)."""

    records: int
    errors: int
    bytes: int
    elapsed_s: float
    latency: LatencyHistogram
    first_error: str | None = None
    workers: list[dict[str, Any]] = field(default_factory=list)

    @property
    def records_per_s(self) -> float:
        return self.records / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def mb_per_s(self) -> float:
        return self.bytes / self.elapsed_s / (1024 * 1024) if self.elapsed_s > 0 else 0.0

    def summary_line(self) -> str:
        """kafka-producer-perf-test's final line (percentiles with sub-ms precision)."""
        lat = self.latency
        return (f"{self.records} records sent, {self.records_per_s:.1f} records/sec "
                f"({self.mb_per_s:.2f} MB/sec), {lat.avg_ms:.2f} ms avg latency, "
                f"{lat.max_ms:.2f} ms max latency, {lat.percentile_ms(50):.2f} ms 50th, "
                f"{lat.percentile_ms(95):.2f} ms 95th, {lat.percentile_ms(99):.2f} ms 99th, "
                f"{lat.percentile_ms(99.9):.2f} ms 99.9th.")

    def to_json(self) -> dict[str, Any]:
        lat = self.latency
        return {
            "records": self.records, "errors": self.errors, "bytes": self.bytes,
            "elapsed_s": round(self.elapsed_s, 4),
            "records_per_s": round(self.records_per_s, 1),
            "mb_per_s": round(self.mb_per_s, 3),
            "latency_ms": {
                "avg": round(lat.avg_ms, 3), "max": round(lat.max_ms, 3),
                "p50": round(lat.percentile_ms(50), 3), "p95": round(lat.percentile_ms(95), 3),
                "p99": round(lat.percentile_ms(99), 3),
                "p99.9": round(lat.percentile_ms(99.9), 3),
            },
            "first_error": self.first_error,
            "workers": self.workers,
        }


def _worker(wid: int, opts: ProduceOptions, count: int, rate: float, shared: Any,
            ready: Any, go: Any, results: Any) -> None:
    """One producing process: connect, wait for ``go``, produce ``count`` records."""
    from confluent_kafka import Producer

    base = wid * _SLOTS
    # The delivery callback runs once per record: keep it to one append (float32 seconds);
    # the histogram is built after the clock stops.
    lat = array("f")
    errors = [0]
    first_error: list[str] = []
    seen = [0, 0.0]  # records and latency sum already published

    def on_delivery(err: Any, msg: Any, append: Any = lat.append) -> None:
        if err is None:
            append(msg.latency())
            return
        errors[0] += 1
        if not first_error:
            first_error.append(str(err))

    def publish() -> None:
        n = len(lat)
        if n > seen[0]:
            window = lat[seen[0]:n]
            seen[1] += sum(window)
            seen[0] = n
            win_max = int(max(window) * 1_000_000)
            if win_max > shared[base + _WIN_MAX]:
                shared[base + _WIN_MAX] = win_max
        shared[base + _ACKED] = n
        shared[base + _ERRORS] = errors[0]
        shared[base + _LAT_SUM] = int(seen[1] * 1_000_000)

    try:
        conf: dict[str, Any] = dict(opts.config)
        conf["on_delivery"] = on_delivery
        producer = Producer(conf)
        meta = producer.list_topics(opts.topic, timeout=opts.start_timeout_s)
        topic_meta = meta.topics.get(opts.topic)
        if topic_meta is None or topic_meta.error is not None:
            raise RuntimeError(f"topic {opts.topic!r} is not available: "
                               f"{topic_meta.error if topic_meta else 'missing'}")
        payloads = opts.payloads or random_payloads(
            opts.record_size, max(1, min(opts.distinct_payloads, count)), seed=wid + 1)
    except Exception as exc:
        ready.put((wid, f"{type(exc).__name__}: {exc}"))
        return
    ready.put((wid, None))
    go.wait()

    topic = opts.topic
    produce = producer.produce
    poll = producer.poll
    pool = len(payloads)
    partition = -1 if opts.partition is None else opts.partition  # -1: the partitioner's
    total_bytes = 0
    start = time.monotonic()
    interval = 1.0 / rate if rate > 0 else 0.0
    for i in range(count):
        payload = payloads[i % pool]
        total_bytes += len(payload)
        while True:
            try:
                produce(topic, payload, partition=partition)
                break
            except BufferError:
                poll(0.001)
                publish()
        if not i & 1023:
            poll(0)
            shared[base + _SENT] = i
            publish()
        if interval:
            ahead = start + i * interval - time.monotonic()
            if ahead > 0.0005:
                poll(0)
                time.sleep(ahead)
    shared[base + _SENT] = count
    while producer.flush(0.1):
        publish()
    end = time.monotonic()
    publish()
    hist = LatencyHistogram()
    record = hist.record
    for seconds in lat:
        record(int(seconds * 1_000_000))
    results.put({"wid": wid, "start": start, "end": end, "acked": len(lat), "errors": errors[0],
                 "bytes": total_bytes, "first_error": first_error[0] if first_error else None,
                 "latency": hist.to_dict()})


def run_produce(opts: ProduceOptions,
                on_progress: Callable[[int, int, float, dict[str, float]], None] | None = None,
                interval_s: float = 0.5) -> ProduceResult:
    """Run the workers and gather their results.

    ``on_progress(acked, errors, elapsed_s, window)`` is called every ``interval_s`` while they
    run; ``window`` holds ``avg_ms``/``max_ms`` of records acknowledged since the last call.
    """
    ctx = mp.get_context("spawn")
    n = max(1, opts.processes)
    shared = ctx.RawArray("q", n * _SLOTS)
    ready = ctx.Queue()
    results = ctx.Queue()
    go = ctx.Event()
    counts = split(opts.num_records, n)
    rates = [opts.throughput / n if opts.throughput > 0 else 0.0] * n
    procs = [ctx.Process(target=_worker, args=(i, opts, counts[i], rates[i], shared, ready, go,
                                               results), daemon=True)
             for i in range(n)]
    for p in procs:
        p.start()
    try:
        wait_ready(procs, ready, opts.start_timeout_s + 30)
        go.set()
        t0 = time.monotonic()
        last_acked, last_lat = 0, 0

        def tick() -> None:
            nonlocal last_acked, last_lat
            if on_progress is None:
                return
            acked = sum(shared[i * _SLOTS + _ACKED] for i in range(n))
            errors = sum(shared[i * _SLOTS + _ERRORS] for i in range(n))
            lat = sum(shared[i * _SLOTS + _LAT_SUM] for i in range(n))
            win_max = max(shared[i * _SLOTS + _WIN_MAX] for i in range(n))
            for i in range(n):
                shared[i * _SLOTS + _WIN_MAX] = 0
            d = acked - last_acked
            window = {"records": d, "avg_ms": (lat - last_lat) / d / 1000 if d else 0.0,
                      "max_ms": win_max / 1000}
            last_acked, last_lat = acked, lat
            on_progress(acked, errors, time.monotonic() - t0, window)

        gathered = gather_results(procs, results, interval_s, "perf worker", tick)
    finally:
        join_workers(procs, 5)
    hist = LatencyHistogram()
    for g in gathered:
        hist.merge(LatencyHistogram.from_dict(g["latency"]))
    start = min(g["start"] for g in gathered)
    end = max(g["end"] for g in gathered)
    acked = sum(g["acked"] for g in gathered)
    size = opts.record_size if opts.payloads is None else 0
    total_bytes = acked * size if size else sum(g["bytes"] for g in gathered)
    errors = sum(g["errors"] for g in gathered)
    first_error = next((g["first_error"] for g in gathered if g["first_error"]), None)
    workers = [{"worker": g["wid"], "records": g["acked"], "errors": g["errors"],
                "elapsed_s": round(g["end"] - g["start"], 4)}
               for g in sorted(gathered, key=lambda g: g["wid"])]
    return ProduceResult(acked, errors, total_bytes, end - start, hist, first_error, workers)
