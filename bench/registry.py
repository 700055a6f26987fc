"""What the schema registry (issue 15) serves: registrations per second, lookups per second
(by id, and of a schema under a subject), and confluent-kafka's ``AvroSerializer`` producing
with the registry in the loop against the same records as plain bytes, in one run against
one ``moldau serve`` with its in-process registry (``schema.registry.listeners``, as
``make run`` has it).

* **register**: ``--registrations`` new Avro schemas (each a record of its own name), each
  under its own subject, by 1 client and by ``--concurrency`` clients (aiohttp, one
  keep-alive connection each): every one a new id, a write to ``_schemas`` read back before
  the answer. Then the same requests again: the schema is found, nothing written.
* **lookup by id**: ``GET /schemas/ids/{id}`` of random registered ids; **lookup of a
  schema**: ``POST /subjects/{subject}`` (the schema parsed and compared), each by 1 and by
  ``--concurrency`` clients.
* **serializer**: ``--records`` records of a 6-field Avro record (~37 B encoded) produced by
  librdkafka three ways: bytes encoded before the clock starts (plain); fastavro's
  ``schemaless_writer`` plus the 5-byte framing per record, no registry (encode); and
  ``AvroSerializer`` called per record with a ``SchemaRegistryClient`` (it registers the
  schema once, then its cache answers: the registry in the loop). Ratios AvroSerializer /
  plain and AvroSerializer / encode (what the serializer costs beyond encoding).

The broker (and its registry) run on CPU 1, this process on CPU 0 (``--no-pin`` to leave
them free). Broker CPU seconds per 1,000 requests come from /proc.

    .venv/bin/python -m bench.registry                  # ~1 minute here
    .venv/bin/python -m bench.registry --registrations 2000 --lookups 20000

Prints the figures and writes bench/results/registry-<time>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import random
import statistics
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from moldau.testing.peers import free_port

from .brokers import BenchBroker, create_topic, servers_on, start_broker
from .common import write_result
from .proc import cpu_seconds

BROKER_CPU = 1
CLIENT_CPU = 0
SR = "application/vnd.schemaregistry.v1+json"
VALUE_SCHEMA = json.dumps({"type": "record", "name": "Order", "namespace": "bench", "fields": [
    {"name": "id", "type": "long"}, {"name": "customer", "type": "string"},
    {"name": "amount", "type": "double"}, {"name": "currency", "type": "string"},
    {"name": "paid", "type": "boolean"}, {"name": "note", "type": ["null", "string"],
                                         "default": None}]})


@dataclass
class Plan:
    """How much the run does (the smoke test shrinks everything)."""

    registrations: int = 1000
    lookups: int = 10_000
    concurrency: int = 8
    records: int = 200_000
    repeat: int = 3
    pin: bool = True


# --- HTTP load ----------------------------------------------------------------------------

def schema_text(n: int) -> str:
    """A distinct Avro schema per ``n`` (a record named after it)."""
    return json.dumps({"type": "record", "name": f"R{n}", "namespace": "bench", "fields": [
        {"name": "a", "type": "string"}, {"name": "b", "type": "long", "default": 0}]})


async def _load(url: str, requests: list[tuple[str, str, Any]], concurrency: int,
                pid: int) -> dict[str, Any]:
    """Send ``requests`` (method, path, JSON body) with ``concurrency`` workers; all must
    answer 200. Requests/s and broker CPU per 1,000 requests."""
    import aiohttp

    queue = list(reversed(range(len(requests))))
    answers: list[Any] = [None] * len(requests)  # in the order of the requests

    async def worker(session: aiohttp.ClientSession) -> None:
        while queue:
            index = queue.pop()
            method, path, body = requests[index]
            data = None if body is None else json.dumps(body)
            async with session.request(method, url + path, data=data,
                                       headers={"Content-Type": SR}) as answer:
                payload = await answer.json(content_type=None)
                if answer.status != 200:
                    raise RuntimeError(f"{method} {path}: {answer.status} {payload}")
                answers[index] = payload

    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        await session.get(url + "/")  # connect before the clock starts
        cpu0, t0 = cpu_seconds(pid), time.monotonic()
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))
        elapsed, cpu = time.monotonic() - t0, cpu_seconds(pid) - cpu0
    return {"requests": len(requests), "concurrency": concurrency,
            "seconds": round(elapsed, 3), "per_s": round(len(requests) / elapsed),
            "broker_cpu_ms_per_request": round(cpu * 1000 / len(requests), 3),
            "answers": answers}


def load(url: str, requests: list[tuple[str, str, Any]], concurrency: int, pid: int
         ) -> dict[str, Any]:
    return asyncio.run(_load(url, requests, concurrency, pid))


def registry_passes(url: str, pid: int, plan: Plan) -> dict[str, Any]:
    """Registrations (new and repeated) and lookups, each by 1 and ``concurrency`` clients."""
    out: dict[str, Any] = {}
    ids: list[int] = []
    subjects: list[tuple[str, str]] = []
    for clients in (1, plan.concurrency):
        base = len(subjects)
        batch = [(f"bench-{base + n}-value", schema_text(base + n))
                 for n in range(plan.registrations)]
        requests = [("POST", f"/subjects/{s}/versions", {"schema": t}) for s, t in batch]
        new = load(url, requests, clients, pid)
        got = [a["id"] for a in new.pop("answers")]
        if len(set(got)) != len(got) or set(got) & set(ids):
            raise RuntimeError("a registration answered an id already handed out")
        ids += got
        subjects += batch
        again = load(url, requests, clients, pid)
        if [a["id"] for a in again.pop("answers")] != got:
            raise RuntimeError("registering the same schemas again changed their ids")
        out[f"register_new_c{clients}"] = new
        out[f"register_existing_c{clients}"] = again
    rng = random.Random(15)
    for clients in (1, plan.concurrency):
        by_id = [("GET", f"/schemas/ids/{rng.choice(ids)}", None)
                 for _ in range(plan.lookups)]
        result = load(url, by_id, clients, pid)
        result.pop("answers")
        out[f"lookup_id_c{clients}"] = result
        picks = [rng.randrange(len(subjects)) for _ in range(plan.lookups)]
        by_schema = [("POST", f"/subjects/{subjects[i][0]}", {"schema": subjects[i][1]})
                     for i in picks]
        result = load(url, by_schema, clients, pid)
        if [a["id"] for a in result.pop("answers")] != [ids[i] for i in picks]:
            raise RuntimeError("a lookup answered another schema's id")
        out[f"lookup_schema_c{clients}"] = result
    return out


# --- serializer ---------------------------------------------------------------------------

def _orders(n: int) -> list[dict[str, Any]]:
    rng = random.Random(4)
    return [{"id": i, "customer": f"customer-{rng.randrange(10_000)}",
             "amount": round(rng.random() * 1000, 2), "currency": rng.choice(["EUR", "USD"]),
             "paid": rng.random() < 0.5, "note": None if i % 3 else "gift"}
            for i in range(n)]


def _produce(bootstrap: str, topic: str, values: Any, count: int, pid: int
             ) -> dict[str, Any]:
    """Produce ``count`` values (``values(i)`` gives the i-th) with librdkafka."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                         "batch.size": 1 << 20, "acks": "all"})
    producer.produce(topic, values(0))  # warm up: connection, metadata, first lookups
    producer.flush(60)
    cpu0, t0 = cpu_seconds(pid), time.monotonic()
    nbytes = 0
    for i in range(count):
        value = values(i)
        nbytes += len(value)
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.001)
        if i % 1000 == 0:
            producer.poll(0)
    if producer.flush(60):
        raise RuntimeError("records left unsent after 60 s")
    elapsed, cpu = time.monotonic() - t0, cpu_seconds(pid) - cpu0
    return {"records": count, "seconds": round(elapsed, 3),
            "records_per_s": round(count / elapsed),
            "bytes_per_record": round(nbytes / count, 1),
            "broker_cpu_s": round(cpu, 3)}


def serializer_passes(bootstrap: str, url: str, pid: int, plan: Plan) -> dict[str, Any]:
    """Plain bytes against AvroSerializer in the loop, alternating which goes first."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    from fastavro import parse_schema, schemaless_writer

    orders = _orders(plan.records)
    parsed = parse_schema(json.loads(VALUE_SCHEMA))

    def encode(order: dict[str, Any]) -> bytes:
        out = io.BytesIO()
        schemaless_writer(out, parsed, order)
        return out.getvalue()

    plain_values = [encode(o) for o in orders]  # encoded before the clock starts
    out: dict[str, Any] = {"passes": []}
    for n in range(plan.repeat):
        topic = f"bench-orders-{uuid.uuid4().hex[:6]}"
        create_topic(bootstrap, topic, 1)
        serializer = AvroSerializer(SchemaRegistryClient({"url": url}), VALUE_SCHEMA)
        ctx = SerializationContext(topic, MessageField.VALUE)

        def serialized(i: int, serializer: Any = serializer, ctx: Any = ctx) -> bytes:
            return serializer(orders[i], ctx)  # type: ignore[no-any-return]

        framing = b"\x00" + serializer(orders[0], ctx)[1:5]  # registers; its id

        def encoded(i: int, framing: bytes = framing) -> bytes:
            return framing + encode(orders[i])

        values = {"plain": plain_values.__getitem__, "avro": serialized, "encode": encoded}
        order = ["plain", "avro", "encode"] if n % 2 == 0 else ["encode", "avro", "plain"]
        got = {name: _produce(bootstrap, topic, values[name], plan.records, pid)
               for name in order}
        got["ratio_vs_encode"] = round(
            got["avro"]["records_per_s"] / got["encode"]["records_per_s"], 4)
        got["ratio"] = round(got["avro"]["records_per_s"] / got["plain"]["records_per_s"], 4)
        out["passes"].append(got)
    out["ratio_median"] = round(statistics.median(p["ratio"] for p in out["passes"]), 4)
    out["ratio_vs_encode_median"] = round(
        statistics.median(p["ratio_vs_encode"] for p in out["passes"]), 4)
    return out


# --- main ---------------------------------------------------------------------------------

def _wait_for_registry(url: str, broker: BenchBroker, timeout_s: float = 60) -> None:
    """Until a registration goes through: the HTTP listener answers reads before the first
    primary election has finished, and writes answer 50004 until then. Registers one warm-up
    schema (id 1)."""
    import urllib.request

    request = urllib.request.Request(
        url + "/subjects/bench-warmup/versions", method="POST",
        data=json.dumps({"schema": '"string"'}).encode(), headers={"Content-Type": SR})
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(request, timeout=5) as answer:
                if answer.status == 200:
                    return
        except OSError:  # refused, or HTTP 500 (urllib's HTTPError is an OSError)
            pass
        if time.monotonic() > deadline or (broker.proc and broker.proc.poll() is not None):
            raise RuntimeError(f"the registry at {url} did not answer; log: {broker.log_path}")
        time.sleep(0.05)


def run(plan: Plan, workdir: Path) -> dict[str, Any]:
    url = f"http://127.0.0.1:{free_port()}"
    with servers_on({BROKER_CPU}, {CLIENT_CPU}, pin=plan.pin):
        broker = start_broker("moldau", None, workdir=workdir / "broker",
                              settings={"schema.registry.listeners": url})
    try:
        _wait_for_registry(url, broker)
        registry = registry_passes(url, broker.pid, plan)
        serializer = serializer_passes(broker.bootstrap, url, broker.pid, plan)
    finally:
        broker.close()
    c = plan.concurrency
    summary = {
        "registrations_per_s_c1": registry["register_new_c1"]["per_s"],
        f"registrations_per_s_c{c}": registry[f"register_new_c{c}"]["per_s"],
        "existing_registrations_per_s_c1": registry["register_existing_c1"]["per_s"],
        "lookups_by_id_per_s_c1": registry["lookup_id_c1"]["per_s"],
        f"lookups_by_id_per_s_c{c}": registry[f"lookup_id_c{c}"]["per_s"],
        "lookups_of_schema_per_s_c1": registry["lookup_schema_c1"]["per_s"],
        f"lookups_of_schema_per_s_c{c}": registry[f"lookup_schema_c{c}"]["per_s"],
        "serializer_vs_plain": serializer["ratio_median"],
        "serializer_vs_encode": serializer["ratio_vs_encode_median"],
    }
    return {"plan": asdict(plan), "registry": registry, "serializer": serializer,
            "summary": summary, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "cpus": os.cpu_count()}


def _print(result: dict[str, Any]) -> None:
    plan = result["plan"]
    print(f"registry: {plan['registrations']} registrations, {plan['lookups']} lookups per "
          f"pass, {plan['concurrency']} concurrent clients")
    for name, data in result["registry"].items():
        print(f"  {name:24} {data['per_s']:>7} /s  ({data['requests']} in "
              f"{data['seconds']} s, broker {data['broker_cpu_ms_per_request']} CPU-ms each)")
    for n, p in enumerate(result["serializer"]["passes"]):
        print(f"  serializer pass {n}: plain {p['plain']['records_per_s']:>8} rec/s, "
              f"fastavro + framing {p['encode']['records_per_s']:>8} rec/s, "
              f"AvroSerializer {p['avro']['records_per_s']:>8} rec/s "
              f"({p['avro']['bytes_per_record']} B); ratio to plain {p['ratio']}, "
              f"to encode {p['ratio_vs_encode']}")
    print(f"  median ratio to plain {result['serializer']['ratio_median']}, to encode "
          f"{result['serializer']['ratio_vs_encode_median']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.registry", description=__doc__.split(
        "\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    defaults = Plan()
    parser.add_argument("--registrations", type=int, default=defaults.registrations)
    parser.add_argument("--lookups", type=int, default=defaults.lookups)
    parser.add_argument("--concurrency", type=int, default=defaults.concurrency)
    parser.add_argument("--records", type=int, default=defaults.records)
    parser.add_argument("--repeat", type=int, default=defaults.repeat)
    parser.add_argument("--no-pin", action="store_true")
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if args.concurrency < 2:
        parser.error("--concurrency must be at least 2 (1 client is always measured)")
    plan = Plan(args.registrations, args.lookups, args.concurrency, args.records,
                args.repeat, not args.no_pin)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="moldau-bench-registry-"))
    result = run(plan, workdir)
    _print(result)
    write_result(result, args.out, "registry")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
