"""The proxy on the wire against a real broker: pipelined requests keep their order, answers
that carry no address are byte-identical to the broker's, KIP-511 passes, and many
connections at once each get their own answers."""

from __future__ import annotations

import struct
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.entities import to_dict
from moldau.protocol.messages import decode_response
from moldau.testing.proxy import ProxyProcess, proxied_broker
from moldau.testing.runner import BrokerProcess
from tests.integration.broker_wire import Wire, create_topic, make_batch, produce

CLIENT = {"client_software_name": "proxy-test", "client_software_version": "1"}
METADATA_ALL = {"topics": None, "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False}


@pytest.fixture(scope="module")
def setup() -> Iterator[tuple[BrokerProcess, ProxyProcess]]:
    with proxied_broker() as pair:
        yield pair


def api_versions_v99(wire: Wire, cid: int) -> bytes:
    """An ApiVersions request at a version nobody serves (KIP-511 fallback)."""
    _, frame = wire.frame(ApiKey.API_VERSIONS, 3, CLIENT, correlation_id=cid)
    return frame[:6] + struct.pack(">h", 99) + frame[8:]


def read_raw(wire: Wire, count: int) -> list[bytes]:
    return [wire.read_frame() for _ in range(count)]


def test_pipelined_requests_answered_in_order_and_rewritten(
        setup: tuple[BrokerProcess, ProxyProcess]) -> None:
    broker, proxy = setup
    p1 = proxy.port(1)
    plan: list[tuple[int, int, dict[str, Any] | None]] = [
        (ApiKey.API_VERSIONS, 3, CLIENT),
        (ApiKey.METADATA, 12, METADATA_ALL),
        (ApiKey.API_VERSIONS, 99, None),
        (ApiKey.METADATA, 4, {"topics": None, "allow_auto_topic_creation": False}),
        (ApiKey.FIND_COORDINATOR, 3, {"key": "g1", "key_type": 0}),
        (ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["g1", "g2"]}),
        (ApiKey.DESCRIBE_CLUSTER, 0, {"include_cluster_authorized_operations": False}),
        (ApiKey.METADATA, 1, {"topics": None}),
        (ApiKey.API_VERSIONS, 0, {}),
    ]
    with Wire(proxy.port(1)) as wire:
        burst = b""
        for cid, (key, version, body) in enumerate(plan, start=100):
            burst += (api_versions_v99(wire, cid) if version == 99
                      else wire.frame(key, version, body, correlation_id=cid)[1])
        wire.send(burst)  # one write: the proxy sees the requests pipelined
        frames = read_raw(wire, len(plan))
    answers: list[dict[str, Any]] = []
    for cid, ((key, version, _), frame) in enumerate(zip(plan, frames, strict=True), start=100):
        (got,) = struct.unpack_from(">i", frame)
        assert got == cid
        if version == 99:
            # KIP-511: v0-format UNSUPPORTED_VERSION with the broker's version list
            _, entity = decode_response(key, 0, frame)
            assert entity.error_code == 35 and entity.api_keys
            answers.append({})
            continue
        answers.append(to_dict(decode_response(key, version, frame)[1]))
    addresses = {(b["node_id"], b["host"], b["port"])
                 for i in (1, 3, 7) for b in answers[i]["brokers"]}
    assert addresses == {(1, "127.0.0.1", p1)}
    assert (answers[4]["host"], answers[4]["port"]) == ("127.0.0.1", p1)
    assert [(c["host"], c["port"]) for c in answers[5]["coordinators"]] == [
        ("127.0.0.1", p1)] * 2
    assert [(b["host"], b["port"]) for b in answers[6]["brokers"]] == [("127.0.0.1", p1)]

    # The same requests straight to the broker: identical bytes for everything that carries
    # no broker address.
    with Wire(broker.port()) as direct:
        burst = b""
        for cid, (key, version, body) in enumerate(plan, start=100):
            burst += (api_versions_v99(direct, cid) if version == 99
                      else direct.frame(key, version, body, correlation_id=cid)[1])
        direct.send(burst)
        direct_frames = read_raw(direct, len(plan))
    for (key, _version, _), ours, theirs in zip(plan, frames, direct_frames, strict=True):
        if key == ApiKey.API_VERSIONS:
            assert ours == theirs


def test_produce_and_fetch_bytes_pass_unchanged(setup: tuple[BrokerProcess, ProxyProcess]) -> None:
    broker, proxy = setup
    with Wire(proxy.port(1)) as wire:
        create_topic(wire, "bytes-through")
        values = [bytes([i]) * (50 + i) for i in range(200)]
        assert produce(wire, "bytes-through", 0, make_batch(values))["error_code"] == 0
    fetch = {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
             "isolation_level": 0, "session_id": 0, "session_epoch": -1,
             "topics": [{"topic": "bytes-through", "partitions": [{
                 "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                 "last_fetched_epoch": -1, "log_start_offset": -1,
                 "partition_max_bytes": 1 << 20}]}],
             "forgotten_topics_data": [], "rack_id": ""}
    frames = []
    for port in (proxy.port(1), broker.port()):
        with Wire(port) as wire:
            _, request = wire.frame(ApiKey.FETCH, 12, fetch, correlation_id=5)
            wire.send(request)
            frames.append(wire.read_frame())
    assert frames[0] == frames[1]
    assert len(frames[0]) > 200 * 50


def test_many_connections_at_once(setup: tuple[BrokerProcess, ProxyProcess]) -> None:
    _, proxy = setup
    errors: list[BaseException] = []

    def client() -> None:
        try:
            with Wire(proxy.port(1)) as wire:
                versions = [12, 9, 4, 1, 0, 13]
                burst = b"".join(
                    wire.frame(ApiKey.METADATA, versions[i % len(versions)],
                               {"topics": [], "allow_auto_topic_creation": False},
                               correlation_id=i)[1]
                    for i in range(40))
                wire.send(burst)
                for i in range(40):
                    version = versions[i % len(versions)]
                    cid, entity = decode_response(ApiKey.METADATA, version, wire.read_frame())
                    assert cid == i
                    assert [(b.host, b.port) for b in entity.brokers] == [
                        ("127.0.0.1", proxy.port(1))]
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=client) for _ in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
