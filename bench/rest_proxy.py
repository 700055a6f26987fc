"""What the REST Proxy costs (issue 16): records/s through the proxy against the broker
directly, in the same run, on one ``moldau serve`` and one ``moldau rest-proxy``.

* **direct produce**: moldau's asyncio producer sends the records (the same JSON bytes the
  proxy writes) to a fresh topic and waits for every acknowledgement.
* **v2 produce**: ``POST /topics/{topic}`` with ``application/vnd.kafka.json.v2+json``, 100
  JSON records per request (``--batch``), ``--connections`` requests in flight (one per
  connection, each waiting for its answer before sending the next).
* **v3 streaming produce**: ``POST /v3/clusters/{id}/topics/{topic}/records`` as one chunked
  request per stream (``--streams``, default 1) carrying every record, concatenated; the
  clock stops when the last per-record result came back. Every result must be error_code
  200.
* **v2 consume**: a consumer instance (format json, earliest) subscribed to the v2 topic,
  ``GET .../records`` until every record was read; the clock starts with the request that
  brought the first records (the join before it is reported apart as ``join_s``).
* **direct consume**: moldau's consumer reads the same topic from the beginning.

Each phase reports records/s and the CPU seconds of the broker and the proxy (/proc), the
median of ``--repeat`` rounds (each round on fresh topics; every run is in the JSON). The
client (this process, aiohttp and moldau's client) shares the machine with both.

    .venv/bin/python -m bench.rest_proxy                       # ~1-2 minutes here
    .venv/bin/python -m bench.rest_proxy --records 200000 --connections 8

Prints the figures and writes bench/results/rest_proxy-<time>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import aiohttp

from moldau.client import Consumer, Producer, TopicPartition
from moldau.testing.processes import child_env, free_port, terminate

from .brokers import BenchBroker, create_topic, start_broker
from .common import write_result
from .proc import cpu_seconds

V2_JSON = "application/vnd.kafka.json.v2+json"
V2 = "application/vnd.kafka.v2+json"
PHASES = ("direct_produce", "v2_produce", "v3_stream_produce", "v2_consume", "direct_consume")


@dataclass
class Plan:
    """How much the run does (the smoke test shrinks everything)."""

    records: int = 100_000
    record_size: int = 100
    batch: int = 100
    connections: int = 4
    streams: int = 1
    partitions: int = 4
    repeat: int = 3


class RestProxyProcess:
    """``moldau rest-proxy`` on a free loopback port, for the broker at ``bootstrap``."""

    def __init__(self, bootstrap: str, workdir: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = workdir / "rest-proxy.log"
        self.command = [sys.executable, "-m", "moldau.cli.main", "rest-proxy",
                        "--bootstrap-server", bootstrap, "--listeners", self.url,
                        "--log-level", "WARNING"]
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    async def start(self, timeout_s: float = 60.0) -> None:
        """Start and wait until API v3 answers with the cluster."""
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.command, stdout=log, stderr=log,
                                         env=child_env())
        deadline = time.monotonic() + timeout_s
        async with aiohttp.ClientSession() as session:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    break
                try:
                    async with session.get(self.url + "/v3/clusters") as reply:
                        if reply.status == 200:
                            return
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.2)
        self.stop()
        raise RuntimeError(f"moldau rest-proxy did not start:\n{self.log_path.read_text()}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            terminate(self.proc, 30)


def value_of(i: int, size: int) -> dict[str, Any]:
    """A JSON record of about ``size`` bytes."""
    return {"i": i, "pad": "x" * max(0, size - 20)}


def encoded(i: int, size: int) -> bytes:
    return json.dumps(value_of(i, size), separators=(",", ":")).encode()


class Meter:
    """Wall time and the broker's and proxy's CPU over one phase."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids

    async def measure(self, records: int, work: Callable[[], Awaitable[dict[str, Any]]]
                      ) -> dict[str, Any]:
        before = {name: cpu_seconds(pid) for name, pid in self.pids.items()}
        start = time.perf_counter()
        extra = await work()
        wall = extra.pop("wall_s", None) or time.perf_counter() - start
        out: dict[str, Any] = {"records": records, "seconds": round(wall, 3),
                               "records_per_s": round(records / wall)}
        for name, pid in self.pids.items():
            out[f"{name}_cpu_s"] = round(cpu_seconds(pid) - before[name], 2)
        out.update(extra)
        return out


async def direct_produce(bootstrap: str, topic: str, plan: Plan) -> dict[str, Any]:
    """The clock runs from the first send (the producer connected and knows the topic, as
    the proxy's long-lived producer does)."""
    async with Producer({"bootstrap.servers": bootstrap, "linger.ms": 5}) as producer:
        await producer.cluster.wait_for_topics([topic], 30_000)
        start = time.perf_counter()
        for i in range(plan.records):
            producer.send(topic, encoded(i, plan.record_size))
        await producer.flush()
        return {"wall_s": time.perf_counter() - start}


async def v2_produce(url: str, topic: str, plan: Plan) -> dict[str, Any]:
    batches = [list(range(start, min(start + plan.batch, plan.records)))
               for start in range(0, plan.records, plan.batch)]
    queue: asyncio.Queue[list[int]] = asyncio.Queue()
    for batch in batches:
        queue.put_nowait(batch)
    failures = 0

    async def worker(session: aiohttp.ClientSession) -> None:
        nonlocal failures
        while not queue.empty():
            batch = queue.get_nowait()
            body = json.dumps({"records": [{"value": value_of(i, plan.record_size)}
                                           for i in batch]}).encode()
            async with session.post(f"{url}/topics/{topic}", data=body,
                                    headers={"Content-Type": V2_JSON}) as reply:
                answer = await reply.json(content_type=None)
                if reply.status != 200:
                    raise RuntimeError(f"v2 produce answered {reply.status}: {answer}")
                failures += sum(1 for o in answer["offsets"] if o.get("error_code"))

    connector = aiohttp.TCPConnector(limit=plan.connections)
    async with aiohttp.ClientSession(connector=connector) as session:
        await asyncio.gather(*(worker(session) for _ in range(plan.connections)))
    if failures:
        raise RuntimeError(f"{failures} records failed through v2 produce")
    return {"batch": plan.batch, "connections": plan.connections}


async def v3_stream_produce(url: str, cluster_id: str, topic: str, plan: Plan
                            ) -> dict[str, Any]:
    path = f"{url}/v3/clusters/{cluster_id}/topics/{topic}/records"
    share = [range(s, plan.records, plan.streams) for s in range(plan.streams)]

    async def body(numbers: range) -> AsyncIterator[bytes]:
        chunk: list[bytes] = []
        for i in numbers:
            chunk.append(b'{"value":{"type":"JSON","data":' + encoded(i, plan.record_size)
                         + b"}}")
            if len(chunk) == 200:
                yield b"".join(chunk)
                chunk = []
        if chunk:
            yield b"".join(chunk)

    async def stream(session: aiohttp.ClientSession, numbers: range) -> int:
        decoder = json.JSONDecoder()
        ok, text = 0, ""
        async with session.post(path, data=body(numbers),
                                headers={"Content-Type": "application/json"}) as reply:
            if reply.status != 200:
                raise RuntimeError(f"v3 produce answered {reply.status}: {await reply.text()}")
            async for piece in reply.content.iter_any():
                text += piece.decode()
                pos = 0
                while True:
                    while pos < len(text) and text[pos] in " \t\r\n":
                        pos += 1
                    try:
                        result, pos = decoder.raw_decode(text, pos)
                    except json.JSONDecodeError:
                        break
                    if result.get("error_code") != 200:
                        raise RuntimeError(f"v3 produce result: {result}")
                    ok += 1
                text = text[pos:]
        return ok

    async with aiohttp.ClientSession() as session:
        counts = await asyncio.gather(*(stream(session, numbers) for numbers in share))
    if sum(counts) != plan.records:
        raise RuntimeError(f"{sum(counts)} of {plan.records} v3 results")
    return {"streams": plan.streams}


async def v2_consume(url: str, topic: str, plan: Plan) -> dict[str, Any]:
    group = f"bench-{uuid.uuid4().hex[:8]}"
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{url}/consumers/{group}", headers={"Content-Type": V2},
                                json={"name": "c", "format": "json",
                                      "auto.offset.reset": "earliest"}) as reply:
            assert reply.status == 200, await reply.text()
        base = f"{url}/consumers/{group}/instances/c"
        async with session.post(f"{base}/subscription", headers={"Content-Type": V2},
                                json={"topics": [topic]}) as reply:
            assert reply.status == 204, await reply.text()
        begin = time.perf_counter()
        first = None
        got = 0
        deadline = begin + 300
        while got < plan.records and time.perf_counter() < deadline:
            asked = time.perf_counter()
            async with session.get(f"{base}/records",
                                   headers={"Accept": V2_JSON}) as reply:
                records = await reply.json(content_type=None)
                if reply.status != 200:
                    raise RuntimeError(f"v2 records answered {reply.status}: {records}")
            if records and first is None:
                first = asked
            got += len(records)
        end = time.perf_counter()
        async with session.delete(base, headers={"Content-Type": V2}):
            pass
    if got < plan.records or first is None:
        raise RuntimeError(f"v2 consume read {got} of {plan.records} records")
    return {"wall_s": end - first, "join_s": round(first - begin, 3)}


async def direct_consume(bootstrap: str, topic: str, plan: Plan) -> dict[str, Any]:
    async with Consumer({"bootstrap.servers": bootstrap}) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(plan.partitions)])
        consumer.seek_to_beginning()
        start = time.perf_counter()
        got = 0
        deadline = time.monotonic() + 300
        while got < plan.records and time.monotonic() < deadline:
            got += len(await consumer.poll(0.5))
        wall = time.perf_counter() - start
    if got < plan.records:
        raise RuntimeError(f"direct consume read {got} of {plan.records} records")
    return {"wall_s": wall}


async def _round(plan: Plan, broker: BenchBroker, proxy: RestProxyProcess, meter: Meter,
                 cluster_id: str) -> dict[str, dict[str, Any]]:
    """Every phase once, on fresh topics."""
    topics = {name: f"bench-{name}-{uuid.uuid4().hex[:6]}"
              for name in ("direct", "v2", "v3")}
    for topic in topics.values():
        create_topic(broker.bootstrap, topic, plan.partitions)
    n = plan.records
    return {
        "direct_produce": await meter.measure(
            n, lambda: direct_produce(broker.bootstrap, topics["direct"], plan)),
        "v2_produce": await meter.measure(
            n, lambda: v2_produce(proxy.url, topics["v2"], plan)),
        "v3_stream_produce": await meter.measure(
            n, lambda: v3_stream_produce(proxy.url, cluster_id, topics["v3"], plan)),
        "v2_consume": await meter.measure(
            n, lambda: v2_consume(proxy.url, topics["v2"], plan)),
        "direct_consume": await meter.measure(
            n, lambda: direct_consume(broker.bootstrap, topics["v2"], plan)),
    }


async def _phases(plan: Plan, broker: BenchBroker, proxy: RestProxyProcess
                  ) -> dict[str, Any]:
    """``plan.repeat`` rounds; per phase the median records/s and every run."""
    await proxy.start()
    meter = Meter({"broker": broker.pid, "proxy": proxy.pid})
    async with aiohttp.ClientSession() as session, \
            session.get(proxy.url + "/v3/clusters") as reply:
        cluster_id = (await reply.json())["data"][0]["cluster_id"]
    rounds = [await _round(plan, broker, proxy, meter, cluster_id)
              for _ in range(plan.repeat)]
    out: dict[str, Any] = {}
    for name in PHASES:
        runs = [r[name] for r in rounds]
        median = sorted(runs, key=lambda r: r["records_per_s"])[len(runs) // 2]
        out[name] = {**median, "runs": runs}
    return out


def run(plan: Plan, workdir: Path) -> dict[str, Any]:
    """Every phase against one broker and one proxy; the report."""
    workdir.mkdir(parents=True, exist_ok=True)
    broker = start_broker("moldau", None, settings={"num.partitions": plan.partitions},
                          workdir=workdir / "broker")
    proxy = RestProxyProcess(broker.bootstrap, workdir)
    try:
        phases = asyncio.run(_phases(plan, broker, proxy))
    finally:
        proxy.stop()
        broker.close()
    direct_p = phases["direct_produce"]["records_per_s"]
    direct_c = phases["direct_consume"]["records_per_s"]
    return {
        "benchmark": "rest_proxy",
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "plan": asdict(plan),
        "phases": phases,
        "summary": {
            "v2_produce_vs_direct": round(phases["v2_produce"]["records_per_s"] / direct_p, 3),
            "v3_stream_vs_direct": round(
                phases["v3_stream_produce"]["records_per_s"] / direct_p, 3),
            "v2_consume_vs_direct": round(phases["v2_consume"]["records_per_s"] / direct_c, 3),
        },
    }


def _print(result: dict[str, Any]) -> None:
    plan = result["plan"]
    print(f"{plan['records']} JSON records of ~{plan['record_size']} B, "
          f"{plan['partitions']} partitions, the median of {plan['repeat']} runs")
    print(f"{'phase':<20} {'records/s':>10} {'seconds':>8} {'broker CPU s':>12} "
          f"{'proxy CPU s':>11}")
    for name in PHASES:
        p = result["phases"][name]
        print(f"{name:<20} {p['records_per_s']:>10,} {p['seconds']:>8} "
              f"{p['broker_cpu_s']:>12} {p['proxy_cpu_s']:>11}")
    for key, value in result["summary"].items():
        print(f"  {key}: {value}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.rest_proxy", description=__doc__.split(
        "\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    defaults = Plan()
    parser.add_argument("--records", type=int, default=defaults.records)
    parser.add_argument("--record-size", type=int, default=defaults.record_size)
    parser.add_argument("--batch", type=int, default=defaults.batch,
                        help="records per v2 produce request")
    parser.add_argument("--connections", type=int, default=defaults.connections,
                        help="v2 produce requests in flight")
    parser.add_argument("--streams", type=int, default=defaults.streams,
                        help="v3 streaming connections")
    parser.add_argument("--partitions", type=int, default=defaults.partitions)
    parser.add_argument("--repeat", type=int, default=defaults.repeat,
                        help="rounds of every phase; the median is reported")
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    plan = Plan(args.records, args.record_size, args.batch, args.connections, args.streams,
                args.partitions, args.repeat)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="moldau-bench-rest-"))
    result = run(plan, workdir)
    _print(result)
    write_result(result, args.out, "rest_proxy")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
