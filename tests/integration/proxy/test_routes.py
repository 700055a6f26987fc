"""The route table: nodes appear, move, get ports; the address map decides upstreams."""

from __future__ import annotations

import pytest

from moldau.client.address_map import AddressMap
from moldau.proxy.routes import Change, PortPlan, RouteTable


def test_new_same_moved() -> None:
    table = RouteTable(AddressMap.parse("10.1.0.11=203.0.113.11,10.1.0.12:9092=gw:19092"))
    route, change = table.observe("broker", 1, "10.1.0.11", 9092)
    assert change is Change.NEW
    assert (route.advertised, route.upstream) == (("10.1.0.11", 9092), ("203.0.113.11", 9092))
    route.port = 40001
    again, change = table.observe("broker", 1, "10.1.0.11", 9092)
    assert change is Change.SAME and again is route
    moved, change = table.observe("broker", 1, "10.1.0.12", 9092)
    assert change is Change.MOVED and moved is route
    assert (route.upstream, route.port) == (("gw", 19092), 40001)  # the port stays
    assert route.describe() == "broker 1 at 10.1.0.12:9092 (via gw:19092)"


def test_brokers_and_controllers_with_the_same_id_are_different_routes() -> None:
    table = RouteTable()
    broker, _ = table.observe("broker", 1, "h", 9092)
    controller, change = table.observe("controller", 1, "h", 9093)
    assert change is Change.NEW and broker is not controller
    assert [r.name for r in table.sorted()] == ["broker 1", "controller 1"]


def test_to_json_names_every_address() -> None:
    table = RouteTable(AddressMap.parse("[fd00::1]:9092=127.0.0.1:9092"))
    route, _ = table.observe("broker", 3, "fd00::1", 9092)
    route.port = 5
    assert route.to_json() == {"kind": "broker", "node_id": 3, "port": 5,
                               "advertised": "[fd00::1]:9092", "upstream": "127.0.0.1:9092"}


def test_port_plan() -> None:
    assert PortPlan().port_for("broker", 1) == 0
    assert PortPlan().bootstrap_port(0) == 0
    plan = PortPlan(base=19090, explicit={5: 30000}, bootstrap=[9000])
    assert [plan.port_for("broker", n) for n in (0, 1, 2)] == [19090, 19091, 19092]
    assert plan.port_for("broker", 5) == 30000
    assert plan.port_for("controller", 1) == 0
    assert [plan.bootstrap_port(0), plan.bootstrap_port(1)] == [9000, 0]
    with pytest.raises(ValueError, match="--broker-port 70000=PORT"):
        plan.port_for("broker", 70000)


def test_by_upstream_finds_bound_brokers_only() -> None:
    table = RouteTable(AddressMap.parse("broker.invalid=127.0.0.1"))
    route, _ = table.observe("broker", 1, "broker.invalid", 9092)
    assert table.by_upstream("127.0.0.1", 9092) is None  # not bound yet
    route.port = 40001
    assert table.by_upstream("127.0.0.1", 9092) is route
    assert table.by_upstream("127.0.0.1", 9093) is None
