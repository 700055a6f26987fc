"""Address rewriting of every response version that carries broker addresses.

Each response is built with kio, encoded as a broker would send it, rewritten, decoded again:
the addresses must be the proxy's, every other field unchanged.
"""

from __future__ import annotations

import dataclasses
import datetime
import subprocess
import sys
import textwrap
import uuid
from typing import Any

import pytest

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.entities import build, to_dict
from moldau.protocol.messages import decode_response, encode_response, response_schema
from moldau.proxy.rewrite import (
    BROKER,
    CONTROLLER,
    RewriteError,
    _fetch_has_tagged_fields,
    needs_rewrite,
    rewrite_response,
)

PROXY_HOST = "proxy.example"
# what the upstream advertises -> the proxy port standing for it
PORTS = {("broker", 1): 40001, ("broker", 2): 40002, ("broker", 7): 40007,
         ("controller", 3000): 41000}


class Recorder:
    """A resolver that maps per PORTS and remembers what it was asked."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, str, int]] = []

    def __call__(self, kind: str, node_id: int, host: str, port: int) -> tuple[str, int] | None:
        self.calls.append((kind, node_id, host, port))
        local = PORTS.get((kind, node_id))
        return None if local is None else (PROXY_HOST, local)


def frame_of(api_key: int, version: int, data: dict[str, Any], correlation_id: int = 77) -> bytes:
    """An encoded response without its size prefix (what the rewriter is handed)."""
    entity = build(response_schema(api_key, version), data)
    return encode_response(api_key, version, correlation_id, entity)[4:]


def rewrite(api_key: int, version: int, data: dict[str, Any],
            resolver: Recorder) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(before, after) as dicts, or None when the rewriter kept the frame."""
    frame = frame_of(api_key, version, data)
    out = rewrite_response(api_key, version, frame, resolver)
    if out is None:
        return None
    assert int.from_bytes(out[:4], "big") == len(out) - 4
    correlation_id, after = decode_response(api_key, version, out[4:])
    assert correlation_id == 77
    _, before = decode_response(api_key, version, frame)
    return to_dict(before), to_dict(after)


METADATA_BROKERS = [
    {"node_id": 1, "host": "broker.invalid", "port": 9092, "rack": "r1"},
    {"node_id": 2, "host": "10.10.0.12", "port": 19092, "rack": None},
]
METADATA = {
    "throttle_time": 0,
    "brokers": METADATA_BROKERS,
    "cluster_id": "c-1",
    "controller_id": 1,
    "topics": [{
        "error_code": 0, "name": "orders", "topic_id": uuid.uuid4(), "is_internal": False,
        "partitions": [
            {"error_code": 0, "partition_index": i, "leader_id": 1 + i % 2, "leader_epoch": 3,
             "replica_nodes": [1, 2], "isr_nodes": [1, 2], "offline_replicas": []}
            for i in range(3)
        ],
        "topic_authorized_operations": -2147483648,
    }],
    "cluster_authorized_operations": -2147483648,
}


@pytest.mark.parametrize("version", range(0, 14))
def test_metadata_every_version(version: int) -> None:
    assert needs_rewrite(ApiKey.METADATA, version)
    resolver = Recorder()
    result = rewrite(ApiKey.METADATA, version, METADATA, resolver)
    assert result is not None
    before, after = result
    assert [(b["node_id"], b["host"], b["port"]) for b in after["brokers"]] == [
        (1, PROXY_HOST, 40001), (2, PROXY_HOST, 40002)]
    if version >= 1:
        assert [b["rack"] for b in after["brokers"]] == ["r1", None]
    assert resolver.calls == [("broker", 1, "broker.invalid", 9092),
                              ("broker", 2, "10.10.0.12", 19092)]
    before.pop("brokers")
    after.pop("brokers")
    assert after == before


@pytest.mark.parametrize("version", range(0, 14))
def test_metadata_splice_equals_a_full_kio_reencode(version: int) -> None:
    # Only the brokers array is re-encoded; the result must be exactly what decoding and
    # encoding the whole response with kio gives.
    frame = frame_of(ApiKey.METADATA, version, METADATA)
    spliced = rewrite_response(ApiKey.METADATA, version, memoryview(frame), Recorder())
    correlation_id, entity = decode_response(ApiKey.METADATA, version, frame)
    brokers = tuple(dataclasses.replace(b, host=PROXY_HOST, port=PORTS[("broker", b.node_id)])
                    for b in entity.brokers)
    full = encode_response(ApiKey.METADATA, version, correlation_id,
                           dataclasses.replace(entity, brokers=brokers))
    assert spliced == full


def test_metadata_with_many_brokers_and_no_brokers() -> None:
    many = {**METADATA, "brokers": [{"node_id": i, "host": f"b{i}.invalid", "port": 9092}
                                    for i in range(200)]}
    resolver = lambda kind, node, host, port: ("p", 10000 + node)  # noqa: E731
    for version in (4, 12):
        out = rewrite_response(ApiKey.METADATA, version, frame_of(ApiKey.METADATA, version, many),
                               resolver)
        assert out is not None
        _, entity = decode_response(ApiKey.METADATA, version, out[4:])
        assert [(b.host, b.port) for b in entity.brokers] == [
            ("p", 10000 + i) for i in range(200)]
        none = frame_of(ApiKey.METADATA, version, {**METADATA, "brokers": []})
        assert rewrite_response(ApiKey.METADATA, version, none, resolver) is None


def test_metadata_already_pointing_at_the_proxy_is_kept_byte_for_byte() -> None:
    data = {**METADATA, "brokers": [{"node_id": 1, "host": PROXY_HOST, "port": 40001}]}
    frame = frame_of(ApiKey.METADATA, 12, data)
    assert rewrite_response(ApiKey.METADATA, 12, frame, Recorder()) is None


def test_metadata_entries_the_resolver_declines_stay_as_they_were() -> None:
    data = {**METADATA, "brokers": [*METADATA_BROKERS,
                                    {"node_id": 9, "host": "other", "port": 1}]}
    result = rewrite(ApiKey.METADATA, 12, data, Recorder())
    assert result is not None
    assert [(b["host"], b["port"]) for b in result[1]["brokers"]] == [
        (PROXY_HOST, 40001), (PROXY_HOST, 40002), ("other", 1)]


@pytest.mark.parametrize("version", range(0, 4))
def test_find_coordinator_single(version: int) -> None:
    resolver = Recorder()
    data = {"throttle_time": 5, "error_code": 0, "error_message": None,
            "node_id": 7, "host": "10.10.0.17", "port": 9092}
    result = rewrite(ApiKey.FIND_COORDINATOR, version, data, resolver)
    assert result is not None
    before, after = result
    assert (after["node_id"], after["host"], after["port"]) == (7, PROXY_HOST, 40007)
    assert resolver.calls == [("broker", 7, "10.10.0.17", 9092)]
    for key in ("host", "port"):
        before.pop(key)
        after.pop(key)
    assert after == before


@pytest.mark.parametrize("version", range(0, 4))
def test_find_coordinator_error_is_not_touched(version: int) -> None:
    resolver = Recorder()
    data = {"error_code": 15, "error_message": "COORDINATOR_NOT_AVAILABLE",
            "node_id": -1, "host": "", "port": -1}
    assert rewrite(ApiKey.FIND_COORDINATOR, version, data, resolver) is None
    assert resolver.calls == []


@pytest.mark.parametrize("version", range(4, 7))
def test_find_coordinator_batched(version: int) -> None:
    resolver = Recorder()
    data = {"throttle_time": 0, "coordinators": [
        {"key": "group-a", "node_id": 1, "host": "broker.invalid", "port": 9092,
         "error_code": 0, "error_message": None},
        {"key": "group-b", "node_id": -1, "host": "", "port": -1,
         "error_code": 15, "error_message": "not yet"},
        {"key": "group-c", "node_id": 7, "host": "10.10.0.17", "port": 9092,
         "error_code": 0, "error_message": None},
    ]}
    result = rewrite(ApiKey.FIND_COORDINATOR, version, data, resolver)
    assert result is not None
    _before, after = result
    assert [(c["key"], c["node_id"], c["host"], c["port"]) for c in after["coordinators"]] == [
        ("group-a", 1, PROXY_HOST, 40001), ("group-b", -1, "", -1),
        ("group-c", 7, PROXY_HOST, 40007)]
    assert [c["error_code"] for c in after["coordinators"]] == [0, 15, 0]
    assert resolver.calls == [("broker", 1, "broker.invalid", 9092),
                              ("broker", 7, "10.10.0.17", 9092)]


@pytest.mark.parametrize("version", range(0, 3))
def test_describe_cluster_brokers(version: int) -> None:
    resolver = Recorder()
    data = {"throttle_time": 0, "error_code": 0, "cluster_id": "c-1", "controller_id": 2,
            "endpoint_type": 1, "brokers": [
                {"broker_id": 1, "host": "broker.invalid", "port": 9092, "rack": "r1",
                 "is_fenced": False},
                {"broker_id": 2, "host": "10.10.0.12", "port": 19092, "rack": None,
                 "is_fenced": True}],
            "cluster_authorized_operations": 123}
    result = rewrite(ApiKey.DESCRIBE_CLUSTER, version, data, resolver)
    assert result is not None
    before, after = result
    assert [(b["broker_id"], b["host"], b["port"]) for b in after["brokers"]] == [
        (1, PROXY_HOST, 40001), (2, PROXY_HOST, 40002)]
    assert {c[0] for c in resolver.calls} == {BROKER}
    for entity in (before, after):
        for b in entity["brokers"]:
            b.pop("host")
            b.pop("port")
    assert after == before


@pytest.mark.parametrize("version", [1, 2])
def test_describe_cluster_controllers_are_their_own_kind(version: int) -> None:
    resolver = Recorder()
    data = {"error_code": 0, "cluster_id": "c-1", "endpoint_type": 2, "brokers": [
        {"broker_id": 3000, "host": "controller.invalid", "port": 9093}]}
    result = rewrite(ApiKey.DESCRIBE_CLUSTER, version, data, resolver)
    assert result is not None
    assert resolver.calls == [(CONTROLLER, 3000, "controller.invalid", 9093)]
    assert (result[1]["brokers"][0]["host"], result[1]["brokers"][0]["port"]) == (
        PROXY_HOST, 41000)


def _produce(version: int, endpoints: list[dict[str, Any]]) -> dict[str, Any]:
    topic: dict[str, Any] = {"name": "orders"} if version < 13 else {"topic_id": uuid.uuid4()}
    return {"responses": [{**topic, "partition_responses": [
        {"index": 0, "error_code": 6 if endpoints else 0, "base_offset": -1,
         "log_append_time": datetime.datetime.fromtimestamp(0, datetime.UTC),
         "log_start_offset": 0, "record_errors": [], "error_message": None,
         **({"current_leader": {"leader_id": 2, "leader_epoch": 9}} if endpoints else {})},
    ]}], "throttle_time": 0, "node_endpoints": endpoints}


@pytest.mark.parametrize("version", range(10, 14))
def test_produce_node_endpoints(version: int) -> None:
    assert needs_rewrite(ApiKey.PRODUCE, version)
    resolver = Recorder()
    assert rewrite(ApiKey.PRODUCE, version, _produce(version, []), resolver) is None
    endpoints = [{"node_id": 2, "host": "10.10.0.12", "port": 19092, "rack": None}]
    result = rewrite(ApiKey.PRODUCE, version, _produce(version, endpoints), resolver)
    assert result is not None
    before, after = result
    assert after["node_endpoints"] == [
        {"node_id": 2, "host": PROXY_HOST, "port": 40002, "rack": None}]
    before.pop("node_endpoints")
    after.pop("node_endpoints")
    assert after == before


def test_produce_before_kip951_is_not_inspected() -> None:
    assert not any(needs_rewrite(ApiKey.PRODUCE, v) for v in range(0, 10))
    assert not any(needs_rewrite(ApiKey.FETCH, v) for v in range(0, 16))
    assert not needs_rewrite(ApiKey.API_VERSIONS, 3)
    assert not needs_rewrite(ApiKey.JOIN_GROUP, 7)


def _fetch(endpoints: list[dict[str, Any]], *, records: bytes = b"\x00" * 300,
           topics: int = 2) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": 0, "session_id": 5, "responses": [
        {"topic_id": uuid.uuid4(), "partitions": [
            {"partition_index": p, "error_code": 0, "high_watermark": 10,
             "last_stable_offset": 10, "log_start_offset": 0,
             "aborted_transactions": [{"producer_id": 4, "first_offset": 1}] if p else None,
             "preferred_read_replica": -1, "records": records,
             **({"current_leader": {"leader_id": 2, "leader_epoch": 1}} if p == 1 else {})}
            for p in range(3)]}
        for _ in range(topics)], "node_endpoints": endpoints}


@pytest.mark.parametrize("version", range(16, 19))
def test_fetch_without_node_endpoints_is_passed_without_decoding(version: int) -> None:
    for data in (_fetch([]), _fetch([], records=b"", topics=0), _fetch([], topics=1)):
        frame = frame_of(ApiKey.FETCH, version, data)
        assert not _fetch_has_tagged_fields(version, frame)
        assert rewrite_response(ApiKey.FETCH, version, frame, Recorder()) is None


@pytest.mark.parametrize("version", range(16, 19))
def test_fetch_node_endpoints(version: int) -> None:
    endpoints = [{"node_id": 2, "host": "10.10.0.12", "port": 19092, "rack": "r2"}]
    frame = frame_of(ApiKey.FETCH, version, _fetch(endpoints))
    assert _fetch_has_tagged_fields(version, frame)
    result = rewrite(ApiKey.FETCH, version, _fetch(endpoints), Recorder())
    assert result is not None
    before, after = result
    assert after["node_endpoints"] == [
        {"node_id": 2, "host": PROXY_HOST, "port": 40002, "rack": "r2"}]
    assert after["responses"][0]["partitions"][0]["records"] == b"\x00" * 300
    before.pop("node_endpoints")
    after.pop("node_endpoints")
    assert after == before


def test_undecodable_answers_raise_rewrite_error() -> None:
    frame = frame_of(ApiKey.METADATA, 12, METADATA)
    with pytest.raises(RewriteError, match="metadata v12"):
        rewrite_response(ApiKey.METADATA, 12, frame[:20], Recorder())
    with pytest.raises(RewriteError, match="no schema"):
        rewrite_response(ApiKey.METADATA, 99, frame, Recorder())


HOSTILE = textwrap.dedent("""
    from moldau.proxy.rewrite import RewriteError, rewrite_response
    head = b"\\x00\\x00\\x00\\x07" + b"\\x00" + b"\\x00\\x00\\x00\\x00"  # cid, tags, throttle
    huge = b"\\xff\\xff\\xff\\xff\\x0f"  # a compact array claiming 2**32 - 2 entries
    cases = [(3, 12, head + huge), (3, 12, head + b"\\x00"), (10, 4, head + huge),
             (60, 0, head + b"\\x00\\x00" + b"\\x01" + b"\\x00\\x00\\x00\\x01" + huge),
             (1, 16, head + b"\\x00\\x00" + b"\\x00\\x00\\x00\\x00" + huge),
             (1, 16, head + b"\\x00\\x00" + b"\\x00\\x00\\x00\\x00" + b"\\x01" + huge),
             (0, 10, b"\\x00\\x00\\x00\\x07\\x00" + huge)]
    for api_key, version, frame in cases:
        try:
            rewrite_response(api_key, version, frame, lambda *a: ("p", 1))
        except RewriteError as exc:
            print("refused:", exc)
        else:
            print("kept")
""")


def test_hostile_answers_are_refused_not_fatal() -> None:
    # kio's native reader allocates what a count claims; a broken or hostile broker must not
    # abort the proxy (run apart: an abort would take the test process with it).
    proc = subprocess.run([sys.executable, "-c", HOSTILE], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert len(lines) == 7 and all(line.startswith("refused:") for line in lines), proc.stdout
