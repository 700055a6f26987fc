"""Brokers that appear after the proxy started, brokers that move, coordinators and
controllers the proxy has not seen: a new port appears before the client is told about it."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from moldau.protocol.api_keys import ApiKey
from moldau.testing.proxy import ProxyProcess
from tests.integration.broker_wire import Wire

from .fake_cluster import FakeCluster


@pytest.fixture
def fake() -> Iterator[FakeCluster]:
    cluster = FakeCluster()
    yield cluster
    cluster.close()


def metadata(port: int) -> dict[str, Any]:
    with Wire(port) as wire:
        return wire.call(ApiKey.METADATA, 12, {
            "topics": [], "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False})


def brokers(answer: dict[str, Any]) -> list[tuple[int, str, int]]:
    return [(b["node_id"], b["host"], b["port"]) for b in answer["brokers"]]


def event(proxy: ProxyProcess, kind: str, node_id: int) -> dict[str, Any]:
    return proxy.wait_for(lambda e: e.get("event") == kind and e.get("node_id") == node_id)


def test_brokers_appear_and_move(fake: FakeCluster) -> None:
    one, two, three = (fake.add_server(n) for n in ("one", "two", "three"))
    fake.brokers = [(1, "node1.invalid", 9092)]
    amap = (f"node1.invalid:9092=127.0.0.1:{one},node2.invalid:9092=127.0.0.1:{two},"
            f"node2b.invalid:9092=127.0.0.1:{three}")
    with ProxyProcess(f"127.0.0.1:{one}", address_map=amap) as proxy:
        assert list(proxy.routes()) == [1]
        p1 = proxy.port(1)
        assert brokers(metadata(int(proxy.bootstrap.split(":")[1]))) == [(1, "127.0.0.1", p1)]

        # A second broker joins: the answer names a port that is already listening.
        fake.brokers = [(1, "node1.invalid", 9092), (2, "node2.invalid", 9092)]
        answer = metadata(p1)
        added = event(proxy, "route_added", 2)
        p2 = added["port"]
        assert brokers(answer) == [(1, "127.0.0.1", p1), (2, "127.0.0.1", p2)]
        assert added["upstream"] == f"127.0.0.1:{two}"
        held = Wire(p2)
        assert held.call(ApiKey.METADATA, 12, {"topics": []})["cluster_id"] == "two"

        # It moves: same node id, same proxy port, new connections go to the new address.
        fake.brokers = [(1, "node1.invalid", 9092), (2, "node2b.invalid", 9092)]
        assert brokers(metadata(p1)) == [(1, "127.0.0.1", p1), (2, "127.0.0.1", p2)]
        moved = event(proxy, "route_moved", 2)
        assert (moved["port"], moved["upstream"]) == (p2, f"127.0.0.1:{three}")
        assert metadata(p2)["cluster_id"] == "three"
        # the connection opened before the move still reaches the old address
        assert held.call(ApiKey.METADATA, 12, {"topics": []})["cluster_id"] == "two"
        held.close()
        assert fake.connections["three"] == 1


def test_unknown_coordinator_and_controllers_get_ports(fake: FakeCluster) -> None:
    one = fake.add_server("one")
    fake.brokers = [(1, "127.0.0.1", one)]
    fake.coordinator = (7, "node7.invalid", 9092)
    fake.controllers = [(3000, "controller.invalid", 9093)]
    with ProxyProcess(f"127.0.0.1:{one}") as proxy:
        p1 = proxy.port(1)
        with Wire(p1) as wire:
            single = wire.call(ApiKey.FIND_COORDINATOR, 3, {"key": "g", "key_type": 0})
            batched = wire.call(ApiKey.FIND_COORDINATOR, 4,
                                {"key_type": 0, "coordinator_keys": ["g", "h"]})
            controllers = wire.call(ApiKey.DESCRIBE_CLUSTER, 1, {
                "include_cluster_authorized_operations": False, "endpoint_type": 2})
        p7 = event(proxy, "route_added", 7)["port"]
        assert (single["node_id"], single["host"], single["port"]) == (7, "127.0.0.1", p7)
        assert [(c["key"], c["host"], c["port"]) for c in batched["coordinators"]] == [
            ("g", "127.0.0.1", p7), ("h", "127.0.0.1", p7)]
        added = event(proxy, "route_added", 3000)
        assert added["kind"] == "controller"
        assert [(b["broker_id"], b["host"], b["port"]) for b in controllers["brokers"]] == [
            (3000, "127.0.0.1", added["port"])]

        # node7.invalid is not reachable (no address map): the client is closed, the log says
        # which broker, which address and why.
        with socket.create_connection(("127.0.0.1", p7), timeout=10) as sock:
            sock.settimeout(10)
            assert sock.recv(10) == b""
        deadline = time.monotonic() + 10
        while "broker 7" not in proxy.log_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "cannot connect to broker 7 at node7.invalid:9092: DNS lookup of " \
            "'node7.invalid' failed" in proxy.log_text()
