"""kcat 1.7.1 (Debian; librdkafka 2.0.2) against Moldau.

Covers: ``-P`` of 10,000 records per codec (none and ``-z`` gzip, snappy, lz4, zstd) with
``-K`` keys and ``-H`` headers (repeated names, empty values) into an auto-created topic
(Metadata v4, Produce v7); ``-C -J`` reads them all back byte-exact with offsets, timestamps
and timestamp types (Fetch v11); ``-o`` absolute, relative-from-end and ``s@<timestamp>``
start offsets; ``-Q`` timestamp queries (ListOffsets v2); ``-L`` output in the
"broker 1 at host:port" form seed 000 shows; LogAppendTime topics report ``logappend``;
``-G`` group consumption that commits and resumes.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from .conftest import require_tool, unique_name
from .endpoint import KafkaEndpoint
from .records import CODEC_IDS, CODECS, N_RECORDS, Rec, first_mismatch, make_records, now_ms
from .records import stored_batches as stored

TIMEOUT = 60
HALF = N_RECORDS // 2


@pytest.fixture(scope="module", autouse=True)
def _kcat_installed() -> None:
    require_tool("kcat")


def kcat(*args: str, stdin: str | None = None, timeout: float = TIMEOUT) -> str:
    """Run kcat; fail with its stderr when it exits non-zero; return stdout."""
    run = subprocess.run(["kcat", *args], input=stdin, capture_output=True, text=True,
                         timeout=timeout)
    assert run.returncode == 0, f"kcat {' '.join(args)} exited {run.returncode}: {run.stderr}"
    return run.stdout


def read_json(bootstrap: str, topic: str, *offset_args: str, count: int | None = None,
              ) -> list[dict[str, Any]]:
    args = ["-C", "-b", bootstrap, "-t", topic, "-p", "0", *offset_args, "-e", "-J"]
    if count is not None:
        args += ["-c", str(count)]
    return [json.loads(line) for line in kcat(*args).splitlines() if line]


def to_rec(doc: dict[str, Any]) -> Rec:
    flat = doc.get("headers") or []
    headers = [(flat[i], flat[i + 1].encode()) for i in range(0, len(flat), 2)]
    key = doc["key"].encode() if doc["key"] is not None else None
    value = doc["payload"].encode() if doc["payload"] is not None else None
    return Rec(key, value, headers, doc["ts"], doc["offset"])


def headers_for(codec: str, run: int) -> list[tuple[str, bytes]]:
    return [("run", str(run).encode()), ("codec", codec.encode()), ("dup", b"a"),
            ("dup", b"b"), ("empty", b"")]


def produce(bootstrap: str, topic: str, records: list[Rec], headers: list[tuple[str, bytes]],
            codec: str) -> None:
    args = ["-P", "-b", bootstrap, "-t", topic, "-p", "0", "-K", "\t"]
    for name, value in headers:
        args += ["-H", f"{name}={value.decode()}"]
    if codec != "none":
        args += ["-z", codec]
    lines = "".join(f"{r.key.decode()}\t{r.value.decode()}\n"  # type: ignore[union-attr]
                    for r in records)
    kcat(*args, stdin=lines)


@dataclass
class Produced:
    topic: str
    codec: str
    records: list[Rec]
    mid_ts: int  # every record of the first half has ts <= mid_ts < every one of the second


@pytest.fixture(scope="module", params=CODECS)
def produced(request: pytest.FixtureRequest, kafka_endpoint: KafkaEndpoint) -> Produced:
    codec = request.param
    topic = unique_name(f"kcat-{codec}")  # auto-created by the first produce
    records = make_records(topic[:12], binary=False, headers=False)
    first = [Rec(r.key, r.value, headers_for(codec, 1)) for r in records[:HALF]]
    second = [Rec(r.key, r.value, headers_for(codec, 2)) for r in records[HALF:]]
    produce(kafka_endpoint.bootstrap, topic, first, headers_for(codec, 1), codec)
    mid_ts = now_ms()
    time.sleep(0.05)
    produce(kafka_endpoint.bootstrap, topic, second, headers_for(codec, 2), codec)
    return Produced(topic, codec, first + second, mid_ts)


def test_consume_all_byte_exact(produced: Produced, kafka_endpoint: KafkaEndpoint) -> None:
    docs = read_json(kafka_endpoint.bootstrap, produced.topic, "-o", "beginning")
    got = [to_rec(d) for d in docs]
    assert first_mismatch(got, produced.records) is None
    assert {d["tstype"] for d in docs} == {"create"}
    assert all(d["ts"] <= produced.mid_ts for d in docs[:HALF])
    assert all(d["ts"] > produced.mid_ts for d in docs[HALF:])


def test_start_offsets(produced: Produced, kafka_endpoint: KafkaEndpoint) -> None:
    bootstrap, topic = kafka_endpoint.bootstrap, produced.topic
    got = [to_rec(d) for d in read_json(bootstrap, topic, "-o", "4321", count=5)]
    assert first_mismatch(got, produced.records[4321:4326], first_offset=4321) is None
    got = [to_rec(d) for d in read_json(bootstrap, topic, "-o", "-3")]
    assert first_mismatch(got, produced.records[-3:], first_offset=N_RECORDS - 3) is None
    [doc] = read_json(bootstrap, topic, "-o", f"s@{produced.mid_ts + 1}", count=1)
    assert doc["offset"] == HALF
    assert read_json(bootstrap, topic, "-o", "end") == []


def _query(bootstrap: str, topic: str, ts: int) -> int:
    out = kcat("-Q", "-b", bootstrap, "-t", f"{topic}:0:{ts}")
    match = re.fullmatch(rf"{re.escape(topic)} \[0\] offset (-?\d+)\n", out)
    assert match, out
    return int(match[1])


def test_query_offsets_by_timestamp(produced: Produced, kafka_endpoint: KafkaEndpoint) -> None:
    bootstrap = kafka_endpoint.bootstrap
    assert _query(bootstrap, produced.topic, 0) == 0
    assert _query(bootstrap, produced.topic, produced.mid_ts + 1) == HALF
    assert _query(bootstrap, produced.topic, now_ms() + 86_400_000) == -1


def test_batches_stored_as_sent(produced: Produced, kafka_endpoint: KafkaEndpoint) -> None:
    if kafka_endpoint.log_dir is None:
        pytest.skip("endpoint exposes no log directory")
    batches = stored(kafka_endpoint.log_dir, produced.topic)
    assert sum(h.record_count for h in batches) == N_RECORDS
    codec = CODEC_IDS[produced.codec]
    assert {h.compression for h in batches} <= {0, codec}
    # librdkafka sends a batch uncompressed when compressing does not make it smaller (the
    # first, lone record of each run); all the rest must be stored with the codec
    assert sum(h.record_count for h in batches if h.compression == codec) >= N_RECORDS - 10


def test_metadata_listing(kafka_endpoint: KafkaEndpoint) -> None:
    topic = unique_name("kcat-md")
    kcat("-P", "-b", kafka_endpoint.bootstrap, "-t", topic, stdin="x\n")
    out = kcat("-L", "-b", kafka_endpoint.bootstrap, "-t", topic)
    lines = out.splitlines()
    assert re.fullmatch(rf"Metadata for {re.escape(topic)} \(from broker \d+: "
                        rf"[^ ]+:\d+/\d+\):", lines[0]), out
    assert lines[1] == f" {len(kafka_endpoint.brokers)} brokers:"
    [controller] = [n for n in kafka_endpoint.brokers if f"broker {n} at" in out and
                    f"broker {n} at {kafka_endpoint.brokers[n][0]}:"
                    f"{kafka_endpoint.brokers[n][1]} (controller)" in out]
    for node, (host, port) in sorted(kafka_endpoint.brokers.items()):
        suffix = " (controller)" if node == controller else ""
        assert f"  broker {node} at {host}:{port}{suffix}" in lines
    assert f'  topic "{topic}" with 1 partitions:' in lines
    assert re.search(r"^    partition 0, leader \d+, replicas: \d+, isrs: \d+$", out, re.M), out
    everything = kcat("-L", "-b", kafka_endpoint.bootstrap)
    assert everything.startswith("Metadata for all topics (from broker ")
    assert f'  topic "{topic}" with 1 partitions:' in everything.splitlines()


def test_log_append_time(kafka_endpoint: KafkaEndpoint) -> None:
    topic = unique_name("kcat-lat")
    admin = AdminClient({"bootstrap.servers": kafka_endpoint.bootstrap, "log_level": 2})
    [future] = admin.create_topics([NewTopic(topic, 1, 1, config={
        "message.timestamp.type": "LogAppendTime"})]).values()
    future.result(30)
    before = now_ms()
    kcat("-P", "-b", kafka_endpoint.bootstrap, "-t", topic, "-z", "snappy",
         stdin="".join(f"m{i}\n" for i in range(100)))
    after = now_ms()
    docs = read_json(kafka_endpoint.bootstrap, topic, "-o", "beginning")
    assert [d["payload"] for d in docs] == [f"m{i}" for i in range(100)]
    assert {d["tstype"] for d in docs} == {"logappend"}
    assert all(before - 1000 <= d["ts"] <= after + 1000 for d in docs)
    assert _query(kafka_endpoint.bootstrap, topic, before - 1000) == 0


def test_group_consume_commit_resume(kafka_endpoint: KafkaEndpoint) -> None:
    topic = unique_name("kcat-group")
    group = unique_name("kcat-grp")
    kcat("-P", "-b", kafka_endpoint.bootstrap, "-t", topic, "-K", ":",
         stdin="".join(f"k{i}:v{i}\n" for i in range(100)))
    fmt = ["-f", "%o %s\n", "-X", "auto.offset.reset=earliest"]
    first = kcat("-b", kafka_endpoint.bootstrap, "-G", group, *fmt, "-c", "60", topic)
    second = kcat("-b", kafka_endpoint.bootstrap, "-G", group, *fmt, "-c", "40", topic)
    firsts = [line.split() for line in first.splitlines()]
    seconds = [line.split() for line in second.splitlines()]
    assert firsts == [[str(i), f"v{i}"] for i in range(60)]
    assert seconds == [[str(i), f"v{i}"] for i in range(60, 100)]
