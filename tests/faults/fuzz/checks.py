"""Before and after a live fuzz run: reference data written and read back by real clients.

* :func:`write_reference` — before the run, confluent-kafka (every codec, keys and headers,
  idempotent) and kafka-python write the reference topics; the offsets their delivery reports
  give are the expectation.
* :func:`read_reference` — after the run (and after each restart) a real client reads every
  reference partition from the beginning; the records must be exactly the expected ones.
* :func:`consume_everything` — after the run, a real client reads every partition of every
  topic (the fuzzed ones, the internal ones) from its log start to its high watermark with CRC
  checks on. A client that raises, reports an error or stops short of the high watermark
  (librdkafka stops silently on a batch it cannot parse) fails the run: this is what finds a
  corrupt batch the broker stored.
* :func:`offsets_snapshot` — (log start, log end) of every partition, compared across a
  restart.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from tests.integration.broker_wire import Wire, create_topic

REFERENCE_TOPICS = {"ref-confluent": 3, "ref-kafka-python": 1}
_KEEP_FOREVER = {"retention.ms": "-1", "retention.bytes": "-1"}
RDKAFKA = logging.getLogger("fuzz.rdkafka")

Rec = tuple[int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]


@dataclass
class Reference:
    """{(topic, partition): [(offset, key, value, headers), ...]} written by real clients."""

    records: dict[tuple[str, int], list[Rec]] = field(default_factory=dict)

    def count(self) -> int:
        return sum(len(v) for v in self.records.values())


def _values(tag: str, i: int) -> tuple[bytes | None, bytes, list[tuple[str, bytes]]]:
    key = None if i % 7 == 3 else b"%s-key-%d" % (tag.encode(), i)
    value = (b"%s-value-%d-" % (tag.encode(), i)) * (1 + i % 13)
    headers = [("n", b"%d" % i), ("tag", tag.encode())] if i % 4 == 0 else []
    return key, value, headers


def write_reference(port: int, per_codec: int = 60) -> Reference:
    """Write the reference topics with confluent-kafka and kafka-python."""
    import confluent_kafka
    from kafka import KafkaProducer

    with Wire(port) as wire:
        for topic, partitions in REFERENCE_TOPICS.items():
            create_topic(wire, topic, partitions, configs=_KEEP_FOREVER)
    bootstrap = f"127.0.0.1:{port}"
    ref = Reference()
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        producer = confluent_kafka.Producer({
            "bootstrap.servers": bootstrap, "compression.type": codec, "acks": "all",
            "enable.idempotence": True, "linger.ms": 20, "logger": RDKAFKA})
        errors: list[Any] = []

        def report(err: Any, msg: Any, headers: tuple[tuple[str, bytes], ...],
                   errors: list[Any] = errors) -> None:
            if err is not None:
                errors.append(err)
                return
            ref.records.setdefault((msg.topic(), msg.partition()), []).append(
                (msg.offset(), msg.key(), msg.value(), headers))

        for i in range(per_codec):
            key, value, headers = _values(f"ck-{codec}", i)
            producer.produce("ref-confluent", value, key, partition=i % 3, headers=headers,
                             on_delivery=lambda err, msg, h=tuple(headers): report(err, msg, h))
        assert producer.flush(60) == 0 and not errors, f"reference produce failed: {errors}"
    for codec in (None, "gzip", "zstd"):
        producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type=codec, acks="all",
                                 linger_ms=20)
        futures = []
        for i in range(per_codec):
            key, value, headers = _values(f"kp-{codec}", i)
            futures.append((producer.send("ref-kafka-python", value, key, headers=headers,
                                          partition=0), key, value, headers))
        for future, key, value, headers in futures:
            meta = future.get(60)
            ref.records.setdefault(("ref-kafka-python", 0), []).append(
                (meta.offset, key, value, tuple(headers)))
        producer.close(10)
    for recs in ref.records.values():
        recs.sort()
    return ref


def read_reference(port: int, ref: Reference, client: str) -> None:
    """Read every reference partition with ``client`` (confluent-kafka or kafka-python);
    raise AssertionError naming the first difference."""
    for (topic, partition), expected in sorted(ref.records.items()):
        got = _read_partition(port, topic, partition, expected[-1][0] + 1, client)
        got_recs = [(o, k, v, h) for o, k, v, h in got if o <= expected[-1][0]]
        if got_recs != expected:
            first = next((i for i, (a, b) in enumerate(zip(got_recs, expected, strict=False))
                          if a != b), min(len(got_recs), len(expected)))
            raise AssertionError(
                f"{client} read {topic}-{partition} differently: {len(got_recs)} records, "
                f"expected {len(expected)}; first difference at index {first}: "
                f"got {got_recs[first:first + 1]}, expected {expected[first:first + 1]}")


def _read_partition(port: int, topic: str, partition: int, end: int, client: str,
                    timeout: float = 60) -> list[Rec]:
    out: list[Rec] = []
    if client == "confluent-kafka":
        import confluent_kafka

        consumer = confluent_kafka.Consumer({
            "bootstrap.servers": f"127.0.0.1:{port}", "group.id": "fuzz-reference-reader",
            "enable.auto.commit": False, "check.crcs": True, "logger": RDKAFKA,
            "isolation.level": "read_uncommitted"})
        try:
            consumer.assign([confluent_kafka.TopicPartition(topic, partition,
                                                            confluent_kafka.OFFSET_BEGINNING)])
            deadline = time.monotonic() + timeout
            while (not out or out[-1][0] < end - 1) and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is None:
                    continue
                if msg.error():
                    raise AssertionError(f"confluent-kafka: {topic}-{partition}: {msg.error()}")
                out.append((msg.offset(), msg.key(), msg.value(),
                            tuple((k, v) for k, v in (msg.headers() or []))))
        finally:
            consumer.close()
        return out
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}", enable_auto_commit=False,
                             check_crcs=True, consumer_timeout_ms=2000)
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        deadline = time.monotonic() + timeout
        while (not out or out[-1][0] < end - 1) and time.monotonic() < deadline:
            for msg in consumer.poll(500).get(tp, []):
                out.append((msg.offset, msg.key, msg.value, tuple(msg.headers or [])))
    finally:
        consumer.close()
    return out


def all_partitions(port: int) -> list[tuple[str, int]]:
    with Wire(port, client_id="fuzz-check") as wire:
        md = wire.call(ApiKey.METADATA, 12, {"topics": None,
                                             "allow_auto_topic_creation": False,
                                             "include_topic_authorized_operations": False})
    return sorted((t["name"], p["partition_index"]) for t in md["topics"]
                  if t["error_code"] == 0 for p in t["partitions"])


def offsets_snapshot(port: int) -> dict[tuple[str, int], tuple[int, int]]:
    """{(topic, partition): (log start offset, log end offset)} of every partition."""
    parts = all_partitions(port)
    out: dict[tuple[str, int], tuple[int, int]] = {}
    with Wire(port, client_id="fuzz-check") as wire:
        for topic, partition in parts:
            got = []
            for ts in (-2, -1):
                reply = wire.call(ApiKey.LIST_OFFSETS, 7, {
                    "replica_id": -1, "isolation_level": 0, "topics": [{
                        "name": topic, "partitions": [{"partition_index": partition,
                                                       "current_leader_epoch": -1,
                                                       "timestamp": ts}]}]})
                entry = reply["topics"][0]["partitions"][0]
                got.append(entry["offset"] if entry["error_code"] == ErrorCode.none else
                           -1000 - int(entry["error_code"]))
            out[(topic, partition)] = (got[0], got[1])
    return out


def consume_everything(port: int, client: str, stall_s: float = 30.0) -> list[str]:
    """Read every partition from log start to log end with ``client``, in a child process (a
    client may abort on what it reads: librdkafka did on stored corrupt batches); the problems
    found, a crash of the child included."""
    run = subprocess.run(
        [sys.executable, "-m", "tests.faults.fuzz.checks", "consume-all", client, str(port),
         str(stall_s)], capture_output=True, text=True, timeout=900,
        cwd=Path(__file__).resolve().parents[3])
    if run.returncode != 0:
        return [f"{client} crashed reading the topics (exit {run.returncode}): "
                f"{run.stderr.strip()[-500:]}"]
    return list(json.loads(run.stdout.strip().splitlines()[-1]))


def _consume_everything(port: int, client: str, stall_s: float) -> list[str]:
    snapshot = offsets_snapshot(port)
    todo = {tp: span for tp, span in snapshot.items() if span[1] > span[0] >= 0}
    problems = [f"{t}-{p}: ListOffsets failed ({span})" for (t, p), span in snapshot.items()
                if min(span) < 0]
    if not todo:
        return problems
    if client == "confluent-kafka":
        problems += _consume_confluent(port, todo, stall_s)
    else:
        problems += _consume_kafka_python(port, todo, stall_s)
    return problems


def _consume_confluent(port: int, todo: dict[tuple[str, int], tuple[int, int]],
                       stall_s: float) -> list[str]:
    import confluent_kafka

    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": f"127.0.0.1:{port}", "group.id": "fuzz-consume-all",
        "enable.auto.commit": False, "check.crcs": True, "logger": RDKAFKA,
        "isolation.level": "read_uncommitted", "enable.partition.eof": True,
        "fetch.message.max.bytes": 1 << 20})
    position = {tp: span[0] for tp, span in todo.items()}
    done: set[tuple[str, int]] = set()
    problems: list[str] = []
    try:
        consumer.assign([confluent_kafka.TopicPartition(t, p, start)
                         for (t, p), (start, _end) in todo.items()])
        last_progress = time.monotonic()
        while len(done) < len(todo) and time.monotonic() - last_progress < stall_s:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            tp = (msg.topic(), msg.partition())
            err = msg.error()
            if err is not None:
                if err.code() == confluent_kafka.KafkaError._PARTITION_EOF:
                    if msg.offset() >= todo[tp][1]:
                        done.add(tp)
                        last_progress = time.monotonic()
                    continue
                problems.append(f"confluent-kafka: {tp[0]}-{tp[1]}: {err}")
                done.add(tp)
                continue
            position[tp] = msg.offset() + 1
            last_progress = time.monotonic()
            if position[tp] >= todo[tp][1]:
                done.add(tp)
    finally:
        consumer.close()
    for tp in sorted(set(todo) - done):
        problems.append(f"confluent-kafka stopped on {tp[0]}-{tp[1]} at offset {position[tp]}, "
                        f"log end {todo[tp][1]} (log start {todo[tp][0]})")
    return problems


def _consume_kafka_python(port: int, todo: dict[tuple[str, int], tuple[int, int]],
                          stall_s: float) -> list[str]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}", enable_auto_commit=False,
                             check_crcs=True, isolation_level="read_uncommitted",
                             max_partition_fetch_bytes=1 << 20)
    problems: list[str] = []
    tps = {TopicPartition(t, p): (t, p) for (t, p) in todo}
    try:
        consumer.assign(list(tps))
        for tp, key in tps.items():
            consumer.seek(tp, todo[key][0])
        remaining = set(tps)
        last_progress = time.monotonic()
        while remaining and time.monotonic() - last_progress < stall_s:
            try:
                batch = consumer.poll(500)
            except Exception as exc:
                problems.append(f"kafka-python: {type(exc).__name__}: {exc}")
                break
            if batch:
                last_progress = time.monotonic()
            for tp in list(remaining):
                if consumer.position(tp) >= todo[tps[tp]][1]:
                    remaining.discard(tp)
        for tp in sorted(remaining, key=lambda x: (x.topic, x.partition)):
            problems.append(f"kafka-python stopped on {tp.topic}-{tp.partition} at offset "
                            f"{consumer.position(tp)}, log end {todo[tps[tp]][1]}")
    finally:
        consumer.close()
    return problems


if __name__ == "__main__":  # consume-all CLIENT PORT STALL_S, run by consume_everything
    _cmd, _client, _port, _stall = sys.argv[1:5]
    print(json.dumps(_consume_everything(int(_port), _client, float(_stall))))
