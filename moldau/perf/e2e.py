"""End-to-end latency at a fixed rate (``moldau perf e2e``), after Kafka's EndToEndLatency
tool and the OpenMessaging Benchmark.

Producer processes send ``rate`` records/s in total; each payload starts with the monotonic
clock (CLOCK_MONOTONIC is one clock for all processes of a Linux machine) at ``produce()``.
One consumer process, positioned at the partitions' ends before the producers start, reads
with ``poll()`` and records "now - stamp" per record. Publish latency (delivery report minus
``produce()``) is recorded too. The first ``warmup_s`` of records count in neither histogram.
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import time
from dataclasses import dataclass
from typing import Any

from .latency import LatencyHistogram, bucket_of
from .payloads import random_payloads, stamp, stamp_of
from .workers import join_workers, wait_ready


@dataclass
class E2EOptions:
    """What to send (see ``moldau perf e2e --help``)."""

    topic: str
    rate: float  # records/s over all producer processes
    duration_s: float
    record_size: int
    producer_config: dict[str, str]
    consumer_config: dict[str, str]
    processes: int = 1
    warmup_s: float = 1.0
    drain_timeout_s: float = 10.0
    start_timeout_s: float = 30.0


@dataclass
class E2EResult:
    sent: int
    received: int
    errors: int
    elapsed_s: float
    end_to_end: LatencyHistogram
    publish: LatencyHistogram
    first_error: str | None = None

    @property
    def achieved_rate(self) -> float:
        return self.sent / self.elapsed_s if self.elapsed_s else 0.0

    def to_json(self) -> dict[str, Any]:
        def lat(h: LatencyHistogram) -> dict[str, float]:
            return {"avg": round(h.avg_ms, 3), "p50": round(h.percentile_ms(50), 3),
                    "p95": round(h.percentile_ms(95), 3), "p99": round(h.percentile_ms(99), 3),
                    "p99.9": round(h.percentile_ms(99.9), 3), "max": round(h.max_ms, 3),
                    "count": h.count}

        return {"sent": self.sent, "received": self.received, "errors": self.errors,
                "elapsed_s": round(self.elapsed_s, 3),
                "achieved_rate": round(self.achieved_rate, 1),
                "end_to_end_ms": lat(self.end_to_end), "publish_ms": lat(self.publish),
                "first_error": self.first_error}

    def summary_line(self) -> str:
        e, p = self.end_to_end, self.publish
        return (f"{self.sent} records sent at {self.achieved_rate:.1f} records/sec, "
                f"{self.received} received; end-to-end {e.percentile_ms(50):.2f} ms 50th, "
                f"{e.percentile_ms(99):.2f} ms 99th, {e.percentile_ms(99.9):.2f} ms 99.9th, "
                f"{e.max_ms:.2f} ms max; publish {p.percentile_ms(50):.2f} ms 50th, "
                f"{p.percentile_ms(99):.2f} ms 99th, {p.percentile_ms(99.9):.2f} ms 99.9th.")


def _producer(wid: int, opts: E2EOptions, rate: float, ready: Any, go: Any,
              results: Any) -> None:
    from confluent_kafka import Producer

    counts: list[int] = []
    acc = [0, 0, 0, 0]  # acked, errors, latency sum, max
    first_error: list[str] = []
    warm_until = [0.0]

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            acc[1] += 1
            if not first_error:
                first_error.append(str(err))
            return
        if stamp_of(msg.value()) < warm_until[0]:
            return
        us = int(msg.latency() * 1_000_000)
        idx = bucket_of(us)
        if idx >= len(counts):
            counts.extend([0] * (idx + 1 - len(counts)))
        counts[idx] += 1
        acc[0] += 1
        acc[2] += us
        if us > acc[3]:
            acc[3] = us

    try:
        conf: dict[str, Any] = dict(opts.producer_config)
        conf["on_delivery"] = on_delivery
        producer = Producer(conf)
        producer.list_topics(opts.topic, timeout=opts.start_timeout_s)
        count = max(1, int(rate * opts.duration_s))
        pool = random_payloads(max(opts.record_size, 8), min(count, 1000), seed=wid + 100)
    except Exception as exc:
        ready.put((wid, f"{type(exc).__name__}: {exc}"))
        return
    ready.put((wid, None))
    go.wait()
    produce, poll = producer.produce, producer.poll
    topic = opts.topic
    interval = 1.0 / rate
    npool = len(pool)
    start = time.monotonic()
    warm_until[0] = time.monotonic_ns() + int(opts.warmup_s * 1e9)
    sent = 0
    for i in range(count):
        ahead = start + i * interval - time.monotonic()
        if ahead > 0:
            poll(0)
            if ahead > 0.0002:
                time.sleep(ahead)
        while True:
            try:
                produce(topic, stamp(pool[i % npool], time.monotonic_ns()))
                break
            except BufferError:
                poll(0.001)
        sent += 1
        if not i & 63:
            poll(0)
    end = time.monotonic()
    producer.flush(opts.drain_timeout_s)
    results.put(("producer", wid, {"sent": sent, "start": start, "end": end,
                                   "latency": LatencyHistogram(counts, acc[0], acc[2],
                                                               acc[3]).to_dict(),
                                   "errors": acc[1],
                                   "first_error": first_error[0] if first_error else None}))


def _consumer(opts: E2EOptions, expected: int, ready: Any, go: Any, stop: Any,
              results: Any) -> None:
    from confluent_kafka import Consumer, TopicPartition

    try:
        conf: dict[str, Any] = {"group.id": "moldau-perf-e2e", "enable.auto.commit": "false"}
        conf.update(opts.consumer_config)
        consumer = Consumer(conf)
        # The producers may be the ones creating the topic (auto-creation): wait for it.
        deadline = time.monotonic() + opts.start_timeout_s
        while True:
            meta = consumer.list_topics(opts.topic, timeout=opts.start_timeout_s)
            topic = meta.topics.get(opts.topic)
            if topic is not None and topic.error is None and topic.partitions:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"topic {opts.topic!r} is not available: "
                                   f"{topic.error if topic else 'missing'}")
            time.sleep(0.1)
        parts = sorted(topic.partitions)
        positions = []
        for p in parts:
            _low, high = consumer.get_watermark_offsets(TopicPartition(opts.topic, p),
                                                        timeout=opts.start_timeout_s)
            positions.append(TopicPartition(opts.topic, p, high))
        consumer.assign(positions)
        consumer.poll(0.2)  # start the fetchers before the clock starts
    except Exception as exc:
        ready.put(("consumer", f"{type(exc).__name__}: {exc}"))
        return
    ready.put(("consumer", None))
    go.wait()
    counts: list[int] = []
    total = 0
    received = 0
    max_us = 0
    warm_until = time.monotonic_ns() + int(opts.warmup_s * 1e9)
    poll = consumer.poll
    now_ns = time.monotonic_ns
    idle_deadline = None
    while received < expected:
        msg = poll(0.05)
        if msg is None:
            if stop.is_set():
                if idle_deadline is None:
                    idle_deadline = time.monotonic() + opts.drain_timeout_s
                elif time.monotonic() > idle_deadline:
                    break
            continue
        if msg.error() is not None:
            continue
        t = now_ns()
        received += 1
        sent_at = stamp_of(msg.value())
        if sent_at < warm_until:
            continue
        us = (t - sent_at) // 1000
        idx = bucket_of(us)
        if idx >= len(counts):
            counts.extend([0] * (idx + 1 - len(counts)))
        counts[idx] += 1
        total += us
        if us > max_us:
            max_us = us
    consumer.close()
    hist = LatencyHistogram(counts, sum(counts), total, max_us)
    results.put(("consumer", 0, {"received": received, "latency": hist.to_dict()}))


def run_e2e(opts: E2EOptions) -> E2EResult:
    """Run producers and the consumer; return both latency histograms."""
    ctx = mp.get_context("spawn")
    n = max(1, opts.processes)
    ready, results, go, stop = ctx.Queue(), ctx.Queue(), ctx.Event(), ctx.Event()
    rate = opts.rate / n
    expected = n * max(1, int(rate * opts.duration_s))
    procs = [ctx.Process(target=_consumer, args=(opts, expected, ready, go, stop, results),
                         daemon=True)]
    procs += [ctx.Process(target=_producer, args=(i, opts, rate, ready, go, results),
                          daemon=True) for i in range(n)]
    for p in procs:
        p.start()
    got: list[tuple[str, int, dict[str, Any]]] = []
    try:
        wait_ready(procs, ready, opts.start_timeout_s + 30)
        go.set()
        deadline = time.monotonic() + opts.duration_s + opts.drain_timeout_s * 2 + 30
        producers_done = 0
        while len(got) < n + 1:
            try:
                item = results.get(timeout=0.5)
            except queue.Empty:
                if time.monotonic() > deadline:
                    raise RuntimeError("end-to-end run did not finish in time") from None
                dead = [p for p in procs if p.exitcode not in (None, 0)]
                if dead:
                    raise RuntimeError(
                        f"e2e worker exited with code {dead[0].exitcode}") from None
                continue
            got.append(item)
            if item[0] == "producer":
                producers_done += 1
                if producers_done == n:
                    stop.set()
    finally:
        stop.set()
        join_workers(procs, 10)
    prods = [g for kind, _, g in got if kind == "producer"]
    cons = next(g for kind, _, g in got if kind == "consumer")
    publish = LatencyHistogram()
    for g in prods:
        publish.merge(LatencyHistogram.from_dict(g["latency"]))
    start = min(g["start"] for g in prods)
    end = max(g["end"] for g in prods)
    return E2EResult(
        sent=sum(g["sent"] for g in prods), received=cons["received"],
        errors=sum(g["errors"] for g in prods), elapsed_s=end - start,
        end_to_end=LatencyHistogram.from_dict(cons["latency"]), publish=publish,
        first_error=next((g["first_error"] for g in prods if g["first_error"]), None))
