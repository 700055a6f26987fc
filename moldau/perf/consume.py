"""Consumer load generator (``moldau perf consume``), the counterpart of
kafka-consumer-perf-test.

librdkafka (confluent-kafka) consumes; ``processes`` worker processes share the work. With a
group (the default, as Kafka's tool) every worker subscribes and the group spreads the
partitions; with ``assign=True`` the partitions are split between workers up front and read
from the beginning without a group (no rebalance time, works the same on every broker). The
run ends when ``messages`` records were read in all or nothing arrived for ``timeout_ms``.
"""

from __future__ import annotations

import multiprocessing as mp
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .workers import gather_results, join_workers, wait_ready

# Slots per worker in the shared counter array.
_RECORDS, _BYTES = range(2)
_SLOTS = 2


@dataclass
class ConsumeOptions:
    """What to consume and how (see ``moldau perf consume --help``)."""

    topic: str
    messages: int
    config: dict[str, str]
    group: str | None = None  # None: perf-consumer-<random> (Kafka's default)
    assign: bool = False  # split partitions between workers, no group
    from_latest: bool = False
    fetch_size: int | None = None  # max.partition.fetch.bytes
    timeout_ms: int = 10_000
    processes: int = 1
    batch: int = 10_000  # records per consume() call
    start_timeout_s: float = 30.0


@dataclass
class ConsumeResult:
    """Totals of a run (kafka-consumer-perf-test's columns)."""

    start_ms: int
    end_ms: int
    records: int
    bytes: int
    elapsed_s: float
    rebalance_ms: float
    fetch_s: float
    timed_out: bool = False
    workers: list[dict[str, Any]] = field(default_factory=list)

    @property
    def mb(self) -> float:
        return self.bytes / (1024 * 1024)

    def row(self) -> dict[str, Any]:
        """Columns of kafka-consumer-perf-test, in its order."""
        el = self.elapsed_s or 1e-9
        fetch = self.fetch_s or 1e-9
        return {
            "start.time": _fmt_time(self.start_ms), "end.time": _fmt_time(self.end_ms),
            "data.consumed.in.MB": round(self.mb, 4), "MB.sec": round(self.mb / el, 4),
            "data.consumed.in.nMsg": self.records,
            "nMsg.sec": round(self.records / el, 4),
            "rebalance.time.ms": int(self.rebalance_ms), "fetch.time.ms": int(fetch * 1000),
            "fetch.MB.sec": round(self.mb / fetch, 4),
            "fetch.nMsg.sec": round(self.records / fetch, 4),
        }

    def to_json(self) -> dict[str, Any]:
        out = self.row()
        out.update({"records": self.records, "bytes": self.bytes,
                    "elapsed_s": round(self.elapsed_s, 4),
                    "records_per_s": round(self.records / self.elapsed_s, 1)
                    if self.elapsed_s else 0.0,
                    "mb_per_s": round(self.mb / self.elapsed_s, 3) if self.elapsed_s else 0.0,
                    "timed_out": self.timed_out, "workers": self.workers})
        return out


HEADER = ("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, "
          "nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")


def _fmt_time(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000)) + f":{ms % 1000:03d}"


def format_row(row: dict[str, Any]) -> str:
    """One line under :data:`HEADER`."""
    return ", ".join(f"{v:.4f}" if isinstance(v, float) else str(v) for v in row.values())


def _worker(wid: int, opts: ConsumeOptions, group: str, partitions: list[int] | None,
            shared: Any, ready: Any, go: Any, results: Any) -> None:
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, Message, TopicPartition

    base = wid * _SLOTS
    try:
        conf: dict[str, Any] = dict(opts.config)
        conf.setdefault("group.id", group)
        conf.setdefault("enable.auto.commit", "false" if opts.assign else "true")
        conf.setdefault("auto.offset.reset", "latest" if opts.from_latest else "earliest")
        # librdkafka pauses fetching for fetch.queue.backoff.ms (default 1 s) whenever its
        # queue is over queued.min.messages; with small records one fetch response does
        # that, and the consumer then idles most of the time. Kafka's Java consumer has no
        # such pause.
        conf.setdefault("fetch.queue.backoff.ms", "10")
        if opts.fetch_size:
            conf["max.partition.fetch.bytes"] = str(opts.fetch_size)
        consumer = Consumer(conf)
        if opts.assign:
            where = OFFSET_END if opts.from_latest else OFFSET_BEGINNING
            consumer.assign([TopicPartition(opts.topic, p, where) for p in partitions or []])
    except Exception as exc:
        ready.put((wid, f"{type(exc).__name__}: {exc}"))
        return
    ready.put((wid, None))
    go.wait()
    start = time.monotonic()
    assigned_at: float | None = start if opts.assign else None
    if not opts.assign:
        consumer.subscribe([opts.topic])
    consume = consumer.consume
    error_of = Message.error
    records = 0
    nbytes = 0
    last_data = time.monotonic()
    timed_out = False
    target = opts.messages
    first_at: float | None = None
    end = start
    while True:
        msgs = consume(opts.batch, 0.1)
        now = time.monotonic()
        if not msgs:
            if assigned_at is None:
                if not consumer.assignment():
                    # The timeout runs from the assignment (the join may take a while).
                    last_data = now
                    if now - start > opts.start_timeout_s:
                        timed_out = True
                        break
                    continue
                assigned_at = last_data = now
            if now - last_data > opts.timeout_ms / 1000:
                timed_out = True
                break
            if _total(shared, _RECORDS) >= target:
                break
            continue
        if first_at is None:
            first_at = now
            if assigned_at is None:
                assigned_at = now
        last_data = now
        # C-level loops: Message.error per record, len(Message) is its value's length.
        if any(map(error_of, msgs)):
            msgs = [m for m in msgs if m.error() is None]
        records += len(msgs)
        nbytes += sum(map(len, msgs))
        end = now
        shared[base + _RECORDS] = records
        shared[base + _BYTES] = nbytes
        if _total(shared, _RECORDS) >= target:
            break
    consumer.close()
    results.put({"wid": wid, "start": start, "end": end, "records": records, "bytes": nbytes,
                 "assigned": assigned_at if assigned_at is not None else start,
                 "timed_out": timed_out})


def _total(shared: Any, slot: int) -> int:
    return sum(shared[i] for i in range(slot, len(shared), _SLOTS))


def _partitions(opts: ConsumeOptions) -> list[int]:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({k: v for k, v in opts.config.items()
                         if k in ("bootstrap.servers", "security.protocol", "client.id")})
    meta = admin.list_topics(opts.topic, timeout=opts.start_timeout_s)
    topic = meta.topics.get(opts.topic)
    if topic is None or topic.error is not None:
        raise RuntimeError(f"topic {opts.topic!r} is not available: "
                           f"{topic.error if topic else 'missing'}")
    return sorted(topic.partitions)


def run_consume(opts: ConsumeOptions,
                on_progress: Callable[[int, int, float], None] | None = None,
                interval_s: float = 0.5) -> ConsumeResult:
    """Run the workers; ``on_progress(records, bytes, elapsed_s)`` every ``interval_s``."""
    ctx = mp.get_context("spawn")
    n = max(1, opts.processes)
    group = opts.group or f"perf-consumer-{uuid.uuid4().hex[:8]}"
    split: list[list[int] | None] = [None] * n
    if opts.assign:
        parts = _partitions(opts)
        n = min(n, len(parts))
        split = [parts[i::n] for i in range(n)]
    shared = ctx.RawArray("q", n * _SLOTS)
    ready, results, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=_worker, args=(i, opts, group, split[i], shared, ready, go,
                                               results), daemon=True) for i in range(n)]
    for p in procs:
        p.start()
    try:
        wait_ready(procs, ready, opts.start_timeout_s + 30)
        wall_start = time.time()
        go.set()
        t0 = time.monotonic()

        def tick() -> None:
            if on_progress is not None:
                on_progress(_total(shared, _RECORDS), _total(shared, _BYTES),
                            time.monotonic() - t0)

        gathered = gather_results(procs, results, interval_s, "perf consumer worker", tick)
    finally:
        join_workers(procs, 10)
    start = min(g["start"] for g in gathered)
    end = max(g["end"] for g in gathered)
    assigned = max(g["assigned"] for g in gathered)
    records = sum(g["records"] for g in gathered)
    elapsed = max(end - start, 1e-9)
    workers = [{"worker": g["wid"], "records": g["records"],
                "elapsed_s": round(g["end"] - g["start"], 4)}
               for g in sorted(gathered, key=lambda g: g["wid"])]
    return ConsumeResult(
        start_ms=int(wall_start * 1000), end_ms=int((wall_start + elapsed) * 1000),
        records=records, bytes=sum(g["bytes"] for g in gathered), elapsed_s=elapsed,
        rebalance_ms=max(0.0, (assigned - start) * 1000),
        fetch_s=max(end - assigned, 1e-9), timed_out=any(g["timed_out"] for g in gathered),
        workers=workers)
