"""kafkajs 2.2.4 (node) against Moldau, through tests/compat/js/compat.js.

Covers: 10,000 records with keys, headers (repeated names as kafkajs arrays, empty values)
and explicit timestamps per codec — none, gzip (built in), snappy (kafkajs-snappy), lz4
(lz4js adapter), zstd (zstd-codec adapter) — into auto-created topics (Metadata v6,
Produce v7), and once with the idempotent producer (InitProducerId v1); every record read
back byte-exact and in order through a consumer group (kafkajs consumes only through groups:
FindCoordinator v2, JoinGroup v5, SyncGroup v3, Fetch v11) from the beginning and after a
seek; the stored batches decode with Moldau's own codecs (the plugins write standard Kafka
compression); ListOffsets (v3) through ``admin.fetchTopicOffsets`` and
``fetchTopicOffsetsByTimestamp``; LogAppendTime topics; topic admin (create, describe,
alter configs that take effect, delete); group offsets committed, kept across a broker
restart, and resumed from.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
from typing import Any

import pytest

from .conftest import JS_DIR, require_tool, unique_name
from .endpoint import KafkaEndpoint
from .records import (
    CODEC_IDS,
    CODECS,
    N_RECORDS,
    Produced,
    Rec,
    case_id,
    first_mismatch,
    make_records,
    now_ms,
    records_to_produce,
    stored_batches,
    stored_records,
    timestamp_cases,
)

SCRIPT = JS_DIR / "compat.js"
CASES = [(codec, False) for codec in CODECS] + [("gzip", True)]
TIMEOUT = 90


@pytest.fixture(scope="module", autouse=True)
def _kafkajs_installed() -> None:
    require_tool("node")
    package = json.loads((JS_DIR / "package.json").read_text())
    missing = [name for name in package["dependencies"]
               if not (JS_DIR / "node_modules" / name / "package.json").exists()]
    if missing:
        pytest.fail(f"npm packages missing from {JS_DIR}/node_modules: {', '.join(missing)}; "
                    f"run `npm install --prefix {JS_DIR}`")


def node(command: str, job: dict[str, Any]) -> dict[str, Any]:
    """Run one compat.js command with ``job`` as its JSON input; return its JSON output."""
    run = subprocess.run(["node", str(SCRIPT), command], input=json.dumps(job),
                         capture_output=True, text=True, timeout=TIMEOUT, cwd=JS_DIR,
                         env={**os.environ, "NODE_PATH": str(JS_DIR / "node_modules")})
    assert run.returncode == 0, f"compat.js {command} failed:\n{run.stderr[-3000:]}"
    return json.loads(run.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def _unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def encode(records: list[Rec]) -> list[dict[str, Any]]:
    return [{"key": _b64(r.key), "value": _b64(r.value), "timestamp": r.timestamp,
             "headers": [[name, _b64(value)] for name, value in r.headers]} for r in records]


def decode(docs: list[dict[str, Any]]) -> list[Rec]:
    return [Rec(_unb64(d["key"]), _unb64(d["value"]),
                [(name, _unb64(value)) for name, value in d["headers"]],  # type: ignore[misc]
                d["timestamp"], d["offset"]) for d in docs]


def consume(endpoint: KafkaEndpoint, topic: str, start: int, count: int) -> list[Rec]:
    out = node("consume", {"bootstrap": endpoint.bootstrap, "topic": topic, "start": start,
                           "count": count, "group": unique_name("kjs-read")})
    return decode(out["records"])


@pytest.fixture(scope="module", params=CASES, ids=case_id)
def produced(request: pytest.FixtureRequest, kafka_endpoint: KafkaEndpoint) -> Produced:
    codec, idempotent = request.param
    topic = unique_name(f"kjs-{codec}-{'idem' if idempotent else 'plain'}")  # auto-created
    base_ts, records = records_to_produce(topic)
    out = node("produce", {"bootstrap": kafka_endpoint.bootstrap, "topic": topic,
                           "codec": codec, "idempotent": idempotent,
                           "records": encode(records)})
    return Produced(topic, codec, idempotent, base_ts, records, out["offsets"])


def test_acknowledged_offsets_contiguous(produced: Produced) -> None:
    assert produced.offsets == list(range(N_RECORDS))


def test_fetch_back_byte_exact(produced: Produced, kafka_endpoint: KafkaEndpoint) -> None:
    got = consume(kafka_endpoint, produced.topic, 0, N_RECORDS)
    assert first_mismatch(got, produced.records) is None


def test_fetch_after_seek(produced: Produced, kafka_endpoint: KafkaEndpoint) -> None:
    start = 4321
    got = consume(kafka_endpoint, produced.topic, start, N_RECORDS - start)
    assert first_mismatch(got, produced.records[start:], first_offset=start) is None


def test_batches_stored_as_sent(produced: Produced, kafka_endpoint: KafkaEndpoint) -> None:
    if kafka_endpoint.log_dir is None:
        pytest.skip("endpoint exposes no log directory")
    batches = stored_batches(kafka_endpoint.log_dir, produced.topic)
    assert {h.compression for h in batches} == {CODEC_IDS[produced.codec]}
    if produced.idempotent:
        assert len({h.producer_id for h in batches}) == 1 and batches[0].producer_id >= 0
        assert [h.base_sequence for h in batches] == [h.base_offset for h in batches]
    else:
        assert {h.producer_id for h in batches} == {-1}
    stored = stored_records(kafka_endpoint.log_dir, produced.topic)
    assert stored is not None
    assert first_mismatch(stored, produced.records) is None


def test_list_offsets(produced: Produced, kafka_endpoint: KafkaEndpoint) -> None:
    cases = list(timestamp_cases(produced.base_ts))
    out = node("offsets", {"bootstrap": kafka_endpoint.bootstrap, "topic": produced.topic,
                           "timestamps": [ts for ts, _ in cases]})
    assert (out["low"], out["high"], out["offset"]) == (0, N_RECORDS, N_RECORDS)
    # kafkajs answers a timestamp past the last record with the high watermark
    assert out["byTime"] == [N_RECORDS if want is None else want for _, want in cases]


def test_log_append_time(kafka_endpoint: KafkaEndpoint) -> None:
    topic = unique_name("kjs-lat")
    records = make_records("lat", 300, base_ts=now_ms() - 86_400_000)
    out = node("lat", {"bootstrap": kafka_endpoint.bootstrap, "topic": topic, "codec": "gzip",
                       "records": encode(records), "group": unique_name("kjs-lat")})
    got = decode(out["records"])
    assert first_mismatch(got, records, check_timestamps=False) is None
    assert all(out["before"] - 1000 <= r.timestamp <= out["after"] + 1000 for r in got)


def test_topic_admin(kafka_endpoint: KafkaEndpoint) -> None:
    topic = unique_name("kjs-admin")
    out = node("admin", {"bootstrap": kafka_endpoint.bootstrap, "topic": topic})
    assert out["created"] is True
    assert sorted(p for p, _ in out["partitions"]) == [0, 1]
    assert {leader for _, leader in out["partitions"]} <= set(kafka_endpoint.brokers)
    assert dict(out["before"])["retention.ms"] == "3600000"
    after = dict(out["after"])
    assert after["max.message.bytes"] == "2000"
    assert after["retention.ms"] == "604800000"  # AlterConfigs replaces the whole set
    assert out["tooLarge"]["type"] == "MESSAGE_TOO_LARGE"
    assert out["small"][0]["errorCode"] == 0
    brokers = {(b["nodeId"], b["host"], b["port"]) for b in out["cluster"]["brokers"]}
    assert brokers == {(n, h, p) for n, (h, p) in kafka_endpoint.brokers.items()}
    assert topic not in out["listed"]


def test_group_commit_restart_resume(kafka_endpoint: KafkaEndpoint) -> None:
    if kafka_endpoint.restart is None:
        pytest.skip(f"endpoint {kafka_endpoint.name} cannot restart its broker")
    topic = unique_name("kjs-group")
    records = [Rec(f"k{i}".encode(), f"v{i}".encode()) for i in range(100)]
    node("produce", {"bootstrap": kafka_endpoint.bootstrap, "topic": topic, "codec": "none",
                     "records": encode(records)})
    job = {"bootstrap": kafka_endpoint.bootstrap, "topic": topic, "group": unique_name("kjs-g")}
    first = node("group-phase", {**job, "count": 60})
    assert [d["offset"] for d in first["records"]] == list(range(60))
    assert first["committed"] == [[0, 60]]

    kafka_endpoint.restart()

    second = node("group-phase", {**job, "count": 40})
    assert [d["offset"] for d in second["records"]] == list(range(60, 100))
    assert [_unb64(d["value"]) for d in first["records"] + second["records"]] == [
        r.value for r in records]
    assert second["committed"] == [[0, 100]]
