"""Throughput through ``moldau proxy`` versus straight to the broker.

One ``moldau serve`` subprocess, one ``moldau proxy`` subprocess in front of it; a
confluent-kafka (librdkafka) producer sends N records of each size to a fresh topic, directly
and through the proxy, alternating; then a consumer reads them back from the beginning.
Each (size, path) is run ``--repeat`` times and the median reported, with the CPU seconds the
broker and the proxy used (from /proc). Prints a table and writes
bench/results/proxy_overhead-<time>.json.

    .venv/bin/python bench/proxy_overhead.py [--sizes 100,1024] [--records 1000000,300000]
        [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from moldau.testing.proxy import ProxyProcess
from moldau.testing.runner import BrokerProcess

PARTITIONS = 4
PRODUCER = {"linger.ms": 10, "batch.size": 1_000_000, "batch.num.messages": 100_000,
            "queue.buffering.max.messages": 1_000_000, "acks": 1, "compression.type": "none"}
CONSUMER = {"fetch.max.bytes": 52_428_800, "max.partition.fetch.bytes": 10_485_760,
            "enable.auto.commit": False, "enable.partition.eof": True}


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def produce(bootstrap: str, topic: str, count: int, size: int) -> float:
    """Seconds to produce and acknowledge ``count`` records of ``size`` bytes."""
    producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER})
    value = os.urandom(size)
    failures = 0

    def report(err: Any, _msg: Any) -> None:
        nonlocal failures
        if err is not None:
            failures += 1

    producer.produce(topic, value, partition=0, on_delivery=report)  # connect + metadata
    producer.flush(30)
    start = time.perf_counter()
    for i in range(count - 1):
        while True:
            try:
                producer.produce(topic, value, partition=i % PARTITIONS, on_delivery=report)
                break
            except BufferError:
                producer.poll(0.01)
    left = producer.flush(120)
    elapsed = time.perf_counter() - start
    if failures or left:
        raise RuntimeError(f"{failures} records failed, {left} not delivered")
    return elapsed


def consume(bootstrap: str, topic: str, count: int) -> float:
    """Seconds to fetch ``count`` records from the beginning of every partition."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4()}",
                         **CONSUMER})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got = 0
    eof: set[int] = set()
    start = time.perf_counter()
    deadline = start + 300
    while got < count and time.perf_counter() < deadline:
        for msg in consumer.consume(10_000, 1.0):
            if msg.error() is None:
                got += 1
            else:
                eof.add(msg.partition())
    elapsed = time.perf_counter() - start
    consumer.close()
    if got < count:
        raise RuntimeError(f"consumed {got} of {count} records")
    return elapsed


def run_once(path: str, bootstrap: str, admin: AdminClient, count: int, size: int,
             pids: dict[str, int]) -> dict[str, float]:
    topic = f"bench-{path}-{size}-{uuid.uuid4().hex[:6]}"
    [future] = admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values()
    future.result(30)
    before = {name: cpu_seconds(pid) for name, pid in pids.items()}
    produced = produce(bootstrap, topic, count, size)
    middle = {name: cpu_seconds(pid) for name, pid in pids.items()}
    consumed = consume(bootstrap, topic, count - 1)
    after = {name: cpu_seconds(pid) for name, pid in pids.items()}
    admin.delete_topics([topic])
    out = {"produce_s": produced, "consume_s": consumed}
    for name in pids:
        out[f"{name}_cpu_produce_s"] = middle[name] - before[name]
        out[f"{name}_cpu_consume_s"] = after[name] - middle[name]
    return out


def summarize(runs: list[dict[str, float]], count: int, size: int) -> dict[str, Any]:
    med = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
    records = count - 1
    return {
        "produce_records_per_s": records / med["produce_s"],
        "produce_mb_per_s": records * size / med["produce_s"] / 1e6,
        "consume_records_per_s": records / med["consume_s"],
        "consume_mb_per_s": records * size / med["consume_s"] / 1e6,
        "median": med,
        "runs": runs,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100,1024", help="record value sizes in bytes")
    parser.add_argument("--records", default="1000000,300000",
                        help="records per run, one count per size (or one for all)")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    counts = [int(c) for c in args.records.split(",")]
    counts = (counts * len(sizes))[: len(sizes)] if len(counts) == 1 else counts
    if len(counts) != len(sizes):
        parser.error("--records needs one count, or one per size")

    results: dict[str, Any] = {
        "benchmark": "proxy_overhead",
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version()},
        "records": dict(zip(map(str, sizes), counts, strict=True)),
        "partitions": PARTITIONS, "repeat": args.repeat,
        "producer": PRODUCER, "consumer": CONSUMER, "sizes": {},
    }
    with BrokerProcess(settings={"num.partitions": PARTITIONS}) as broker, \
            ProxyProcess(broker.bootstrap, log_path=broker.data_dir.parent / "proxy.log") as proxy:
        assert proxy.proc is not None and broker.proc is not None
        pids = {"broker": broker.proc.pid, "proxy": proxy.proc.pid}
        paths = {"direct": broker.bootstrap, "proxy": proxy.bootstrap}
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0})
        for size, count in zip(sizes, counts, strict=True):
            runs: dict[str, list[dict[str, float]]] = {"direct": [], "proxy": []}
            for i in range(args.repeat):
                order = ["direct", "proxy"] if i % 2 == 0 else ["proxy", "direct"]
                for path in order:
                    runs[path].append(run_once(path, paths[path], admin, count, size, pids))
            entry: dict[str, Any] = {path: summarize(r, count, size)
                                     for path, r in runs.items()}
            for kind in ("produce", "consume"):
                entry[f"{kind}_ratio"] = (entry["proxy"][f"{kind}_records_per_s"]
                                          / entry["direct"][f"{kind}_records_per_s"])
            results["sizes"][str(size)] = entry
        del admin

    print(f"{PARTITIONS} partitions, median of {args.repeat} runs")
    print(f"{'size':>6} {'records':>8} {'op':>8} {'direct rec/s':>13} {'MB/s':>7} "
          f"{'proxy rec/s':>12} {'MB/s':>7} {'ratio':>6} {'proxy CPU s':>11}")
    for size, entry in results["sizes"].items():
        for kind in ("produce", "consume"):
            d, p = entry["direct"], entry["proxy"]
            print(f"{size:>6} {results['records'][size]:>8} {kind:>8} "
                  f"{d[f'{kind}_records_per_s']:>13,.0f} {d[f'{kind}_mb_per_s']:>7.1f} "
                  f"{p[f'{kind}_records_per_s']:>12,.0f} "
                  f"{p[f'{kind}_mb_per_s']:>7.1f} {entry[f'{kind}_ratio']:>6.2f} "
                  f"{p['median'][f'proxy_cpu_{kind}_s']:>11.2f}")
    out_dir = Path(__file__).resolve().parent / "results"
    out_dir.mkdir(exist_ok=True)
    out = out_dir / f"proxy_overhead-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(results, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
