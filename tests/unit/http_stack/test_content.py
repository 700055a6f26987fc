"""moldau.http's pure parts: listener parsing, Accept negotiation, query parameters."""

from __future__ import annotations

import pytest

from moldau.http import Listener, ListenerError, parse_accept, parse_listeners
from moldau.http.content import negotiate

SR = ("application/vnd.schemaregistry.v1+json", "application/vnd.schemaregistry+json",
      "application/json")


def test_listeners_parse_hosts_ports_and_lists() -> None:
    assert parse_listeners("http://0.0.0.0:8081") == [Listener("http", "0.0.0.0", 8081)]
    assert parse_listeners("http://:8081,http://[::1]:0") == [
        Listener("http", "", 8081), Listener("http", "::1", 0)]
    assert parse_listeners(["HTTP://localhost:1/"]) == [Listener("http", "localhost", 1)]
    assert str(Listener("http", "::1", 80)) == "http://[::1]:80"


@pytest.mark.parametrize("value, words", [
    ("localhost:8081", ["schema.registry.listeners", "'localhost:8081'", "scheme://"]),
    ("https://h:1", ["scheme 'https'"]),
    ("http://h:99999", ["'http://h:99999'", "port"]),
    ("http://h", ["'http://h'", "port"]),
    (" , ", ["empty"]),
])
def test_listener_errors_name_the_key_and_the_value(value: str, words: list[str]) -> None:
    with pytest.raises(ListenerError) as info:
        parse_listeners(value, key="schema.registry.listeners")
    assert "schema.registry.listeners" in str(info.value)
    for word in words:
        assert word in str(info.value)


def test_accept_orders_by_quality_then_position() -> None:
    assert parse_accept(None) == [("*/*", 1.0)]
    assert parse_accept("application/json;q=0.5, text/html, */*;q=0.1") == [
        ("text/html", 1.0), ("application/json", 0.5), ("*/*", 0.1)]


def test_negotiation_prefers_the_clients_order_and_the_services_default() -> None:
    # confluent-kafka's Accept header
    header = ("application/vnd.schemaregistry.v1+json, application/vnd.schemaregistry+json, "
              "application/json")
    assert negotiate(header, SR) == SR[0]
    assert negotiate("application/json", SR) == "application/json"
    assert negotiate("application/vnd.schemaregistry+json", SR) == SR[1]
    assert negotiate(None, SR) == SR[0]
    assert negotiate("*/*", SR) == SR[0]
    assert negotiate("application/*", SR) == SR[0]
    assert negotiate("text/html", SR) is None
    assert negotiate("application/json;q=0", SR) is None
