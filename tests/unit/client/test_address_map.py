"""broker.address.map parsing and application."""

from __future__ import annotations

import pytest

from moldau.client.address_map import AddressMap
from moldau.client.cluster import Cluster
from moldau.client.config import parse_config
from moldau.client.errors import ConfigError


def test_exact_and_host_only_entries() -> None:
    amap = AddressMap.parse("10.10.0.11:9092=203.0.113.11:9092,10.10.0.12=203.0.113.12")
    assert amap.apply("10.10.0.11", 9092) == ("203.0.113.11", 9092)
    # exact entries match the port too
    assert amap.apply("10.10.0.11", 9093) == ("10.10.0.11", 9093)
    # host-only entries keep each broker's port
    assert amap.apply("10.10.0.12", 9092) == ("203.0.113.12", 9092)
    assert amap.apply("10.10.0.12", 19094) == ("203.0.113.12", 19094)
    assert amap.apply("10.10.0.13", 9092) == ("10.10.0.13", 9092)


def test_exact_wins_over_host_only_and_port_can_change() -> None:
    amap = AddressMap.parse("kafka0=gw.example.com, kafka0:29092=gw.example.com:39092")
    assert amap.apply("kafka0", 29092) == ("gw.example.com", 39092)
    assert amap.apply("kafka0", 9092) == ("gw.example.com", 9092)


def test_exact_source_with_host_only_target_keeps_port() -> None:
    amap = AddressMap.parse("10.0.0.5:9092=nat.example")
    assert amap.apply("10.0.0.5", 9092) == ("nat.example", 9092)


def test_case_insensitive_hosts_and_ipv6() -> None:
    amap = AddressMap.parse("Broker-1.Internal:9092=[2001:db8::1]:19092,[fd00::2]=10.1.1.1")
    assert amap.apply("broker-1.internal", 9092) == ("2001:db8::1", 19092)
    assert amap.apply("FD00::2", 7) == ("10.1.1.1", 7)


def test_dict_form_and_round_trip_text() -> None:
    amap = AddressMap.parse({"10.0.0.1:9092": "1.2.3.4:9092", "10.0.0.2": "1.2.3.5"})
    assert AddressMap.parse(str(amap)) == amap
    assert not AddressMap.parse("")
    assert not AddressMap.parse(None)


@pytest.mark.parametrize(("spec", "fragment"), [
    ("10.0.0.1:9092", "needs exactly one '='"),
    ("a=b=c", "needs exactly one '='"),
    ("10.0.0.1:abc=1.2.3.4", "port 'abc'"),
    ("10.0.0.1:70000=1.2.3.4", "between 1 and 65535"),
    ("=1.2.3.4", "empty side"),
    ("10.0.0.1=1.2.3.4:9092", "host-only source keeps each broker's port"),
    ("fd00::1=1.2.3.4", "in brackets"),
    ("[fd00::1=1.2.3.4", "unclosed '['"),
    ("a=b,a=c", "maps 'a' twice"),
    ("a:1=b:1,a:1=c:1", "maps a:1 twice"),
])
def test_malformed_entries_name_the_entry(spec: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        AddressMap.parse(spec)
    assert fragment in str(info.value)
    if "twice" not in fragment:
        assert repr(spec.split(",")[0].strip()) in str(info.value)


def test_cluster_applies_map_to_metadata_and_keeps_advertised() -> None:
    config = parse_config("admin", {
        "bootstrap.servers": "127.0.0.1:1",
        "broker.address.map": "10.10.0.11:9092=203.0.113.11:9092",
    })
    cluster = Cluster(config)
    info = cluster.broker_info(1, "10.10.0.11", 9092, None)
    assert (info.host, info.port) == ("203.0.113.11", 9092)
    assert info.advertised == ("10.10.0.11", 9092)
    assert "advertised as 10.10.0.11:9092" in info.describe()
    plain = cluster.broker_info(2, "10.10.0.12", 9092, None)
    assert "advertised" not in plain.describe()
