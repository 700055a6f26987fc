"""What transactions cost (issue 14): transactional vs idempotent production, and
read_committed vs read_uncommitted consumption, against one ``moldau serve``.

* **produce**: the same records (1 KiB values by default) to the same kind of topic, in
  alternating passes: an idempotent producer (``enable.idempotence=true``, ``acks=all``)
  against a transactional one that commits a transaction every 100 ms (``--txn-ms``) —
  Confluent's published setting, for which it reports about 3% overhead. Per pass the ratio
  transactional / idempotent; the median is the figure. With confluent-kafka (librdkafka)
  and with the moldau client.
* **consume**: a topic written in transactions of which 10% (``--abort-ratio``) are aborted,
  read from the start to the end by a librdkafka consumer with ``isolation.level``
  read_uncommitted (every data record) and read_committed (the committed 90%: the broker
  sends the aborted-transaction list, the client drops those batches and the markers).

The broker runs on CPU 1 and this process (the clients) on CPU 0 (``--no-pin`` to leave them
free), as ``bench.replication``.

    .venv/bin/python -m bench.transactions                   # ~1-2 minutes here
    .venv/bin/python -m bench.transactions --records 400000 --repeat 5

Prints the figures and writes bench/results/transactions-<time>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .brokers import BenchBroker, create_topic, servers_on, start_broker
from .common import write_result
from .proc import cpu_seconds

BROKER_CPU = 1
CLIENT_CPU = 0
CLIENTS = ("confluent", "moldau")


@dataclass
class Plan:
    """How much the run does (the smoke test shrinks everything)."""

    records: int = 300_000
    record_size: int = 1024
    partitions: int = 3
    txn_ms: float = 100.0
    repeat: int = 3
    consume_records: int = 200_000
    txn_records: int = 100  # records per transaction of the consume topic
    abort_ratio: float = 0.1
    clients: tuple[str, ...] = CLIENTS
    pin: bool = True


# --- produce ------------------------------------------------------------------------------

def _confluent_produce(bootstrap: str, topic: str, plan: Plan, transactional: bool
                       ) -> dict[str, Any]:
    from confluent_kafka import Producer

    # A bounded queue (2 MiB of records, as the moldau client's flush below) makes produce()
    # wait for the broker, so a transaction spans ~txn_ms of sending, not of enqueueing.
    config: dict[str, Any] = {"bootstrap.servers": bootstrap, "enable.idempotence": True,
                              "acks": "all", "linger.ms": 5, "batch.size": 1 << 20,
                              "queue.buffering.max.kbytes": 16384}
    if transactional:
        config["transactional.id"] = f"bench-{uuid.uuid4().hex[:8]}"
    producer = Producer(config)
    value = os.urandom(plan.record_size)
    txns = 0
    # Warm up outside the timed part: connections, metadata, the producer id (librdkafka's
    # idempotent start alone took ~0.3 s of a 1 s idempotent half) and init_transactions.
    if transactional:
        producer.init_transactions(60)
        producer.begin_transaction()
    producer.produce(topic, value)
    if transactional:
        producer.commit_transaction(60)
    producer.flush(60)
    t0 = time.monotonic()
    sent = 0
    while sent < plan.records:
        if transactional:
            producer.begin_transaction()
        txn_end = time.monotonic() + plan.txn_ms / 1000
        while sent < plan.records and (not transactional or time.monotonic() < txn_end):
            try:
                producer.produce(topic, value)
                sent += 1
            except BufferError:
                producer.poll(0.001)
            if sent % 1000 == 0:
                producer.poll(0)
        if transactional:
            producer.commit_transaction(60)
            txns += 1
    if producer.flush(60):
        raise RuntimeError("confluent producer: records left unsent after 60 s")
    elapsed = time.monotonic() - t0
    return {"records": sent, "seconds": round(elapsed, 3),
            "records_per_s": round(sent / elapsed), "transactions": txns,
            "mb_per_s": round(sent * plan.record_size / elapsed / 1e6, 2)}


async def _moldau_produce_async(bootstrap: str, topic: str, plan: Plan, transactional: bool
                                ) -> dict[str, Any]:
    from moldau.client import Producer

    config: dict[str, Any] = {"bootstrap.servers": bootstrap, "enable.idempotence": True,
                              "acks": "all", "linger.ms": 5, "batch.size": 1 << 20}
    if transactional:
        config["transactional.id"] = f"bench-{uuid.uuid4().hex[:8]}"
    producer = Producer(config)
    await producer.start()
    value = os.urandom(plan.record_size)
    txns = sent = 0
    # Warm up outside the timed part, as the confluent half does.
    if transactional:
        await producer.init_transactions()
        producer.begin_transaction()
    producer.send(topic, value)
    if transactional:
        await producer.commit_transaction()
    await producer.flush()
    t0 = time.monotonic()
    try:
        while sent < plan.records:
            if transactional:
                producer.begin_transaction()
            txn_end = time.monotonic() + plan.txn_ms / 1000
            while sent < plan.records and (not transactional or time.monotonic() < txn_end):
                producer.send(topic, value)
                sent += 1
                if producer.buffered_bytes > 16 << 20:  # as librdkafka's bounded queue
                    await producer.flush()
                elif sent % 1000 == 0:
                    await asyncio.sleep(0)
            if transactional:
                await producer.commit_transaction()
                txns += 1
        await producer.flush()
    finally:
        await producer.close()
    elapsed = time.monotonic() - t0
    return {"records": sent, "seconds": round(elapsed, 3),
            "records_per_s": round(sent / elapsed), "transactions": txns,
            "mb_per_s": round(sent * plan.record_size / elapsed / 1e6, 2)}


def _produce(client: str, bootstrap: str, topic: str, plan: Plan, transactional: bool
             ) -> dict[str, Any]:
    if client == "confluent":
        return _confluent_produce(bootstrap, topic, plan, transactional)
    return asyncio.run(_moldau_produce_async(bootstrap, topic, plan, transactional))


def produce_passes(broker: BenchBroker, plan: Plan) -> dict[str, Any]:
    """Alternating idempotent / transactional passes per client; ratios and their medians."""
    out: dict[str, Any] = {}
    for client in plan.clients:
        passes = []
        for n in range(plan.repeat):
            halves = {}
            # alternate which half goes first, so warm-up and drift do not favour one
            kinds = ("idempotent", "transactional") if n % 2 == 0 else (
                "transactional", "idempotent")
            for kind in kinds:
                topic = f"produce-{client}-{kind}-{n}"
                create_topic(broker.bootstrap, topic, plan.partitions)
                cpu0 = cpu_seconds(broker.pid)
                half = _produce(client, broker.bootstrap, topic, plan, kind == "transactional")
                # the broker's CPU per GB: a figure the machine's load moves less than rec/s
                spent = cpu_seconds(broker.pid) - cpu0
                half["broker_cpu_s_per_gb"] = round(
                    spent / (half["records"] * plan.record_size / 1e9), 2)
                halves[kind] = half
            idem, txn = halves["idempotent"], halves["transactional"]
            halves["ratio"] = round(txn["records_per_s"] / idem["records_per_s"], 4)
            passes.append(halves)
        ratios = [p["ratio"] for p in passes]
        out[client] = {"passes": passes, "ratio_median": round(statistics.median(ratios), 4),
                       "overhead_pct_median": round((1 - statistics.median(ratios)) * 100, 1),
                       "broker_cpu_s_per_gb_median": {
                           kind: statistics.median(p[kind]["broker_cpu_s_per_gb"]
                                                   for p in passes)
                           for kind in ("idempotent", "transactional")}}
    return out


# --- consume ------------------------------------------------------------------------------

def fill_with_aborts(bootstrap: str, topic: str, plan: Plan) -> dict[str, int]:
    """``consume_records`` records in transactions of ``txn_records``; every
    ``1/abort_ratio``-th transaction is aborted. Returns the counts written."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                         "transactional.id": f"bench-fill-{uuid.uuid4().hex[:8]}",
                         "queue.buffering.max.messages": 1_000_000})
    producer.init_transactions(60)
    value = os.urandom(plan.record_size)
    every = round(1 / plan.abort_ratio) if plan.abort_ratio > 0 else 0
    committed = aborted = 0
    txns = -(-plan.consume_records // plan.txn_records)
    for i in range(txns):
        producer.begin_transaction()
        count = min(plan.txn_records, plan.consume_records - i * plan.txn_records)
        for _ in range(count):
            while True:
                try:
                    producer.produce(topic, value)
                    break
                except BufferError:
                    producer.poll(0.01)
        if every and i % every == every - 1:
            # librdkafka's abort drops what is still queued: send it, so the log holds it.
            if producer.flush(60):
                raise RuntimeError("fill: records left unsent after 60 s")
            producer.abort_transaction(60)
            aborted += count
        else:
            producer.commit_transaction(60)
            committed += count
    producer.flush(60)
    return {"committed": committed, "aborted": aborted}


def _consume(bootstrap: str, topic: str, partitions: int, isolation: str,
             expected: int, timeout_s: float = 300) -> dict[str, Any]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4()}",
                         "enable.auto.commit": False, "isolation.level": isolation,
                         "fetch.max.bytes": 52428800, "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    received = nbytes = 0
    at_eof: set[int] = set()
    t0 = time.monotonic()
    deadline = t0 + timeout_s
    while len(at_eof) < partitions and time.monotonic() < deadline:
        for msg in consumer.consume(10000, 1.0):
            if msg.error():
                if msg.error().code() == -191:  # _PARTITION_EOF
                    at_eof.add(msg.partition())
                    continue
                raise RuntimeError(f"consume {isolation}: {msg.error()}")
            at_eof.discard(msg.partition())
            received += 1
            nbytes += len(msg.value() or b"")
    elapsed = time.monotonic() - t0
    consumer.close()
    if received != expected:
        raise RuntimeError(f"{isolation}: read {received} records, expected {expected}")
    return {"records": received, "seconds": round(elapsed, 3),
            "records_per_s": round(received / elapsed),
            "mb_per_s": round(nbytes / elapsed / 1e6, 2)}


def consume_pass(broker: BenchBroker, plan: Plan) -> dict[str, Any]:
    topic = f"consume-aborts-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, plan.partitions)
    written = fill_with_aborts(broker.bootstrap, topic, plan)
    total = written["committed"] + written["aborted"]
    out: dict[str, Any] = {"written": written, "passes": []}
    expected = {"read_uncommitted": total, "read_committed": written["committed"]}
    for n in range(plan.repeat):
        order = list(expected) if n % 2 == 0 else list(reversed(expected))
        got = {iso: _consume(broker.bootstrap, topic, plan.partitions, iso, expected[iso])
               for iso in order}
        unc, com = got["read_uncommitted"], got["read_committed"]
        out["passes"].append({"read_uncommitted": unc, "read_committed": com,
                              "ratio": round(com["records_per_s"] / unc["records_per_s"], 4)})
    out["ratio_median"] = round(statistics.median(p["ratio"] for p in out["passes"]), 4)
    return out


# --- main ---------------------------------------------------------------------------------

def run(plan: Plan, workdir: Path) -> dict[str, Any]:
    with servers_on({BROKER_CPU}, {CLIENT_CPU}, pin=plan.pin):
        broker = start_broker("moldau", None, workdir=workdir / "broker")
    try:
        produce = produce_passes(broker, plan)
        consume = consume_pass(broker, plan)
    finally:
        broker.close()
    summary = {f"{c}_txn_vs_idempotent": produce[c]["ratio_median"] for c in produce}
    summary["read_committed_vs_uncommitted"] = consume["ratio_median"]
    return {"plan": asdict(plan), "produce": produce, "consume": consume, "summary": summary,
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "cpus": os.cpu_count()}


def _print(result: dict[str, Any]) -> None:
    plan = result["plan"]
    print(f"transactions: {plan['records']} records of {plan['record_size']} B, "
          f"{plan['partitions']} partitions, {plan['txn_ms']:.0f} ms transactions")
    for client, data in result["produce"].items():
        for n, p in enumerate(data["passes"]):
            idem, txn = p["idempotent"], p["transactional"]
            print(f"  {client:9} pass {n}: idempotent {idem['records_per_s']:>8} rec/s "
                  f"({idem['broker_cpu_s_per_gb']} broker CPU-s/GB), transactional "
                  f"{txn['records_per_s']:>8} rec/s ({txn['transactions']} txns, "
                  f"{txn['broker_cpu_s_per_gb']} CPU-s/GB), ratio {p['ratio']}")
        print(f"  {client:9} median ratio {data['ratio_median']} "
              f"(overhead {data['overhead_pct_median']}%)")
    consume = result["consume"]
    print(f"consume: {consume['written']['committed']} committed + "
          f"{consume['written']['aborted']} aborted records")
    for n, p in enumerate(consume["passes"]):
        print(f"  pass {n}: read_uncommitted {p['read_uncommitted']['records_per_s']:>8} rec/s, "
              f"read_committed {p['read_committed']['records_per_s']:>8} rec/s, "
              f"ratio {p['ratio']}")
    print(f"  median ratio {consume['ratio_median']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.transactions", description=__doc__.split(
        "\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    defaults = Plan()
    parser.add_argument("--records", type=int, default=defaults.records)
    parser.add_argument("--record-size", type=int, default=defaults.record_size)
    parser.add_argument("--partitions", type=int, default=defaults.partitions)
    parser.add_argument("--txn-ms", type=float, default=defaults.txn_ms)
    parser.add_argument("--repeat", type=int, default=defaults.repeat)
    parser.add_argument("--consume-records", type=int, default=defaults.consume_records)
    parser.add_argument("--txn-records", type=int, default=defaults.txn_records)
    parser.add_argument("--abort-ratio", type=float, default=defaults.abort_ratio)
    parser.add_argument("--clients", default=",".join(CLIENTS),
                        help="comma-separated: confluent, moldau")
    parser.add_argument("--no-pin", action="store_true")
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    clients = tuple(c.strip() for c in args.clients.split(",") if c.strip())
    unknown = set(clients) - set(CLIENTS)
    if unknown:
        parser.error(f"--clients: unknown {sorted(unknown)}; use confluent and/or moldau")
    plan = Plan(args.records, args.record_size, args.partitions, args.txn_ms, args.repeat,
                args.consume_records, args.txn_records, args.abort_ratio, clients,
                not args.no_pin)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="moldau-bench-txn-"))
    result = run(plan, workdir)
    _print(result)
    write_result(result, args.out, "transactions")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
