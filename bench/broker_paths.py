"""Micro-benchmark of the broker's request paths, in process, without sockets.

A broker runs on this process's event loop; request frames (built once with kio, as
librdkafka would send them) are fed to a :class:`KafkaConnection` whose transport only counts
the bytes written. Reports CPU µs per request, so an optimization can be judged without the
noise of a shared machine:

    .venv/bin/python -m bench.broker_paths [--seconds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from moldau.broker.config import build_config
from moldau.broker.connection import KafkaConnection
from moldau.broker.metadata.controller import TopicSpec
from moldau.broker.server import Broker
from moldau.testing.runner import default_settings
from moldau.testing.wire import NullTransport, feed, fetch_frame, metadata_frame, produce_frame


def _count(fn: Callable[[], None], iterations: int) -> dict[str, float]:
    """Run ``fn`` a fixed number of times (for instruction counting under valgrind)."""
    t0 = time.process_time()
    for _ in range(iterations):
        fn()
    return {"requests": iterations,
            "cpu_us_per_request": round((time.process_time() - t0) / iterations * 1e6, 2),
            "median_us": 0.0}


def _summary(per_round: list[float], total: int) -> dict[str, float]:
    """The best round's CPU µs per request (least disturbed by other processes), the median
    round's, and how many requests ran."""
    per_round = sorted(per_round)
    return {"requests": total, "cpu_us_per_request": round(per_round[0], 2),
            "median_us": round(per_round[len(per_round) // 2], 2)}


def _time(fn: Callable[[], None], seconds: float, rounds: int = 7) -> dict[str, float]:
    """CPU µs per call: the best of ``rounds`` rounds (the minimum is the figure least
    disturbed by other processes on a shared machine), and the median."""
    per_round: list[float] = []
    total = 0
    for _ in range(rounds):
        n = 0
        t0 = time.process_time()
        w0 = time.perf_counter()
        while time.perf_counter() - w0 < seconds / rounds:
            for _ in range(20):
                fn()
            n += 20
        per_round.append((time.process_time() - t0) / n * 1e6)
        total += n
    return _summary(per_round, total)


_SENTINEL = 0x5A5A5A5A5A5A5A5A


async def long_poll_cycle(broker: Broker, seconds: float, iterations: int) -> dict[str, float]:
    """W4's broker work per record: a consumer's fetch waits at the log end (long poll), a
    producer appends one 1 KiB record, the purgatory wakes the fetch, both answer."""
    await broker.controller.create_topics([TopicSpec("lp", 1)])
    topic_id = broker.image.topics_by_name["lp"].topic_id
    fetch = bytearray(fetch_frame(topic_id, 1, _SENTINEL, max_wait_ms=500))
    at = fetch.index(_SENTINEL.to_bytes(8, "big"))
    produce = produce_frame("lp", 1, 1, 1024)
    consumer, producer = KafkaConnection(broker, "PLAINTEXT"), KafkaConnection(broker, "PLAINTEXT")
    ct, pt = NullTransport(), NullTransport()
    consumer.connection_made(ct)
    producer.connection_made(pt)
    log = broker.replica_manager.get("lp", 0).log

    async def one() -> None:
        fetch[at:at + 8] = log.log_end_offset.to_bytes(8, "big")
        writes = ct.writes
        feed(consumer, bytes(fetch))
        feed(producer, produce)
        while ct.writes == writes:
            await asyncio.sleep(0)

    for _ in range(20):
        await one()
    per_round: list[float] = []
    rounds = 1 if iterations else 7
    total = 0
    for _ in range(rounds):
        n = 0
        t0 = time.process_time()
        w0 = time.perf_counter()
        while (n < iterations) if iterations else (time.perf_counter() - w0 < seconds / rounds):
            await one()
            n += 1
        per_round.append((time.process_time() - t0) / n * 1e6)
        total += n
    return _summary(per_round, total)


async def run(seconds: float, only: list[str], iterations: int = 0) -> dict[str, Any]:
    tmp = tempfile.TemporaryDirectory(prefix="moldau-paths-")
    settings = {k: str(v) for k, v in default_settings(Path(tmp.name) / "data").items()}
    broker = Broker(build_config(settings))
    await broker.start()
    try:
        await broker.controller.create_topics([TopicSpec("p1", 1), TopicSpec("p6", 6),
                                               TopicSpec("p1000", 1000), TopicSpec("f1", 1),
                                               TopicSpec("f6", 6), TopicSpec("big6", 6),
                                               TopicSpec("big1", 1)])
        transport = NullTransport()
        conn = KafkaConnection(broker, "PLAINTEXT")
        conn.connection_made(transport)
        out: dict[str, Any] = {}
        cases = {
            "produce 1 x 1 KiB record, 1 partition, acks=1": produce_frame("p1", 1, 1, 1024),
            "produce 6 partitions x 100 x 100 B, acks=1": produce_frame("p6", 6, 100, 100),
            "produce 1000 partitions x 2 x 100 B, acks=1": produce_frame("p1000", 1000, 2, 100),
            "produce 100 partitions x 2 x 100 B, acks=1": produce_frame("p1000", 100, 2, 100),
            "produce 1 x 1 MB batch (1000 x 1000 B)": produce_frame("big1", 1, 1000, 1000),
        }
        # Fetch targets: one batch of 100 x 100 B per partition of f6, one 1 KiB record in f1.
        feed(conn, produce_frame("f6", 6, 100, 100))
        feed(conn, produce_frame("f1", 1, 1, 1024))
        for _ in range(12):  # ~1.2 MiB per partition: a catch-up read of max.partition.fetch.bytes
            feed(conn, produce_frame("big6", 6, 1000, 100))
        image = broker.image.topics_by_name
        cases["fetch 6 partitions x 1 batch of 100 x 100 B"] = fetch_frame(
            image["f6"].topic_id, 6, 0)
        cases["fetch 1 partition, 1 record of 1 KiB"] = fetch_frame(image["f1"].topic_id, 1, 0)
        cases["fetch 6 partitions x 1 MiB (catch-up read)"] = fetch_frame(
            image["big6"].topic_id, 6, 0)
        cases["metadata 1 topic x 6 partitions"] = metadata_frame(["p6"])
        for name, frame in cases.items():
            if only and not any(o in name for o in only):
                continue
            fn = (lambda f=frame: feed(conn, f))  # noqa: E731
            out[name] = _count(fn, iterations) if iterations else _time(fn, seconds)
        name = "long-poll fetch woken by a 1 KiB produce (W4 per record)"
        if not only or any(o in name for o in only):
            out[name] = await long_poll_cycle(broker, seconds, iterations)
        # A produce case that appended nothing measured a rejection (e.g. MESSAGE_TOO_LARGE).
        for name, topic in (("1 x 1 KiB", "p1"), ("6 partitions x 100", "p6"),
                            ("partitions x 2", "p1000"), ("1 MB batch", "big1")):
            ran = any(name in case for case in out)
            if ran and broker.replica_manager.get(topic, 0).log.log_end_offset == 0:
                raise RuntimeError(f"produce case {name!r} appended nothing: rejected?")
        conn.connection_lost(None)
        return out
    finally:
        await broker.stop()
        tmp.cleanup()


def count_instructions(case: str, low: int = 0, high: int = 0) -> float:
    """User-space instructions per request of ``case``: two runs under valgrind (callgrind)
    with different iteration counts; their difference cancels start-up. Deterministic,
    unlike timings on a shared machine (syscalls' kernel work is not counted)."""
    import re
    import subprocess
    import sys

    if not high:  # enough requests that start-up noise (~1M instructions) does not matter
        low, high = (20, 220) if "partitions x 2" in case else (300, 2300)
    totals = []
    for n in (low, high):
        out = subprocess.run(
            ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
             "-m", "bench.broker_paths", "--case", case, "--iterations", str(n)],
            capture_output=True, text=True, check=True).stderr
        totals.append(int(re.findall(r"Collected : (\d+)", out)[-1]))
    return (totals[1] - totals[0]) / (high - low)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=2.0, help="per case")
    parser.add_argument("--case", action="append", default=[],
                        help="run only cases whose name contains this (repeatable)")
    parser.add_argument("--iterations", type=int, default=0,
                        help="run each case this many times instead of timing it (to count "
                             "instructions: valgrind --tool=callgrind, N and 2N runs)")
    parser.add_argument("--instructions", action="store_true",
                        help="count instructions per request of each --case under valgrind")
    args = parser.parse_args()
    if args.instructions:
        for case in args.case:
            print(f"{case}: {count_instructions(case):,.0f} instructions/request", flush=True)
        return
    result = asyncio.run(run(args.seconds, args.case, args.iterations))
    width = max(map(len, result))
    for name, r in result.items():
        print(f"{name:<{width}}  {r['cpu_us_per_request']:>9.1f} µs/request (best), "
              f"{r['median_us']:>9.1f} (median)")
    out = Path(__file__).resolve().parent / "results"
    out.mkdir(exist_ok=True)
    path = out / f"broker_paths-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
